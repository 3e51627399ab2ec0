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
    rows:
      - {name: bm25, preset: naive_baseline}
      - {name: bm25_k1_1.5, preset: naive_baseline, set: {bm25.k1: 1.5}}
      - {name: top3, top_k: 3}      # dotted config keys may also sit on the row itself

A floor or ceiling that names no row but names a preset gets an implicit row of that preset.
Everything is validated before the store is touched; every problem is reported at once with
its file:line. Rows run in this process (``jobs == 1``), or in it and ``jobs − 1`` forked worker
processes; the store, experiment and parent run exist before the workers fork, so workers never
race to create them.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow import progress
from kebab_mlflow.errors import InputError, KebabError, RunInterrupted
from kebab_mlflow.interrupts import sigterm_as_interrupt
from kebab_mlflow.sweep.outputs import compute_gauge, overall_state, publish_sweep
from kebab_mlflow.sweep.spec import (
    RowOutcome,
    SweepError,
    SweepResult,
    SweepRow,
    SweepSpec,
    describe_row,
)
from kebab_mlflow.sweep.workers import start_pool, stop_pool

ROW_TAG = "kebab.sweep_row"
SWEEP_KIND = "sweep"








# --------------------------------------------------------------------------- loading
















# --------------------------------------------------------------------------- running






def row_options(spec: SweepSpec, row: SweepRow, experiment: str, uri: str,
                parent_run_id: str):
    from kebab_mlflow.tracking.log import RunOptions

    return RunOptions(golden=spec.golden, corpus=spec.corpus, preset=row.preset, k=row.k,
                      overrides=dict(row.overrides), experiment=experiment, tracking_uri=uri,
                      run_name=row.name, seed=spec.seed, parent_run_id=parent_run_id,
                      target=row.target, concurrency=row.concurrency, cutoffs=row.cutoffs,
                      ask=row.ask,
                      extra_tags={ROW_TAG: row.name, "kebab.sweep_role": row.role,
                                  **row.grid_tags})


def execute_row(options: Any, metrics: tuple[str, ...]) -> dict[str, Any]:
    """Run one row (in this process or a worker). Errors come back as text; an interrupt
    propagates."""
    from kebab_mlflow.tracking.log import execute

    t0 = time.perf_counter()
    try:
        with progress.silenced():
            result = execute(options)
    except RunInterrupted:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed row is recorded, the sweep goes on
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
    return {"run_id": result.run_id, "query_ids": list(result.query_ids),
            "scores": {m: np.asarray(result.scores[m], dtype=np.float64)
                       for m in metrics if m in result.scores},
            "overall": dict(result.aggregate["overall"]),
            "seconds": time.perf_counter() - t0}


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
        return RowOutcome(row.name, row.role, None, "FAILED", reply["error"],
                          seconds=reply["seconds"])
    return RowOutcome(row.name, row.role, reply["run_id"], "FINISHED", None,
                      _aligned(spec, reply["query_ids"], reply["scores"]), reply["overall"],
                      reply["seconds"])


def run_sweep(spec: SweepSpec, *, experiment: str | None = None,
              tracking_uri: str | None = None, jobs: int = 1, resume: str | None = None,
              on_event: Callable[[str], None] = lambda s: None) -> SweepResult:
    """Create (or resume) the parent run, run the pending rows, gauge, publish."""
    from kebab_mlflow.errors import RunInterrupted

    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    t0 = time.perf_counter()
    # jobs − 1 worker processes (this process runs rows as well); they fork on the first row
    # handed to them, after the parent run exists
    pool = start_pool(min(jobs, len(spec.rows)) - 1) if jobs > 1 and len(spec.rows) > 1 else None
    parent_id: str | None = None
    tracker: Any = None
    try:
        with sigterm_as_interrupt():
            from kebab_mlflow.tracking.store import DEFAULT_EXPERIMENT, Tracker

            experiment = experiment or spec.experiment or DEFAULT_EXPERIMENT
            tracker = Tracker(tracking_uri)
            experiment_id = tracker.experiment_id(experiment)
            done: dict[str, RowOutcome] = {}
            if resume:
                parent_id, done = _resume_state(tracker, spec, experiment, resume)
                on_event(f"resuming sweep {parent_id}: {len(done)} finished row(s) reused")
            else:
                parent_id = tracker.start_run(experiment_id, spec.name, _parent_tags(spec))
                tracker.log_batch(parent_id, params=_parent_params(spec))
                on_event(f"sweep {spec.name}: parent run {parent_id}")
            pending = [r for r in spec.rows if r.name not in done]
            outcomes = _run_rows(spec, pending, experiment, tracker.uri, parent_id, pool,
                                 on_event)
    except (KeyboardInterrupt, RunInterrupted):
        stop_pool(pool, terminate=True)
        if parent_id is None:
            raise RunInterrupted("interrupted before the sweep started") from None
        tracker.end_run_quietly(parent_id, "KILLED")
        _kill_running_children(tracker, parent_id)
        raise RunInterrupted(f"interrupted: sweep {parent_id} ended as KILLED; finish it with "
                             f"`kebab-mlflow sweep {spec.path} --resume {parent_id}`") from None
    except BaseException:
        stop_pool(pool, terminate=True)
        if parent_id is not None:
            tracker.end_run_quietly(parent_id, "FAILED")
        raise
    stop_pool(pool)
    rows = {r.name: (done.get(r.name) or outcomes[r.name]) for r in spec.rows}
    gauge = compute_gauge(spec, rows)
    state = overall_state(gauge)
    status = "FINISHED" if all(r.status == "FINISHED" for r in rows.values()) else "FAILED"
    wall_s = time.perf_counter() - t0
    result = SweepResult(parent_id, experiment_id, status, rows, gauge, state,
                         tracker.ui_command(), wall_s)
    publish_sweep(tracker, spec, result)
    return result












