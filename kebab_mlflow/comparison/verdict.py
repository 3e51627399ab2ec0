"""Compare a candidate eval run with a baseline: per-query diff, paired statistics, one verdict.

:func:`compare_runs` is pure (no MLflow): checks, per-query classes, per-metric statistics
and the verdict. Conventions:

* **Chunk ids** are comparable only when ``parser_version`` and ``chunker_version`` are equal
  (``unknown`` or missing counts as different). Otherwise everything is judged at doc level and
  chunk-level metrics are replaced by their ``_doc`` variants (``mrr`` → ``mrr_doc``).
* **Level of a query** is where the golden set has its ground truth: ``chunk`` when it carries
  ``expected_chunk_ids`` (and chunk ids are comparable), ``doc`` when it has only
  ``expected_doc_ids`` (a BEIR set), ``none`` without retrieval truth. The comparison's level is
  the set of its queries' levels (``chunk``, ``doc``, ``chunk+doc`` or ``none``).
* **First-hit rank** at that level is read from ``first_relevant_rank`` in ``per_query.jsonl``
  (files written before it existed: ``1 / mrr``); a miss is nothing relevant within rank 10
  (the mrr cut-off) or within a shallower run's ``--k``. Without ground truth "hit" means
  "returned at least one result".
* **Classes.** miss→hit Win; hit→miss Regression (query with ground truth) or Loss (without);
  better rank Win, worse rank Loss; same rank or miss→miss Draw. On an abstention case (an
  unanswerable ask query, its ``abstention`` outcome in ``per_query.jsonl``)
  ``correct_refusal`` → ``incorrect_answer`` is a Regression and the reverse a Win (a change
  through ``boundary_partial`` a Loss or a Win); a Regression on either side of the evidence
  wins, then an abstention Win or Loss. Such a query counts as judged for the small-set rule.
* **Abstention gate.** When both runs have abstention cases, ``abstention_accuracy`` (the right
  refuse-or-answer decision per ask query) is gated with the primary, sharing Holm's
  correction (``CompareOptions.abstention_gate``, ``--no-abstention-gate`` to leave it out).
* **Primary metric** decides: ``--primary``, else the golden set's ``primary_metric``, else by
  the ground truth: ``mrr`` when some query has chunk truth, ``ndcg_at_10_doc`` when only doc
  truth, ``contains_all`` for an answer-only set. ``--gate`` adds metrics that share Holm's
  correction with it; a metric whose paired deltas are all 0 is reported and left out of the
  correction (it cannot be significant and would only cost the others power).
* **Statistics** per gated metric over the queries where both runs have a value: mean delta
  (candidate − baseline), percentile bootstrap CI, two-sided sign-flip p (exact when the
  enumeration is small), Holm's correction; "significant" = Holm-adjusted p < alpha, its
  direction the sign of the mean delta (for ``no_hit_rate``, ``error_rate``, ``refusal_rate``
  lower is better). The CI is reported, never decides alone (alone it excludes 0 in ~6% of
  null trials). The MDE (:mod:`kebab_mlflow.stats.power`) is at 80% power and level
  alpha / (metrics in the correction): Holm's first step, the hardest one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.checks import check_pair, shared_rows
from kebab_mlflow.comparison.records import (
    DEFAULT_PRIMARY,
    KINDS,
    CompareOptions,
    Comparison,
    MetricResult,
    QueryDiff,
    QueryKind,
    RunSide,
    Verdict,
)
from kebab_mlflow.errors import ComparisonRefused, Problem
from kebab_mlflow.evaluation.per_query import QueryRow
from kebab_mlflow.formatting import number
from kebab_mlflow.metrics.answers import AbstentionOutcome
from kebab_mlflow.metrics.registry import MRR_CUTOFF, Level, parse_metric
from kebab_mlflow.records import VERSION_KEYS
from kebab_mlflow.stats.alternative import Alternative

if TYPE_CHECKING:
    from kebab_mlflow.stats.resampling import PairedTest

PRIMARY_TAG = vocab.PRIMARY_METRIC
ABSTENTION_GATE = "abstention_accuracy"  # gated by default on sets with abstention cases


def doc_variant(name: str) -> str:
    """The doc-level counterpart of a chunk-level metric name (others unchanged)."""
    m = parse_metric(name)
    if m is None or m.level != Level.CHUNK:
        return name
    return name[: -len("_chunk")] + "_doc" if name.endswith("_chunk") else name + "_doc"


def _higher_is_better(name: str) -> bool:
    m = parse_metric(name)
    return True if m is None else m.higher_is_better


# ---------------------------------------------------------------------------------------------
# per-query classes


def _truth(row: QueryRow, level: str, by_first_rank: bool) -> bool:
    if by_first_rank:
        return (row.first_relevant_rank or {})[level] is not None
    return row.score("mrr" if level == "chunk" else "mrr_doc") is not None


def _truth_level(b: QueryRow, c: QueryRow, chunk_ok: bool, by_first_rank: bool) -> str:
    """Where the golden set has this query's ground truth (either run saw it)."""
    for level in (("chunk", "doc") if chunk_ok else ("doc",)):
        if _truth(b, level, by_first_rank) or _truth(c, level, by_first_rank):
            return level
    return "none"


