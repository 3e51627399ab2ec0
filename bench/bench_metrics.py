"""The metric engine on 100,000 synthetic queries × 100 hits, against pytrec_eval.

Input: for each query a ranked list of 100 distinct doc ids and 1–5 relevant docs with grades
1–2 (about half of them ranked somewhere in the list). Seeded (SEED), so every run measures
the same data. Measured, each separately:

- table (lists): :meth:`RelevanceTable.from_rankings` from Python lists of string ids — what a
  run does today with hit lists;
- table (codes): :meth:`RelevanceTable.from_codes` from integer-coded ids (vectorised);
- metrics: every retrieval metric on the table — hit/precision/recall/nDCG at 1, 3, 5, 10, 100
  and MRR@10 (21 per-query arrays);
- pytrec_eval: ``RelevanceEvaluator(qrels, measures).evaluate(run)`` for the same 21 values
  (success, P, recall, ndcg_cut at the same cut-offs, recip_rank), its dict building not
  counted. The values are compared too (MRR@10 against recip_rank only where the first
  relevant doc is within 10).

Run: .venv/bin/python bench/bench_metrics.py [N_QUERIES]   (writes bench/results/bench_metrics.txt)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from common import emit  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
SEED, DEPTH, N_DOCS, CUTOFFS = 20240601, 100, 1_000_000, (1, 3, 5, 10, 100)


def synthetic(n_queries: int, rng: np.random.Generator):
    """Integer-coded ranked lists (n × DEPTH, distinct per row) and judgments."""
    ranked = np.empty((n_queries, DEPTH), dtype=np.int64)
    for start in range(0, n_queries, 10_000):  # distinct ids per row, in blocks
        rows = min(10_000, n_queries - start)
        base = rng.integers(0, N_DOCS - 10 * DEPTH, size=(rows, 1))
        offsets = np.argsort(rng.random((rows, 10 * DEPTH)), axis=1)[:, :DEPTH]
        ranked[start:start + rows] = base + offsets
    n_rel = rng.integers(1, 6, size=n_queries)
    rel_query = np.repeat(np.arange(n_queries), n_rel)
    in_list = rng.random(rel_query.size) < 0.5
    picked = rng.integers(0, DEPTH, size=rel_query.size)
    rel_item = np.where(in_list, ranked[rel_query, picked], N_DOCS + rng.integers(0, N_DOCS,
                                                                                 rel_query.size))
    # one judgment per (query, doc): drop repeats
    keys = rel_query * (3 * N_DOCS) + rel_item
    _, first = np.unique(keys, return_index=True)
    first.sort()
    rel_query, rel_item = rel_query[first], rel_item[first]
    rel_grade = rng.integers(1, 3, size=rel_query.size)
    return ranked, rel_query, rel_item, rel_grade


def timed(fn, repeats=3):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def all_metrics(table):
    from kebab_mlflow.metrics.retrieval import FAMILY_FUNCTIONS, mrr

    out = {"mrr": mrr(table)}
    for k in CUTOFFS:
        for family, fn in FAMILY_FUNCTIONS.items():
            out[f"{family}_{k}"] = fn(table, k)
    return out


def main() -> int:
    import pytrec_eval

    from kebab_mlflow.metrics.retrieval import RelevanceTable

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = np.random.default_rng(SEED)
    ranked, rel_query, rel_item, rel_grade = synthetic(n, rng)

    # the same input as Python lists of string ids (what a run holds) and as pytrec dicts
    ranked_ids = [[f"d{x}" for x in row] for row in ranked.tolist()]
    relevance: list[dict[str, int]] = [{} for _ in range(n)]
    for q, d, g in zip(rel_query.tolist(), rel_item.tolist(), rel_grade.tolist(), strict=True):
        relevance[q][f"d{d}"] = g
    qrels = {f"q{i}": rel for i, rel in enumerate(relevance)}
    run = {f"q{i}": {d: float(DEPTH - r) for r, d in enumerate(row)}
           for i, row in enumerate(ranked_ids)}

    t_lists, table = timed(lambda: RelevanceTable.from_rankings(ranked_ids, relevance, DEPTH), 1)
    t_codes, table_codes = timed(
        lambda: RelevanceTable.from_codes(ranked, rel_query, rel_item, rel_grade))
    same_table = all(np.array_equal(getattr(table, f), getattr(table_codes, f))
                     for f in ("gains", "n_relevant", "ideal"))
    # a fresh table each time: the per-table cumulative sums are part of what is measured
    t_metrics, ours = timed(lambda: all_metrics(
        RelevanceTable(table_codes.gains, table_codes.n_relevant, table_codes.ideal)))

    measures = {"success." + ",".join(map(str, CUTOFFS)), "P." + ",".join(map(str, CUTOFFS)),
                "recall." + ",".join(map(str, CUTOFFS)),
                "ndcg_cut." + ",".join(map(str, CUTOFFS)), "recip_rank"}
    t_pytrec_setup, evaluator = timed(lambda: pytrec_eval.RelevanceEvaluator(qrels, measures), 1)
    t_pytrec, theirs = timed(lambda: evaluator.evaluate(run), 1)

    names = {"hit": "success", "precision": "P", "recall": "recall", "ndcg": "ndcg_cut"}
    worst = 0.0
    for k in CUTOFFS:
        for family, trec in names.items():
            mine = ours[f"{family}_{k}"]
            ref = np.array([theirs[f"q{i}"][f"{trec}_{k}"] for i in range(n)])
            worst = max(worst, float(np.abs(mine - ref).max()))
    rr = np.array([theirs[f"q{i}"]["recip_rank"] for i in range(n)])
    within = rr >= 0.1  # first relevant within rank 10 (1/rank >= 1/10)
    worst = max(worst, float(np.abs(ours["mrr"][within] - rr[within]).max()))
    mrr_beyond_10_is_0 = bool((ours["mrr"][~within] == 0).all())

    lines = [
        f"metric engine: {n:,} synthetic queries x {DEPTH} hits, 1-5 graded relevant docs each "
        f"(seed {SEED}); 21 per-query metrics (hit/P/recall/nDCG @ "
        f"{','.join(map(str, CUTOFFS))} + MRR@10)",
        "",
        f"{'step':46}{'seconds':>10}",
        f"{'kebab: table from Python string-id lists':46}{t_lists:>10.3f}",
        f"{'kebab: table from integer codes (vectorised)':46}{t_codes:>10.3f}",
        f"{'kebab: the 21 metric functions on the table':46}{t_metrics:>10.3f}",
        f"{'kebab: codes table + metrics':46}{t_codes + t_metrics:>10.3f}",
        f"{'kebab: lists table + metrics':46}{t_lists + t_metrics:>10.3f}",
        f"{'pytrec_eval: RelevanceEvaluator(qrels)':46}{t_pytrec_setup:>10.3f}",
        f"{'pytrec_eval: evaluate(run)':46}{t_pytrec:>10.3f}",
        "",
        f"ratio pytrec evaluate / kebab metric functions:   {t_pytrec / t_metrics:8.1f}x",
        f"ratio pytrec evaluate / kebab codes table+metrics: "
        f"{t_pytrec / (t_codes + t_metrics):7.1f}x",
        f"ratio pytrec evaluate / kebab lists table+metrics: "
        f"{t_pytrec / (t_lists + t_metrics):7.1f}x",
        f"tables from lists and from codes identical: {same_table}; "
        f"max |kebab - pytrec_eval| over all values: {worst:.2e}; "
        f"MRR@10 = 0 where the first relevant rank > 10: {mrr_beyond_10_is_0}",
        f"goal (all retrieval metrics < 1 s): metric functions "
        f"{'met' if t_metrics < 1 else 'NOT met'}; codes table + metrics "
        f"{'met' if t_codes + t_metrics < 1 else 'NOT met'}; lists table + metrics "
        f"{'met' if t_lists + t_metrics < 1 else 'NOT met'}",
    ]
    emit("bench_metrics", "\n".join(lines))
    return 0 if same_table and worst < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
