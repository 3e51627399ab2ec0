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

import csv
import dataclasses
import hashlib
import importlib
import io
import json
import math
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kebab_mlflow.errors import ConfigError, InputError, KebabError, Problem
from kebab_mlflow.interrupts import sigterm_as_interrupt
from kebab_mlflow.yaml_source import child, location, parse

DEFAULT_FLOORS = ("random_retrieval", "single_chunk")
DEFAULT_GAUGE_CHUNK = ("hit_at_5", "mrr", "ndcg_at_10_doc")
DEFAULT_GAUGE_DOC = ("hit_at_10_doc", "mrr_doc", "ndcg_at_10_doc")
DEFAULT_RESAMPLES = 2000
TOP_LEVEL_KEYS = {"name", "description", "experiment", "golden", "corpus", "k", "set",
                  "primary", "floors", "ceiling", "gauge_metrics", "resamples", "seed", "rows"}
ROW_KEYS = {"name", "preset", "k", "set", "target", "concurrency"}
ROW_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")
ROW_TAG = "kebab.sweep_row"
SWEEP_KIND = "sweep"


class SweepError(ConfigError):
    """A sweep file that cannot run, or a --resume that does not fit it."""


@dataclass(frozen=True)
class SweepRow:
    name: str
    preset: str
    overrides: Mapping[str, Any]
    k: int
    role: str  # primary | floor | ceiling | variant
    location: str = ""
    target: str | None = None  # evaluate another system (python:, http://, cmd:) in this row
    concurrency: int = 1

    @property
    def shown_preset(self) -> str:
        """The preset as the row's run records it: ``target`` for a row that runs a target."""
        return "target" if self.target else self.preset


@dataclass(frozen=True)
class SweepSpec:
    path: str
    sha256: str
    name: str
    description: str
    experiment: str | None
    golden: str
    corpus: str
    rows: tuple[SweepRow, ...]
    primary: str
    floors: tuple[str, ...]
    ceiling: str | None
    gauge_metrics: tuple[str, ...]
    resamples: int
    seed: int
    golden_name: str = ""
    golden_sha256: str = ""
    query_ids: tuple[str, ...] = ()
    corpus_sha256: str = ""

    def row(self, name: str) -> SweepRow:
        return next(r for r in self.rows if r.name == name)


# --------------------------------------------------------------------------- loading


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file and everything it points at; one SweepError lists
    every problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SweepError(f"cannot read sweep file {path}: {exc.strerror}") from None
    source = str(path)
    data, node = parse(raw, source, SweepError, "sweep file")
    if not isinstance(data, dict):
        raise SweepError(f"invalid sweep file {source}", [Problem(
            "top level must be a mapping with 'rows'", location(source, node))])
    return _build(data, node, source, path.parent, hashlib.sha256(raw).hexdigest())


