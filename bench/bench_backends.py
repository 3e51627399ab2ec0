"""lexical vs dense vs hybrid on SciFact test, side by side (issue 7).

Corpus: ../shared/datasets/scifact/corpus.jsonl.gz with chunker.mode=document (one chunk per
document: title + abstract). Golden set: the 300 judged test queries, imported by
``kebab_mlflow.importers.import_beir`` (the code behind ``kebab-mlflow import-beir``).
Every backend is built by the reference pipeline (``reference.build_pipeline``) exactly as
``kebab-mlflow run --preset P --set chunker.mode=document`` builds it, in a fresh index cache,
so the first dense build embeds the corpus and the second one must load it (0 s embedding).

Effectiveness is doc level: nDCG@10 and Recall@100 from the project's metrics
(``kebab_mlflow.metrics.retrieval``), cross-checked with pytrec_eval (trec_eval's
ndcg_cut_10 / recall_100). Speed: corpus embedding time (dense), index build time, and the
throughput of one batch search of the 300 queries at depth 100, best of 3 (for dense that
includes encoding the queries). Ratios are against lexical (BM25), the baseline.

Hybrid settings (rrf_k, depth) are tuned, if at all, on SciFact *train* (809 judged queries),
never on test: ``--sweep`` fuses the lexical and dense lists of the train queries over a grid and
reports the grid's best on train next to its value on test.

Run: .venv/bin/python bench/bench_backends.py [--sweep] [--cache-dir DIR]
     (writes bench/results/bench_backends.txt; a fresh cache takes ~5 min of embedding on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import SCIFACT, emit  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
DATA = SCIFACT
CORPUS = DATA / "corpus.jsonl.gz"
DEPTH = 100
SEARCH_REPEATS = 3
SWEEP_RRF_K = (1, 10, 30, 60, 100, 200)
SWEEP_DEPTH = (10, 20, 50, 100, 200)


def golden(split: str, folder: Path):
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.importers.beir import import_beir

    return load_golden_set(import_beir(DATA, split, folder / f"scifact-{split}.yaml").out)


def evaluate(ranked, doc_ids, queries) -> dict[str, float]:
    """nDCG@10 and Recall@100 (doc level) by the project's metrics and by pytrec_eval."""
    import pytrec_eval

    from kebab_mlflow.metrics.retrieval import (
        RelevanceTable,
        first_appearance,
        ndcg_at_k,
        recall_at_k,
    )

    rankings = [first_appearance([doc_ids[i] for i, _ in hits]) for hits in ranked]
    relevance = [dict(q.expected_doc_ids) for q in queries]
    table = RelevanceTable.from_rankings(rankings, relevance, DEPTH)
    ours = {"ndcg_at_10_doc": float(np.nanmean(ndcg_at_k(table, 10))),
            "recall_at_100_doc": float(np.nanmean(recall_at_k(table, 100)))}
    qrels = {q.id: {d: int(g) for d, g in q.expected_doc_ids.items()} for q in queries}
    # scores from ranks, so pytrec_eval keeps our order (it sorts by score, ties by doc id)
    run = {q.id: {d: float(DEPTH - r) for r, d in enumerate(docs)}
           for q, docs in zip(queries, rankings, strict=True)}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100"}).evaluate(run)
    ours["trec_ndcg_cut_10"] = float(np.mean([v["ndcg_cut_10"] for v in per_query.values()]))
    ours["trec_recall_100"] = float(np.mean([v["recall_100"] for v in per_query.values()]))
    return ours


def timed_build(preset: str, overrides: dict | None = None):
    from kebab_mlflow.config import build_config
    from kebab_mlflow.pipeline.reference import build_pipeline

    config = build_config(preset, {"chunker.mode": "document", **(overrides or {})})
    t0 = time.perf_counter()
    pipeline = build_pipeline(config, CORPUS)
    return pipeline, time.perf_counter() - t0


def dense_part(backend):
    return backend if hasattr(backend, "embed_seconds") else backend.backends[1]


