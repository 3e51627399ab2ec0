"""Load both sides of a comparison through the tracking layer: run records and per_query.jsonl."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import RunSide
from kebab_mlflow.errors import ComparisonRefused, Problem
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.files import file_digest
from kebab_mlflow.records import RunRecord
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker


def load_pair(tracker: Tracker, experiment: str, baseline_ref: str, candidate_ref: str,
              workdir: Path | None = None) -> tuple[RunSide, RunSide]:
    """Resolve both references, refuse unfinished runs, download and read ``per_query.jsonl``."""
    from kebab_mlflow.tracking.references import resolve_run

    runs = [resolve_run(tracker, experiment, ref) for ref in (baseline_ref, candidate_ref)]
    problems = [p for role, r in zip(("baseline", "candidate"), runs, strict=True)
                for p in _unusable(role, r)]
    if problems:
        raise ComparisonRefused(problems)
    with tempfile.TemporaryDirectory(prefix="kebab-compare-", dir=workdir) as tmp:
        baseline, candidate = (_side(tracker, r, Path(tmp) / role)
                               for role, r in zip(("baseline", "candidate"), runs, strict=True))
    return baseline, candidate


def load_side(tracker: Tracker, experiment: str, ref: str, role: str) -> RunSide:
    """One side of a comparison from a run reference."""
    from kebab_mlflow.tracking.references import resolve_run

    run = resolve_run(tracker, experiment, ref)
    if problems := _unusable(role, run):
        raise ComparisonRefused(problems)
    with tempfile.TemporaryDirectory(prefix="kebab-compare-") as tmp:
        return _side(tracker, run, Path(tmp))


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


def _side(tracker: Tracker, r: RunRecord, folder: Path) -> RunSide:
    path = tracker.download_artifact(r.run_id, "per_query.jsonl", folder)
    digest = file_digest(path)
    # a file that fails its digest is not parsed: compare_runs reports the mismatch
    intact = digest == r.tags.get(vocab.PER_QUERY_SHA256)
    return RunSide(run_id=r.run_id, name=r.run_name, status=r.status, params=dict(r.params),
                   tags=dict(r.tags),
                   rows=tuple(read_per_query(path, _artifact_name(r))) if intact else (),
                   per_query_sha256=digest,
                   experiment=tracker.experiment_name(r.experiment_id))