def _build(data: dict, node: Any, source: str, base: Path, sha256: str) -> SweepSpec:
    from kebab_mlflow.config import PRESETS, build_config

    problems: list[Problem] = []

    def where(key: str) -> str:
        return location(source, child(node, key) or node)

    def typed(key: str, check: Callable[[Any], bool], what: str, default: Any) -> Any:
        value = data.get(key, default)
        if key in data and not check(value):
            problems.append(Problem(f"'{key}' must be {what}, got {value!r}", where(key)))
            return default
        return value

    for key in sorted(set(map(str, data)) - TOP_LEVEL_KEYS):
        problems.append(Problem(f"unknown top-level key {key!r} (known: "
                                f"{', '.join(sorted(TOP_LEVEL_KEYS))})", where(key)))
    is_str = lambda v: isinstance(v, str) and v.strip() != ""  # noqa: E731
    is_str_list = lambda v: isinstance(v, list) and all(is_str(x) for x in v)  # noqa: E731
    name = typed("name", is_str, "a string", Path(source).stem)
    description = typed("description", lambda v: isinstance(v, str), "a string", "")
    experiment = typed("experiment", is_str, "a string", None)
    k = typed("k", lambda v: _is_int(v) and v >= 1, "an integer >= 1", 10)
    shared = typed("set", lambda v: isinstance(v, dict), "a mapping of config keys", {})
    resamples = typed("resamples", lambda v: _is_int(v) and v >= 100,
                      "an integer >= 100", DEFAULT_RESAMPLES)
    seed = typed("seed", lambda v: _is_int(v) and v >= 0, "an integer >= 0", 0)
    floors = typed("floors", is_str_list, "a list of row names", list(DEFAULT_FLOORS))
    ceiling = typed("ceiling", lambda v: v is None or is_str(v), "a row name or null", None)
    primary = typed("primary", is_str, "a row name", None)
    gauge = typed("gauge_metrics", lambda v: is_str_list(v) and v, "a non-empty list of "
                  "metric names", None)
    golden = corpus = None
    for key in ("golden", "corpus"):
        value = data.get(key)
        if not is_str(value):
            problems.append(Problem(f"missing or empty '{key}' (a path, relative to the sweep "
                                    "file)", where(key)))
        elif key == "golden":
            golden = _resolve(base, value)
        else:
            corpus = _resolve(base, value)
    if isinstance(floors, list) and not floors:
        problems.append(Problem("'floors' must name at least one row: a gauge without a floor "
                                "measures nothing", where("floors")))

    rows = _rows(data.get("rows"), child(node, "rows"), source, shared, k, problems,
                 where("rows"))
    names = [r.name for r in rows]
    # floors/ceiling that name a preset but no row get an implicit row of that preset
    for ref, key in [(f, "floors") for f in floors] + [(ceiling, "ceiling")]:
        if ref is None or ref in names:
            continue
        if ref in PRESETS:
            try:
                build_config(ref, dict(shared), source=f"{where(key)} implicit row {ref}")
            except ConfigError as exc:
                problems.extend(exc.problems or [Problem(exc.summary, where(key))])
            rows.append(SweepRow(ref, ref, dict(shared), k, "variant", where(key)))
            names.append(ref)
        else:
            problems.append(Problem(f"'{key}' names {ref!r}, which is neither a row "
                                    f"(rows: {', '.join(names) or 'none'}) nor a preset",
                                    where(key)))
    if primary is None and names:
        primary = names[0]
    if primary is not None and primary not in names:
        problems.append(Problem(f"'primary' names {primary!r}, which is not a row (rows: "
                                f"{', '.join(names) or 'none'})", where("primary")))
    if primary in floors or (primary is not None and primary == ceiling):
        problems.append(Problem(f"the primary row {primary!r} cannot also be a floor or the "
                                "ceiling", where("primary")))
    if ceiling is not None and ceiling in floors:
        problems.append(Problem(f"row {ceiling!r} cannot be both a floor and the ceiling",
                                where("ceiling")))
    if len(set(floors)) != len(floors):
        problems.append(Problem("'floors' lists a row twice", where("floors")))
    roles = {primary: "primary", ceiling: "ceiling", **{f: "floor" for f in floors}}
    rows = [dataclasses.replace(r, role=roles.get(r.name, "variant")) for r in rows]

    golden_set = corpus_digest = None
    if golden is not None:
        golden_set, corpus_digest = _check_golden(golden, corpus, problems, where("golden"),
                                                  where("corpus"))
    gauge_metrics = _check_metrics(gauge, golden_set, rows, problems, where("gauge_metrics"))
    if problems:
        raise SweepError(f"invalid sweep file {source}", problems)
    return SweepSpec(source, sha256, name, description, experiment, str(golden), str(corpus),
                     tuple(rows), primary, tuple(floors), ceiling, gauge_metrics, resamples,
                     seed, golden_set.name, golden_set.digest,
                     tuple(q.id for q in golden_set.queries), corpus_digest or "")


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _rows(items: Any, node: Any, source: str, shared: Mapping[str, Any], default_k: int,
          problems: list[Problem], where_rows: str) -> list[SweepRow]:
    from kebab_mlflow.config import build_config

    if not isinstance(items, list) or not items:
        problems.append(Problem("'rows' must be a non-empty list of rows", where_rows))
        return []
    item_nodes = node.value if isinstance(node, yaml.SequenceNode) else []
    rows: list[SweepRow] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        item_node = item_nodes[i] if i < len(item_nodes) else None
        loc = location(source, item_node)
        if not isinstance(item, dict):
            problems.append(Problem(f"row #{i + 1} must be a mapping", loc))
            continue
        name = item.get("name")
        if not isinstance(name, str) or not ROW_NAME.match(name):
            problems.append(Problem(f"row #{i + 1}: 'name' must be 1-100 characters of letters, "
                                    f"digits, '_', '.', '-' (an MLflow key part), got {name!r}",
                                    loc))
            continue
        duplicate = name in seen  # still checked below: every problem is listed at once
        if duplicate:
            problems.append(Problem(f"duplicate row name {name!r} (first at {seen[name]})", loc))
        else:
            seen[name] = loc
        preset = item.get("preset", "naive_baseline")
        k = item.get("k", default_k)
        if not _is_int(k) or k < 1:
            problems.append(Problem(f"row {name}: 'k' must be an integer >= 1, got {k!r}", loc))
            k = default_k
        row_set = item.get("set", {})
        if not isinstance(row_set, dict):
            problems.append(Problem(f"row {name}: 'set' must be a mapping of config keys", loc))
            row_set = {}
        inline = {key: v for key, v in item.items() if key not in ROW_KEYS}
        overrides = {**shared, **row_set, **inline}
        if not isinstance(preset, str):
            problems.append(Problem(f"row {name}: 'preset' must be a string", loc))
            continue
        try:
            build_config(preset, overrides, source=f"{loc} row {name}")
        except ConfigError as exc:
            problems.extend(exc.problems or [Problem(f"row {name}: {exc.summary}", loc)])
            continue
        target, concurrency = item.get("target"), item.get("concurrency", 1)
        if target is not None and not (isinstance(target, str) and target.strip()):
            problems.append(Problem(f"row {name}: 'target' must be a target spec string "
                                    "(python:..., http://..., cmd:...)", loc))
        elif target is not None:
            from kebab_mlflow.targets import TargetError, check_target

            try:
                check_target(target)
            except TargetError as exc:
                problems.append(Problem(f"row {name}: {exc}", loc))
        if not _is_int(concurrency) or concurrency < 1:
            problems.append(Problem(f"row {name}: 'concurrency' must be an integer >= 1", loc))
            concurrency = 1
        if not duplicate:
            rows.append(SweepRow(name, preset, overrides, k, "variant", loc, target,
                                 concurrency))
    return rows