def measure(label: str, preset: str, queries, overrides: dict | None = None) -> dict:
    pipeline, build_s = timed_build(preset, overrides)
    backend = pipeline.backend
    texts = [q.query for q in queries]
    backend.search_batch(texts[:8], DEPTH)  # warm-up (model load for dense, caches)
    times = []
    for _ in range(SEARCH_REPEATS):  # best of a few: the machine may be shared
        t0 = time.perf_counter()
        ranked = backend.search_batch(texts, DEPTH)
        times.append(time.perf_counter() - t0)
    search_s = min(times)
    embed_s = dense_part(backend).embed_seconds if preset != "naive_baseline" else None
    cached = dense_part(backend).from_cache if preset != "naive_baseline" else None
    meta = dense_part(backend).cache_meta if preset != "naive_baseline" else {}
    doc_ids = [c.doc_id for c in pipeline.chunks]
    scoring_s = None
    if preset == "dense":  # the exact top-k alone, without encoding the queries
        from kebab_mlflow.pipeline.backends import top_k_indices

        vectors = backend.encode_queries(texts)
        t0 = time.perf_counter()
        for scores in vectors @ backend.embeddings.T:
            top_k_indices(scores, DEPTH)
        scoring_s = time.perf_counter() - t0
    row = {"label": label, "build_s": build_s, "embed_s": embed_s, "from_cache": cached,
           "scoring_s": scoring_s, "cache_meta": meta,
           "qps": len(texts) / search_s, "n_chunks": len(pipeline.chunks),
           "versions": pipeline.versions.as_dict(), **evaluate(ranked, doc_ids, queries)}
    print(f"  {label}: built in {build_s:.1f} s, nDCG@10 {row['ndcg_at_10_doc']:.4f}",
          file=sys.stderr)
    return row


class Fixed:
    """A backend that replays precomputed ranked lists (for the fusion sweep)."""

    def __init__(self, ranked):
        self.ranked = ranked

    def search_batch(self, queries, k):
        return [r[:k] for r in self.ranked[:len(queries)]]


def sweep(train, test) -> list[str]:
    from kebab_mlflow.pipeline.backends.hybrid import HybridBackend

    lex_pipe, _ = timed_build("naive_baseline")
    dense_pipe, _ = timed_build("dense")
    doc_ids = [c.doc_id for c in lex_pipe.chunks]
    lists = {}
    for name, queries in (("train", train), ("test", test)):
        texts = [q.query for q in queries]
        lists[name] = (lex_pipe.backend.search_batch(texts, max(SWEEP_DEPTH)),
                       dense_pipe.backend.search_batch(texts, max(SWEEP_DEPTH)))
    results = []
    for rrf_k in SWEEP_RRF_K:
        for depth in SWEEP_DEPTH:
            row = {"rrf_k": rrf_k, "depth": depth}
            for name, queries in (("train", train), ("test", test)):
                lex, den = lists[name]
                hybrid = HybridBackend(Fixed(lex), Fixed(den), rrf_k, depth)
                ranked = hybrid.search_batch([q.query for q in queries], DEPTH)
                row[name] = evaluate(ranked, doc_ids, queries)["ndcg_at_10_doc"]
            results.append(row)
    best = max(results, key=lambda r: (r["train"], -r["rrf_k"], -r["depth"]))
    lines = [f"Hybrid sweep (nDCG@10, doc level): rrf_k x depth, tuned on train "
             f"({len(train)} queries), shown on test ({len(test)} queries)",
             f"{'rrf_k':>6}{'depth':>7}{'train':>9}{'test':>9}"]
    lines += [f"{r['rrf_k']:>6}{r['depth']:>7}{r['train']:>9.4f}{r['test']:>9.4f}"
              + ("   <- best on train" if r is best else "")
              + ("   (default)" if (r["rrf_k"], r["depth"]) == (60, 100) else "")
              for r in results]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", help="index cache to use (default: a fresh temp dir)")
    parser.add_argument("--sweep", action="store_true", help="tune rrf_k/depth on train")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kebab-bench-") as tmp:
        os.environ["KEBAB_CACHE_DIR"] = args.cache_dir or str(Path(tmp) / "cache")
        test = golden("test", Path(tmp)).queries
        rows = [measure("lexical", "naive_baseline", test),
                measure("dense", "dense", test),
                measure("dense (2nd run)", "dense", test),
                measure("hybrid", "hybrid", test)]
        sweep_lines = sweep(golden("train", Path(tmp)).queries, test) if args.sweep else []
    lines = render(rows) + ([""] + sweep_lines if sweep_lines else [])
    emit("bench_backends", "\n".join(lines))
    return 0


