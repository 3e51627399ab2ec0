"""Ablation sweeps (DESIGN §8): one parent MLflow run, one nested eval run per row, and the
distinguishing-power gauge on the parent.

A sweep file (YAML)::

    name: fixtures-sweep            # parent run name (default: the file's stem)
    golden: golden_queries.yaml     # paths are relative to the sweep file
    corpus: kb
    k: 10                           # retrieval depth of every row (a row may set its own)
    set: {chunker.mode: document}   # config overrides shared by every row
    primary: bm25                   # the row the gauge judges (default: the first row)
    floors: [random_retrieval, single_chunk]   # the default
    ceiling: oracle                 # optional; normalized gaps use 1.0 without one
    gauge_metrics: [hit_at_5, mrr, ndcg_at_10_doc]
    resamples: 2000                 # bootstrap resamples for the CIs
    seed: 0                         # bootstrap seed (logged)
    executor: local                 # local | dask | dask:tcp://host:8786 (--executor wins)
    rows:
      - {name: bm25, preset: naive_baseline}
      - {name: bm25_k1_1.5, preset: naive_baseline, set: {bm25.k1: 1.5}}
      - {name: top3, top_k: 3}      # dotted config keys may also sit on the row itself

A floor or ceiling that names no row but names a preset gets an implicit row of that preset.
Everything is validated before the store is touched; every problem is reported at once with
its file:line. The store, experiment and parent run exist before any row starts, so rows never
race to create them; where the rows run is :mod:`kebab_mlflow.sweep.executors`' business, and
one loop here drives every executor.

Every signal at any moment ends the sweep's runs KILLED: from the parent's creation to its
publication the sweep runs inside one SIGTERM-as-interrupt block, and the clean-up after an
interrupt runs with SIGINT/SIGTERM held off (a second Ctrl-C cannot cut it short).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kebab_mlflow import progress
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.app.lifecycle import Lifecycle, end_running_children, run_lifecycle
from kebab_mlflow.errors import InputError, RunInterrupted, SweepError
from kebab_mlflow.formatting import number
from kebab_mlflow.interrupts import (
    checkpoint,
    raise_if_interrupted,
    signals_deferred,
    sigterm_as_interrupt,
)
from kebab_mlflow.sweep.executors import RowExecutor, check_executor, make_executor
from kebab_mlflow.sweep.outputs import compute_gauge, overall_state, publish_sweep
from kebab_mlflow.sweep.spec import (
    RowOutcome,
    SweepResult,
    SweepRow,
    SweepSpec,
    describe_row,
)
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the store loads when the sweep opens it
    from kebab_mlflow.app.run import RunOptions
    from kebab_mlflow.records import RunRecord
    from kebab_mlflow.tracking.store import Tracker

ROW_TAG = vocab.SWEEP_ROW
SWEEP_KIND = vocab.RunKind.SWEEP
LOST_TAG = vocab.SWEEP_ROW_LOST
ROW_POLL_S = 0.5  # how often the row loop looks for a noted signal while rows run


# --------------------------------------------------------------------------- one row


def absolute_uri(uri: str) -> str:
    """A worker elsewhere (another process, cwd or machine) must find the same SQLite file."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not Path(uri.removeprefix(prefix)).is_absolute():
        return prefix + str(Path(uri.removeprefix(prefix)).resolve())
    return uri


def row_options(spec: SweepSpec, row: SweepRow, experiment: str, uri: str,
                parent_run_id: str) -> RunOptions:
    from kebab_mlflow.app.run import RunOptions

    return RunOptions(golden=str(Path(spec.golden).resolve()),
                      corpus=str(Path(spec.corpus).resolve()), preset=row.preset, k=row.k,
                      overrides=dict(row.overrides), experiment=experiment,
                      tracking_uri=absolute_uri(uri), run_name=row.name, seed=spec.seed,
                      parent_run_id=parent_run_id, target=row.target,
                      concurrency=row.concurrency, cutoffs=row.cutoffs, ask=row.ask,
                      extra_tags={ROW_TAG: row.name, vocab.SWEEP_ROLE: row.role,
                                  **row.grid_tags})


