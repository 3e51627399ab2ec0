"""Rescore a recorded run under another golden version, in memory: no pipeline, no MLflow.

A run's ``per_query.jsonl`` holds every query's hits and answer as the pipeline returned them.
:mod:`evaluation.replay` hands those back to the ordinary query loop (evaluation/runner.py) as if
the pipeline answered again, so the scores, the aggregate and the ``per_query.jsonl`` bytes come
from the same code as a fresh run: under the run's own golden set they are the recorded ones
exactly; under an edited set they are what a fresh run of the same pipeline would give.

The run's params say how it was scored (``k``, ``cutoffs``, ``seed``, ``ask``); they are reused,
so the derived result differs from its source only by the golden set.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kebab_mlflow import progress
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.evaluation.evaluate import EvalResult, PipelineSource, evaluate_prepared, with_ask
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.evaluation.replay import FileRecording, Recording, RowRecording, replay_target
from kebab_mlflow.golden import GoldenSet
from kebab_mlflow.metrics.scoring import parse_cutoffs, run_cutoffs
from kebab_mlflow.records import VERSION_KEYS, VersionSnapshot

# params an EvalResult writes itself (EvalResult.params); the rest describe the pipeline
_RESULT_PARAMS = frozenset({*VERSION_KEYS, "k", "cutoffs", "golden_set", "n_queries", "seed",
                            "ask"})
MAX_LISTED = 10  # query ids listed in a message


@dataclass(frozen=True, kw_only=True)
class RecordedRun:
    """What a rescore needs of its source run: its rows (held whole: an in-memory result) or
    its ``per_query.jsonl`` read a batch at a time (``file``: a stored run), params and
    tags."""

    run_id: str
    rows: tuple[PerQueryRow, ...] = ()
    params: Mapping[str, str]
    tags: Mapping[str, str] = field(default_factory=dict)
    load_ms: float | None = None  # its pipeline's one-time load (latency/load_ms), kept as is
    file: FileRecording | None = None

    def recording(self) -> Recording:
        return self.file if self.file is not None else RowRecording(self.rows)


@dataclass(frozen=True, kw_only=True)
class Rescored:
    """A rescore's result and what it left out."""

    result: EvalResult
    source_run_id: str
    dropped_new: tuple[str, ...] = ()  # golden queries the run never saw (with --intersect)
    dropped_old: tuple[str, ...] = ()  # queries the run saw that the golden set no longer has


@dataclass(frozen=True, kw_only=True)
class RecordedSource(PipelineSource):
    """The pipeline as its source run recorded it: the same params and config digest, so the
    derived run describes the same pipeline (and links to the same LoggedModel)."""

    recorded: Mapping[str, str] = field(default_factory=dict)
    recorded_config_digest: str = ""

    def params(self) -> dict[str, Any]:
        return dict(self.recorded)

    def config_digest(self) -> str:
        return self.recorded_config_digest or super().config_digest()


def rescore(run: RecordedRun, golden: GoldenSet, *, intersect: bool = False,
            per_query_path: Path | None = None, quiet: bool = False) -> Rescored:
    """Score ``run``'s recorded hits and answers against ``golden``. A golden query the run
    never saw is an InputError listing them, unless ``intersect`` (then only the shared
    queries are scored); queries the run saw that ``golden`` dropped are left out. ``quiet``:
    no progress and no warnings (a rescore inside compare, whose output is its own)."""
    with _quiet() if quiet else contextlib.nullcontext():
        return _rescore(run, golden, intersect, per_query_path)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("kebab_mlflow")
    level = logger.level
    with progress.silenced():
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(level)


def _rescore(run: RecordedRun, golden: GoldenSet, intersect: bool,
             per_query_path: Path | None) -> Rescored:
    recording = run.recording()
    seen = set(recording.ids)
    unseen = tuple(q.id for q in golden.queries if q.id not in seen)
    if unseen and not intersect:
        raise InputError(f"the golden set {golden.path or golden.name} has {len(unseen)} "
                         f"queries run {run.run_id} never saw: {_listed(unseen)}; pass "
                         "--intersect to rescore the shared queries only")
    wanted = golden.subset(seen) if unseen else golden
    if not wanted.queries:
        raise InputError(f"run {run.run_id} and {golden.path or golden.name} share no query id")
    kept = {q.id for q in wanted.queries}
    ask = ask_override(run.params.get("ask"))
    wanted = with_ask(wanted, ask)
    _check_private_answers(run, recording, wanted)
    k = int(run.params.get("k", "10"))
    cutoffs = rescore_cutoffs(run.params)
    target = replay_target(recording, _versions(run.params), answers=recording.scored_answers,
                           load_ms=run.load_ms)
    result = evaluate_prepared(target, recorded_source(run), wanted, k, cutoffs,
                               seed=int(run.params.get("seed", "0")),
                               per_query_path=per_query_path, ask=ask)
    return Rescored(result=result, source_run_id=run.run_id, dropped_new=unseen,
                    dropped_old=tuple(i for i in recording.ids if i not in kept))


def recorded_source(run: RecordedRun) -> RecordedSource:
    params = {k: v for k, v in run.params.items() if k not in _RESULT_PARAMS}
    return RecordedSource(preset=params.get(vocab.PRESET, "unknown"),
                          backend=params.get(vocab.BACKEND, "unknown"),
                          corpus=params.get(vocab.CORPUS), target=params.get(vocab.TARGET),
                          recorded=params,
                          recorded_config_digest=run.tags.get(vocab.CONFIG_SHA256, ""))


def ask_override(value: str | None) -> bool | None:
    """The run's ``ask`` param as :func:`with_ask` takes it."""
    return {"all": True, "none": False}.get(value or "")


def rescore_cutoffs(params: Mapping[str, str]) -> tuple[int, ...]:
    """The cut-offs the run was scored at (its ``k`` and ``cutoffs`` params)."""
    k = int(params.get("k", "10"))
    return tuple(run_cutoffs(k, parse_cutoffs(params["cutoffs"]) if params.get("cutoffs")
                             else None))


def _versions(params: Mapping[str, str]) -> VersionSnapshot:
    return VersionSnapshot(**{k: params[k] for k in VERSION_KEYS if k in params})


def _check_private_answers(run: RecordedRun, recording: Recording, golden: GoldenSet) -> None:
    """A private run's answers were recorded without their text: answer checks cannot be
    scored again, so a query that asks and checks its answer is refused, not scored 0 (every
    answer of such a run was written without text, read back as ``""``: per_query.py)."""
    if run.tags.get(vocab.PRIVATE) != "true":
        return
    blind = tuple(q.id for q in golden.queries if q.ask and (q.must_contain or q.forbidden)
                  and recording.answered(q.id))
    if blind:
        raise InputError("cannot rescore answer checks of a private run", [Problem(
            f"run {run.run_id} recorded no answer text (private set) for {len(blind)} "
            f"queries with must_contain/forbidden: {_listed(blind)}")])


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" (and {len(ids) - MAX_LISTED} more)" if len(ids) > MAX_LISTED else "")


def run_of_result(result: EvalResult, run_id: str = "in-memory") -> RecordedRun:
    """An in-memory result as a rescore's source (the Python API)."""
    return RecordedRun(run_id=run_id, rows=result.rows(),
                       params={k: str(v) for k, v in result.params().items()},
                       tags={vocab.CONFIG_SHA256: result.source.config_digest(),
                             vocab.PRIVATE: str(result.golden.private).lower()},
                       load_ms=(result.aggregate.latency or {}).get("load_ms"))
