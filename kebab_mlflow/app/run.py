"""One eval = one MLflow run: validate everything, run the queries, publish to MLflow.

Order matters (DESIGN §2, §6): the golden set, the configuration, the corpus/index and the
tracking store are all checked *before* the MLflow run exists, so bad input creates no run.
Results are written to a local work folder first; the folder is published to MLflow at the end
and removed. If MLflow fails while publishing, the folder stays as a recovery folder that
``kebab-mlflow upload`` publishes later as the same run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kebab_mlflow import names
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.app.lifecycle import (
    MANIFEST,
    Lifecycle,
    Manifest,
    keep_for_recovery,
    read_manifest,
    run_lifecycle,
)
from kebab_mlflow.config import build_config
from kebab_mlflow.errors import (
    ConfigError,
    KebabError,
    Problem,
    TrackingError,
)
from kebab_mlflow.evaluation.evaluate import (
    EvalResult,
    PipelineSource,
    as_pipeline,
    evaluate_prepared,
    with_ask,
)
from kebab_mlflow.evaluation.evidence import EvidenceRun, check_evidence, prepare_evidence
from kebab_mlflow.evaluation.report import headline_values, run_report, summary_table
from kebab_mlflow.evaluation.runner import check_expected_ids
from kebab_mlflow.golden import GoldenSet, load_golden_set, version_label
from kebab_mlflow.interrupts import checkpoint
from kebab_mlflow.meanwhile import Meanwhile
from kebab_mlflow.metrics.aggregate import Aggregate
from kebab_mlflow.metrics.scoring import run_cutoffs
from kebab_mlflow.names import DEFAULT_K
from kebab_mlflow.pipeline.backends.floors import oracle_truth
from kebab_mlflow.pipeline.cache import cache_root
from kebab_mlflow.pipeline.reference import build_pipeline
from kebab_mlflow.records import VersionSnapshot
from kebab_mlflow.redaction import redacted
from kebab_mlflow.tracking.layout import (
    BREAKDOWN_TABLE,
    breakdown_table,
    golden_dataset,
    logged_metrics,
    pipeline_model,
)
from kebab_mlflow.tracking.provenance import provenance_tags
from kebab_mlflow.tracking.traces import (
    TRACES,
    check_traces,
    chunk_texts,
    read_traces,
    write_traces,
)
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the store loads once the inputs are checked
    from kebab_mlflow.evaluation.plots import PlotProcess
    from kebab_mlflow.tracking.store import Tracker


def golden_version(golden: GoldenSet) -> str:
    """How a golden version is shown (runs, the UI's runs page): its name and short digest."""
    return version_label(golden.name, golden.digest)


DEFAULT_CORPUS = "fixtures/kb"


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    golden: str = "fixtures/golden_queries.yaml"
    corpus: str | None = None  # None: the golden set's ``corpus:``, else DEFAULT_CORPUS
    preset: str = "naive_baseline"
    k: int = DEFAULT_K
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
    log_breakdowns: bool = False
    traces: str = "none"  # none | failures | all
    repeat: int = 1  # --repeat: every query N times (evaluation/repeats.py)
    # draw the plots in a second process started with the run (evaluation/plots.py): the CLI's
    # one run; off for sweeps and tuning, whose workers keep both cores busy already
    plots_aside: bool = False


@dataclass(frozen=True, kw_only=True)
class RunResult:
    run_id: str
    experiment_id: str
    status: str
    metrics: dict[str, float]
    aggregate: Aggregate
    ui_command: str
    timings: dict[str, float]
    versions: dict[str, str]
    scores: dict[str, Any] = field(default_factory=dict)  # metric -> per-query numpy array
    query_ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """Everything validated and built, before any MLflow run exists."""

    golden: GoldenSet
    pipeline: Any
    source: PipelineSource
    cutoffs: tuple[int, ...]
    index_s: float
    ask: bool | None = None
    evidence: EvidenceRun | None = None  # the golden set's evidence, resolved


def prepare(options: RunOptions, on_status: Callable[[str], None] = lambda s: None) -> Prepared:
    """Check the golden set, the configuration and the pipeline (building its index): bad
    input fails here, before the tracking store is touched."""
    t0 = time.perf_counter()
    problems = [why for why in (names.depth_problem(options.k), names.length_problem(
        "--experiment", options.experiment, names.MAX_EXPERIMENT_NAME)) if why]
    if problems:
        raise ConfigError("invalid options", [Problem(why) for why in problems])
    reading = _run_file_meanwhile(options.target, options.concurrency)
    try:
        golden = with_ask(load_golden_set(options.golden), options.ask)
    except Exception:  # its error goes first, as before; the read is not left running
        if reading is not None:
            reading.join()
        raise
    loaded = reading.result() if reading is not None else None
    check_traces(options.traces, golden)
    config = build_config(options.preset, dict(options.overrides))
    cutoffs = tuple(run_cutoffs(options.k, options.cutoffs))
    _check_primary_metric(golden, cutoffs)
    if options.target:
        pipeline, source = as_pipeline(options.target, options.concurrency, golden,
                                       loaded=loaded)
    else:
        corpus = corpus_to_use(options.corpus, golden)
        on_status(f"corpus: {corpus}" + ("" if options.corpus or not golden.corpus
                                         else " (from the golden set)"))
        check_evidence(golden, corpus)  # a quote not found fails before the index is built
        on_status("loading or building the index")
        pipeline = build_pipeline(config, corpus, oracle_truth(golden.queries))
        check_expected_ids(golden, pipeline.chunk_ids, pipeline.doc_ids)
        # the config with its tokenizer and gate resolved for the corpus
        source = PipelineSource(preset=options.preset, backend=config["backend"], corpus=corpus,
                                config=pipeline.config)
    golden, evidence = prepare_evidence(golden, pipeline)
    return Prepared(golden=golden, pipeline=pipeline, source=source, cutoffs=cutoffs,
                    index_s=time.perf_counter() - t0, ask=options.ask, evidence=evidence)


def _run_file_meanwhile(spec: str | None, concurrency: int) -> Meanwhile[Any] | None:
    """A ``run:`` target's file read on a second thread while the golden set is parsed:
    the file's digest and pyarrow's CSV parse leave the GIL, the unification of each block
    group's ids does not. What the second thread gets done depends on how often it must take
    the GIL back from the parse (up to 5 ms a time; files.BLOCK): with 16 MiB digest blocks,
    not 1 MiB, and the streamed read a 1M-query run's preparation went from 83 to 62 s
    (bench_scale run-file, d24fa11 beside it).
    Only ``run:``: other targets import code or probe a server, which belongs after the
    golden set is known good."""
    if not spec or not spec.strip().startswith("run:"):
        return None
    from kebab_mlflow.targets import load_target

    return Meanwhile(lambda: load_target(spec, concurrency=concurrency), "kebab-run-file")


def corpus_to_use(explicit: str | None, golden: GoldenSet) -> str:
    """An explicit corpus wins; then the one the golden set names; then the fixtures."""
    return explicit or golden.corpus or DEFAULT_CORPUS


def _check_primary_metric(golden: GoldenSet, cutoffs: Sequence[int]) -> None:
    """The golden set's primary_metric must name a metric this run reports (compare decides
    on it): a standard one or one at the run's cut-offs."""
    from kebab_mlflow.metrics.registry import run_metric_names

    name, valid = golden.primary_metric, run_metric_names(cutoffs)
    if name is not None and name not in valid:
        from kebab_mlflow.errors import GoldenSetError, Problem

        raise GoldenSetError(f"invalid golden set {golden.path}", [Problem(
            f"unknown primary_metric {name!r}; valid metrics: {', '.join(sorted(valid))}",
            golden.path)])


def run_tags(golden: GoldenSet, source: PipelineSource,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    primary = {vocab.PRIMARY_METRIC: golden.primary_metric} if golden.primary_metric else {}
    # where the golden version was read: rescore and compare name it (never a private set's)
    path = {} if golden.private or not golden.path else {
        vocab.GOLDEN_PATH: names.fit(golden.path, names.MAX_INPUT_TAG_VALUE)}
    return {**provenance_tags(vocab.RunKind.EVAL), vocab.GOLDEN_SHA256: golden.digest, **path,
            vocab.GOLDEN_VERSION: golden_version(golden),
            vocab.CONFIG_SHA256: source.config_digest(), vocab.PRESET_TAG: source.preset,
            vocab.PRIVATE: str(golden.private).lower(), **primary, **dict(extra or {})}


def execute(options: RunOptions, *,
            on_status: Callable[[str], None] = lambda s: None) -> RunResult:
    """``kebab-mlflow run``: prepare, start the MLflow run, :func:`evaluate` into its work
    folder, publish. Ctrl-C/SIGTERM ends the run KILLED."""
    from kebab_mlflow.evaluation.plots import plot_process

    with plot_process(options.plots_aside) as plotter:
        return _execute(options, on_status, plotter)


def _execute(options: RunOptions, on_status: Callable[[str], None],
             plotter: PlotProcess | None) -> RunResult:
    importing = _import_store_meanwhile(options.tracking_uri)
    try:
        prepared = prepare(options, on_status)
    except Exception:
        importing.join()  # the caller may import mlflow next: two importers can deadlock
        raise
    checkpoint("prepared")
    on_status("connecting to the tracking store")
    t_open = time.perf_counter()
    importing.join()  # two threads importing mlflow's modules at once can deadlock
    from kebab_mlflow.tracking.store import Tracker

    t_import = time.perf_counter()
    tracker = Tracker(options.tracking_uri)
    experiment_id = tracker.experiment_id(options.experiment)
    open_s = time.perf_counter() - t_import
    t_log = time.perf_counter()
    run_name = options.run_name or f"{prepared.source.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    tags = run_tags(prepared.golden, prepared.source, options.extra_tags)

    def start() -> str:
        return tracker.start_run(experiment_id, run_name, tags,
                                 parent_run_id=options.parent_run_id)

    with run_guard(tracker, start, plotter) as (run_id, workdir):
        checkpoint("run-started")
        tracker.log_batch(run_id, params=_params_before_results(prepared, options))
        checkpoint("params-logged")
        mlflow_s = time.perf_counter() - t_log
        result = evaluate_prepared(prepared.pipeline, prepared.source, prepared.golden,
                                   options.k, prepared.cutoffs, seed=options.seed,
                                   fail_fast=options.fail_fast,
                                   per_query_path=workdir / "per_query.jsonl",
                                   index_s=prepared.index_s, ask=prepared.ask,
                                   repeat=options.repeat, evidence=prepared.evidence)
        checkpoint("queries-done")
        title = options.run_name or f"{prepared.source.preset} on {prepared.golden.name}"
        publishing = Publishing(options.log_breakdowns, options.traces,
                                chunk_texts(prepared.pipeline, options.traces))
        timings = finish_run(tracker, run_id, experiment_id, result, workdir, title, publishing,
                             plotter)
    timings.update(mlflow_import_s=t_import - t_open, mlflow_store_open_s=open_s)
    timings["mlflow_logging_s"] += mlflow_s
    return RunResult(run_id=run_id, experiment_id=experiment_id, status=RunStatus.FINISHED,
                     metrics=result.metrics, aggregate=result.aggregate,
                     ui_command=tracker.ui_command(experiment_id),
                     timings={**result.timings, **timings},
                     versions=result.versions.as_dict(), scores=dict(result.scores),
                     query_ids=result.query_ids)


def _import_store_meanwhile(tracking_uri: str | None) -> Meanwhile[None]:
    """Import mlflow and the store's modules on a second thread while :func:`prepare` reads the
    golden set and the index (the import is most of a cached run's overhead; the machine has a
    second core for the parts that leave the GIL). Best effort: an import that fails here is
    raised again, where it belongs, when the store is opened. Join the thread before this
    thread imports mlflow: Python's import locks report two threads importing the same
    package's modules in different orders as a deadlock."""
    def load() -> None:
        with contextlib.suppress(Exception):
            from kebab_mlflow.tracking.store import preload

            preload(tracking_uri)

    return Meanwhile(load, "kebab-store-import")


@contextlib.contextmanager
def run_guard(tracker: Tracker, start: Callable[[], str],
              plotter: PlotProcess | None = None) -> Iterator[tuple[str, Path]]:
    """(run id, work folder) of a run started by ``start``, through the one run lifecycle
    (:mod:`kebab_mlflow.app.lifecycle`): a signal at any moment ends it KILLED, an error
    FAILED, and its work folder is removed — or kept for ``kebab-mlflow upload`` once the
    manifest is written; ``plotter`` is ended first, so nothing writes into the folder."""
    lifecycle = Lifecycle(what="run", workdir_root=cache_root() / "work",
                          on_stop=plotter.close if plotter is not None else lambda: None)
    with run_lifecycle(tracker, start, lifecycle) as live:
        assert live.workdir is not None
        yield live.run_id, live.workdir


def _params_before_results(prepared: Prepared, options: RunOptions) -> dict[str, Any]:
    """The params an EvalResult will have, known before any query ran."""
    probe = EvalResult(golden=prepared.golden, source=prepared.source,
                       versions=getattr(prepared.pipeline, "versions", None) or VersionSnapshot(),
                       k=options.k, cutoffs=prepared.cutoffs, seed=options.seed,
                       aggregate=Aggregate(overall={}),
                       scores={}, per_query_path=Path(), per_query_sha256="",
                       ask=prepared.ask, repeat=options.repeat,
                       evidence_params={} if prepared.evidence is None
                       else prepared.evidence.params())
    return probe.params()


def log_run(result: EvalResult, *, experiment: str = "kebab-eval",
            tracking_uri: str | None = None, run_name: str | None = None,
            parent_run_id: str | None = None,
            extra_tags: Mapping[str, str] | None = None, log_breakdowns: bool = False,
            traces: str = "none", pipeline: Any = None) -> str:
    """Record an in-memory :class:`EvalResult` as one finished MLflow run; its id.
    ``log_breakdowns`` / ``traces``: as ``run --log-breakdowns`` / ``--traces``; ``pipeline``
    (optional) gives the traces the text of each hit."""
    check_traces(traces, result.golden)
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(tracking_uri)
    experiment_id = tracker.experiment_id(experiment)
    name = run_name or f"{result.source.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    tags = run_tags(result.golden, result.source, extra_tags)

    def start() -> str:
        return tracker.start_run(experiment_id, name, tags, parent_run_id=parent_run_id)

    with run_guard(tracker, start) as (run_id, workdir):
        tracker.log_batch(run_id, params=result.params())
        shutil.copyfile(result.per_query_path, workdir / "per_query.jsonl")
        finish_run(tracker, run_id, experiment_id, result, workdir,
                   run_name or f"{result.source.preset} on {result.golden.name}",
                   Publishing(log_breakdowns, traces, chunk_texts(pipeline, traces)))
    return run_id


@dataclass(frozen=True)
class Publishing:
    """What a run publishes beyond its headline metrics and artifacts."""

    log_breakdowns: bool = False  # every breakdown value as a metric too (else only the table)
    traces: str = "none"  # none | failures | all: per-query MLflow traces
    chunk_text: Mapping[str, str] | None = None  # chunk id -> text, for the traces' documents


def finish_run(tracker: Tracker, run_id: str, experiment_id: str, result: EvalResult,
               workdir: Path, title: str, publishing: Publishing = Publishing(),
               plotter: PlotProcess | None = None) -> dict[str, float]:
    """Write the outputs and the manifest into the work folder, publish it, end the run; keep
    the folder for ``kebab-mlflow upload`` if the store is lost on the way. ``plotter``: the
    plots are drawn there (evaluation/plots.py) while the manifest is written and the dataset,
    model and metrics logged (a cached SciFact run waited ~0.3 s for them before); the
    manifest lists them, so a folder kept before they were done has them drawn by ``upload``."""
    from kebab_mlflow.tracking.store import describe_uri

    t_out = time.perf_counter()
    params = result.params()
    plots = write_outputs(workdir, title, params, result.aggregate, plotter)
    traced = write_traces(workdir / TRACES, result, publishing)
    outputs_s = time.perf_counter() - t_out
    checkpoint("outputs-written")
    manifest: Manifest = {
        # never user:password@ (a recovery folder may be shared); `upload` takes credentials
        # from MLFLOW_TRACKING_USERNAME/PASSWORD or --tracking-uri
        "run_id": run_id, "experiment_id": experiment_id,
        "tracking_uri": describe_uri(tracker.uri),
        "metrics": logged_metrics(result.aggregate, publishing.log_breakdowns),
        # kebab.traces: how many traces the run has (a PR comment links them only then)
        # kebab.primary_metric again (set at the start too): publishing puts it first in the
        # UI's runs view, and an `upload` has only this folder
        "tags": {vocab.PER_QUERY_SHA256: result.per_query_sha256,
                 **({vocab.TRACES: str(traced)} if traced else {}),
                 **({vocab.PRIMARY_METRIC: primary} if (primary := result.golden.primary_metric)
                    else {})},
        "description": f"**{title}**\n\n{_summary_markdown(result.aggregate)}",
        "dataset": golden_dataset(result.golden),
        "model": pipeline_model(result),
        "traces": traced,
        "plots": plots,
    }
    (workdir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    checkpoint("manifest-written")
    t_log = time.perf_counter()
    _publish_or_keep(tracker, run_id, workdir, plotter)
    checkpoint("published")
    shutil.rmtree(workdir, ignore_errors=True)
    return {"outputs_s": outputs_s, "mlflow_logging_s": time.perf_counter() - t_log}


def _summary_markdown(aggregate: Aggregate) -> str:
    summary = headline_values(aggregate)
    return summary_table(summary, list(summary))


def _publish_or_keep(tracker: Tracker, run_id: str, workdir: Path,
                     plotter: PlotProcess | None = None) -> None:
    try:
        publish(tracker, workdir, plotter)
    except KebabError:
        raise
    except Exception as exc:  # noqa: BLE001 - server lost mid-run: keep everything
        if plotter is not None:
            plotter.close()  # nothing writes into the folder as it moves; upload draws
        recovery = keep_for_recovery(workdir)
        raise TrackingError(
            f"lost the tracking store while publishing run {run_id} ({type(exc).__name__}: "
            f"{gist(redacted(str(exc)))}); "
            f"results kept in {recovery} — run `kebab-mlflow upload {recovery}` once it is back"
        ) from None


GIST_CHARS = 400  # how much of a failure's text an error message quotes


def gist(text: str, limit: int = GIST_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters: its start and its end, which is
    where MLflow's "API request to URL failed with exception ..." names the cause (``Caused
    by ResponseError('too many 500 error responses')``: a full disk on the server;
    ``NewConnectionError``: the server is gone)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    half = (limit - 5) // 2
    return f"{flat[:half]} ... {flat[-half:]}"


def write_outputs(workdir: Path, title: str, params: Mapping[str, Any],
                  aggregate: Aggregate, plotter: PlotProcess | None = None) -> list[list[Any]]:
    """aggregate.json, report.md and the plots: drawn here, or handed to ``plotter``, which
    draws them while the run publishes (:func:`publish` awaits them). The plot jobs, each
    path a file name in ``workdir`` (the manifest's ``plots``)."""
    (workdir / "aggregate.json").write_text(aggregate.to_json())
    (workdir / "report.md").write_text(run_report(title, params, aggregate))
    jobs: list[list[Any]] = [["metric_vs_k", {
        "overall": dict(aggregate.overall), "path": "metric_vs_k.png", "title": title}]]
    if aggregate.reliability_bins:
        jobs.append(["reliability_diagram", {
            "bins": [list(b) for b in aggregate.reliability_bins],
            "path": "reliability_diagram.png", "title": f"{title}: confidence vs accuracy"}])
    if plotter is None:
        draw_missing(workdir, jobs)
    else:
        for kind, args in jobs:
            plotter.draw(kind, **{**args, "path": str(workdir / args["path"])})
        plotter.start()
    return jobs


def draw_missing(folder: Path, jobs: Sequence[Sequence[Any]]) -> None:
    """Draw here each plot of ``jobs`` (paths: file names in ``folder``) it does not hold."""
    from kebab_mlflow.evaluation import plots

    plots.draw_missing((kind, {**args, "path": str(folder / args["path"])})
                       for kind, args in jobs)


def publish(tracker: Tracker, workdir: Path, plotter: PlotProcess | None = None) -> None:
    """Log dataset, model, metrics, artifacts, tables, traces and final tags from a work
    folder, then finish the run. The dataset and the model come first so that the metrics can
    name them; the headline metrics are the first (by default the only) metrics logged. The
    plots are awaited (``plotter``, drawing meanwhile) or drawn (those the manifest lists
    that the folder lacks) just before the artifacts.

    Every step first looks at what the run holds already, so publishing again (``upload``
    of a folder kept after a failure at any step) finishes the same run exactly once: one
    dataset link, one model link, one point per metric, each artifact whole, FINISHED once."""
    manifest = read_manifest(workdir)
    run_id = manifest["run_id"]
    ds = manifest["dataset"]
    tracker.log_golden_dataset(run_id, ds["name"], ds["digest"], ds["tags"],
                               ds.get("schema"), ds.get("profile"))
    checkpoint("dataset-logged")
    model_id = _model_of(tracker, manifest)
    if model_id:
        tracker.log_model_output(run_id, model_id)
    checkpoint("model-linked")
    tracker.log_new_metrics(run_id, manifest["metrics"],
                            tags={**manifest["tags"],
                                  "mlflow.note.content": manifest["description"]},
                            model_id=model_id, dataset=(ds["name"], ds["digest"][:36]))
    checkpoint("metrics-logged")
    if plotter is not None:
        plotter.finish()
    draw_missing(workdir, manifest.get("plots", []))
    for f in sorted(workdir.iterdir()):
        # a dot file: a PNG a stopped plot process left half-written (drawn again above)
        if f.name not in (MANIFEST, TRACES) and not f.name.startswith(".") and f.is_file():
            # the same path again: the file is replaced whole; linked where the store is a
            # local folder (nothing writes a kept folder's files again)
            tracker.log_artifact(run_id, f, owned=True)
    checkpoint("artifacts-logged")
    aggregate = Aggregate.from_json((workdir / "aggregate.json").read_bytes())
    tracker.log_table(run_id, breakdown_table(aggregate), BREAKDOWN_TABLE)
    checkpoint("table-logged")
    if manifest.get("traces") and (workdir / TRACES).is_file():
        tracker.log_traces(manifest["experiment_id"], run_id, read_traces(workdir / TRACES),
                           model_id)
    checkpoint("traces-logged")
    tracker.set_runs_view(manifest["experiment_id"],
                          [names.metric_key(n) for n in headline_values(aggregate)],
                          manifest["tags"].get(vocab.PRIMARY_METRIC))
    checkpoint("view-set")
    if tracker.run_status(run_id) != RunStatus.FINISHED:
        tracker.end_run(run_id, RunStatus.FINISHED)


def _model_of(tracker: Tracker, manifest: Manifest) -> str | None:
    model = manifest.get("model")  # absent in recovery folders of older versions
    if not model:
        return None
    return tracker.pipeline_model(manifest["experiment_id"], model["name"], model["digest"],
                                  model["params"], manifest["run_id"], model["tags"])


def upload(folder: Path, tracking_uri: str | None = None) -> str:
    """``kebab-mlflow upload``: publish a recovery folder as the run it belongs to (the store
    named by ``tracking_uri``, else the manifest's); remove the folder; the run id."""
    from kebab_mlflow.tracking.store import Tracker

    manifest = read_manifest(folder)
    tracker = Tracker(tracking_uri or manifest["tracking_uri"])
    try:
        publish(tracker, folder)
    except KebabError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLflow's refusals come in many types
        first = (redacted(str(exc)).strip().splitlines() or [type(exc).__name__])[0]
        raise TrackingError(f"could not publish {folder} as run {manifest['run_id']}: "
                            f"{type(exc).__name__}: {first[:300]}") from None
    shutil.rmtree(folder)
    return manifest["run_id"]