def execute_row(options: RunOptions, metrics: tuple[str, ...]) -> dict[str, Any]:
    """Run one row (in this process or a worker). Errors come back as text; an interrupt
    propagates."""
    from kebab_mlflow.app.run import execute

    t0 = time.perf_counter()
    try:
        # SIGTERM is an interrupt for the whole row, not only inside `execute`'s query loop
        with sigterm_as_interrupt():
            result = execute(options)
    except (RunInterrupted, KeyboardInterrupt):
        # an interrupt outside `execute`'s own lifecycle (before its run exists, or after it
        # ended) may leave the row's run RUNNING: end it here, where it is known
        with signals_deferred():
            _end_row_runs(options)
        raise RunInterrupted(f"interrupted: row {options.run_name} ended as KILLED") from None
    except Exception as exc:  # noqa: BLE001 - a failed row is recorded, the sweep goes on
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
    return {"run_id": result.run_id, "query_ids": list(result.query_ids),
            "scores": {m: np.asarray(result.scores[m], dtype=np.float64)
                       for m in metrics if m in result.scores},
            "overall": dict(result.aggregate.overall),
            "seconds": time.perf_counter() - t0}


def _end_row_runs(options: RunOptions) -> None:
    """End this row's child runs still RUNNING KILLED (best effort on the way out)."""
    from kebab_mlflow.tracking.store import Tracker

    if options.parent_run_id is None or options.run_name is None:
        return  # not a row's: a row's options always name its parent and itself
    with contextlib.suppress(Exception):
        end_running_children(Tracker(options.tracking_uri), options.parent_run_id,
                             RunStatus.KILLED, where={ROW_TAG: options.run_name})


