"""Compare a candidate eval run with a baseline: per-query diff, paired statistics, one verdict.

Flow (DESIGN §7): :func:`load_pair` reads both runs through the MLflow tracking API (via
:mod:`kebab_mlflow.tracking`, the only module that imports mlflow) and their
``per_query.jsonl``; :func:`compare_runs` is pure (no MLflow) — checks, per-query classes,
per-metric statistics and the verdict; :func:`to_json` / :func:`to_markdown` render it;
:func:`record` writes the verdict back onto the candidate run.

Conventions:

* **Level.** Chunk ids are comparable only when ``parser_version`` and ``chunker_version`` are
  equal (``unknown`` or missing counts as different). Otherwise everything is judged at doc
  level: chunk-level gates are replaced by their ``_doc`` variants (``hit_at_5`` →
  ``hit_at_5_doc``, ``mrr`` → ``mrr_doc``, ``precision_at_5_chunk`` → ``precision_at_5_doc``).
* **First-hit rank** of a query is read back from ``first_relevant_rank`` in
  ``per_query.jsonl`` (per level; files written before it existed: ``1 / mrr``, and when either
  run's file lacks it both are read that way); a miss is no relevant item within rank 10 (the
  mrr cut-off) or within a shallower run's ``--k``; ``null`` means the query has no ground
  truth at that level, and then "hit" means "returned at least one result".
* **Classes.** miss→hit Win; hit→miss Regression (query with ground truth) or Loss (without);
  better rank Win, worse rank Loss; same rank or miss→miss Draw.
* **Statistics** per gated metric over the queries where both runs have a value: mean delta
  (candidate − baseline), percentile bootstrap CI, two-sided sign-flip randomization p
  (:mod:`kebab_mlflow.stats`), Holm's correction across the gated metrics. For a metric where
  lower is better (``no_hit_rate``, ``error_rate``, ``refusal_rate``) "worse" means a positive
  delta.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from kebab_mlflow.comparison.records import (
    DEFAULT_GATES,
    KINDS,
    CompareOptions,
    Comparison,
    MetricResult,
    QueryDiff,
    RunSide,
)
from kebab_mlflow.errors import ComparisonRefused, Problem
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.metrics.registry import METRICS, MRR_CUTOFF
from kebab_mlflow.records import VERSION_KEYS

CHUNK_ID_VERSIONS = ("parser_version", "chunker_version")




# ---------------------------------------------------------------------------------------------
# records












# ---------------------------------------------------------------------------------------------
# loading from MLflow




# ---------------------------------------------------------------------------------------------
# the comparison (pure)


def doc_variant(name: str) -> str:
    """The doc-level counterpart of a chunk-level metric name (others unchanged)."""
    m = METRICS.get(name)
    if m is None or m.level != "chunk":
        return name
    return name[: -len("_chunk")] + "_doc" if name.endswith("_chunk") else name + "_doc"


def _higher_is_better(name: str) -> bool:
    m = METRICS.get(name)
    return True if m is None else m.higher_is_better


def _check(baseline: RunSide, candidate: RunSide, options: CompareOptions
           ) -> tuple[list[Problem], list[str], list[str], str]:
    """(problems, warnings, notes, level)."""
    problems: list[Problem] = []
    warnings: list[str] = []
    notes: list[str] = []
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if side.status != "FINISHED":
            problems.append(Problem(f"run {side.run_id} ({side.name}) is {side.status}; only "
                                    "FINISHED runs can be compared", role))
        tag = side.tags.get("kebab.per_query_sha256")
        if not tag:
            problems.append(Problem(f"run {side.run_id} has no kebab.per_query_sha256 tag "
                                    "(not a kebab-mlflow eval run?)", role))
        elif side.per_query_sha256 != tag:
            problems.append(Problem(
                f"per_query.jsonl of run {side.run_id} does not match its kebab.per_query_sha256 "
                f"tag (sha256 {side.per_query_sha256}, tag {tag}): tampered with or truncated",
                role))
        ids = [r.id for r in side.rows]
        if len(set(ids)) != len(ids):
            dup = sorted(i for i, c in Counter(ids).items() if c > 1)
            problems.append(Problem(f"per_query.jsonl of run {side.run_id} repeats query ids: "
                                    f"{', '.join(dup[:10])}", role))
    g_base = baseline.tags.get("kebab.golden_sha256")
    g_cand = candidate.tags.get("kebab.golden_sha256")
    if not g_base or g_base != g_cand:
        what = (f"different golden sets ({baseline.params.get('golden_set')} sha256 "
                f"{(g_base or 'unknown')[:12]} vs {candidate.params.get('golden_set')} sha256 "
                f"{(g_cand or 'unknown')[:12]})")
        if options.allow_golden_mismatch:
            warnings.append(f"{what}: comparing the shared query ids only")
        else:
            problems.append(Problem(f"{what}; pass --allow-golden-mismatch to compare the "
                                    "shared query ids", "golden set"))
    vb, vc = baseline.versions, candidate.versions
    changed = [k for k in CHUNK_ID_VERSIONS if vb[k] != vc[k] or vb[k] == "unknown"]
    level = "chunk"
    if changed:
        level = "doc"
        detail = ", ".join(f"{k} {vb[k]} → {vc[k]}" for k in changed)
        msg = (f"chunk ids are not comparable ({detail}): DOC-LEVEL comparison, chunk-level "
               "gates replaced by their _doc variants")
        if options.strict:
            problems.append(Problem(msg + " (--strict refuses this)", "versions"))
        notes.append(msg)
    provenance = []
    cb, cc = baseline.tags.get("kebab.git_commit", "unknown"), \
        candidate.tags.get("kebab.git_commit", "unknown")
    if "unknown" in (cb, cc):
        provenance.append(f"git commit unknown (baseline {cb}, candidate {cc})")
    elif cb != cc:
        provenance.append(f"different git commits (baseline {cb}, candidate {cc})")
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if side.tags.get("kebab.git_dirty") == "true":
            provenance.append(f"the {role} run was made from a dirty working tree")
    for p in provenance:
        if options.strict:
            problems.append(Problem(p + " (--strict refuses this)", "provenance"))
        else:
            warnings.append(p)
    return problems, warnings, notes, level


def _rank(row: PerQueryRow, level: str, by_first_rank: bool) -> tuple[bool, int | None]:
    """(has ground truth, first-hit rank or None for a miss: nothing relevant in the top
    ``MRR_CUTOFF``, or in the top ``--k`` of a shallower run), from ``first_relevant_rank``
    when both runs' files have it; else from the per-query MRR (files written before it
    existed; only at depth >= 10). Mixing the two would read a missing MRR as "no truth" on one
    side only, i.e. as a miss."""
    if by_first_rank:
        rank = row.first_relevant_rank[level]
        if rank is None:
            return False, (1 if row.hits else None)
        return True, (rank if 0 < rank <= MRR_CUTOFF else None)
    value = row.scores.get("mrr" if level == "chunk" else "mrr_doc")
    if value is None:
        return False, (1 if row.hits else None)
    return True, (round(1.0 / value) if value > 0 else None)


def _classify(has_truth: bool, base: int | None, cand: int | None) -> str:
    if base is None:
        return "Draw" if cand is None else "Win"
    if cand is None:
        return "Regression" if has_truth else "Loss"
    return "Win" if cand < base else "Loss" if cand > base else "Draw"


def _refused(row: PerQueryRow) -> bool | None:
    if not isinstance(row.answer, dict):
        return None
    return row.answer.get("refusal_reason") is not None


def _query_diff(b: PerQueryRow, c: PerQueryRow, level: str, private: bool,
                by_first_rank: bool) -> QueryDiff:
    truth_b, rank_b = _rank(b, level, by_first_rank)
    truth_c, rank_c = _rank(c, level, by_first_rank)
    has_truth = truth_b or truth_c
    if has_truth and not (truth_b and truth_c):  # truth on one side only: a miss on the other
        rank_b = rank_b if truth_b else None
        rank_c = rank_c if truth_c else None
    kind = _classify(has_truth, rank_b, rank_c)
    ca_b, ca_c = b.scores.get("contains_all"), c.scores.get("contains_all")
    contains = None
    if ca_b is not None and ca_c is not None and bool(ca_b) != bool(ca_c):
        contains = "gained" if ca_c else "lost"
    ref_b, ref_c = _refused(b), _refused(c)
    refusal = None
    if ref_b is not None and ref_c is not None and ref_b != ref_c:
        refusal = "started" if ref_c else "stopped"
    top = (float(c.hits[0]["score"]) - float(b.hits[0]["score"])) if b.hits and c.hits else None
    query = None if private else (b.query if b.query is not None else c.query)
    return QueryDiff(b.id, query, has_truth, rank_b, rank_c, kind, contains, refusal, top)


def _gate_names(gates: Sequence[str] | None, level: str, available: set[str]
                ) -> tuple[list[tuple[str, str]], list[Problem], list[str]]:
    """(gate as asked, metric compared) pairs, problems, notes. Without ``--gate`` the default
    gates that either run lacks (``contains_all`` of a set without ask queries) are skipped
    with a note; a gate the user named must exist."""
    pairs, missing, seen = [], [], set()
    for gate in gates if gates is not None else DEFAULT_GATES:
        name = doc_variant(gate) if level == "doc" else gate
        if name not in available:
            missing.append(repr(name))
        elif name not in seen:
            seen.add(name)
            pairs.append((gate, name))
    if gates is None and pairs:
        return pairs, [], [f"default gate {m} skipped: not in both runs' per-query scores"
                           for m in missing]
    if not missing:
        return pairs, [], []
    valid = ", ".join(sorted(available)) or "(none)"
    what = "metric" if len(missing) == 1 else "metrics"
    return pairs, [Problem(f"unknown gated {what} {', '.join(missing)} (not in the per-query "
                           f"scores of both runs); valid metrics: {valid}", "--gate")], []


def rule_text(options: CompareOptions) -> str:
    conf = f"{options.confidence:.0%}"
    return (f"Regressed if some gated metric has its {conf} bootstrap CI entirely on the worse "
            f"side of 0 and Holm-adjusted randomization p < {options.alpha:g}, or if fewer than "
            f"{options.small_set} compared queries have ground truth and at least one query is a "
            f"Regression (hit → miss); Better if not Regressed and some gated metric has its CI "
            f"entirely on the better side of 0 with adjusted p < {options.alpha:g}; Same "
            f"otherwise. Paired bootstrap ({options.resamples} resamples) and sign-flip test "
            f"({options.resamples} flips, +1 correction), seed {options.seed}.")


def compare_runs(baseline: RunSide, candidate: RunSide,
                 options: CompareOptions | None = None) -> Comparison:
    """Check the pair, then compare; raises :class:`ComparisonRefused` listing every problem."""
    from kebab_mlflow.stats.resampling import holm, paired_tests

    options = options or CompareOptions()
    problems, warnings, notes, level = _check(baseline, candidate, options)
    by_id_c = {r.id: r for r in candidate.rows}
    ids_b = {r.id for r in baseline.rows}
    shared = [r for r in baseline.rows if r.id in by_id_c]
    dropped = {"baseline_only": len(ids_b - by_id_c.keys()),
               "candidate_only": len(by_id_c.keys() - ids_b)}
    unread = any("kebab.per_query_sha256" in p.message for p in problems)
    if (dropped["baseline_only"] or dropped["candidate_only"]) and not unread:
        if options.allow_golden_mismatch:
            warnings.append(f"dropped {dropped['baseline_only']} baseline-only and "
                            f"{dropped['candidate_only']} candidate-only queries; "
                            f"{len(shared)} shared")
        elif not any(p.location == "golden set" for p in problems):
            problems.append(Problem(
                f"the runs scored different queries ({dropped['baseline_only']} baseline-only, "
                f"{dropped['candidate_only']} candidate-only) although their golden sets match",
                "golden set"))
    if not shared and not unread and not problems:
        problems.append(Problem("the runs share no query id", "golden set"))
    available = ({k for r in baseline.rows for k in r.scores}
                 & {k for r in candidate.rows for k in r.scores})
    gates, gate_problems, gate_notes = _gate_names(options.gates, level, available)
    if baseline.rows and candidate.rows:  # else the gates cannot be checked
        problems += gate_problems
        notes += gate_notes
    if problems:
        raise ComparisonRefused(problems)

    private = baseline.private or candidate.private
    by_first_rank = all(level in (r.first_relevant_rank or {})
                        for side in (baseline, candidate) for r in side.rows)
    queries = tuple(_query_diff(b, by_id_c[b.id], level, private, by_first_rank)
                    for b in shared)
    counts = {k: 0 for k in KINDS} | Counter(q.kind for q in queries)
    n_truth = sum(q.has_truth for q in queries)

    pairs = []
    for _, name in gates:
        vb = np.array([np.nan if b.scores.get(name) is None else b.scores[name]
                       for b in shared], dtype=np.float64)
        vc = np.array([np.nan if by_id_c[b.id].scores.get(name) is None
                       else by_id_c[b.id].scores[name] for b in shared], dtype=np.float64)
        both = ~(np.isnan(vb) | np.isnan(vc))
        pairs.append((vb[both], vc[both]))
    tests = paired_tests([c - b for b, c in pairs], options.resamples, options.seed,
                         options.confidence)
    tested = [i for i, t in enumerate(tests) if t.p_value is not None]
    adjusted = dict(zip(tested, holm(np.array([tests[i].p_value for i in tested])), strict=True))
    metrics = []
    for i, ((gate, name), (vb, vc), t) in enumerate(zip(gates, pairs, tests, strict=True)):
        hib = _higher_is_better(name)
        p_adj = float(adjusted[i]) if i in adjusted else None
        sig = None
        if p_adj is not None and p_adj < options.alpha:
            if (t.ci_high < 0) if hib else (t.ci_low > 0):
                sig = "worse"
            elif (t.ci_low > 0) if hib else (t.ci_high < 0):
                sig = "better"
        metrics.append(MetricResult(
            name, gate, hib, t.n, float(vb.mean()) if t.n else None,
            float(vc.mean()) if t.n else None, t.mean, t.ci_low, t.ci_high, t.p_value, p_adj,
            sig))
        if t.n == 0:
            warnings.append(f"gated metric {name} has no query scored by both runs")

    reasons = [f"{m.name} is significantly worse (delta {m.delta:+.4f}, CI "
               f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}], adjusted p {m.p_holm:.4g})"
               for m in metrics if m.significant == "worse"]
    if n_truth < options.small_set and counts["Regression"]:
        reasons.append(f"small set: {n_truth} queries with ground truth (< {options.small_set}) "
                       f"and {counts['Regression']} Regression query(ies)")
    if reasons:
        verdict = "Regressed"
    else:
        reasons = [f"{m.name} is significantly better (delta {m.delta:+.4f}, CI "
                   f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}], adjusted p {m.p_holm:.4g})"
                   for m in metrics if m.significant == "better"]
        verdict = "Better" if reasons else "Same"
        if not reasons:
            reasons = ["no gated metric differs significantly"
                       + (" and no query regressed" if n_truth < options.small_set else "")]
    vb, vc = baseline.versions, candidate.versions
    versions = tuple((k, vb[k], vc[k], vb[k] == vc[k] and vb[k] != "unknown")
                     for k in VERSION_KEYS)
    return Comparison(verdict, tuple(reasons), rule_text(options), level, baseline.summary(),
                      candidate.summary(), versions, tuple(warnings), tuple(notes), options,
                      len(queries), n_truth, dropped, tuple(metrics), queries, private, counts)


# ---------------------------------------------------------------------------------------------
# rendering


























# ---------------------------------------------------------------------------------------------
# recording