def _rank(row: QueryRow, level: str, by_first_rank: bool) -> tuple[bool, int | None]:
    """(has ground truth, first-hit rank or None for a miss: nothing relevant in the top
    ``MRR_CUTOFF``, or in the top ``--k`` of a shallower run), from ``first_relevant_rank``
    when both runs' files have it; else from the per-query MRR (files written before it
    existed; only at depth >= 10). Mixing the two would read a missing MRR as "no truth" on one
    side only, i.e. as a miss."""
    if by_first_rank:
        rank = (row.first_relevant_rank or {})[level]
        if rank is None:
            return False, (1 if row.has_hits else None)
        return True, (rank if 0 < rank <= MRR_CUTOFF else None)
    value = row.score("mrr" if level == "chunk" else "mrr_doc")
    if value is None:
        return False, (1 if row.has_hits else None)
    return True, (round(1.0 / value) if value > 0 else None)


def _classify(has_truth: bool, base: int | None, cand: int | None) -> QueryKind:
    if base is None:
        return QueryKind.DRAW if cand is None else QueryKind.WIN
    if cand is None:
        return QueryKind.REGRESSION if has_truth else QueryKind.LOSS
    return QueryKind.WIN if cand < base else QueryKind.LOSS if cand > base else QueryKind.DRAW


def _flip(before: bool | None, after: bool | None, words: tuple[str, str]) -> str | None:
    if before is None or after is None or before == after:
        return None
    return words[0] if after else words[1]


# best first: moving down this list is a Loss, from the first to the last a Regression
_ABSTENTION_RANK = (AbstentionOutcome.CORRECT_REFUSAL, AbstentionOutcome.BOUNDARY_PARTIAL,
                    AbstentionOutcome.INCORRECT_ANSWER)


def abstention_kind(before: str | None, after: str | None) -> QueryKind | None:
    """The class of an abstention outcome change; None when either side has none."""
    if before is None or after is None:
        return None
    rank_b = _ABSTENTION_RANK.index(AbstentionOutcome(before))
    rank_a = _ABSTENTION_RANK.index(AbstentionOutcome(after))
    if rank_a == rank_b:
        return QueryKind.DRAW
    if rank_a < rank_b:
        return QueryKind.WIN
    return QueryKind.REGRESSION if rank_a - rank_b == 2 else QueryKind.LOSS


def _combined_kind(retrieval: QueryKind, abstention: QueryKind | None) -> QueryKind:
    """A Regression on either evidence first, then an abstention change, else retrieval's."""
    if abstention is None or abstention is QueryKind.DRAW or retrieval is QueryKind.REGRESSION:
        return retrieval
    return abstention


