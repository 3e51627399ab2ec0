"""``compare --by``: the paired comparison per slice of the queries, Holm across the slices.

A slice is the compared queries sharing a golden-set label (``query_type``, ``lang``,
``hardcase_category`` — a query is in each of its categories —, ``metadata_field``, ``group``,
``difficulty``). The labels come from the candidate's golden set (the file its run recorded,
or ``--golden``; its digest must be the candidate's), never from ``per_query.jsonl``: its bytes
stay what the run wrote. Labels are names the golden set declares, the same ones every run
logs as breakdown metric names (``by_query_type/…``), private sets included; no query text.

Every gated metric of the comparison is tested in every slice, and Holm's correction runs over
all those (slice, metric) tests at once (:func:`~.verdict.metric_results`), so the chance that
any slice shows a false alarm stays within alpha. A slice is **Regressed** when one of its
metrics is significantly worse after that correction, **Better** when one is better and none
worse, **too small** when fewer of its queries carry per-query evidence than the small-set
threshold (it carries no Same verdict: its MDE says why), else **Same**. A regressed slice
makes the whole comparison Regressed (exit 1) and is named in the headline: ``Regressed only
on abstention (n=14)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from kebab_mlflow.comparison.records import (
    Comparison,
    MetricResult,
    QueryDiff,
    QueryKind,
    RunSide,
    SliceReport,
    SliceResult,
    SliceVerdict,
    Verdict,
)
from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.evaluation.per_query import QueryRow
from kebab_mlflow.formatting import number
from kebab_mlflow.golden import GoldenQuery, GoldenSet, SliceKey, version_label


def query_labels(query: GoldenQuery, by: SliceKey) -> tuple[str, ...]:
    """The slices a golden query is in (none when it lacks the field)."""
    if by is SliceKey.HARDCASE_CATEGORY:
        return tuple(query.hardcase_categories)
    value = getattr(query, str(by))
    return (value,) if value else ()


def labels_by_id(golden: GoldenSet, by: SliceKey) -> dict[str, tuple[str, ...]]:
    return {q.id: query_labels(q, by) for q in golden.queries}


def _members(queries: Sequence[QueryDiff], labels: Mapping[str, tuple[str, ...]]
             ) -> dict[str, list[QueryDiff]]:
    members: dict[str, list[QueryDiff]] = {}
    for q in queries:
        for label in labels.get(q.id, ()):
            members.setdefault(label, []).append(q)
    return dict(sorted(members.items()))


def _values(queries: Sequence[QueryDiff], base: Mapping[str, QueryRow],
            cand: Mapping[str, QueryRow], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, candidate) values of one metric over the slice's queries both scored."""
    pairs = [(base[q.id].score(name), cand[q.id].score(name)) for q in queries]
    kept = [(b, c) for b, c in pairs if b is not None and c is not None]
    return (np.array([b for b, _ in kept], dtype=np.float64),
            np.array([c for _, c in kept], dtype=np.float64))


def _abstention_cases(baseline: RunSide, candidate: RunSide) -> set[str]:
    """Ids of the abstention cases of both runs: judged without retrieval truth."""
    return ({r.id for r in baseline.rows if r.abstention is not None}
            & {r.id for r in candidate.rows if r.abstention is not None})


def _verdict(metrics: Sequence[MetricResult], n_judged: int, small_set: int) -> SliceVerdict:
    if any(m.significant == "worse" for m in metrics):
        return SliceVerdict.REGRESSED
    if any(m.significant == "better" for m in metrics):
        return SliceVerdict.BETTER
    return SliceVerdict.TOO_SMALL if n_judged < small_set else SliceVerdict.SAME


