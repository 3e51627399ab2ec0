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

from kebab_mlflow.config import build_config
from kebab_mlflow.errors import ConfigError, KebabError, RunInterrupted, TrackingError
from kebab_mlflow.evaluation.evaluate import (
    EvalResult,
    PipelineSource,
    as_pipeline,
    evaluate_prepared,
    with_ask,
)
from kebab_mlflow.evaluation.report import run_report, summary_table
from kebab_mlflow.evaluation.runner import check_expected_ids
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.interrupts import sigterm_as_interrupt
from kebab_mlflow.metrics.scoring import run_cutoffs
from kebab_mlflow.pipeline.backends.floors import oracle_truth
from kebab_mlflow.pipeline.cache import cache_root
from kebab_mlflow.pipeline.reference import build_pipeline
from kebab_mlflow.records import VersionSnapshot
from kebab_mlflow.tracking.provenance import provenance_tags

MANIFEST = "manifest.json"


DEFAULT_CORPUS = "fixtures/kb"


@dataclass(frozen=True)
class RunOptions:
    golden: str = "fixtures/golden_queries.yaml"
    corpus: str | None = None  # None: the golden set's ``corpus:``, else DEFAULT_CORPUS
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
    cutoffs: tuple[int, ...] | None = None  # --cutoffs; None: 1, 3, 5, 10 and k
    ask: bool | None = None  # --ask / --no-ask for every query; None: each query's own ``ask``


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


@dataclass(frozen=True)
class Prepared:
    """Everything validated and built, before any MLflow run exists."""

    golden: GoldenSet
    pipeline: Any
    source: PipelineSource
    cutoffs: tuple[int, ...]
    index_s: float
    ask: bool | None = None


def prepare(options: RunOptions, on_status: Callable[[str], None] = lambda s: None) -> Prepared:
    """Check the golden set, the configuration and the pipeline (building its index): bad
    input fails here, before the tracking store is touched."""
    t0 = time.perf_counter()
    if options.k < 1:
        raise ConfigError(f"--k must be >= 1, got {options.k}")
    golden = with_ask(load_golden_set(options.golden), options.ask)
    config = build_config(options.preset, dict(options.overrides))
    cutoffs = tuple(run_cutoffs(options.k, options.cutoffs))
    if options.target:
        pipeline, source = as_pipeline(options.target, options.concurrency, golden)
    else:
        corpus = corpus_to_use(options.corpus, golden)
        on_status(f"corpus: {corpus}" + ("" if options.corpus or not golden.corpus
                                         else " (from the golden set)"))
        on_status("loading or building the index")
        pipeline = build_pipeline(config, corpus, oracle_truth(golden.queries))
        check_expected_ids(golden, pipeline.chunk_ids, pipeline.doc_ids)
        source = PipelineSource(options.preset, config["backend"], corpus, config)
    return Prepared(golden, pipeline, source, cutoffs, time.perf_counter() - t0, options.ask)


def corpus_to_use(explicit: str | None, golden: GoldenSet) -> str:
    """An explicit corpus wins; then the one the golden set names; then the fixtures."""
    return explicit or golden.corpus or DEFAULT_CORPUS


def run_tags(golden: GoldenSet, source: PipelineSource,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**provenance_tags("eval"), "kebab.golden_sha256": golden.digest,
            "kebab.config_sha256": source.config_digest(), "kebab.preset": source.preset,
            "kebab.private": str(golden.private).lower(), **dict(extra or {})}