def _query_diff(b: QueryRow, c: QueryRow, chunk_ok: bool, private: bool,
                by_first_rank: bool) -> QueryDiff:
    level = _truth_level(b, c, chunk_ok, by_first_rank)
    rank_level = level if level != "none" else ("chunk" if chunk_ok else "doc")
    truth_b, rank_b = _rank(b, rank_level, by_first_rank)
    truth_c, rank_c = _rank(c, rank_level, by_first_rank)
    has_truth = truth_b or truth_c
    if has_truth and not (truth_b and truth_c):  # truth on one side only: a miss on the other
        rank_b = rank_b if truth_b else None
        rank_c = rank_c if truth_c else None
    ca_b, ca_c = b.score("contains_all"), c.score("contains_all")
    contains = _flip(None if ca_b is None else bool(ca_b), None if ca_c is None else bool(ca_c),
                     ("gained", "lost"))
    refusal = _flip(b.refused, c.refused, ("started", "stopped"))
    top = (c.top_score - b.top_score
           if b.top_score is not None and c.top_score is not None else None)
    query = None if private else (b.query if b.query is not None else c.query)
    abstention = abstention_kind(b.abstention, c.abstention)
    kind = _combined_kind(_classify(has_truth, rank_b, rank_c), abstention)
    change = (f"{b.abstention} → {c.abstention}"
              if abstention not in (None, QueryKind.DRAW) else None)
    flaky = bool(b.flip_rate) or bool(c.flip_rate)
    return QueryDiff(id=b.id, query=query, has_truth=has_truth, level=level, baseline_rank=rank_b,
                     candidate_rank=rank_c, kind=kind, contains_all=contains, refusal=refusal,
                     top_score_delta=top, abstention=change, flaky=flaky)



def _comparison_level(queries: Sequence[QueryDiff], abstention_cases: int = 0) -> str:
    """chunk, doc, chunk+doc; without retrieval truth "abstention" when abstention cases
    carry the per-query evidence, else "none"."""
    levels = {q.level for q in queries if q.has_truth}
    retrieval = "+".join(lv for lv in ("chunk", "doc") if lv in levels)
    return retrieval or ("abstention" if abstention_cases else "none")


# ---------------------------------------------------------------------------------------------
# which metrics gate


def _valued(rows: Sequence[QueryRow], keys: set[str]) -> set[str]:
    """The metrics of ``keys`` with a value (ground truth) on at least one query of the rows
    (``any`` stops at the first: usually the first row)."""
    return {k for k in keys if any(r.has_value(k) for r in rows)}


def compare_reads(options: CompareOptions, tags: Sequence[Mapping[str, str]]) -> set[str]:
    """The per-query scores a comparison of runs with these tags can read: the metrics it
    may gate (the named or a default primary, --gate, abstention_accuracy, and their doc
    variants); the default primaries are also what its per-query classes read (mrr,
    mrr_doc, contains_all). A compact read keeps only these (evaluation/per_query.py);
    reading another raises ScoreNotKept."""
    named = {options.primary, *(t.get(PRIMARY_TAG) for t in tags)} - {None, ""}
    names = {*named, *DEFAULT_PRIMARY.values(), *options.gates, ABSTENTION_GATE}
    return {n for name in names if name for n in (name, doc_variant(name))}


def _score_names(rows: Sequence[QueryRow]) -> set[str]:
    """Every score name of the rows (compact rows share one name collection: read once;
    keyed by identity, so a collection must outlive the loop: a view made a call gave
    1M-query rows 1M keys, 200 MB)."""
    distinct = {id(names): names for names in (r.score_names for r in rows)}
    return {k for names in distinct.values() for k in names}


def default_primary(queries: Sequence[QueryDiff], valued: set[str], chunk_ok: bool) -> str:
    """``mrr`` when some query has chunk truth, ``ndcg_at_10_doc`` when only doc truth,
    ``contains_all`` for an answer-only set (doc variants when chunk ids are not comparable)."""
    levels = {q.level for q in queries}
    if "chunk" in levels or (not chunk_ok and "mrr" in valued):
        return DEFAULT_PRIMARY["chunk"]
    if "doc" in levels:
        return DEFAULT_PRIMARY["doc"]
    if "contains_all" in valued:
        return DEFAULT_PRIMARY["answer"]
    return DEFAULT_PRIMARY["chunk"]