def embedding_line(row: dict, n_docs: int) -> str:
    meta = row["cache_meta"]
    wall, cpu = meta.get("embed_seconds"), meta.get("embed_cpu_seconds")
    if wall is None:
        return "corpus embedding: not recorded"
    how = ("in this run" if not row["from_cache"] else
           "recorded in the cache when it was built (this run loaded it)")
    cpu_text = f", {cpu:.0f} s CPU" if cpu is not None else ""
    return (f"corpus embedding {how}: {wall:.1f} s wall{cpu_text} = {n_docs / wall:.1f} docs/s "
            "(wall time depends on what else the machine runs)")


def render(rows: list[dict]) -> list[str]:
    import torch

    base = rows[0]
    dense_row, second, hybrid = rows[1], rows[2], rows[3]
    best_single = max(base["ndcg_at_10_doc"], dense_row["ndcg_at_10_doc"])

    def fmt(v, spec):
        return "—" if v is None else format(v, spec)

    lines = [
        f"SciFact test: {base['n_chunks']} docs (chunker.mode=document), 300 queries, depth "
        f"{DEPTH}; queries/s best of {SEARCH_REPEATS}; CPU, torch {torch.__version__} with "
        f"{torch.get_num_threads()} threads"
        + ("; embeddings loaded from an existing cache" if rows[1]["from_cache"] else
           "; fresh index cache"),
        f"embedding_version: {dense_row['versions']['embedding_version']}",
        f"hybrid index_version: {hybrid['versions']['index_version']}",
        "ratio columns are against lexical (BM25); nDCG@10 / Recall@100 are doc level "
        "(project metrics; pytrec_eval in brackets)",
        "",
        f"{'backend':18}{'nDCG@10':>18}{'ratio':>7}{'Recall@100':>18}{'embed s':>9}"
        f"{'build s':>9}{'queries/s':>11}{'ratio':>7}",
    ]
    for r in rows:
        lines.append(
            f"{r['label']:18}{r['ndcg_at_10_doc']:>8.4f} ({r['trec_ndcg_cut_10']:.4f})"
            f"{r['ndcg_at_10_doc'] / base['ndcg_at_10_doc']:>7.2f}"
            f"{r['recall_at_100_doc']:>8.4f} ({r['trec_recall_100']:.4f})"
            f"{fmt(r['embed_s'], '.1f'):>9}{r['build_s']:>9.1f}{r['qps']:>11.1f}"
            f"{r['qps'] / base['qps']:>7.3f}")
    lines += [
        "",
        embedding_line(dense_row, base["n_chunks"]),
        "exact inner-product top-k alone (queries already encoded): "
        f"{dense_row['scoring_s'] / 300 * 1e3:.3f} ms/query over {base['n_chunks']} docs = "
        f"{dense_row['scoring_s'] / 300 / base['n_chunks'] * 1e9:.0f} ns per query per doc "
        f"(~{dense_row['scoring_s'] / 300 / base['n_chunks'] * 1e6 * 1e3:.0f} ms/query at 1M "
        "chunks, linear)",
        f"goal dense nDCG@10 >= 0.60: {dense_row['ndcg_at_10_doc']:.4f} -> "
        f"{'met' if dense_row['ndcg_at_10_doc'] >= 0.60 else 'NOT met'}",
        f"goal hybrid >= best single + 0.01 ({best_single:.4f} + 0.01): "
        f"{hybrid['ndcg_at_10_doc']:.4f} -> "
        f"{'met' if hybrid['ndcg_at_10_doc'] >= best_single + 0.01 else 'NOT met'}",
        f"goal second dense run embeds nothing: embed {second['embed_s']:.1f} s, from cache "
        f"{second['from_cache']} -> "
        f"{'met' if second['from_cache'] and second['embed_s'] == 0 else 'NOT met'}",
    ]
    return lines


if __name__ == "__main__":
    sys.exit(main())
