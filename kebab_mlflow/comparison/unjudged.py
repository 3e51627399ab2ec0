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
from dataclasses import replace

from kebab_mlflow.comparison.records import CompareOptions, Comparison, RunSide, Verdict
from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_docs
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenSet

INCONCLUSIVE_UNJUDGED = Verdict.INCONCLUSIVE_UNJUDGED


class UnjudgedMode(enum.StrEnum):
    GATE = "gate"
    REPORT = "report"
    OFF = "off"


def _recorded(side: RunSide) -> RecordedRun:
    return RecordedRun(run_id=side.run_id, rows=side.rows, params=side.params, tags=side.tags)


def _optimistic_side(side: RunSide, golden: GoldenSet) -> RunSide:
    result = rescore(_recorded(side), golden, intersect=True, quiet=True).result
    return replace(side, rows=result.rows(), per_query_sha256=result.per_query_sha256,
                   tags={**side.tags, "kebab.golden_sha256": golden.digest,
                         "kebab.per_query_sha256": result.per_query_sha256})


def with_unjudged_bounds(result: Comparison, baseline: RunSide, candidate: RunSide,
                         golden: GoldenSet, options: CompareOptions, mode: UnjudgedMode,
                         k: int = 10) -> Comparison:
    """``result`` with the bounds noted (report) or gated (gate); unchanged for off."""
    from kebab_mlflow.comparison.verdict import compare_runs

    if mode is UnjudgedMode.OFF:
        return result
    counts = {role: unjudged_docs(golden, side.rows, k)
              for role, side in (("baseline", baseline), ("candidate", candidate))}
    union: dict[str, list[str]] = {}
    for docs in counts.values():
        for qid, ids in docs.items():
            union[qid] = list(dict.fromkeys([*union.get(qid, []), *ids]))
    optimistic = optimistic_golden(golden, union)
    upper = compare_runs(_optimistic_side(baseline, optimistic),
                         _optimistic_side(candidate, optimistic), options)
    name = result.primary.name
    notes = [f"unjudged hits in the top {k}: " + ", ".join(
        f"{role} {sum(map(len, docs.values()))} ({_per_query(docs)}/query)"
        for role, docs in counts.items()),
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


def _per_query(docs: dict[str, list[str]]) -> str:
    return f"{sum(map(len, docs.values())) / max(len(docs), 1):.1f}"


def _bound(lower: float | None, upper: float | None) -> str:
    if lower is None or upper is None:
        return "n/a"
    return f"{lower:.4f} .. {upper:.4f}"