def _gates(baseline: RunSide, candidate: RunSide, options: CompareOptions,
           queries: Sequence[QueryDiff], chunk_ok: bool
           ) -> tuple[list[tuple[str, str, str]], list[Problem], str]:
    """(asked, compared, role) triples — the primary first —, problems, and where the
    primary came from. A metric named by the user must be scored by both runs; the default
    primary must also have values (ground truth) in both."""
    keys = _score_names(baseline.rows) & _score_names(candidate.rows)
    valued = _valued(baseline.rows, keys) & _valued(candidate.rows, keys)
    named = options.primary or baseline.tags.get(PRIMARY_TAG) or candidate.tags.get(PRIMARY_TAG)
    source = ("--primary" if options.primary else
              "golden set primary_metric" if named else "default")
    primary = named or default_primary(queries, valued, chunk_ok)
    triples = [(primary, primary if chunk_ok else doc_variant(primary), "primary")]
    for gate in options.gates:
        name = gate if chunk_ok else doc_variant(gate)
        if name not in {t[1] for t in triples}:
            triples.append((gate, name, "gate"))
    if (options.abstention_gate and ABSTENTION_GATE in valued
            and ABSTENTION_GATE not in {t[1] for t in triples}
            and all(any(r.abstention for r in side.rows) for side in (baseline, candidate))):
        triples.append((ABSTENTION_GATE, ABSTENTION_GATE, "gate"))
    problems = []
    if not named and triples[0][1] not in valued:
        problems.append(Problem(
            f"the default primary metric {triples[0][1]!r} has no values in both runs (a run "
            f"shallower than its cut-off, or no ground truth for it); choose one with "
            f"--primary (metrics with values: {', '.join(sorted(valued)) or '(none)'})",
            "--primary"))
    missing = [(name, "--gate" if role == "gate" else source) for _, name, role in triples
               if name not in keys and (named or role == "gate")]
    for name, where in missing:
        problems.append(Problem(f"unknown gated metric {name!r} (not in the per-query scores "
                                f"of both runs); valid metrics: "
                                f"{', '.join(sorted(keys)) or '(none)'}", where))
    return triples, problems, source


# ---------------------------------------------------------------------------------------------
# statistics and the verdict


def _paired(pairs: Sequence[tuple[QueryRow, QueryRow]], name: str
            ) -> tuple[np.ndarray, np.ndarray]:
    vb = np.array([np.nan if (v := b.score(name)) is None else v for b, _ in pairs],
                  dtype=np.float64)
    vc = np.array([np.nan if (v := c.score(name)) is None else v for _, c in pairs],
                  dtype=np.float64)
    both = ~(np.isnan(vb) | np.isnan(vc))
    return vb[both], vc[both]


def significance(p_adjusted: float | None, mean: float | None, higher_is_better: bool,
                 alpha: float) -> str | None:
    """"worse" / "better" when the adjusted p is below alpha (the mean delta's sign says
    which), else None. The one decision rule: compare and bench_gate both call it."""
    if p_adjusted is None or not mean or not p_adjusted < alpha:
        return None
    return "better" if (mean > 0) == higher_is_better else "worse"


def detectable_effect(deltas: np.ndarray, baseline: np.ndarray, higher_is_better: bool,
                      level: float) -> dict[str, float | None]:
    """The paired deltas' sd and the MDE at ``level`` for a loss on a random subset of the
    queries (:func:`~kebab_mlflow.stats.power.mde_subset`). How a loss falls decides what it
    takes to see it, and compare cannot know: ``mde`` (printed) is the conservative figure, a
    loss of whole queries (each losing what it scores in the baseline; for a lower-is-better
    rate, rising to 1), the hardest shape to detect (bench/bench_mde_shapes.py);
    ``mde_spread`` a loss made of changes like the observed ones (their sizes ``|d|``), e.g.
    relevant documents moved down a few ranks; ``loss_size`` their Σd²/Σ|d|."""
    from kebab_mlflow.stats.power import delta_sd, loss_size, mde_subset

    room = baseline if higher_is_better else 1 - baseline  # what each query could lose
    conservative = mde_subset(deltas, room, level)
    spread = mde_subset(deltas, deltas, level)
    if conservative is None or spread is None:
        conservative = conservative or spread
    else:
        conservative = max(conservative, spread)
    return {"sd": delta_sd(deltas), "loss_size": loss_size(deltas), "mde": conservative,
            "mde_whole": conservative, "mde_spread": spread}