def execute(options: RunOptions, *,
            on_status: Callable[[str], None] = lambda s: None) -> RunResult:
    """``kebab-mlflow run``: prepare, start the MLflow run, :func:`evaluate` into its work
    folder, publish. Ctrl-C/SIGTERM ends the run KILLED."""
    prepared = prepare(options, on_status)
    on_status("connecting to the tracking store")
    t_open = time.perf_counter()
    from kebab_mlflow.tracking.store import Tracker

    t_import = time.perf_counter()
    tracker = Tracker(options.tracking_uri)
    experiment_id = tracker.experiment_id(options.experiment)
    open_s = time.perf_counter() - t_import
    t_log = time.perf_counter()
    run_name = options.run_name or f"{prepared.source.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_id = tracker.start_run(experiment_id, run_name,
                               run_tags(prepared.golden, prepared.source, options.extra_tags),
                               parent_run_id=options.parent_run_id)
    workdir = cache_root() / "work" / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with sigterm_as_interrupt():
            params = _params_before_results(prepared, options)
            tracker.log_batch(run_id, params=params)
            mlflow_s = time.perf_counter() - t_log
            result = evaluate_prepared(prepared.pipeline, prepared.source, prepared.golden,
                                       options.k, prepared.cutoffs, seed=options.seed,
                                       fail_fast=options.fail_fast,
                                       per_query_path=workdir / "per_query.jsonl",
                                       index_s=prepared.index_s, ask=prepared.ask)
    except KeyboardInterrupt:
        tracker.end_run_quietly(run_id, "KILLED")
        shutil.rmtree(workdir, ignore_errors=True)
        raise RunInterrupted(f"interrupted: run {run_id} ended as KILLED") from None
    except BaseException:
        tracker.end_run_quietly(run_id, "FAILED")
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    title = options.run_name or f"{prepared.source.preset} on {prepared.golden.name}"
    timings = finish_run(tracker, run_id, experiment_id, result, workdir, title)
    timings.update(mlflow_import_s=t_import - t_open, mlflow_store_open_s=open_s)
    timings["mlflow_logging_s"] += mlflow_s
    return RunResult(run_id, experiment_id, "FINISHED", result.metrics, dict(result.aggregate),
                     tracker.ui_command(), {**result.timings, **timings},
                     result.versions.as_dict(), dict(result.scores), result.query_ids)


def _params_before_results(prepared: Prepared, options: RunOptions) -> dict[str, Any]:
    """The params an EvalResult will have, known before any query ran."""
    probe = EvalResult(prepared.golden, prepared.source,
                       getattr(prepared.pipeline, "versions", None) or VersionSnapshot(),
                       options.k, prepared.cutoffs, options.seed, {}, {}, Path(), "",
                       ask=prepared.ask)
    return probe.params()


def log_run(result: EvalResult, *, experiment: str = "kebab-eval",
            tracking_uri: str | None = None, run_name: str | None = None,
            parent_run_id: str | None = None,
            extra_tags: Mapping[str, str] | None = None) -> str:
    """Record an in-memory :class:`EvalResult` as one finished MLflow run; its id."""
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(tracking_uri)
    experiment_id = tracker.experiment_id(experiment)
    name = run_name or f"{result.source.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_id = tracker.start_run(experiment_id, name,
                               run_tags(result.golden, result.source, extra_tags),
                               parent_run_id=parent_run_id)
    workdir = cache_root() / "work" / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with sigterm_as_interrupt():
            tracker.log_batch(run_id, params=result.params())
            shutil.copyfile(result.per_query_path, workdir / "per_query.jsonl")
    except BaseException:
        tracker.end_run_quietly(run_id, "KILLED")
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    finish_run(tracker, run_id, experiment_id, result, workdir,
               run_name or f"{result.source.preset} on {result.golden.name}")
    return run_id


def finish_run(tracker: Any, run_id: str, experiment_id: str, result: EvalResult,
               workdir: Path, title: str) -> dict[str, float]:
    """Write the outputs and the manifest into the work folder, publish it, end the run; keep
    the folder for ``kebab-mlflow upload`` if the store is lost on the way."""
    t_out = time.perf_counter()
    params = result.params()
    write_outputs(workdir, title, params, result.aggregate)
    outputs_s = time.perf_counter() - t_out
    manifest = {
        "run_id": run_id, "experiment_id": experiment_id, "tracking_uri": tracker.uri,
        "metrics": result.metrics,
        "tags": {"kebab.per_query_sha256": result.per_query_sha256},
        "description": f"**{title}**\n\n{summary_table(result.aggregate['overall'])}",
        "dataset": {"name": result.golden.name, "digest": result.golden.digest,
                    "tags": _dataset_tags(result.golden)},
    }
    (workdir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    t_log = time.perf_counter()
    _publish_or_keep(tracker, run_id, workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    return {"outputs_s": outputs_s, "mlflow_logging_s": time.perf_counter() - t_log}


def _publish_or_keep(tracker: Any, run_id: str, workdir: Path) -> None:
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


def _dataset_tags(golden: GoldenSet) -> dict[str, str]:
    tags = {"golden_set": golden.name, "queries": str(len(golden))}
    if not golden.private:
        tags["path"] = golden.path
    return tags


def write_outputs(workdir: Path, title: str, params: Mapping[str, Any],
                  aggregate: Mapping[str, Any]) -> None:
    from kebab_mlflow.evaluation import plots

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



