"""BM25: kebab-mlflow's lexical backend against bm25s on SciFact test, same tokenization.

Both sides index the same texts (title + abstract, chunker.mode=document) and tokenize with the
same uncached tokenizer (kebab_mlflow.pipeline.text.tokenize: lowercase, sklearn English stop
words, Snowball English stems), inside the timed call, every repeat: a run tokenizes each query
once, so neither side may reuse tokens from an earlier repeat (kebab's own per-text memo is
swapped for the plain analyzer here). bm25s runs with its numpy backend and with its numba
backend (its fastest on a CPU; JIT-compiled in the warm-up). Same parameters: k1=0.9, b=0.4,
Lucene idf. Query side: one batch of all 300 test queries, top 100, one thread. Every side is
timed the same way (bench/common.py ``alternate``: one warm-up call, then the sides take turns
for the same number of repeats; the median is the figure). Effectiveness: nDCG@10 by
pytrec_eval (trec_eval ndcg_cut_10) for every run.

Run: .venv/bin/python bench/bench_bm25.py   (writes bench/results/bench_bm25.txt)
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
from common import SCIFACT, alternate, emit, load_line  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
DATA = SCIFACT
K1, B, DEPTH, REPEATS, BUILD_REPEATS = 0.9, 0.4, 100, 9, 3


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
    from kebab_mlflow.pipeline.text import get_analyzer, tokenize

    chunks, queries, qrels = load()
    texts = [c.text for c in chunks]
    doc_ids = [c.doc_id for c in chunks]
    qids = list(queries)
    qtexts = [queries[q] for q in qids]
    load_start = os.getloadavg()[0]

    def bm25s_build(backend: str):
        def build():
            model = bm25s.BM25(k1=K1, b=B, method="lucene", backend=backend)
            model.index([tokenize(t) for t in texts], show_progress=False)
            return model
        return build

    builds = alternate({"kebab": lambda: BM25Index.build(texts, K1, B),
                        "bm25s numpy": bm25s_build("numpy"),
                        "bm25s numba": bm25s_build("numba")}, BUILD_REPEATS)
    ours = builds["kebab"].result
    ours._tokenize = get_analyzer("english")  # no memo: tokens paid every repeat, as bm25s's

    def bm25s_search(backend: str):
        model = builds[f"bm25s {backend}"].result

        def search():
            tokens = [tokenize(q) for q in qtexts]
            # bm25s refuses a query whose tokens are all out of vocabulary; none are here
            return model.retrieve(tokens, k=DEPTH, show_progress=False, n_threads=1,
                                  backend_selection=backend)[0]
        return search

    searches = alternate({"kebab": lambda: ours.search_batch(qtexts, DEPTH),
                          "bm25s numpy": bm25s_search("numpy"),
                          "bm25s numba": bm25s_search("numba")}, REPEATS)
    runs = {"kebab": as_run(qids, [[doc_ids[i] for i, _ in hits]
                                   for hits in searches["kebab"].result])}
    for side in ("bm25s numpy", "bm25s numba"):
        runs[side] = as_run(qids, [[doc_ids[i] for i in row] for row in searches[side].result])
    ndcg = {side: ndcg10(run, qrels) for side, run in runs.items()}
    n = len(qtexts)
    kb_build, kb_search = builds["kebab"].median, searches["kebab"].median
    lines = [
        f"BM25 on SciFact test: {len(texts)} docs, {n} queries, top {DEPTH}, k1={K1} b={B}, "
        f"same uncached tokenizer on every side, bm25s {bm25s.__version__}; "
        f"{load_line(load_start)}",
        f"median of {BUILD_REPEATS} builds / {REPEATS} searches after one warm-up call each, "
        "sides alternating; ratio = peer / kebab (> 1: kebab faster)",
        "",
        f"{'side':16}{'build s':>10}{'ratio':>8}{'search s':>11}{'ratio':>8}{'q/s':>8}"
        f"{'nDCG@10':>9}",
    ]
    for side in runs:
        b, q = builds[side].median, searches[side].median
        lines.append(f"{side:16}{b:>10.3f}{b / kb_build:>8.2f}{q:>11.4f}{q / kb_search:>8.2f}"
                     f"{n / q:>8.0f}{ndcg[side]:>9.4f}")
    fastest = min(("bm25s numpy", "bm25s numba"), key=lambda side: searches[side].median)
    same = np.mean([runs["kebab"][q].keys() == runs[fastest][q].keys() for q in qids])
    lines += [
        "",
        f"queries with the same top-{DEPTH} doc set as {fastest}: {same:.1%}",
        f"goal: search throughput >= bm25s's fastest backend ({fastest}) -> "
        f"{'met' if kb_search <= searches[fastest].median else 'NOT met'}; |nDCG@10 diff| "
        f"<= 0.01 -> {'met' if abs(ndcg['kebab'] - ndcg[fastest]) <= 0.01 else 'NOT met'}",
    ]
    emit("bench_bm25", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