def metric_results(gates: Sequence[tuple[str, str, str]],
                   values: Sequence[tuple[np.ndarray, np.ndarray]],
                   options: CompareOptions, detectable: bool = True) -> list[MetricResult]:
    """Paired statistics of each gated metric (baseline, candidate values over the queries
    both scored); Holm over the metrics that changed somewhere. Pure numpy: bench_gate calls
    it the way compare does. ``detectable``: estimate the MDE (else None: no verdict reads
    it)."""
    from kebab_mlflow.stats.resampling import holm, paired_tests

    deltas = [c - b for b, c in values]
    tests = paired_tests(deltas, options.resamples, options.seed, options.confidence)
    hibs = [_higher_is_better(name) for _, name, _ in gates]
    pvalues = [gate_p(t, hib, options) for t, hib in zip(tests, hibs, strict=True)]
    unchanged = [t.n > 0 and not np.any(d) for t, d in zip(tests, deltas, strict=True)]
    tested = [i for i, p in enumerate(pvalues) if p is not None and not unchanged[i]]
    adjusted = dict(zip(tested, holm(np.array([pvalues[i] for i in tested])), strict=True))
    level = options.alpha / max(1, len(tested))
    # the MDE model takes a two-sided level: a one-sided alpha is a two-sided 2·alpha
    mde_level = level if options.alternative is Alternative.TWO_SIDED else min(0.999, 2 * level)
    out = []
    for i, ((gate, name, role), (vb, vc), t) in enumerate(zip(gates, values, tests,
                                                              strict=True)):
        hib = hibs[i]
        p_adj = float(adjusted[i]) if i in adjusted else None
        sig = significance(p_adj, t.mean, hib, options.alpha)
        within = None
        if options.margin is not None and t.n:
            bound = t.ci_low if hib else t.ci_high
            within = bound is not None and bool(bound >= -options.margin if hib
                                                else bound <= options.margin)
        effect = detectable_effect(deltas[i], vb, hib, mde_level) if detectable else dict.fromkeys(
            ("sd", "loss_size", "mde", "mde_whole", "mde_spread"))
        out.append(MetricResult(
            name=name, gate=gate, role=role, higher_is_better=hib, n=t.n,
            baseline=float(vb.mean()) if t.n else None,
            candidate=float(vc.mean()) if t.n else None, delta=t.mean, ci_low=t.ci_low,
            ci_high=t.ci_high, p_value=pvalues[i], p_exact=t.p_exact, p_holm=p_adj,
            significant=sig, unchanged=unchanged[i], sd=effect["sd"], mde=effect["mde"],
            mde_alpha=level, within_margin=within, loss_size=effect["loss_size"],
            mde_whole=effect["mde_whole"], mde_spread=effect["mde_spread"]))
    return out


def gate_p(t: PairedTest, higher_is_better: bool, options: CompareOptions) -> float | None:
    """The p the gate decides with: two-sided, or one-sided toward "worse" (``less``)."""
    if t.p_value is None or options.alternative is Alternative.TWO_SIDED:
        return t.p_value
    from kebab_mlflow.stats.resampling import one_sided_p

    worse = t.mean is not None and (t.mean < 0 if higher_is_better else t.mean > 0)
    return one_sided_p(t.p_value, worse, t.p_exact, options.resamples)


def _effect(m: MetricResult) -> str:
    return (f"delta {number(m.delta, signed=True)}, CI [{number(m.ci_low, signed=True)}, "
            f"{number(m.ci_high, signed=True)}], adjusted p {number(m.p_holm)}")