def _aligned(spec: SweepSpec, query_ids: Sequence[str],
             scores: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per-query arrays in the golden set's query order (NaN where a query is absent)."""
    position = {q: i for i, q in enumerate(query_ids)}
    out = {}
    for metric in spec.gauge_metrics:
        values = scores.get(metric)
        column = np.full(len(spec.query_ids), np.nan)
        if values is not None:
            for j, qid in enumerate(spec.query_ids):
                if qid in position:
                    column[j] = values[position[qid]]
        out[metric] = column
    return out


def _outcome(spec: SweepSpec, row: SweepRow, reply: Mapping[str, Any]) -> RowOutcome:
    if "error" in reply:
        return RowOutcome(name=row.name, role=row.role, run_id=None, status=RunStatus.FAILED,
                          error=reply["error"], seconds=reply["seconds"])
    return RowOutcome(name=row.name, role=row.role, run_id=reply["run_id"],
                      status=RunStatus.FINISHED,
                      error=None,
                      scores=_aligned(spec, reply["query_ids"], reply["scores"]),
                      overall=reply["overall"],
                      seconds=reply["seconds"])


def row_line(spec: SweepSpec, outcome: RowOutcome) -> str:
    """What the console shows as a row finishes: its headline (first gauged) metric."""
    if outcome.status != RunStatus.FINISHED:
        return f"row {outcome.name}: FAILED — {outcome.error}"
    metric = spec.gauge_metrics[0]
    return (f"row {outcome.name}: FINISHED ({outcome.seconds:.1f} s, run "
            f"{(outcome.run_id or '')[:8]}) {metric} {number(outcome.overall.get(metric))}")


# --------------------------------------------------------------------------- the sweep


@dataclass(kw_only=True)
class _Live:
    """What an interrupt must clean up: the tracker and the parent run, once they exist."""

    tracker: Tracker = field(init=False)  # set by _open_store, before any run exists
    parent_id: str = ""
    experiment: str = ""
    experiment_id: str = ""


def run_sweep(spec: SweepSpec, *, experiment: str | None = None,
              tracking_uri: str | None = None, jobs: int = 1, resume: str | None = None,
              executor: str | None = None,
              on_event: Callable[[str], None] = lambda s: None) -> SweepResult:
    """Create (or resume) the parent run, run the pending rows on the executor (``local``,
    ``dask`` or ``dask:ADDRESS``; default the file's ``executor:``, else local), gauge,
    publish."""
    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    runner = make_executor(check_executor(executor or spec.executor), jobs, len(spec.rows))
    t0 = time.perf_counter()
    live = _Live()
    with sigterm_as_interrupt(), progress.warnings_once():  # one warning per sweep, not per row
        try:
            _open_store(live, spec, experiment, tracking_uri, resume)
        except KeyboardInterrupt:
            raise RunInterrupted("interrupted before the sweep started") from None
        reused: dict[str, RowOutcome] = {}

        def start() -> str:
            parent_id, done = _start_parent(live, spec, resume, on_event)
            reused.update(done)
            return parent_id

        lifecycle = Lifecycle(what="sweep", end_children=True, on_stop=runner.cancel,
                              resume_hint=lambda parent_id: (
                                  f"; finish it with `kebab-mlflow sweep {spec.path} "
                                  f"--resume {parent_id}`"))
        with run_lifecycle(live.tracker, start, lifecycle) as parent:
            live.parent_id = parent.run_id
            if not resume:
                live.tracker.log_batch(live.parent_id, params=_parent_params(spec))
                checkpoint("sweep-parent-logged")
                on_event(f"sweep {spec.name}: parent run {live.parent_id}")
            pending = [r for r in spec.rows if r.name not in reused]
            outcomes = _run_pending(spec, pending, live, runner, on_event)
            return _finish(spec, live, {**reused, **outcomes}, time.perf_counter() - t0)


def _open_store(live: _Live, spec: SweepSpec, experiment: str | None,
                tracking_uri: str | None, resume: str | None) -> None:
    """Open the store and the experiment, before any run exists."""
    from kebab_mlflow.tracking.store import DEFAULT_EXPERIMENT, Tracker

    live.experiment = experiment or spec.experiment or DEFAULT_EXPERIMENT
    live.tracker = Tracker(tracking_uri)
    live.experiment_id = live.tracker.experiment_id(live.experiment)
    if not resume:
        checkpoint("sweep-store-opened")


def _start_parent(live: _Live, spec: SweepSpec, resume: str | None,
                  on_event: Callable[[str], None]) -> tuple[str, dict[str, RowOutcome]]:
    """Start the parent run, or take up the one resumed: (its id, the reused rows). Called
    by the lifecycle with signals held: a signal here is raised once the id is known."""
    if resume:
        parent_id, done = _resume_state(live.tracker, spec, live.experiment, resume)
        on_event(f"resuming sweep {parent_id}: {len(done)} finished row(s) reused")
        return parent_id, done
    return live.tracker.start_run(live.experiment_id, spec.name, _parent_tags(spec)), {}


def _run_pending(spec: SweepSpec, pending: Sequence[SweepRow], live: _Live,
                 runner: RowExecutor,
                 on_event: Callable[[str], None]) -> dict[str, RowOutcome]:
    if not pending:
        return {}
    runner.start(f"kebab-sweep-cancel-{live.parent_id}")
    checkpoint("sweep-workers-started")
    on_event(f"running {len(pending)} row(s) in {runner.name}")
    outcomes = _run_rows(spec, pending, runner, on_event,
                         lambda row: row_options(spec, row, live.experiment,
                                                 live.tracker.uri, live.parent_id))
    runner.close()
    # a row Dask retried after its worker died left that attempt's child RUNNING
    kept = {o.run_id for o in outcomes.values() if o.run_id is not None}
    end_running_children(live.tracker, live.parent_id, RunStatus.FAILED, keep=frozenset(kept),
                         tags={LOST_TAG: "its worker died; the row was retried or failed"})
    return outcomes


def _run_rows(spec: SweepSpec, pending: Sequence[SweepRow], runner: RowExecutor,
              on_event: Callable[[str], None], options: Callable[[SweepRow], RunOptions]
              ) -> dict[str, RowOutcome]:
    """The one row loop: ``runner.slots`` rows in flight, slowest first, the next submitted
    the moment one finishes; each outcome reported as it comes."""
    queue = deque(sorted(pending, key=lambda r: -_cost(r)))
    in_flight: dict[Future[Any], SweepRow] = {}
    outcomes: dict[str, RowOutcome] = {}
    with progress.task("sweep rows", len(pending), "rows") as bar:
        while queue or in_flight:
            while queue and len(in_flight) < runner.slots:
                row = queue.popleft()
                on_event(f"row {row.name}: running ({row.shown_preset})")
                in_flight[runner.submit(execute_row, options(row), spec.gauge_metrics)] = row
            # in short waits: a signal whose KeyboardInterrupt a gc callback swallowed (Dask's
            # scheduler runs one here) is acted on while rows are still running
            done, _ = wait(list(in_flight), timeout=ROW_POLL_S, return_when=FIRST_COMPLETED)
            raise_if_interrupted()
            for future in done:
                row = in_flight.pop(future)
                outcomes[row.name] = _outcome(spec, row, _reply(future))
                on_event(row_line(spec, outcomes[row.name]))
                bar.advance()
                checkpoint("sweep-row-done")
    return outcomes


def _reply(future: Future[dict[str, Any]]) -> dict[str, Any]:
    try:
        return future.result()
    except (RunInterrupted, CancelledError):
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. a worker that died (KilledWorker)
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": 0.0}


def _finish(spec: SweepSpec, live: _Live, rows_done: Mapping[str, RowOutcome],
            wall_s: float) -> SweepResult:
    rows = {r.name: rows_done[r.name] for r in spec.rows}
    checkpoint("sweep-rows-done")
    gauge = compute_gauge(spec, rows)
    checkpoint("sweep-gauged")
    finished = all(r.status == RunStatus.FINISHED for r in rows.values())
    status = RunStatus.FINISHED if finished else RunStatus.FAILED
    result = SweepResult(parent_run_id=live.parent_id, experiment_id=live.experiment_id,
                         status=status, rows=rows, gauge=gauge,
                         signal_state=overall_state(gauge),
                         ui_command=live.tracker.ui_command(live.experiment_id), wall_s=wall_s)
    publish_sweep(live.tracker, spec, result)
    checkpoint("sweep-published")
    return result


BACKEND_COST = {"random": 3, "dense": 2, "hybrid": 2, "lexical": 1, "oracle": 0}


def _cost(row: SweepRow) -> int:
    """Rough cost of a row, to start the slowest first (the random floor hashes every chunk
    for every query)."""
    from kebab_mlflow.config import build_config

    return BACKEND_COST.get(build_config(row.preset, dict(row.overrides))["backend"], 1)


def _parent_tags(spec: SweepSpec) -> dict[str, str]:
    from kebab_mlflow.tracking.provenance import provenance_tags

    return {**provenance_tags(SWEEP_KIND), vocab.SWEEP_SHA256: spec.sha256,
            vocab.GOLDEN_SHA256: spec.golden_sha256,
            vocab.CORPUS_SHA256: spec.corpus_sha256, vocab.SWEEP_PRIMARY: spec.primary}


def _parent_params(spec: SweepSpec) -> dict[str, Any]:
    return {"sweep_file": spec.path, "golden": spec.golden, "golden_set": spec.golden_name,
            "corpus": spec.corpus, "n_queries": len(spec.query_ids),
            "rows": ",".join(r.name for r in spec.rows), "primary": spec.primary,
            "floors": ",".join(spec.floors), "ceiling": spec.ceiling or "",
            "gauge_metrics": ",".join(spec.gauge_metrics), "resamples": spec.resamples,
            "seed": spec.seed, "confidence": 0.95,
            **{f"row.{r.name}": describe_row(r) for r in spec.rows}}




def _resume_state(tracker: Tracker, spec: SweepSpec, experiment: str, ref: str
                  ) -> tuple[str, dict[str, RowOutcome]]:
    """The parent to resume and its reusable rows. Children a SIGKILLed sweep left RUNNING end
    KILLED; a FINISHED row whose per_query.jsonl does not match its kebab.per_query_sha256 tag
    (tampered with or truncated) is not reused but run again, with a warning."""
    from kebab_mlflow.tracking.references import resolve_run

    parent = resolve_run(tracker, experiment, ref)
    _check_resumable(parent, spec, ref)
    stale = end_running_children(tracker, parent.run_id, RunStatus.KILLED)
    if stale:
        progress.warn(f"--resume: {len(stale)} child run(s) left RUNNING by an earlier "
                      f"sweep process ended KILLED: {', '.join(stale)}")
    children = tracker.find_runs([parent.experiment_id],
                                 tags={"mlflow.parentRunId": parent.run_id})
    done: dict[str, RowOutcome] = {}
    wanted = {r.name: r for r in spec.rows}
    with tempfile.TemporaryDirectory(prefix="kebab-resume-") as tmp:
        for child in children:  # newest first
            name = child.tags.get(ROW_TAG)
            if child.status != RunStatus.FINISHED or name not in wanted or name in done:
                continue
            outcome = _reused_row(tracker, spec, wanted[name], child, Path(tmp))
            if outcome is not None:
                done[name] = outcome
    return parent.run_id, done


def _check_resumable(parent: RunRecord, spec: SweepSpec, ref: str) -> None:
    tags, parent_id = parent.tags, parent.run_id
    if tags.get(vocab.KIND) != SWEEP_KIND:
        raise SweepError(f"--resume {ref}: run {parent_id} is not a sweep parent "
                         f"(kind {tags.get(vocab.KIND)!r})")
    if tags.get(vocab.SWEEP_SHA256) != spec.sha256:
        raise SweepError(f"--resume {ref}: the sweep file {spec.path} changed since run "
                         f"{parent_id} started (sha256 {spec.sha256[:12]} vs "
                         f"{str(tags.get(vocab.SWEEP_SHA256))[:12]}); start a new sweep")
    # the rows it would reuse were scored on the golden set and corpus of back then
    for what, key, now in (("golden set", vocab.GOLDEN_SHA256, spec.golden_sha256),
                           ("corpus", vocab.CORPUS_SHA256, spec.corpus_sha256)):
        then = tags.get(key)
        if then is not None and then != now:
            raise SweepError(f"--resume {ref}: the {what} changed since run {parent_id} "
                             f"started (sha256 {now[:12]} vs {then[:12]}); its finished rows "
                             "were scored on the old one — start a new sweep")


def _reused_row(tracker: Tracker, spec: SweepSpec, row: SweepRow, child: RunRecord,
                tmp: Path) -> RowOutcome | None:
    """A finished child's outcome read back from its per_query.jsonl, or None (run it again)
    when the file does not match the digest its run recorded, as ``compare`` checks it."""
    from kebab_mlflow.evaluation.per_query import read_per_query

    path = tracker.download_artifact(child.run_id, "per_query.jsonl", tmp / child.run_id)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != child.tags.get(vocab.PER_QUERY_SHA256):
        progress.warn(f"--resume: per_query.jsonl of row {row.name} (run {child.run_id}) does "
                      "not match its kebab.per_query_sha256 tag (tampered with or truncated); "
                      "the row runs again")
        return None
    ids: list[str] = []
    columns: dict[str, list[float]] = {m: [] for m in spec.gauge_metrics}
    for rec in read_per_query(path):
        ids.append(rec.id)
        for m in spec.gauge_metrics:
            v = rec.scores.get(m)
            columns[m].append(math.nan if v is None else float(v))
    overall = {k: v for k, v in child.metrics.items() if "/" not in k}
    return RowOutcome(name=row.name, role=row.role, run_id=child.run_id, status=RunStatus.FINISHED,
                      error=None,
                      scores=_aligned(spec, ids, columns), overall=overall, seconds=0.0,
                      reused=True)
