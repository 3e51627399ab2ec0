"""Doc-level metrics of a real BM25 run agree with trec_eval (pytrec_eval) to 1e-9 per query.

Three runs: a seeded synthetic one (graded qrels, empty and short runs), BM25 on the shipped
fixtures (no download needed: a fresh clone runs both), and BM25 on SciFact test (300 queries,
5,183 abstracts; skipped without ../shared), chunker.mode=document, depth 100. pytrec_eval
orders a run by score (ties by doc id); to make it rank exactly as we did, it gets scores made
from our ranks (score = depth − rank). Conventions compared (docs/metrics.md): hit@k = trec_eval
``success_k``; P@k = ``P_k`` (denominator k); recall@k = ``recall_k``; nDCG@10 =
``ndcg_cut_10`` (linear gain); MRR@10 = ``recip_rank`` on the run truncated to 10.
The index is built once per session (a few seconds).
"""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
from conftest import GOLDEN, KB, SHARED

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.scoring import cutoffs_for, score_results
from kebab_mlflow.records import Hit, QueryResult

SCIFACT = SHARED / "datasets" / "scifact"
DEPTH = 100
pytrec_eval = pytest.importorskip("pytrec_eval")


def _scifact() -> tuple[list, dict, dict]:
    """(chunks, qrels, query texts) of SciFact's test split: BM25 over 5,183 abstracts."""
    if not (SCIFACT / "corpus.jsonl.gz").is_file():
        pytest.skip(f"SciFact not found under {SCIFACT} (the synthetic and fixture runs "
                    "cross-check the same metrics without it)")
    from kebab_mlflow.pipeline.corpus import load_corpus

    qrels: dict[str, dict[str, int]] = {}
    with (SCIFACT / "qrels" / "test.tsv").open() as fh:
        for i, row in enumerate(csv.reader(fh, delimiter="\t")):
            if i:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    texts = {}
    with (SCIFACT / "queries.jsonl").open() as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["_id"] in qrels:
                texts[rec["_id"]] = rec["text"]
    return load_corpus(SCIFACT / "corpus.jsonl.gz"), qrels, texts


def _fixtures() -> tuple[list, dict, dict]:
    """The shipped knowledge base and golden set (fixtures/, written for this project): the
    doc-level truth as qrels, graded 1–3 by a fixed hash so graded nDCG is exercised too."""
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.corpus import load_corpus

    golden = load_golden_set(GOLDEN)
    qrels = {q.id: {d: 1 + hashlib.sha256(f"{q.id} {d}".encode()).digest()[0] % 3
                    for d in q.expected_doc_ids} for q in golden.queries if q.has_doc_truth}
    return load_corpus(KB), qrels, {q.id: q.query for q in golden.queries if q.id in qrels}


def _bm25_results(docs, qrels, texts) -> tuple[list[str], list[QueryResult]]:
    from kebab_mlflow.pipeline.backends.lexical import BM25Index
    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus

    chunks = chunk_corpus(docs, ChunkerConfig("document"))
    index = BM25Index.build([c.text for c in chunks], 0.9, 0.4)
    qids = sorted(texts)
    ranked = index.search_batch([texts[q] for q in qids], DEPTH)
    return qids, [QueryResult(query_id=q,
                              hits=tuple(Hit(chunk_id=chunks[i].chunk_id, doc_id=chunks[i].doc_id,
                                             score=s, rank=r)
                                       for r, (i, s) in enumerate(hits, 1)))
                  for q, hits in zip(qids, ranked, strict=True)]