def detectable_words(m: MetricResult) -> str:
    """What a Same verdict could have missed on this metric, in words."""
    if m.n < 2:
        return f"{m.name}: too few paired queries ({m.n}) to estimate a detectable effect"
    if m.unchanged:
        return (f"{m.name} is identical on all {m.n} queries: the paired deltas have no "
                "variance, so no detectable effect can be estimated from them")
    if not m.mde:
        return (f"{m.name}: not even every query losing all it scores would be detected "
                f"with 80% power on these {m.n} queries")
    side = "loss" if m.higher_is_better else "increase"
    spread = (f"; one spread like the observed changes is seen from {number(m.mde_spread)}"
              if m.mde_spread and number(m.mde_spread) != number(m.mde) else "")
    return (f"could not have detected a {side} smaller than {number(m.mde)} {m.name} with "
            f"these {m.n} queries (80% power, alpha {m.mde_alpha:.3g}; conservative: a {side} "
            f"of any shape, whole queries being the hardest to see{spread})")


def _beyond_margin(m: MetricResult, margin: float | None) -> str:
    bound = m.ci_low if m.higher_is_better else m.ci_high
    return (f"not shown non-inferior: {m.name}'s CI worse bound {number(bound, signed=True)} is "
            f"beyond the margin {number(margin)} (--margin)")


def _decide(metrics: Sequence[MetricResult], counts: Mapping[str, int],
            judged: tuple[int, int], level: str,
            options: CompareOptions) -> tuple[Verdict, list[str]]:
    """``judged``: (queries with per-query evidence, of them abstention cases only)."""
    worse = [f"{m.name} is significantly worse ({_effect(m)})"
             for m in metrics if m.significant == "worse"]
    flaky = counts.get("Regression (flaky)", 0)
    regressions = counts[QueryKind.REGRESSION] - (0 if options.count_flaky else flaky)
    n_truth, n_abstention = judged
    cases = f", {n_abstention} of them abstention cases" if n_abstention else ""
    left_out = (f" ({flaky} flaky left out; --count-flaky counts them)"
                if flaky and not options.count_flaky else "")
    if n_truth < options.small_set and regressions:
        worse.append(f"small set: {n_truth} queries with ground truth (< {options.small_set}"
                     f"{cases}) and {regressions} Regression query(ies) at {level} level"
                     f"{left_out}")
    if options.max_regressions is not None and regressions > options.max_regressions:
        worse.append(f"{regressions} Regression queries (hit → miss at {level} level) > "
                     f"--max-regressions {options.max_regressions}{left_out}")
    if worse:
        return Verdict.REGRESSED, worse
    better = [f"{m.name} is significantly better ({_effect(m)})"
              for m in metrics if m.significant == "better"]
    if better:
        return Verdict.BETTER, better
    outside = [m for m in metrics if m.within_margin is False]
    reasons = ["no gated metric differs significantly"
               + (f" and no query regressed at {level} level"
                  if n_truth < options.small_set else "")]
    reasons += [detectable_words(m) for m in metrics if m.n]
    if outside:
        return Verdict.INCONCLUSIVE, [_beyond_margin(m, options.margin) for m in outside] + reasons
    return Verdict.SAME, reasons


def _level_words(options: CompareOptions) -> str:
    """The test and the level it really has on the worse side."""
    a = options.alpha
    if options.alternative is Alternative.LESS:
        return (f"one-sided sign-flip p < {a:g} (--alternative less: the whole alpha on the "
                "worse side)")
    return (f"two-sided sign-flip p < {a:g} and a worse mean, i.e. a one-sided level of "
            f"{a / 2:g} (--alternative less spends all of {a:g} on the worse side)")