BACKEND_COST = {"random": 3, "dense": 2, "hybrid": 2, "lexical": 1, "oracle": 0}


def _cost(row: SweepRow) -> int:
    """Rough cost of a row, to start the slowest first (the random floor hashes every chunk
    for every query)."""
    from kebab_mlflow.config import build_config

    return BACKEND_COST.get(build_config(row.preset, dict(row.overrides))["backend"], 1)


def _run_rows(spec: SweepSpec, pending: Sequence[SweepRow], experiment: str, uri: str,
              parent_id: str, pool: Any, on_event: Callable[[str], None]
              ) -> dict[str, RowOutcome]:
    outcomes: dict[str, RowOutcome] = {}

    def note(row: SweepRow, outcome: RowOutcome) -> None:
        outcomes[row.name] = outcome
        if outcome.status == "FINISHED":
            on_event(f"row {row.name}: FINISHED run {outcome.run_id} "
                     f"({outcome.seconds:.1f} s)")
        else:
            on_event(f"row {row.name}: FAILED — {outcome.error}")

    def run_here(row: SweepRow, where: str = "") -> None:
        on_event(f"row {row.name}: running{where} ({row.shown_preset})")
        note(row, _outcome(spec, row, execute_row(
            row_options(spec, row, experiment, uri, parent_id), spec.gauge_metrics)))

    if pool is None or len(pending) <= 1:
        for row in pending:
            run_here(row)
        return outcomes

    import threading
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, wait

    # Rows wait in one queue, slowest first. A feeder thread keeps each of the pool's workers
    # (jobs − 1) on a row from the front, handing the next one over the moment a worker is
    # free; this process, which has everything imported already, runs rows from the back (the
    # cheap ones) meanwhile. A worker holds one row at a time, so nobody idles while rows wait.
    queue = deque(sorted(pending, key=lambda r: -_cost(r)))
    lock = threading.Lock()
    finished: list[tuple[SweepRow, Any]] = []  # (row, future) from the workers, in order
    failure: list[BaseException] = []

    def take(front: bool) -> SweepRow | None:
        with lock:
            return (queue.popleft() if front else queue.pop()) if queue else None

    def submit(row: SweepRow) -> Any:
        return pool.submit(execute_row, row_options(spec, row, experiment, uri, parent_id),
                           spec.gauge_metrics)

    # the first submit forks the workers: here, while this is the only thread (a fork while
    # another thread holds a lock, the import lock say, leaves the child waiting on it forever)
    in_flight = {submit(row): row for _ in range(pool._max_workers)
                 if (row := take(front=True)) is not None}

    def feed() -> None:
        try:
            while in_flight:
                for future in wait(list(in_flight), return_when=FIRST_COMPLETED).done:
                    finished.append((in_flight.pop(future), future))
                    if (row := take(front=True)) is not None:
                        in_flight[submit(row)] = row
        except BaseException as exc:  # noqa: BLE001 - handed to the sweep's own thread
            failure.append(exc)

    def collect() -> None:
        while finished:
            row, future = finished.pop(0)
            try:
                reply = future.result()
            except KebabError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. a worker that died
                reply = {"error": f"{type(exc).__name__}: {exc}", "seconds": 0.0}
            note(row, _outcome(spec, row, reply))

    on_event(f"running {len(pending)} row(s) in this process and "
             f"{pool._max_workers} worker process(es)")
    feeder = threading.Thread(target=feed, name="kebab-sweep-feeder", daemon=True)
    feeder.start()
    try:
        while (row := take(front=False)) is not None:
            run_here(row, " here")
            collect()
        feeder.join()
    except BaseException:  # interrupted: the feeder must not hand out another row
        with lock:
            queue.clear()
        raise
    if failure:
        raise failure[0]
    collect()
    return outcomes