def _synthetic() -> tuple[list[str], dict, list[QueryResult]]:
    """400 queries over 300 made-up docs, seeded: graded qrels (0–3, some judged docs never
    retrieved), runs of 0 to DEPTH hits — the edge cases a real run rarely has."""
    rng = np.random.default_rng(18)
    qids, qrels, results = [], {}, []
    for n in range(400):
        qid = f"s{n:03d}"
        judged = rng.choice(300, size=int(rng.integers(1, 12)), replace=False)
        grades = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
        if not any(g > 0 for g in grades.values()):
            continue  # no relevant doc: skipped at doc level, as trec_eval's per-query output
        depth = int(rng.choice([0, 1, 4, 10, 37, DEPTH]))
        ranked = rng.permutation(np.concatenate([judged, rng.choice(300, 60)]))
        docs = list(dict.fromkeys(f"d{d}" for d in ranked))[:depth]
        qids.append(qid)
        qrels[qid] = grades
        results.append(QueryResult(query_id=qid,
                                   hits=tuple(Hit(chunk_id=f"{d}#0", doc_id=d,
                                                  score=float(DEPTH - r), rank=r)
                                              for r, d in enumerate(docs, 1))))
    return qids, qrels, results


@pytest.fixture(scope="module", params=["synthetic", "fixtures", "scifact"])
def scifact_run(request):
    """(query ids, qrels, the run as pytrec_eval takes it, our per-query scores)."""
    if request.param == "synthetic":
        qids, qrels, results = _synthetic()
    else:
        docs, qrels, texts = _fixtures() if request.param == "fixtures" else _scifact()
        qids, results = _bm25_results(docs, qrels, texts)
    queries = [GoldenQuery(id=q, query="", expected_doc_ids=qrels[q]) for q in qids]
    scores = score_results(queries, results, DEPTH, cutoffs_for(DEPTH))
    run = {q: {h.doc_id: float(DEPTH - h.rank) for h in r.hits}
           for q, r in zip(qids, results, strict=True)}
    return request.param, qids, {q: qrels[q] for q in qids}, run, scores


def trec(qrels, run, measures):
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def assert_agree(ours: np.ndarray, qids, theirs, measure):
    reference = np.array([theirs[q][measure] for q in qids])
    worst = np.abs(ours - reference).max()
    assert worst <= 1e-9, f"{measure}: max difference {worst}"


KS = (1, 3, 5, 10, 100)


def test_the_run_is_real(scifact_run):
    source, qids, _, run, scores = scifact_run
    if source != "scifact":
        assert len(qids) >= 30 and sum(bool(r) for r in run.values()) >= 0.8 * len(qids)
        return
    assert len(qids) == 300
    assert sum(len(r) == DEPTH for r in run.values()) >= 290  # a few match < 100 docs
    assert np.nanmean(scores["ndcg_at_10_doc"]) >= 0.66  # BM25 on SciFact: ~0.665-0.68


@pytest.mark.parametrize(("ours", "theirs"), [
    ("hit_at_{k}_doc", "success_{k}"), ("precision_at_{k}_doc", "P_{k}"),
    ("recall_at_{k}_doc", "recall_{k}"),
])
def test_cutoff_metrics_agree_with_trec_eval(scifact_run, ours, theirs):
    _, qids, qrels, run, scores = scifact_run
    family = theirs.split("_")[0]
    result = trec(qrels, run, {f"{family}.{','.join(map(str, KS))}"})
    for k in KS:
        assert_agree(scores[ours.format(k=k)], qids, result, theirs.format(k=k))


def test_ndcg_at_10_agrees_with_trec_eval(scifact_run):
    _, qids, qrels, run, scores = scifact_run
    assert_agree(scores["ndcg_at_10_doc"], qids, trec(qrels, run, {"ndcg_cut_10"}),
                 "ndcg_cut_10")


def test_mrr_at_10_agrees_with_recip_rank_of_the_top_10(scifact_run):
    _, qids, qrels, run, scores = scifact_run
    top10 = {q: {d: s for d, s in docs.items() if s > DEPTH - 11} for q, docs in run.items()}
    assert all(len(d) == min(10, len(run[q])) for q, d in top10.items())
    assert_agree(scores["mrr_doc"], qids, trec(qrels, top10, {"recip_rank"}), "recip_rank")
