"""Load both sides of a comparison through the tracking layer: run records and per_query.jsonl.

Each side's ``per_query.jsonl`` is read compact (:func:`~kebab_mlflow.evaluation.per_query.
read_compact`: scores, first relevant ranks and flags, never the hit lists), and the file
stays while the side lives, so that what needs whole rows (the pull request comment's worst
queries, ``--rescore``, the bounds for unjudged hits) reads them again by byte offset. A local
artifact store's file is read in place (``Tracker.artifact_file``: a finished run's artifacts
do not change); any other is downloaded into a temporary folder, removed when the side is
garbage-collected or at exit.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import CompareOptions, RowSource, RunSide
from kebab_mlflow.errors import ComparisonRefused, PerQueryError, Problem
from kebab_mlflow.evaluation.per_query import CompactRow, QueryRow, read_compact
from kebab_mlflow.files import file_digest
from kebab_mlflow.meanwhile import Meanwhile
from kebab_mlflow.records import RunRecord
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker


def load_pair(tracker: Tracker, experiment: str, baseline_ref: str, candidate_ref: str,
              workdir: Path | None = None, reads: CompareOptions | None = None
              ) -> tuple[RunSide, RunSide]:
    """Resolve both references, refuse unfinished runs, download and read ``per_query.jsonl``.
    ``reads``: keep only the scores a comparison with these options reads
    (verdict.compare_reads), else every score."""
    from kebab_mlflow.comparison.verdict import compare_reads
    from kebab_mlflow.tracking.references import resolve_run

    runs = [resolve_run(tracker, experiment, ref) for ref in (baseline_ref, candidate_ref)]
    problems = [p for role, r in zip(("baseline", "candidate"), runs, strict=True)
                for p in _unusable(role, r)]
    if problems:
        raise ComparisonRefused(problems)
    folder = _TempFolder(workdir)
    names = None if reads is None else compare_reads(reads, [r.tags for r in runs])
    baseline = _side(tracker, runs[0], folder, "baseline", names)
    return baseline, _side(tracker, runs[1], folder, "candidate", names, twins=baseline.by_id)


def load_side(tracker: Tracker, experiment: str, ref: str, role: str) -> RunSide:
    """One side of a comparison from a run reference."""
    from kebab_mlflow.tracking.references import resolve_run

    run = resolve_run(tracker, experiment, ref)
    if problems := _unusable(role, run):
        raise ComparisonRefused(problems)
    return _side(tracker, run, _TempFolder(None), role)


class _TempFolder:
    """A temporary folder, removed when the last side holding it is gone (or at exit)."""

    def __init__(self, workdir: Path | None):
        self.path = Path(tempfile.mkdtemp(prefix="kebab-compare-", dir=workdir))
        weakref.finalize(self, shutil.rmtree, str(self.path), True)


def kept_compact(path: Path, shown_as: str) -> tuple[tuple[CompactRow, ...], RowSource]:
    """The compact rows of a ``per_query.jsonl`` about to be deleted (a rescore's), and their
    source: the file moved into a temporary folder that lives as long as the side."""
    folder = _TempFolder(None)
    moved = Path(shutil.move(path, folder.path / path.name))
    return tuple(read_compact(moved, shown_as)), RowSource(path=moved, shown_as=shown_as,
                                                            keep=folder)


def _unusable(role: str, r: RunRecord) -> list[Problem]:
    problems = []
    if r.status != RunStatus.FINISHED:
        problems.append(Problem(f"run {r.run_id} ({r.run_name}) is {r.status}; only FINISHED "
                                "runs can be compared", role))
    if r.tags.get(vocab.KIND) == vocab.RunKind.SWEEP:
        problems.append(Problem(f"run {r.run_id} ({r.run_name}) is a sweep parent, not an eval "
                                "run; compare two of its rows (its child runs) instead", role))
    return problems


def _artifact_name(r: RunRecord) -> str:
    """Where a parse error of the downloaded file is: the run's artifact, which lasts."""
    return f"run {r.run_id} ({r.run_name}) artifact per_query.jsonl"


def _side(tracker: Tracker, r: RunRecord, folder: _TempFolder, role: str,
          names: Collection[str] | None = None,
          twins: Mapping[str, QueryRow] | None = None) -> RunSide:
    """``names``: the scores kept (None: all); ``twins``: the baseline's rows by id, whose
    strings the candidate's share."""
    path = tracker.artifact_file(r.run_id, "per_query.jsonl", folder.path / role.strip("-"))
    shown_as = _artifact_name(r)
    digest, rows = _hashed_and_read(path, shown_as, r.tags.get(vocab.PER_QUERY_SHA256),
                                    names, twins)
    return RunSide(run_id=r.run_id, name=r.run_name, status=r.status, params=dict(r.params),
                   tags=dict(r.tags), rows=rows, per_query_sha256=digest,
                   experiment=tracker.experiment_name(r.experiment_id),
                   source=RowSource(path=path, shown_as=shown_as, keep=folder))


def _hashed_and_read(path: Path, shown_as: str, recorded: str | None,
                     names: Collection[str] | None, twins: Mapping[str, QueryRow] | None
                     ) -> tuple[str, tuple[CompactRow, ...]]:
    """(the file's sha256, its compact rows): hashed on a second thread while it is parsed
    (hashlib leaves the GIL; 1M queries: ~9 s a side). A file that fails its digest gives no
    rows, and its parse error is not raised: compare_runs reports the mismatch."""
    hashed = Meanwhile(lambda: file_digest(path), "kebab-digest")
    try:
        rows = tuple(read_compact(path, shown_as, names=names, twins=twins))
    except PerQueryError:
        if hashed.result() == recorded:
            raise
        rows = ()
    digest = hashed.result()
    return digest, rows if digest == recorded else ()