def _kill_running_children(tracker: Any, parent_id: str) -> None:
    """A row interrupted outside its query loop may be left RUNNING: end it KILLED."""
    try:
        parent = tracker.get_run(parent_id)
        for child in tracker.find_runs([parent.experiment_id], status="RUNNING",
                                       tags={"mlflow.parentRunId": parent_id}):
            tracker.end_run(child.run_id, "KILLED")
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def _parent_tags(spec: SweepSpec) -> dict[str, str]:
    from kebab_mlflow.tracking.provenance import provenance_tags

    return {**provenance_tags(SWEEP_KIND), "kebab.sweep_sha256": spec.sha256,
            "kebab.golden_sha256": spec.golden_sha256,
            "kebab.corpus_sha256": spec.corpus_sha256, "kebab.sweep_primary": spec.primary}


def _parent_params(spec: SweepSpec) -> dict[str, Any]:
    return {"sweep_file": spec.path, "golden": spec.golden, "golden_set": spec.golden_name,
            "corpus": spec.corpus, "n_queries": len(spec.query_ids),
            "rows": ",".join(r.name for r in spec.rows), "primary": spec.primary,
            "floors": ",".join(spec.floors), "ceiling": spec.ceiling or "",
            "gauge_metrics": ",".join(spec.gauge_metrics), "resamples": spec.resamples,
            "seed": spec.seed, "confidence": 0.95,
            **{f"row.{r.name}": describe_row(r) for r in spec.rows}}




def _resume_state(tracker: Any, spec: SweepSpec, experiment: str, ref: str
                  ) -> tuple[str, dict[str, RowOutcome]]:
    from kebab_mlflow.evaluation.per_query import read_per_query
    from kebab_mlflow.tracking.references import resolve_run

    parent = resolve_run(tracker, experiment, ref)
    parent_id = parent.run_id
    tags = parent.tags
    if tags.get("kebab.kind") != SWEEP_KIND:
        raise SweepError(f"--resume {ref}: run {parent_id} is not a sweep parent "
                         f"(kind {tags.get('kebab.kind')!r})")
    if tags.get("kebab.sweep_sha256") != spec.sha256:
        raise SweepError(f"--resume {ref}: the sweep file {spec.path} changed since run "
                         f"{parent_id} started (sha256 {spec.sha256[:12]} vs "
                         f"{str(tags.get('kebab.sweep_sha256'))[:12]}); start a new sweep")
    # the rows it would reuse were scored on the golden set and corpus of back then
    for what, key, now in (("golden set", "kebab.golden_sha256", spec.golden_sha256),
                           ("corpus", "kebab.corpus_sha256", spec.corpus_sha256)):
        then = tags.get(key)
        if then is not None and then != now:
            raise SweepError(f"--resume {ref}: the {what} changed since run {parent_id} "
                             f"started (sha256 {now[:12]} vs {then[:12]}); its finished rows "
                             "were scored on the old one — start a new sweep")
    children = tracker.find_runs([parent.experiment_id],
                                 tags={"mlflow.parentRunId": parent_id})
    done: dict[str, RowOutcome] = {}
    wanted = {r.name: r for r in spec.rows}
    with tempfile.TemporaryDirectory(prefix="kebab-resume-") as tmp:
        for child in children:  # newest first
            name = child.tags.get(ROW_TAG)
            if child.status != "FINISHED" or name not in wanted or name in done:
                continue
            path = tracker.download_artifact(child.run_id, "per_query.jsonl",
                                             Path(tmp) / child.run_id)
            ids, columns = [], {m: [] for m in spec.gauge_metrics}
            for rec in read_per_query(path):
                ids.append(rec.id)
                for m in spec.gauge_metrics:
                    v = rec.scores.get(m)
                    columns[m].append(math.nan if v is None else float(v))
            overall = {k: v for k, v in child.metrics.items() if "/" not in k}
            done[name] = RowOutcome(name, wanted[name].role, child.run_id, "FINISHED",
                                    None, _aligned(spec, ids, columns), overall, 0.0,
                                    reused=True)
    return parent_id, done


# --------------------------------------------------------------------------- gauge + outputs
























