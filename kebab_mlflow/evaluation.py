"""One eval = one MLflow run: validate everything, run the queries, publish to MLflow.

Order matters (DESIGN §2, §6): the golden set, the configuration, the corpus/index and the
tracking store are all checked *before* the MLflow run exists, so bad input creates no run.
Results are written to a local work folder first; the folder is published to MLflow at the end
and removed. If MLflow fails while publishing, the folder stays as a recovery folder that
``kebab-mlflow upload`` publishes later as the same run.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kebab_mlflow import __version__
from kebab_mlflow.config import build_config, digest, flatten, redacted
from kebab_mlflow.errors import KebabError, TrackingError
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.interrupts import sigterm_as_interrupt
from kebab_mlflow.metrics.aggregate import flat_metrics
from kebab_mlflow.provenance import git_state
from kebab_mlflow.reference import cache_root
from kebab_mlflow.report import run_report, summary_table
from kebab_mlflow.runner import check_expected_ids, run_queries
from kebab_mlflow.scoring import cutoffs_for

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RunOptions:
    golden: str = "fixtures/golden_queries.yaml"
    corpus: str = "fixtures/kb"
    preset: str = "naive_baseline"
    k: int = 10
    overrides: Mapping[str, Any] = field(default_factory=dict)
    experiment: str = "kebab-eval"
    tracking_uri: str | None = None
    run_name: str | None = None
    seed: int = 0
    fail_fast: bool = False
    target: str | None = None
    concurrency: int = 1
    parent_run_id: str | None = None
    extra_tags: Mapping[str, str] = field(default_factory=dict)


@dataclass
class RunResult:
    run_id: str
    experiment_id: str
    status: str
    metrics: dict[str, float]
    aggregate: dict[str, Any]
    ui_command: str
    timings: dict[str, float]
    versions: dict[str, str]
    scores: dict[str, Any] = field(default_factory=dict)  # metric -> per-query numpy array
    query_ids: tuple[str, ...] = ()


class RunInterrupted(KebabError):
    exit_code = 130


class Prepared:
    """Everything validated and built, before any MLflow run exists."""

    def __init__(self, options: RunOptions, on_status: Callable[[str], None] = lambda s: None):
        t0 = time.perf_counter()
        self.options = options
        if options.k < 1:
            from kebab_mlflow.errors import ConfigError

            raise ConfigError(f"--k must be >= 1, got {options.k}")
        self.golden: GoldenSet = load_golden_set(options.golden)
        self.config = build_config(options.preset, dict(options.overrides))
        self.cutoffs = cutoffs_for(options.k)
        if options.target:
            from kebab_mlflow.targets import load_target

            self.pipeline = load_target(options.target, concurrency=options.concurrency)
            self.backend = "target"
        else:
            from kebab_mlflow.backends.floors import oracle_truth
            from kebab_mlflow.reference import build_pipeline

            on_status("loading or building the index")
            self.pipeline = build_pipeline(self.config, options.corpus,
                                           oracle_truth(self.golden.queries))
            check_expected_ids(self.golden, self.pipeline.chunk_ids, self.pipeline.doc_ids)
            self.backend = self.config["backend"]
        self.versions = self.pipeline.versions.as_dict()
        self.index_s = time.perf_counter() - t0

    @property
    def preset(self) -> str:
        """The preset that ran, or ``target``: a --target run uses none of them."""
        return "target" if self.options.target else self.options.preset

    def params(self) -> dict[str, Any]:
        o = self.options
        params: dict[str, Any] = {**self.versions, "preset": self.preset, "backend": self.backend,
                                  "k": o.k, "cutoffs": ",".join(map(str, self.cutoffs)),
                                  "golden_set": self.golden.name,
                                  "n_queries": len(self.golden), "seed": o.seed}
        if o.target:
            from kebab_mlflow.targets import logged_options, without_credentials

            params["target"] = without_credentials(o.target.split("?")[0])
            params.update({f"target.{k}": v for k, v in logged_options(o.target).items()})
        else:
            params["corpus"] = o.corpus
            params.update({f"config.{k}": v for k, v in redacted(flatten(self.config)).items()})
        return params

    def tags(self) -> dict[str, str]:
        commit, dirty = git_state()
        return {"kebab.kind": "eval", "kebab.git_commit": commit,
                "kebab.git_dirty": str(dirty).lower(), "kebab.golden_sha256": self.golden.digest,
                "kebab.config_sha256": digest(self.config), "kebab.tool_version": __version__,
                "kebab.preset": self.preset,
                "kebab.private": str(self.golden.private).lower(),
                **self.options.extra_tags}


def execute(options: RunOptions, *, progress: Any = None,
            on_status: Callable[[str], None] = lambda s: None) -> RunResult:
    prepared = Prepared(options, on_status)
    on_status("connecting to the tracking store")
    t_open = time.perf_counter()
    from kebab_mlflow.tracking import Tracker

    t_import = time.perf_counter()
    tracker = Tracker(options.tracking_uri)
    experiment_id = tracker.experiment_id(options.experiment)
    open_s = time.perf_counter() - t_import
    params = prepared.params()
    t_log = time.perf_counter()
    run_name = options.run_name or f"{prepared.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_id = tracker.start_run(experiment_id, run_name, prepared.tags(),
                               parent_run_id=options.parent_run_id)
    workdir = cache_root() / "work" / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with sigterm_as_interrupt():
            tracker.log_batch(run_id, params=params)
            mlflow_s = time.perf_counter() - t_log
            task = progress.start(len(prepared.golden)) if progress else None
            outcome = run_queries(prepared.pipeline, prepared.golden, options.k,
                                  prepared.cutoffs, workdir / "per_query.jsonl",
                                  fail_fast=options.fail_fast,
                                  on_progress=(lambda n: progress.advance(task, n))
                                  if progress else None)
            if progress:
                progress.stop()
    except KeyboardInterrupt:
        tracker.end_run_quietly(run_id, "KILLED")
        shutil.rmtree(workdir, ignore_errors=True)
        raise RunInterrupted(f"interrupted: run {run_id} ended as KILLED") from None
    except BaseException:
        tracker.end_run_quietly(run_id, "FAILED")
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    title = options.run_name or f"{prepared.preset} on {prepared.golden.name}"
    t_out = time.perf_counter()
    write_outputs(workdir, title, params, outcome.aggregate)
    outputs_s = time.perf_counter() - t_out
    metrics = flat_metrics(outcome.aggregate)
    manifest = {
        "run_id": run_id, "experiment_id": experiment_id, "tracking_uri": tracker.uri,
        "metrics": metrics,
        "tags": {"kebab.per_query_sha256": outcome.per_query_sha256},
        "description": f"**{title}**\n\n{summary_table(outcome.aggregate['overall'])}",
        "dataset": {"name": prepared.golden.name, "digest": prepared.golden.digest,
                    "tags": _dataset_tags(prepared.golden)},
    }
    (workdir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    t_log = time.perf_counter()
    try:
        with sigterm_as_interrupt():
            publish(tracker, workdir)
    except KeyboardInterrupt:
        tracker.end_run_quietly(run_id, "KILLED")
        raise RunInterrupted(f"interrupted while publishing: run {run_id} ended as KILLED; "
                             f"results kept in {keep_for_recovery(workdir)}") from None
    except KebabError:
        raise
    except Exception as exc:  # noqa: BLE001 - server lost mid-run: keep everything
        recovery = keep_for_recovery(workdir)
        raise TrackingError(
            f"lost the tracking store while publishing run {run_id} ({type(exc).__name__}: "
            f"{str(exc).strip()[:200]}); "
            f"results kept in {recovery} — run `kebab-mlflow upload {recovery}` once it is back"
        ) from None
    mlflow_s += time.perf_counter() - t_log
    shutil.rmtree(workdir, ignore_errors=True)
    timings = {"index_s": prepared.index_s, **outcome.timings, "outputs_s": outputs_s,
               "mlflow_import_s": t_import - t_open, "mlflow_store_open_s": open_s,
               "mlflow_logging_s": mlflow_s}
    return RunResult(run_id, experiment_id, "FINISHED", metrics, outcome.aggregate,
                     tracker.ui_command(), timings, prepared.versions, outcome.scores,
                     tuple(q.id for q in prepared.golden.queries))


def _dataset_tags(golden: GoldenSet) -> dict[str, str]:
    tags = {"golden_set": golden.name, "queries": str(len(golden))}
    if not golden.private:
        tags["path"] = golden.path
    return tags


def write_outputs(workdir: Path, title: str, params: Mapping[str, Any],
                  aggregate: Mapping[str, Any]) -> None:
    from kebab_mlflow import plots

    (workdir / "aggregate.json").write_text(json.dumps(aggregate, indent=1, allow_nan=False))
    (workdir / "report.md").write_text(run_report(title, params, aggregate))
    plots.metric_vs_k(aggregate["overall"], workdir / "metric_vs_k.png", title)
    bins = aggregate.get("reliability_bins")
    if bins:
        plots.reliability_diagram(bins, workdir / "reliability_diagram.png",
                                  f"{title}: confidence vs accuracy")


def publish(tracker: Any, workdir: Path) -> None:
    """Log metrics, artifacts, dataset and final tags from a work folder, then finish the run."""
    manifest = json.loads((workdir / MANIFEST).read_text())
    run_id = manifest["run_id"]
    tracker.log_batch(run_id, metrics=manifest["metrics"],
                      tags={**manifest["tags"], "mlflow.note.content": manifest["description"]})
    for f in sorted(workdir.iterdir()):
        if f.name != MANIFEST and f.is_file():
            tracker.log_artifact(run_id, f)
    ds = manifest["dataset"]
    tracker.log_golden_dataset(run_id, ds["name"], ds["digest"], ds["tags"])
    tracker.end_run(run_id, "FINISHED")


def keep_for_recovery(workdir: Path) -> Path:
    target = Path("kebab-recovery") / workdir.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(workdir), target)
    return target.resolve()