def rule_text(options: CompareOptions) -> str:
    margin = ("" if options.margin is None else
              f"; Inconclusive instead of Same if some gated metric's CI has its worse bound "
              f"beyond the margin {options.margin:g}")
    cap = ("" if options.max_regressions is None else
           f", or if more than {options.max_regressions} queries are Regressions")
    abstention = ("abstention_accuracy is gated too when both runs have abstention cases"
                  if options.abstention_gate else "abstention_accuracy not gated "
                  "(--no-abstention-gate)")
    better = ("Better never (a one-sided test for a regression)"
              if options.alternative is Alternative.LESS else
              f"Better if not Regressed and some gated metric is better with adjusted p < "
              f"{options.alpha:g}")
    return (f"Regressed if the primary metric (or a --gate metric) is worse with Holm-adjusted "
            f"{_level_words(options)}, or if fewer than {options.small_set} compared "
            f"queries have ground truth (an abstention case counts) and at least one query is a "
            f"Regression (hit → miss, or correct refusal → incorrect answer; a query flaky "
            f"under run --repeat counts only with --count-flaky){cap}; "
            f"{abstention}; {better}; Same otherwise{margin}. {options.confidence:.0%} "
            f"percentile bootstrap CI ({options.resamples} resamples, reported, never decides "
            f"alone); sign-flip p exact when the flips can be enumerated, else "
            f"{options.resamples} flips with the +1 correction; seed {options.seed}.")


def compare_runs(baseline: RunSide, candidate: RunSide,
                 options: CompareOptions | None = None, *, detectable: bool = True
                 ) -> Comparison:
    """Check the pair, then compare; raises :class:`ComparisonRefused` listing every problem.
    ``detectable=False``: no MDE (metric_results), for a comparison read for its verdict and
    means only (the bounds for unjudged hits: its sample arrays took 1.4 GB at 100k)."""
    options = options or CompareOptions()
    check = check_pair(baseline, candidate, options)
    shared = shared_rows(baseline, candidate, options, check)
    findings = check.findings + shared.findings
    pairs, dropped, chunk_ok = shared.pairs, shared.dropped, check.chunk_ids_comparable
    problems, warnings = list(findings.problems), list(findings.warnings)
    private = baseline.private or candidate.private
    by_first_rank = all(lv in (r.first_relevant_rank or {}) for side in (baseline, candidate)
                        for r in side.rows for lv in ("chunk", "doc"))
    queries = tuple(_query_diff(b, c, chunk_ok, private, by_first_rank) for b, c in pairs)
    gates, gate_problems, source = _gates(baseline, candidate, options, queries, chunk_ok)
    if baseline.rows and candidate.rows:  # else the gates cannot be checked
        problems += gate_problems
    if problems:
        raise ComparisonRefused(problems)

    counts: dict[QueryKind, int] = {k: 0 for k in KINDS} | Counter(q.kind for q in queries)
    flaky_regressions = sum(q.kind == QueryKind.REGRESSION and q.flaky for q in queries)
    abstention_only = sum(not q.has_truth and b.abstention is not None
                          and c.abstention is not None
                          for q, (b, c) in zip(queries, pairs, strict=True))
    n_truth = sum(q.has_truth for q in queries) + abstention_only
    level = _comparison_level(queries, abstention_only)
    metrics = metric_results(gates, [_paired(pairs, name) for _, name, _ in gates], options,
                             detectable)
    warnings += [f"gated metric {m.name} has no query scored by both runs"
                 for m in metrics if m.n == 0]
    verdict, reasons = _decide(metrics, counts | {"Regression (flaky)": flaky_regressions},
                               (n_truth, abstention_only), level, options)
    vb, vc = baseline.versions, candidate.versions
    versions = tuple((k, vb[k], vc[k], vb[k] == vc[k] and vb[k] != "unknown")
                     for k in VERSION_KEYS)
    return Comparison(verdict=verdict, reasons=tuple(reasons), rule=rule_text(options), level=level,
                      baseline=baseline.summary(),
                      candidate=candidate.summary(), versions=versions, warnings=tuple(warnings),
                      notes=findings.notes, options=options,
                      n_queries=len(queries), n_with_truth=n_truth, dropped=dropped,
                      metrics=tuple(metrics), queries=queries, private=private, counts=counts,
                      primary_source=source, flaky_regressions=flaky_regressions)
