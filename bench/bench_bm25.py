"""BM25: kebab-mlflow's lexical backend against bm25s on SciFact test, same tokenization.

Both sides index the same texts (title + abstract, chunker.mode=document) and use the same
tokenizer (kebab_mlflow.pipeline.text.tokenize: lowercase, sklearn English stop words, Snowball
English stems): bm25s is fed our token lists, and the time to tokenize is counted on both sides.
Same parameters: k1=0.9, b=0.4, Lucene idf. Query side: one batch of all 300 test queries,
top 100. Effectiveness: nDCG@10 by pytrec_eval (trec_eval ndcg_cut_10) for both runs.

Run: .venv/bin/python bench/bench_bm25.py   (writes bench/results/bench_bm25.txt)
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from common import emit  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "datasets" / "scifact"
K1, B, DEPTH, REPEATS, BUILD_REPEATS = 0.9, 0.4, 100, 20, 3


def load():
    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus
    from kebab_mlflow.pipeline.corpus import load_corpus

    chunks = chunk_corpus(load_corpus(DATA / "corpus.jsonl.gz"), ChunkerConfig("document"))
    qrels: dict[str, dict[str, int]] = {}
    with (DATA / "qrels" / "test.tsv").open() as fh:
        for i, row in enumerate(csv.reader(fh, delimiter="\t")):
            if i:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries = {}
    with (DATA / "queries.jsonl").open() as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["_id"] in qrels:
                queries[rec["_id"]] = rec["text"]
    return chunks, queries, qrels


def interleaved(fn_a, fn_b, repeats):
    """Time two functions in alternation (the machine may be shared: both sides see the same
    load); best and median of each, and each one's last result."""
    times_a, times_b = [], []
    for _ in range(repeats):
        for fn, times in ((fn_a, times_a), (fn_b, times_b)):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
            if fn is fn_a:
                result_a = result
            else:
                result_b = result
    return ((min(times_a), statistics.median(times_a), result_a),
            (min(times_b), statistics.median(times_b), result_b))


def ndcg10(run, qrels):
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"})
    return float(np.mean([v["ndcg_cut_10"] for v in evaluator.evaluate(run).values()]))


def as_run(qids, ranked_doc_ids):
    # scores from ranks, so pytrec_eval keeps our order (it sorts by score, ties by id)
    return {q: {d: float(DEPTH - r) for r, d in enumerate(docs)}
            for q, docs in zip(qids, ranked_doc_ids, strict=True)}


def main() -> int:
    import bm25s

    from kebab_mlflow.pipeline.backends.lexical import BM25Index
    from kebab_mlflow.pipeline.text import tokenize

    chunks, queries, qrels = load()
    texts = [c.text for c in chunks]
    doc_ids = [c.doc_id for c in chunks]
    qids = list(queries)
    qtexts = [queries[q] for q in qids]

    def ours_build():
        return BM25Index.build(texts, K1, B)

    def bm25s_build():
        model = bm25s.BM25(k1=K1, b=B, method="lucene")
        model.index([tokenize(t) for t in texts], show_progress=False)
        return model

    (ours_build_s, ours_build_med, ours), (theirs_build_s, theirs_build_med, theirs) = \
        interleaved(ours_build, bm25s_build, BUILD_REPEATS)

    def ours_search():
        return ours.search_batch(qtexts, DEPTH)

    def bm25s_search():
        tokens = [tokenize(q) for q in qtexts]
        # bm25s refuses a query whose tokens are all out of vocabulary; none are here
        docs, scores = theirs.retrieve(tokens, k=DEPTH, show_progress=False, n_threads=1)
        return docs, scores

    ours_search(), bm25s_search()  # warm-up
    (ours_q_s, ours_q_med, ours_hits), (theirs_q_s, theirs_q_med, (theirs_docs, _)) = \
        interleaved(ours_search, bm25s_search, REPEATS)

    ours_run = as_run(qids, [[doc_ids[i] for i, _ in hits] for hits in ours_hits])
    theirs_run = as_run(qids, [[doc_ids[i] for i in row] for row in theirs_docs])
    ours_ndcg, theirs_ndcg = ndcg10(ours_run, qrels), ndcg10(theirs_run, qrels)
    same_top10 = np.mean([ours_run[q].keys() == theirs_run[q].keys() for q in qids])

    n = len(qtexts)
    lines = [
        f"BM25 on SciFact test: {len(texts)} docs, {n} queries, top {DEPTH}, k1={K1} b={B}, "
        f"same tokenizer (kebab_mlflow.text.tokenize) on both sides, bm25s {bm25s.__version__}",
        f"times: best of {BUILD_REPEATS} builds / {REPEATS} searches, run alternately (median in "
        "brackets); ratio = bm25s / kebab (> 1: kebab faster)",
        "",
        f"{'':24}{'kebab-mlflow':>22}{'bm25s':>22}{'ratio':>10}",
        f"{'index build (s)':24}{ours_build_s:>12.3f} ({ours_build_med:>6.3f})"
        f"{theirs_build_s:>12.3f} ({theirs_build_med:>6.3f}){theirs_build_s / ours_build_s:>10.2f}",
        f"{'batch search (s)':24}{ours_q_s:>12.4f} ({ours_q_med:>6.4f})"
        f"{theirs_q_s:>12.4f} ({theirs_q_med:>6.4f}){theirs_q_s / ours_q_s:>10.2f}",
        f"{'throughput (queries/s)':24}{n / ours_q_s:>22.0f}{n / theirs_q_s:>22.0f}"
        f"{(n / ours_q_s) / (n / theirs_q_s):>10.2f}",
        f"{'nDCG@10':24}{ours_ndcg:>22.4f}{theirs_ndcg:>22.4f}"
        f"{'':>4}diff {ours_ndcg - theirs_ndcg:+.4f}",
        "",
        f"queries with the same top-{DEPTH} doc set on both sides: {same_top10:.1%}",
        f"goal: throughput >= bm25s's -> {'met' if ours_q_s <= theirs_q_s else 'NOT met'}; "
        f"|nDCG@10 diff| <= 0.01 -> "
        f"{'met' if abs(ours_ndcg - theirs_ndcg) <= 0.01 else 'NOT met'}",
    ]
    emit("bench_bm25", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