def _check_golden(golden: Path, corpus: Path | None, problems: list[Problem],
                  where_golden: str = "", where_corpus: str = ""):
    """(the golden set or None, the corpus digest or None); problems are appended."""
    from kebab_mlflow.corpus import load_corpus
    from kebab_mlflow.errors import CorpusError, GoldenSetError
    from kebab_mlflow.golden import load_golden_set

    golden_set = None
    try:
        golden_set = load_golden_set(golden)
    except GoldenSetError as exc:
        # problems inside the golden file point into it; an unreadable one at the sweep line
        problems.extend(exc.problems or [Problem(exc.summary, where_golden or str(golden))])
    if corpus is None:
        return golden_set, None
    try:
        loaded = load_corpus(corpus)
    except CorpusError as exc:
        problems.extend(exc.problems or [Problem(exc.summary, where_corpus or str(corpus))])
        return golden_set, None
    if golden_set is not None:
        known = {d.doc_id for d in loaded.documents}
        missing = sorted({d for q in golden_set.queries for d in q.expected_doc_ids} - known)
        if missing:
            problems.append(Problem(f"{len(missing)} expected doc id(s) of the golden set are "
                                    f"not in the corpus {corpus}: {', '.join(missing[:20])}",
                                    str(golden)))
    return golden_set, loaded.digest


