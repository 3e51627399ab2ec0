"""``compare --rescore``: the baseline rescored in memory under the candidate's golden version
(evaluation/rescore.py), so two runs of different golden versions compare on the same
judgments. Nothing is logged for the baseline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kebab_mlflow.comparison.loading import kept_compact
from kebab_mlflow.comparison.records import RunSide
from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.evaluation.per_query import CompactRow
from kebab_mlflow.evaluation.replay import FileRecording
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenFile, GoldenSet, version_label

GOLDEN_PATH_TAG = "kebab.golden_path"


def candidate_golden(candidate: RunSide, path: str | Path | None = None) -> GoldenSet:
    """The candidate's golden version: ``path`` (``--golden``), else the file its run
    recorded (tag ``kebab.golden_path``); refused unless its digest is the candidate's."""
    return candidate_golden_file(candidate, path).load()


def candidate_golden_file(candidate: RunSide, path: str | Path | None = None) -> GoldenFile:
    """The file of :func:`candidate_golden`, checked by its digest but not parsed: what the
    bounds for unjudged hits stream a chunk at a time (comparison/unjudged.py)."""
    where = path or candidate.tags.get(GOLDEN_PATH_TAG)
    if not where:
        raise InputError(f"run {candidate.run_id} recorded no golden path (a private set, or "
                         "a run older than kebab.golden_path): pass --golden with the "
                         "candidate's golden-set file")
    golden = GoldenFile.of(where)
    recorded = candidate.tags.get("kebab.golden_sha256")
    if golden.digest != recorded:
        raise InputError("the golden file is not the candidate's golden version", [Problem(
            f"{where} has sha256 {golden.digest[:12]}, run {candidate.run_id} was scored on "
            f"{(recorded or 'unknown')[:12]}; pass --golden with the file it was scored on",
            str(where))])
    return golden


def rescored_baseline(baseline: RunSide, golden: GoldenSet) -> RunSide:
    """``baseline`` as if it had been scored on ``golden``: its recorded hits and answers
    rescored; the same run id and name (marked), the new digests."""
    result = rescore(_recorded(baseline), golden, quiet=True).result
    rows, source = kept_compact(result.per_query_path, f"run {baseline.run_id} rescored")
    tags = {**baseline.tags, "kebab.golden_sha256": golden.digest,
            "kebab.per_query_sha256": result.per_query_sha256,
            "kebab.rescored_from_golden_sha256": baseline.tags.get("kebab.golden_sha256", "")}
    params = {**baseline.params, **{k: str(v) for k, v in result.params().items()}}
    label = version_label(golden.name, golden.digest)
    return replace(baseline, name=f"{baseline.name} (rescored on {label})", params=params,
                   tags=tags, rows=rows,
                   per_query_sha256=result.per_query_sha256, source=source)


def _recorded(side: RunSide) -> RecordedRun:
    """The side as a rescore's source: its file read a batch at a time where its rows were
    read compact from one (evaluation/replay.py), else its whole rows."""
    compact = [r for r in side.rows if isinstance(r, CompactRow)]
    if side.source is not None and len(compact) == len(side.rows):
        recording = FileRecording.of_compact(side.source.path, side.source.shown_as, compact)
        return RecordedRun(run_id=side.run_id, file=recording, params=side.params,
                           tags=side.tags)
    return RecordedRun(run_id=side.run_id, rows=tuple(side.full_rows()), params=side.params,
                       tags=side.tags)


def with_rescored_baseline(baseline: RunSide, candidate: RunSide,
                           golden_path: str | Path | None = None) -> RunSide:
    """The baseline to compare: itself when both sides share a golden version, else rescored
    under the candidate's."""
    if baseline.tags.get("kebab.golden_sha256") == candidate.tags.get("kebab.golden_sha256"):
        return baseline
    return rescored_baseline(baseline, candidate_golden(candidate, golden_path))
