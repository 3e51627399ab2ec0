"""``kebab-mlflow rescore RUN --golden NEW.yaml``: a stored run under another golden version.

The source run's ``per_query.jsonl`` (read in place from a local store, else downloaded) is
checked against its recorded sha256 and replayed a batch at a time through the query loop
(evaluation/rescore.py, evaluation/replay.py); the result is logged as a derived run
in the source run's experiment: the same metric names and params, tags ``kebab.kind =
rescore``, ``kebab.rescored_from`` (the source run id) and the new golden digest, linked to the
same LoggedModel (one per version snapshot, tracking/layout.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import InputError, Problem, TrackingError
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.evaluation.replay import FileRecording
from kebab_mlflow.evaluation.rescore import RecordedRun, Rescored, rescore
from kebab_mlflow.files import file_digest
from kebab_mlflow.golden import GoldenSet, version_label
from kebab_mlflow.records import RunRecord

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker


@dataclass(frozen=True, kw_only=True)
class LoggedRescore:
    """A rescore logged as a run: its id and experiment, and the in-memory rescore."""

    run_id: str
    experiment: str
    rescored: Rescored


def load_recorded(tracker: Tracker, experiment: str, ref: str) -> tuple[RunRecord, RecordedRun]:
    """The run ``ref`` and its rows, held whole, refused unless it is a FINISHED eval (or
    rescore) run whose ``per_query.jsonl`` matches its recorded digest."""
    run = _rescorable(tracker, experiment, ref)
    with tempfile.TemporaryDirectory(prefix="kebab-rescore-") as tmp:
        path = _checked_per_query(tracker, run, Path(tmp))
        rows = tuple(read_per_query(path))
        load_ms = _recorded_load_ms(tracker, run.run_id, Path(tmp))
    return run, RecordedRun(run_id=run.run_id, rows=rows, params=dict(run.params),
                            tags=dict(run.tags), load_ms=load_ms)


@contextlib.contextmanager
def recorded_file(tracker: Tracker, experiment: str, ref: str,
                  on_status: Callable[[str], None] = lambda s: None
                  ) -> Iterator[tuple[RunRecord, RecordedRun]]:
    """:func:`load_recorded`, its ``per_query.jsonl`` read a batch at a time as the rescore
    replays it (evaluation/replay.py: a million queries of 100 hits are ~40 GB as rows): read
    in place from a local store, else from a download kept until the block ends."""
    run = _rescorable(tracker, experiment, ref)
    with tempfile.TemporaryDirectory(prefix="kebab-rescore-") as tmp:
        # before the query loop's progress bar (100k queries: the digest ~1 s, the checked
        # pass ~3.4 s; ten times that at 1M)
        on_status(f"checking run {run.run_id}'s per_query.jsonl against its recorded sha256")
        path = _checked_per_query(tracker, run, Path(tmp))
        on_status(f"reading its {path.stat().st_size / 2**20:,.0f} MiB (every line checked)")
        recording = FileRecording.read(path, f"run {run.run_id}'s per_query.jsonl")
        yield run, RecordedRun(run_id=run.run_id, file=recording, params=dict(run.params),
                               tags=dict(run.tags),
                               load_ms=_recorded_load_ms(tracker, run.run_id, Path(tmp)))


def _rescorable(tracker: Tracker, experiment: str, ref: str) -> RunRecord:
    """The run ``ref``, refused unless it is a FINISHED eval (or rescore) run."""
    from kebab_mlflow.tracking.references import resolve_run

    run = resolve_run(tracker, experiment, ref)
    problems = []
    if run.status != vocab.RunStatus.FINISHED:
        problems.append(Problem(f"run {run.run_id} ({run.run_name}) is {run.status}; only "
                                "FINISHED runs can be rescored"))
    if run.tags.get(vocab.KIND) not in (vocab.RunKind.EVAL, vocab.RunKind.RESCORE):
        problems.append(Problem(f"run {run.run_id} ({run.run_name}) is a "
                                f"{run.tags.get('kebab.kind', 'non-kebab')} run, not an eval"))
    if problems:
        raise InputError(f"cannot rescore {ref}", problems)
    return run


def _checked_per_query(tracker: Tracker, run: RunRecord, folder: Path) -> Path:
    """The run's ``per_query.jsonl`` (in place, or downloaded into ``folder``), refused
    unless it matches its recorded digest."""
    path = tracker.artifact_file(run.run_id, "per_query.jsonl", folder)
    if file_digest(path) != run.tags.get(vocab.PER_QUERY_SHA256):
        raise InputError(f"run {run.run_id}'s per_query.jsonl does not match its "
                         "kebab.per_query_sha256 tag: it cannot be replayed")
    return path


def _recorded_load_ms(tracker: Tracker, run_id: str, folder: Path) -> float | None:
    """The source pipeline's one-time load (aggregate.json's latency.load_ms), which a replay
    reports as it was; None when the run has none (or no readable aggregate.json)."""
    import json

    try:
        aggregate = json.loads(tracker.download_artifact(run_id, "aggregate.json", folder)
                               .read_text())
        value = (aggregate.get("latency") or {}).get("load_ms")
    except (OSError, ValueError, AttributeError, TrackingError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def rescore_run(tracker: Tracker, experiment: str, ref: str, golden: GoldenSet, *,
                intersect: bool = False, run_name: str | None = None,
                on_status: Callable[[str], None] = lambda s: None) -> LoggedRescore:
    """Rescore the stored run ``ref`` under ``golden`` and log the derived run; ``on_status``
    hears each step before the query loop's progress bar and the logging after it."""
    from kebab_mlflow.app.run import log_run

    with recorded_file(tracker, experiment, ref, on_status) as (run, recorded):
        rescored = rescore(recorded, golden, intersect=intersect)
    on_status("logging the derived run")
    run_experiment = tracker.experiment_name(run.experiment_id) or experiment
    tags = {vocab.KIND: vocab.RunKind.RESCORE, vocab.RESCORED_FROM: run.run_id,
            vocab.RESCORED_FROM_GOLDEN_SHA256: run.tags.get(vocab.GOLDEN_SHA256, "unknown")}
    if rescored.dropped_new:
        tags[vocab.RESCORE_DROPPED_QUERIES] = str(len(rescored.dropped_new))
    name = run_name or f"{run.run_name} rescored on {version_label(golden.name, golden.digest)}"
    run_id = log_run(rescored.result, experiment=run_experiment, tracking_uri=tracker.uri,
                     run_name=name, extra_tags=tags)
    return LoggedRescore(run_id=run_id, experiment=run_experiment,
                         rescored=dataclasses.replace(rescored))