def slice_results(c: Comparison, baseline: RunSide, candidate: RunSide,
                  labels: Mapping[str, tuple[str, ...]]) -> tuple[list[SliceResult], int]:
    """Each slice's gated metrics, Holm over every (slice, metric) test; and the tests."""
    from kebab_mlflow.comparison.verdict import metric_results

    base = {r.id: r for r in baseline.rows}
    cand = {r.id: r for r in candidate.rows}
    members = _members(c.queries, labels)
    cases = _abstention_cases(baseline, candidate)
    gates = [(m.gate, m.name, m.role) for m in c.metrics]
    family = [(label, g) for label in members for g in gates]
    values = [_values(members[label], base, cand, g[1]) for label, g in family]
    results = metric_results([g for _, g in family], values, c.options)
    tests = sum(m.p_holm is not None for m in results)
    out = []
    for i, (label, queries) in enumerate(members.items()):
        metrics = tuple(results[i * len(gates):(i + 1) * len(gates)])
        n_judged = sum(q.has_truth or q.id in cases for q in queries)
        out.append(SliceResult(
            label=label, n=len(queries), n_judged=n_judged,
            regressions=sum(q.kind is QueryKind.REGRESSION for q in queries),
            metrics=metrics, verdict=_verdict(metrics, n_judged, c.options.small_set)))
    return out, tests


def slice_words(s: SliceResult) -> str:
    """``abstention (n=14): abstention_accuracy worse (delta -1.0000, adjusted p 0.0001)``."""
    worse = [m for m in s.metrics if m.significant == "worse"]
    return f"{s.label} (n={s.n})" + (": " + "; ".join(
        f"{m.name} worse (delta {number(m.delta, signed=True)}, adjusted p {number(m.p_holm)})"
        for m in worse) if worse else "")


def holm_words(r: SliceReport) -> str:
    return f"Holm over {r.tests} slice test{'' if r.tests == 1 else 's'}"


def verdict_text(c: Comparison) -> str:
    """The verdict as a headline says it, naming the slices that regressed."""
    if c.slices is None or not c.slices.regressed:
        return str(c.verdict)
    names = ", ".join(f"{s.label} (n={s.n})" for s in c.slices.regressed)
    if c.slices.overall is Verdict.REGRESSED:
        return f"Regressed, and on {names}"
    return f"Regressed only on {names}"


def with_slices(c: Comparison, baseline: RunSide, candidate: RunSide, golden: GoldenSet,
                by: SliceKey) -> Comparison:
    """``c`` with its slice report; Regressed when a slice regressed. Refused (exit 2) when no
    compared query has the label."""
    labels = labels_by_id(golden, by)
    unlabelled = sum(not labels.get(q.id) for q in c.queries)
    if c.queries and unlabelled == len(c.queries):
        raise InputError(f"compare --by {by}: no compared query has a {by} label", [Problem(
            f"golden set {golden.name} ({golden.digest[:12]}) gives none of the "
            f"{len(c.queries)} compared queries a {by}", golden.path or "--golden")])
    slices, tests = slice_results(c, baseline, candidate, labels)
    report = SliceReport(by=by, golden=version_label(golden.name, golden.digest),
                         slices=tuple(slices), unlabelled=unlabelled, tests=tests,
                         small_set=c.options.small_set, overall=c.verdict)
    regressed = [slice_words(s) for s in report.regressed]
    if not regressed:
        return replace(c, slices=report)
    reason = (f"slice{'s' if len(regressed) > 1 else ''} regressed (--by {by}, "
              f"{holm_words(report)}): " + "; ".join(regressed))
    return replace(c, slices=report, verdict=Verdict.REGRESSED, reasons=(reason, *c.reasons))


def slice_rows(r: SliceReport) -> list[list[str]]:
    """One row per slice and gated metric (the slice's columns on its first row)."""
    rows = []
    for s in r.slices:
        for i, m in enumerate(s.metrics):
            head = ([s.label, str(s.n), str(s.n_judged), str(s.regressions)] if i == 0
                    else ["", "", "", ""])
            rows.append([*head, f"{m.name} (n={m.n})", number(m.delta, signed=True),
                         f"[{number(m.ci_low, signed=True)}, {number(m.ci_high, signed=True)}]",
                         number(m.p_holm), number(m.mde),
                         str(s.verdict) if i == 0 else (m.significant or "")])
    return rows


def slice_json(r: SliceReport | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"by": str(r.by), "golden": r.golden, "unlabelled": r.unlabelled, "tests": r.tests,
            "small_set_threshold": r.small_set, "overall_verdict": str(r.overall),
            "regressed": [s.label for s in r.regressed],
            "slices": [{"label": s.label, "n": s.n, "n_judged": s.n_judged,
                        "regressions": s.regressions, "verdict": str(s.verdict),
                        "metrics": [asdict(m) for m in s.metrics]} for s in r.slices]}