def _check_metrics(names: list[str] | None, golden_set: Any, rows: Sequence[SweepRow],
                   problems: list[Problem], where: str) -> tuple[str, ...]:
    from kebab_mlflow.metrics.registry import get_metric
    from kebab_mlflow.scoring import cutoffs_for

    has_chunk = golden_set is not None and any(q.has_chunk_truth for q in golden_set.queries)
    has_doc = golden_set is not None and any(q.has_doc_truth for q in golden_set.queries)
    has_ask = golden_set is not None and any(q.ask for q in golden_set.queries)
    if names is None:
        names = list(DEFAULT_GAUGE_CHUNK if has_chunk else DEFAULT_GAUGE_DOC)
    # registers deeper cut-offs (k = 100) so they validate; the registry is process-wide, so
    # a cut-off some other run registered (k = 7) must still be one these rows report
    reported = set.intersection(*(set(cutoffs_for(row.k)) for row in rows)) if rows else set()
    min_k = min((r.k for r in rows), default=10)
    for name in names:
        try:
            metric = get_metric(name)
        except ConfigError as exc:
            problems.append(Problem(f"gauge_metrics: {exc.summary}", where))
            continue
        if not metric.higher_is_better:
            problems.append(Problem(f"gauge_metrics: {name} is lower-is-better; the gauge "
                                    "needs metrics where the primary should beat the floors",
                                    where))
        if metric.k is not None and metric.k > min_k:
            problems.append(Problem(f"gauge_metrics: {name} needs retrieval depth >= {metric.k} "
                                    f"but a row searches only {min_k} deep", where))
        elif metric.family != "mrr" and metric.k is not None and metric.k not in reported:
            problems.append(Problem(f"gauge_metrics: {name} is not reported by every row "
                                    f"(cut-offs: {', '.join(map(str, sorted(reported)))})",
                                    where))
        if golden_set is None:
            continue
        level_ok = {"chunk": has_chunk, "doc": has_doc, "answer": has_ask}.get(metric.level,
                                                                               True)
        if not level_ok:
            hint = f"; use {name}_doc" if metric.level == "chunk" and has_doc else ""
            problems.append(Problem(f"gauge_metrics: {name} is a {metric.level}-level metric "
                                    f"and no query of golden set {golden_set.name!r} counts "
                                    f"for it{hint}", where))
    if len(set(names)) != len(names):
        problems.append(Problem("gauge_metrics lists a metric twice", where))
    return tuple(names)


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class RowOutcome:
    name: str
    role: str
    run_id: str | None
    status: str  # FINISHED | FAILED
    error: str | None = None
    scores: Mapping[str, np.ndarray] = field(default_factory=dict)  # gauge metrics, aligned
    overall: Mapping[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0
    reused: bool = False


@dataclass(frozen=True)
class SweepResult:
    parent_run_id: str
    experiment_id: str
    status: str
    rows: Mapping[str, RowOutcome]
    gauge: Mapping[str, dict]
    signal_state: str
    ui_command: str
    wall_s: float

    @property
    def failed_rows(self) -> dict[str, str]:
        return {n: r.error or "failed" for n, r in self.rows.items() if r.status != "FINISHED"}

    def as_json(self) -> dict[str, Any]:
        return {"parent_run_id": self.parent_run_id, "experiment_id": self.experiment_id,
                "status": self.status,
                "rows": {n: r.run_id for n, r in self.rows.items()},
                "failed_rows": self.failed_rows,
                "signal_state": self.signal_state, "gauge": self.gauge,
                "wall_s": self.wall_s}


def row_options(spec: SweepSpec, row: SweepRow, experiment: str, uri: str,
                parent_run_id: str):
    from kebab_mlflow.evaluation import RunOptions

    return RunOptions(golden=spec.golden, corpus=spec.corpus, preset=row.preset, k=row.k,
                      overrides=dict(row.overrides), experiment=experiment, tracking_uri=uri,
                      run_name=row.name, seed=spec.seed, parent_run_id=parent_run_id,
                      target=row.target, concurrency=row.concurrency,
                      extra_tags={ROW_TAG: row.name, "kebab.sweep_role": row.role})


def execute_row(options: Any, metrics: tuple[str, ...]) -> dict[str, Any]:
    """Run one row (in this process or a worker). Errors come back as text; an interrupt
    propagates."""
    from kebab_mlflow.evaluation import RunInterrupted, execute

    t0 = time.perf_counter()
    try:
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
    from kebab_mlflow.evaluation import RunInterrupted

    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    t0 = time.perf_counter()
    # jobs − 1 worker processes (this process runs rows as well); they fork on the first row
    # handed to them, after the parent run exists
    pool = _start_pool(min(jobs, len(spec.rows)) - 1) if jobs > 1 and len(spec.rows) > 1 else None
    parent_id: str | None = None
    tracker: Any = None
    try:
        with sigterm_as_interrupt():
            from kebab_mlflow.tracking import DEFAULT_EXPERIMENT, Tracker

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
        _stop_pool(pool, terminate=True)
        if parent_id is None:
            raise RunInterrupted("interrupted before the sweep started") from None
        tracker.end_run_quietly(parent_id, "KILLED")
        _kill_running_children(tracker, parent_id)
        raise RunInterrupted(f"interrupted: sweep {parent_id} ended as KILLED; finish it with "
                             f"`kebab-mlflow sweep {spec.path} --resume {parent_id}`") from None
    except BaseException:
        _stop_pool(pool, terminate=True)
        if parent_id is not None:
            tracker.end_run_quietly(parent_id, "FAILED")
        raise
    _stop_pool(pool)
    rows = {r.name: (done.get(r.name) or outcomes[r.name]) for r in spec.rows}
    gauge = compute_gauge(spec, rows)
    state = overall_state(gauge)
    status = "FINISHED" if all(r.status == "FINISHED" for r in rows.values()) else "FAILED"
    wall_s = time.perf_counter() - t0
    result = SweepResult(parent_id, experiment_id, status, rows, gauge, state,
                         tracker.ui_command(), wall_s)
    _publish(tracker, spec, result)
    return result


# imported before the workers fork, so each starts with them loaded
WORKER_PRELOAD = ["kebab_mlflow.evaluation", "kebab_mlflow.tracking", "kebab_mlflow.reference",
                  "kebab_mlflow.backends.lexical", "kebab_mlflow.backends.floors",
                  "kebab_mlflow.runner", "kebab_mlflow.plots", "kebab_mlflow.sweep",
                  "scipy.sparse", "matplotlib.pyplot"]


def _warm_worker() -> None:
    """Import what every row needs, once, before workers fork (or in a spawned worker)."""
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    from kebab_mlflow.plots import _pyplot

    _pyplot()


def _start_pool(workers: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Fork: a worker starts with everything this process has imported (a spawned process would
    # import MLflow and matplotlib and parse the corpus again, which costs more than a cheap
    # row), so import it all here first. ProcessPoolExecutor forks on the first submit; the
    # worker drops the inherited store connections before its first row.
    try:
        context, forked = multiprocessing.get_context("fork"), True
        _warm_worker()
    except ValueError:  # no fork on this platform
        context, forked = multiprocessing.get_context("spawn"), False
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(forked,))


def _init_worker(forked: bool) -> None:
    """A worker leaves Ctrl-C to the sweep process, which stops it with SIGTERM: a row running
    then ends KILLED (``evaluation.execute`` turns SIGTERM into an interrupt while it runs), an
    idle worker just exits — without a traceback from ``call_queue.get``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if forked:
        from kebab_mlflow.tracking import forget_inherited_connections

        forget_inherited_connections()
    else:
        _warm_worker()


def _stop_pool(pool: Any, terminate: bool = False) -> None:
    if pool is None:
        return
    if terminate:
        # workers turn SIGTERM into an interrupt, so their child runs end KILLED
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


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
        for child in tracker.search_runs(
                [parent.info.experiment_id],
                f"tags.`mlflow.parentRunId` = '{parent_id}' and attributes.status = 'RUNNING'"):
            tracker.end_run(child.info.run_id, "KILLED")
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def _parent_tags(spec: SweepSpec) -> dict[str, str]:
    from kebab_mlflow import __version__
    from kebab_mlflow.provenance import git_state

    commit, dirty = git_state()
    return {"kebab.kind": SWEEP_KIND, "kebab.sweep_sha256": spec.sha256,
            "kebab.golden_sha256": spec.golden_sha256,
            "kebab.corpus_sha256": spec.corpus_sha256, "kebab.git_commit": commit,
            "kebab.git_dirty": str(dirty).lower(), "kebab.tool_version": __version__,
            "kebab.sweep_primary": spec.primary}


def _parent_params(spec: SweepSpec) -> dict[str, Any]:
    return {"sweep_file": spec.path, "golden": spec.golden, "golden_set": spec.golden_name,
            "corpus": spec.corpus, "n_queries": len(spec.query_ids),
            "rows": ",".join(r.name for r in spec.rows), "primary": spec.primary,
            "floors": ",".join(spec.floors), "ceiling": spec.ceiling or "",
            "gauge_metrics": ",".join(spec.gauge_metrics), "resamples": spec.resamples,
            "seed": spec.seed, "confidence": 0.95,
            **{f"row.{r.name}": _describe_row(r) for r in spec.rows}}


def _describe_row(row: SweepRow) -> str:
    sets = " ".join(f"{k}={v}" for k, v in row.overrides.items())
    return f"{row.shown_preset} k={row.k}" + (f" {sets}" if sets else "")


def _resume_state(tracker: Any, spec: SweepSpec, experiment: str, ref: str
                  ) -> tuple[str, dict[str, RowOutcome]]:
    from kebab_mlflow.per_query import read_per_query
    from kebab_mlflow.runs import resolve_run

    parent = resolve_run(tracker, experiment, ref)
    parent_id = parent.info.run_id
    tags = parent.data.tags
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
    children = tracker.search_runs(
        [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")
    done: dict[str, RowOutcome] = {}
    wanted = {r.name: r for r in spec.rows}
    with tempfile.TemporaryDirectory(prefix="kebab-resume-") as tmp:
        for child in children:  # newest first
            name = child.data.tags.get(ROW_TAG)
            if child.info.status != "FINISHED" or name not in wanted or name in done:
                continue
            path = tracker.download_artifact(child.info.run_id, "per_query.jsonl",
                                             Path(tmp) / child.info.run_id)
            ids, columns = [], {m: [] for m in spec.gauge_metrics}
            for rec in read_per_query(path):
                ids.append(rec.id)
                for m in spec.gauge_metrics:
                    v = rec.scores.get(m)
                    columns[m].append(math.nan if v is None else float(v))
            overall = {k: v for k, v in child.data.metrics.items() if "/" not in k}
            done[name] = RowOutcome(name, wanted[name].role, child.info.run_id, "FINISHED",
                                    None, _aligned(spec, ids, columns), overall, 0.0,
                                    reused=True)
    return parent_id, done


# --------------------------------------------------------------------------- gauge + outputs


def compute_gauge(spec: SweepSpec, rows: Mapping[str, RowOutcome]) -> dict[str, dict]:
    from kebab_mlflow.gauge import gauge_metric

    out = {}
    for metric in spec.gauge_metrics:
        scores = {n: (r.scores.get(metric) if r.status == "FINISHED" else None)
                  for n, r in rows.items()}
        block = gauge_metric(scores, spec.primary, spec.floors, spec.ceiling, spec.resamples,
                             spec.seed)
        block["n_queries"] = block["primary"]["n"]
        out[metric] = block
    return out


def overall_state(gauge: Mapping[str, dict]) -> str:
    from kebab_mlflow.gauge import combine_states

    return combine_states([g["signal_state"] for g in gauge.values()])


def gauge_metrics_flat(gauge: Mapping[str, dict]) -> dict[str, float]:
    """MLflow metrics of the gauge: non-null values only."""
    flat: dict[str, float] = {}
    for metric, block in gauge.items():
        for row, stat in block["rows"].items():
            for key in ("mean", "ci_low", "ci_high"):
                if stat[key] is not None:
                    flat[f"gauge/{metric}/{row}/{key}"] = stat[key]
        for floor, fb in block["floors"].items():
            for key in ("gap", "gap_ci_low", "gap_ci_high", "normalized"):
                if fb[key] is not None:
                    flat[f"gauge/{metric}/{floor}/{key}"] = fb[key]
        flat[f"gauge/{metric}/alive"] = float(block["signal_state"] == "alive")
    return flat


def distinguishing_power(spec: SweepSpec, result: SweepResult) -> dict[str, Any]:
    from kebab_mlflow import __version__
    from kebab_mlflow.provenance import git_state

    commit, dirty = git_state()
    return {
        "sweep": spec.name, "parent_run_id": result.parent_run_id,
        "primary": spec.primary, "floors": list(spec.floors), "ceiling": spec.ceiling,
        "signal_state": result.signal_state, "gauge": result.gauge,
        "failed_rows": result.failed_rows,
        "rows": {n: {"run_id": r.run_id, "role": r.role, "status": r.status,
                     "reused": r.reused} for n, r in result.rows.items()},
        "provenance": {"git_commit": commit, "git_dirty": dirty, "sweep_file": spec.path,
                       "sweep_sha256": spec.sha256, "golden_set": spec.golden_name,
                       "golden_sha256": spec.golden_sha256, "n_queries": len(spec.query_ids),
                       "tool_version": __version__, "bootstrap_resamples": spec.resamples,
                       "bootstrap_seed": spec.seed, "confidence": 0.95},
    }


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(stat: Mapping[str, Any]) -> str:
    if stat.get("mean") is None:
        return "—"
    if stat.get("ci_low") is None:
        return _fmt(stat["mean"])
    return f"{_fmt(stat['mean'])} [{_fmt(stat['ci_low'])}, {_fmt(stat['ci_high'])}]"


def gauge_rows(gauge: Mapping[str, dict]) -> list[tuple[str, ...]]:
    """One table row per (metric, floor): metric, floor, primary, floor, gap, normalized,
    state — rendered strings."""
    out = []
    for metric, block in gauge.items():
        for floor, fb in block["floors"].items():
            gap = _fmt(fb["gap"])
            if fb["gap_ci_low"] is not None:
                gap += f" [{_fmt(fb['gap_ci_low'])}, {_fmt(fb['gap_ci_high'])}]"
            out.append((metric, floor, _ci(block["primary"]), _ci(fb), gap,
                        _fmt(fb["normalized"]), fb["signal_state"]))
    return out


GAUGE_COLUMNS = ("metric", "floor", "primary [95% CI]", "floor [95% CI]",
                 "gap [paired 95% CI]", "normalized", "state")


def gauge_markdown(spec: SweepSpec, result: SweepResult) -> str:
    lines = [f"# Distinguishing power — {spec.name}", "",
             *([spec.description, ""] if spec.description else []),
             f"Primary row **{spec.primary}**, floors {', '.join(spec.floors)}, ceiling "
             f"{spec.ceiling or 'none (1.0)'}; {len(spec.query_ids)} queries of golden set "
             f"{spec.golden_name!r}; bootstrap {spec.resamples} resamples, seed {spec.seed}.",
             "", f"Overall signal state: **{result.signal_state}**", "",
             "| metric | state |", "|---|---|"]
    lines += [f"| {m} | {b['signal_state']} |" for m, b in result.gauge.items()]
    lines += ["", "| " + " | ".join(GAUGE_COLUMNS) + " |", "|" + "---|" * len(GAUGE_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in gauge_rows(result.gauge)]
    if result.failed_rows:
        lines += ["", "## Failed rows", ""]
        lines += [f"- {n}: {e}" for n, e in result.failed_rows.items()]
    lines += ["", "alive = the primary's CI lower bound is above every floor's CI upper bound; "
              "uncertain = positive gap, overlapping or missing CIs; dead = the primary is at "
              "or below a floor; n/a = a floor is missing or failed. normalized = gap / "
              "(ceiling − floor)."]
    return "\n".join(lines) + "\n"


def leaderboard(spec: SweepSpec, result: SweepResult) -> tuple[str, str]:
    """(markdown, csv) of every row, best first on the first gauge metric."""
    from kebab_mlflow.report import HEADLINE

    first = spec.gauge_metrics[0]

    def key(name: str) -> float:
        mean = result.gauge[first]["rows"].get(name, {}).get("mean")
        return -mean if mean is not None else math.inf

    names = sorted(result.rows, key=key)
    extra = [h for h in HEADLINE if h not in spec.gauge_metrics
             and any(result.rows[n].overall.get(h) is not None for n in names)]
    md = ["| rank | row | role | config | status | " + " | ".join(spec.gauge_metrics) + " | "
          + " | ".join(extra) + " | run id |",
          "|" + "---|" * (6 + len(spec.gauge_metrics) + len(extra))]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "row", "role", "preset", "k", "overrides", "status", "run_id",
                     *[f"{m}{s}" for m in spec.gauge_metrics for s in ("", "_ci_low", "_ci_high",
                                                                       "_n")], *extra, "error"])
    for rank, name in enumerate(names, 1):
        r, row = result.rows[name], spec.row(name)
        stats = [result.gauge[m]["rows"].get(name, {}) for m in spec.gauge_metrics]
        md.append(f"| {rank} | {name} | {r.role} | {_describe_row(row)} | {r.status} | "
                  + " | ".join(_ci(s) for s in stats) + " | "
                  + " | ".join(_fmt(r.overall.get(h)) for h in extra)
                  + f" | {r.run_id or '—'} |")
        writer.writerow([rank, name, r.role, row.shown_preset, row.k,
                         " ".join(f"{k}={v}" for k, v in row.overrides.items()), r.status,
                         r.run_id or "",
                         *[_csv(s.get(f)) for s in stats for f in ("mean", "ci_low", "ci_high",
                                                                  "n")],
                         *[_csv(r.overall.get(h)) for h in extra], r.error or ""])
    return f"# Leaderboard — {spec.name}\n\n" + "\n".join(md) + "\n", buf.getvalue()


def _csv(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def _publish(tracker: Any, spec: SweepSpec, result: SweepResult) -> None:
    from kebab_mlflow import plots
    from kebab_mlflow.reference import cache_root

    parent = result.parent_run_id
    workdir = cache_root() / "work" / f"sweep-{parent}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        report = gauge_markdown(spec, result)
        (workdir / "distinguishing_power.json").write_text(
            json.dumps(distinguishing_power(spec, result), indent=1, allow_nan=False))
        (workdir / "distinguishing_power.md").write_text(report)
        md, table = leaderboard(spec, result)
        (workdir / "leaderboard.md").write_text(md)
        (workdir / "leaderboard.csv").write_text(table)
        shutil.copyfile(spec.path, workdir / "sweep.yaml")
        for metric, block in result.gauge.items():
            bars = [(n, s["mean"], s["ci_low"], s["ci_high"]) for n, s in block["rows"].items()]
            plots.bar_with_ci(bars, workdir / f"gauge_{metric}.png",
                              f"{metric} per row ({block['signal_state']})", f"{metric} (mean)")
        tags = {"kebab.signal_state": result.signal_state,
                "kebab.failed_rows": ",".join(result.failed_rows),
                "mlflow.note.content": report,
                **{f"gauge/{m}/signal_state": b["signal_state"]
                   for m, b in result.gauge.items()}}
        metrics = {**gauge_metrics_flat(result.gauge),
                   "sweep/rows_finished": float(sum(r.status == "FINISHED"
                                                    for r in result.rows.values())),
                   "sweep/rows_failed": float(len(result.failed_rows)),
                   "sweep/wall_s": result.wall_s}
        tracker.log_batch(parent, metrics=metrics, tags=tags)
        for f in sorted(workdir.iterdir()):
            tracker.log_artifact(parent, f)
        tracker.end_run(parent, result.status)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
