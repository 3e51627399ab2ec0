"""``compare --unjudged gate|report|off``: does the verdict hold when the unjudged documents in
both runs' top k count relevant (evaluation/bounds.py)?

Both sides are rescored on one optimistic set of judgments — the golden set plus every
document either run retrieved in its top k that nobody judged, at grade 1 — and compared
again with the same options. ``report`` (the default) adds the bounds and the unjudged counts
to the comparison's notes and leaves the verdict alone; ``gate`` turns a verdict that differs
under the optimistic judgments into ``Inconclusive (unjudged)`` (exit 1); ``off`` does neither.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from kebab_mlflow.comparison.records import (
    CompareOptions,
    Comparison,
    RunSide,
    Verdict,
)
from kebab_mlflow.errors import SettingsAfterQueries
from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_doc_ids
from kebab_mlflow.evaluation.optimistic import CodedLine, coded_compact
from kebab_mlflow.evaluation.per_query import CompactRow, PerQueryRow, read_compact
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenFile, GoldenSet
from kebab_mlflow.metrics.registry import parse_metric
from kebab_mlflow.metrics.unjudged import bound_cutoff
from kebab_mlflow.names import DEFAULT_K

INCONCLUSIVE_UNJUDGED = Verdict.INCONCLUSIVE_UNJUDGED


class UnjudgedMode(enum.StrEnum):
    GATE = "gate"
    REPORT = "report"
    OFF = "off"


#: golden queries rescored at a time: whole rows are read back for one chunk at a time
CHUNK = 1_000


@dataclass(kw_only=True)
class _Count:
    """Unjudged hits of one side: in all, over how many queries (with doc truth)."""

    hits: int = 0
    queries: int = 0

    def words(self) -> str:
        return f"{self.hits} ({self.hits / max(self.queries, 1):.1f}/query)"


def _each_chunk(golden: GoldenSet | GoldenFile, sink: Callable[[GoldenSet], None]) -> GoldenSet:
    """Hand ``sink`` the golden set CHUNK queries at a time, in its order — a file streamed
    (never held whole: a 1M-query set's records are ~1 GB); the set without its queries."""
    if isinstance(golden, GoldenFile):
        return golden.stream(CHUNK, sink)
    for start in range(0, len(golden.queries), CHUNK):
        sink(replace(golden, queries=golden.queries[start:start + CHUNK]))
    return replace(golden, queries=())


def _rescored_rows(side: RunSide, rows: Sequence[PerQueryRow], golden: GoldenSet,
                   names: set[str]) -> tuple[CompactRow, ...]:
    """``rows`` of ``side`` rescored under ``golden``, compact: only the scores ``names`` and
    no query text (the comparison under the optimistic judgments is read for its verdict and
    primary means only)."""
    seen = {r.id for r in rows}
    if not any(q.id in seen for q in golden.queries):
        return ()
    run = RecordedRun(run_id=side.run_id, rows=tuple(rows), params=side.params, tags=side.tags)
    result = rescore(run, golden, intersect=True, quiet=True).result
    return tuple(read_compact(result.per_query_path, keep_query=False, names=names))


@dataclass(kw_only=True)
class _Chunk:
    """One side's rows of a chunk: what the coded rescore reads of each line (a side read
    from its file), else the whole rows."""

    side: RunSide
    ids: list[str]
    lines: list[CodedLine] | None = None
    rows: list[PerQueryRow] | None = None

    @classmethod
    def read(cls, side: RunSide, ids: list[str]) -> _Chunk:
        lines = side.line_records(ids, CodedLine.of)
        if lines is not None:
            return cls(side=side, ids=ids, lines=lines)
        return cls(side=side, ids=ids, rows=list(side.full_rows(ids)))

    def rankings(self) -> Iterator[tuple[str, Sequence[str]]]:
        """(query id, its hits' doc ids), in the chunk's order."""
        if self.lines is not None:
            return ((line.id, line.doc_ids) for line in self.lines)
        return ((r.id, [h.doc_id for h in r.hits]) for r in self.rows or ())

    def rescored(self, golden: GoldenSet, names: set[str]) -> tuple[CompactRow, ...]:
        """The rows rescored under ``golden`` (holding the side's id strings): from doc codes
        where the rescore would score them as a run file's (evaluation/optimistic.py), else
        by the rescore itself."""
        rows = self._rescored(golden, names)
        for row in rows:
            row.share_strings(self.side.by_id[row.id])
        return rows

    def _rescored(self, golden: GoldenSet, names: set[str]) -> tuple[CompactRow, ...]:
        if self.lines is not None:
            if not self.lines:
                return ()
            coded = coded_compact(self.lines, golden, self.side.params, names)
            if coded is not None:
                return tuple(coded)
            self.rows = list(self.side.full_rows(self.ids))
        return _rescored_rows(self.side, self.rows or [], golden, names)


def _optimistic_sides(baseline: RunSide, candidate: RunSide, golden: GoldenSet | GoldenFile,
                      k: int, names: set[str]) -> tuple[dict[str, _Count], RunSide, RunSide]:
    """The unjudged counts and both sides rescored on one optimistic set of judgments (the
    golden set plus every unjudged document either run has in its top k, at grade 1), a
    chunk of the golden set at a time, in its order: what rescoring the whole would give.
    A file whose queries need a whole parse (golden.stream_golden_set) is loaded whole and
    the sides rescored again from the start."""
    if isinstance(golden, GoldenFile):
        try:
            return _optimistic_sides_of(baseline, candidate, golden, k, names)
        except SettingsAfterQueries:
            golden = golden.load()
    return _optimistic_sides_of(baseline, candidate, golden, k, names)


def _optimistic_sides_of(baseline: RunSide, candidate: RunSide, golden: GoldenSet | GoldenFile,
                         k: int, names: set[str]) -> tuple[dict[str, _Count], RunSide, RunSide]:
    sides = {"baseline": baseline, "candidate": candidate}
    counts = {role: _Count() for role in sides}
    upper: dict[str, list[CompactRow]] = {role: [] for role in sides}

    def rescore_chunk(chunk: GoldenSet) -> None:
        ids = [q.id for q in chunk.queries]
        rows = {role: _Chunk.read(side, ids) for role, side in sides.items()}
        docs = {role: unjudged_doc_ids(chunk, rows[role].rankings(), k) for role in sides}
        union: dict[str, list[str]] = {}
        for role, found in docs.items():
            counts[role].hits += sum(map(len, found.values()))
            counts[role].queries += len(found)
            for qid, doc_ids in found.items():
                union[qid] = list(dict.fromkeys([*union.get(qid, []), *doc_ids]))
        optimistic = optimistic_golden(chunk, union)
        for role in sides:
            upper[role] += rows[role].rescored(optimistic, names)

    header = _each_chunk(golden, rescore_chunk)
    for role, side in sides.items():
        if not upper[role]:  # shares no query with the golden set: rescore says so
            rescore(RecordedRun(run_id=side.run_id, rows=(), params=side.params,
                                tags=side.tags), header, intersect=True, quiet=True)
    b, c = (replace(side, rows=tuple(upper[role]), per_query_sha256=header.digest, source=None,
                    tags={**side.tags, "kebab.golden_sha256": header.digest,
                          "kebab.per_query_sha256": header.digest})
            for role, side in sides.items())
    return counts, b, c


def bound_depth(primary: str, sides: Sequence[RunSide]) -> int:
    """Within how many documents the primary's unjudged hits count relevant: the cut-off a
    run's own ``<primary>_upper`` uses (metrics.unjudged.bound_cutoff: its k, mrr's 10, the
    retrieved depth for map and r_precision), DEFAULT_K for a primary without a doc bound."""
    metric = parse_metric(primary)
    depth = max(int(side.params.get("k") or DEFAULT_K) for side in sides)
    cutoff = bound_cutoff(metric, depth) if metric is not None else None
    return cutoff if cutoff is not None else DEFAULT_K


def with_unjudged_bounds(result: Comparison, baseline: RunSide, candidate: RunSide,
                         golden: GoldenSet | GoldenFile, options: CompareOptions,
                         mode: UnjudgedMode) -> Comparison:
    """``result`` with the bounds noted (report) or gated (gate); unchanged for off.
    ``golden``: the candidate's golden version, loaded or as its file (streamed)."""
    from kebab_mlflow.comparison.verdict import compare_reads, compare_runs

    if mode is UnjudgedMode.OFF:
        return result
    k = bound_depth(result.primary.name, (baseline, candidate))
    reads = compare_reads(options, (baseline.tags, candidate.tags))
    counts, upper_b, upper_c = _optimistic_sides(baseline, candidate, golden, k, reads)
    upper = compare_runs(upper_b, upper_c, options, detectable=False)  # verdict, means
    name = result.primary.name
    notes = [f"unjudged hits in the top {k}: " + ", ".join(
        f"{role} {count.words()}" for role, count in counts.items()),
        f"{name} with unjudged counted relevant: baseline "
        f"{_bound(result.primary.baseline, upper.primary.baseline)}, candidate "
        f"{_bound(result.primary.candidate, upper.primary.candidate)}; verdict "
        f"{upper.verdict} (" + ("holds" if upper.verdict == result.verdict else
                               f"{result.verdict} does not hold") + " within the bounds)"]
    flipped = upper.verdict != result.verdict
    if mode is UnjudgedMode.GATE and flipped:
        return replace(result, verdict=INCONCLUSIVE_UNJUDGED, notes=(*result.notes, *notes),
                       reasons=(f"the verdict is {result.verdict} with unjudged hits counted "
                                f"non-relevant and {upper.verdict} with them counted relevant",
                                *result.reasons))
    return replace(result, notes=(*result.notes, *notes))


def _bound(lower: float | None, upper: float | None) -> str:
    if lower is None or upper is None:
        return "n/a"
    return f"{lower:.4f} .. {upper:.4f}"
