"""The metric engine at scale (default 1,000,000 queries × 100 hits), against pytrec_eval and ranx.

Input: for each query a ranked list of 100 distinct doc ids and 1–5 relevant docs with grades
1–2 (about half of them ranked somewhere in the list). Seeded (SEED), so every run measures
the same data. 21 per-query metrics: hit/precision/recall/nDCG at 1, 3, 5, 10, 100 and MRR@10.

Part 1 — kebab alone at N and N/5 queries (the growth): the table from integer codes
(:meth:`RelevanceTable.from_codes`) and the 21 metric functions, median of 3, wall and CPU
(user + system) seconds; the N/(N/5) time ratio (linear: 5).

Part 2 — side by side on the first P queries of the same data (P = --peer-queries, default
100,000: what the peers' dict inputs hold in memory here): kebab's table from Python string-id
lists (what a run holds) and from codes, plus the metrics; pytrec_eval
(``RelevanceEvaluator(qrels).evaluate(run)``, success/P/recall/ndcg_cut/recip_rank); ranx
(numba; ``evaluate(qrels, run, metrics, threads=…)``, warmed by one call first, then 1 thread
and all threads). Building the peers' input dicts is not counted. Every value of every query
is compared with pytrec_eval and ranx (MRR@10 against recip_rank only where the first relevant
doc is within 10; ranx's ``mrr@10`` is the same cut).

The machine is shared (its load average is printed): CPU seconds are the steadier figure.
numpy asks the kernel for transparent huge pages on large arrays (``madvise``); where the
kernel's THP ``defrag`` is ``madvise`` (Debian's default) that can stall on memory compaction —
run once more with ``NUMPY_MADVISE_HUGEPAGE=0`` to see how much of the time that is.

Run: .venv/bin/python bench/bench_metrics.py [N_QUERIES] [--peer-queries P (0: skip part 2)]
(writes bench/results/bench_metrics.txt)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from common import emit  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
SEED, DEPTH, N_DOCS, CUTOFFS, REPEATS = 20240601, 100, 1_000_000, (1, 3, 5, 10, 100), 3


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


def timed(fn, repeats=REPEATS):
    """(median wall seconds, CPU seconds of the median repeat, result) after one untimed
    warm-up call: every side — kebab and both peers — is timed this one way."""
    fn()
    runs = []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        runs.append((time.perf_counter() - start, time.process_time() - start_cpu))
    wall, cpu = sorted(runs)[len(runs) // 2]
    return wall, cpu, result


def all_metrics(table):
    from kebab_mlflow.metrics.retrieval import FAMILY_FUNCTIONS, mrr

    out = {"mrr": mrr(table)}
    for k in CUTOFFS:
        for family, fn in FAMILY_FUNCTIONS.items():
            out[f"{family}_{k}"] = fn(table, k)
    return out


def kebab_at(n: int, data) -> dict[str, float]:
    """Table from codes + the 21 metrics on the first n queries (a fresh table each repeat: the
    per-table work is part of what is measured)."""
    from kebab_mlflow.metrics.retrieval import RelevanceTable

    ranked, rel_query, rel_item, rel_grade = data
    keep = rel_query < n
    args = (ranked[:n], rel_query[keep], rel_item[keep], rel_grade[keep])
    t_table, c_table, table = timed(lambda: RelevanceTable.from_codes(*args))
    t_metrics, c_metrics, _ = timed(lambda: all_metrics(
        RelevanceTable(table.gains, table.n_relevant, table.ideal)))
    t_both, c_both, _ = timed(lambda: all_metrics(RelevanceTable.from_codes(*args)))
    return {"table": t_table, "table_cpu": c_table, "metrics": t_metrics,
            "metrics_cpu": c_metrics, "both": t_both, "both_cpu": c_both}


def peers(p: int, data) -> tuple[list[str], bool]:
    """Part 2: kebab, pytrec_eval and ranx on the first p queries; (lines, values equal)."""
    import pytrec_eval
    from ranx import Qrels, Run, evaluate

    from kebab_mlflow.metrics.retrieval import RelevanceTable

    ranked, rel_query, rel_item, rel_grade = data
    keep = rel_query < p
    ranked, rel_query, rel_item, rel_grade = (ranked[:p], rel_query[keep], rel_item[keep],
                                              rel_grade[keep])
    ranked_ids = [[f"d{x}" for x in row] for row in ranked.tolist()]
    relevance: list[dict[str, int]] = [{} for _ in range(p)]
    for q, d, g in zip(rel_query.tolist(), rel_item.tolist(), rel_grade.tolist(), strict=True):
        relevance[q][f"d{d}"] = g
    qids = [f"q{i:07d}" for i in range(p)]  # zero-padded: ranx's sorted order is this order
    qrels = dict(zip(qids, relevance, strict=True))
    run = {qid: {d: float(DEPTH - r) for r, d in enumerate(row)}
           for qid, row in zip(qids, ranked_ids, strict=True)}

    t_lists, _, table = timed(lambda: RelevanceTable.from_rankings(ranked_ids, relevance, DEPTH))
    t_codes, _, table_codes = timed(
        lambda: RelevanceTable.from_codes(ranked, rel_query, rel_item, rel_grade))
    same_table = all(np.array_equal(getattr(table, f), getattr(table_codes, f))
                     for f in ("gains", "n_relevant", "ideal"))
    t_metrics, _, ours = timed(lambda: all_metrics(
        RelevanceTable(table_codes.gains, table_codes.n_relevant, table_codes.ideal)))

    cuts = ",".join(map(str, CUTOFFS))
    measures = {f"success.{cuts}", f"P.{cuts}", f"recall.{cuts}", f"ndcg_cut.{cuts}",
                "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    t_pytrec, _, theirs = timed(lambda: evaluator.evaluate(run))

    ranx_names = {"hit": "hit_rate", "precision": "precision", "recall": "recall",
                  "ndcg": "ndcg"}
    ranx_metrics = [f"{m}@{k}" for k in CUTOFFS for m in ranx_names.values()] + ["mrr@10"]
    rq, rr = Qrels.from_dict(qrels), Run.from_dict(run)
    t_ranx1, _, ranx1 = timed(lambda: evaluate(rq, rr, ranx_metrics, return_mean=False,
                                               threads=1, save_results_in_run=False))
    threads = os.cpu_count() or 1
    t_ranxn, _, _ = timed(lambda: evaluate(rq, rr, ranx_metrics, return_mean=False,
                                           threads=threads, save_results_in_run=False))

    trec_names = {"hit": "success", "precision": "P", "recall": "recall", "ndcg": "ndcg_cut"}
    worst_trec = worst_ranx = 0.0
    for k in CUTOFFS:
        for family in FAMILIES:
            mine = ours[f"{family}_{k}"]
            ref = np.array([theirs[q][f"{trec_names[family]}_{k}"] for q in qids])
            worst_trec = max(worst_trec, float(np.abs(mine - ref).max()))
            worst_ranx = max(worst_ranx, float(np.abs(
                mine - ranx1[f"{ranx_names[family]}@{k}"]).max()))
    rr_ref = np.array([theirs[q]["recip_rank"] for q in qids])
    within = rr_ref >= 0.1  # first relevant within rank 10 (1/rank >= 1/10)
    worst_trec = max(worst_trec, float(np.abs(ours["mrr"][within] - rr_ref[within]).max()))
    worst_ranx = max(worst_ranx, float(np.abs(ours["mrr"] - ranx1["mrr@10"]).max()))
    mrr_beyond_10_is_0 = bool((ours["mrr"][~within] == 0).all())
    both = t_codes + t_metrics
    lines = [
        f"Part 2 — side by side on the first {p:,} queries (21 metrics; peers' input dicts "
        f"not counted; every side the median of {REPEATS} after one warm-up call)",
        f"{'step':50}{'wall s':>9}{'vs kebab codes':>16}",
        f"{'kebab: table from Python string-id lists':50}{t_lists:>9.3f}",
        f"{'kebab: table from integer codes':50}{t_codes:>9.3f}",
        f"{'kebab: the 21 metric functions':50}{t_metrics:>9.3f}",
        f"{'kebab: codes table + metrics':50}{both:>9.3f}{1:>15.1f}x",
        f"{'kebab: lists table + metrics (as users have ids)':50}{t_lists + t_metrics:>9.3f}"
        f"{(t_lists + t_metrics) / both:>15.1f}x",
        f"peers / kebab from string ids: pytrec_eval {t_pytrec / (t_lists + t_metrics):.1f}x, "
        f"ranx 1 thread {t_ranx1 / (t_lists + t_metrics):.1f}x; from codes: pytrec_eval "
        f"{t_pytrec / both:.1f}x, ranx 1 thread {t_ranx1 / both:.1f}x",
        f"{'pytrec_eval: evaluate(run)':50}{t_pytrec:>9.3f}{t_pytrec / both:>15.1f}x",
        f"{'ranx (numba, warm), 1 thread':50}{t_ranx1:>9.3f}{t_ranx1 / both:>15.1f}x",
        f"{f'ranx (numba, warm), {threads} threads':50}{t_ranxn:>9.3f}{t_ranxn / both:>15.1f}x",
        f"tables from lists and from codes identical: {same_table}; max |kebab - pytrec_eval| "
        f"{worst_trec:.2e}; max |kebab - ranx| {worst_ranx:.2e}; MRR@10 = 0 where the first "
        f"relevant rank > 10: {mrr_beyond_10_is_0}",
    ]
    ok = same_table and worst_trec < 1e-9 and worst_ranx < 1e-9 and mrr_beyond_10_is_0
    return lines, ok


FAMILIES = ("hit", "precision", "recall", "ndcg")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--peer-queries", type=int, default=100_000)
    args = parser.parse_args()
    n, small = args.n, max(1, args.n // 5)
    load_before = os.getloadavg()[0]
    data = synthetic(n, np.random.default_rng(SEED))
    big, fifth = kebab_at(n, data), kebab_at(small, data)
    peer_lines, ok = (peers(min(args.peer_queries, n), data) if args.peer_queries > 0
                      else (["Part 2 skipped (--peer-queries 0)"], True))
    ratio = big["both"] / fifth["both"]
    ratio_cpu = big["both_cpu"] / fifth["both_cpu"]
    lines = [
        f"metric engine: synthetic queries x {DEPTH} hits, 1-5 graded relevant docs each (seed "
        f"{SEED}); 21 per-query metrics (hit/P/recall/nDCG @ {','.join(map(str, CUTOFFS))} + "
        f"MRR@10); load average {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end "
        f"on {os.cpu_count()} CPUs; NUMPY_MADVISE_HUGEPAGE="
        f"{os.environ.get('NUMPY_MADVISE_HUGEPAGE', 'unset (numpy default: 1)')}",
        "",
        "Part 1 — kebab alone, median of 3 after a warm-up (wall s / CPU s)",
        f"{'queries':>10}{'table':>16}{'21 metrics':>16}{'table + metrics':>18}",
    ]
    for size, r in ((small, fifth), (n, big)):
        lines.append(f"{size:>10,}{r['table']:>8.3f} /{r['table_cpu']:>6.3f}"
                     f"{r['metrics']:>8.3f} /{r['metrics_cpu']:>6.3f}"
                     f"{r['both']:>10.3f} /{r['both_cpu']:>6.3f}")
    lines += [
        f"ratio {n:,} / {small:,} queries: {ratio:.2f} wall, {ratio_cpu:.2f} CPU (linear = 5; "
        f"goal <= 5.5); table + metrics at {n:,}: {big['both']:.2f} s wall, "
        f"{big['both_cpu']:.2f} s CPU (goal < 3 s at 1,000,000)",
        "",
        *peer_lines,
    ]
    emit("bench_metrics", "\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
