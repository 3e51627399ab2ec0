"""Doc-level metrics of a real BM25 run agree with trec_eval (pytrec_eval) to 1e-9 per query.

SciFact test (300 queries, 5,183 abstracts), chunker.mode=document, search depth 100. pytrec_eval
orders a run by score (ties by doc id); to make it rank exactly as we did, it gets scores made
from our ranks (score = depth − rank). Conventions compared (README): hit@k = trec_eval
``success_k``; P@k = ``P_k`` (denominator k); recall@k = ``recall_k``; nDCG@10 =
``ndcg_cut_10`` (linear gain); MRR@10 = ``recip_rank`` on the run truncated to 10.
The index is built once per session (a few seconds).
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import SHARED

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.scoring import cutoffs_for, score_results
from kebab_mlflow.records import Hit, QueryResult

SCIFACT = SHARED / "datasets" / "scifact"
DEPTH = 100
pytrec_eval = pytest.importorskip("pytrec_eval")


@pytest.fixture(scope="module")
def scifact_run():
    if not (SCIFACT / "corpus.jsonl.gz").is_file():
        pytest.skip(f"SciFact not found under {SCIFACT}")
    from kebab_mlflow.pipeline.backends.lexical import BM25Index
    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus
    from kebab_mlflow.pipeline.corpus import load_corpus

    chunks = chunk_corpus(load_corpus(SCIFACT / "corpus.jsonl.gz"), ChunkerConfig("document"))
    index = BM25Index.build([c.text for c in chunks], 0.9, 0.4)
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
    qids = sorted(texts)
    ranked = index.search_batch([texts[q] for q in qids], DEPTH)
    results = [QueryResult(q, tuple(Hit(chunks[i].chunk_id, chunks[i].doc_id, s, r)
                                    for r, (i, s) in enumerate(hits, 1)))
               for q, hits in zip(qids, ranked, strict=True)]
    queries = [GoldenQuery(id=q, query=texts[q], expected_doc_ids=qrels[q]) for q in qids]
    scores = score_results(queries, results, DEPTH, cutoffs_for(DEPTH))
    run = {q: {h.doc_id: float(DEPTH - h.rank) for h in r.hits}
           for q, r in zip(qids, results, strict=True)}
    return qids, {q: qrels[q] for q in qids}, run, scores


def trec(qrels, run, measures):
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def assert_agree(ours: np.ndarray, qids, theirs, measure):
    reference = np.array([theirs[q][measure] for q in qids])
    worst = np.abs(ours - reference).max()
    assert worst <= 1e-9, f"{measure}: max difference {worst}"


KS = (1, 3, 5, 10, 100)


def test_the_run_is_real(scifact_run):
    qids, _, run, scores = scifact_run
    assert len(qids) == 300
    assert sum(len(r) == DEPTH for r in run.values()) >= 290  # a few match < 100 docs
    assert np.nanmean(scores["ndcg_at_10_doc"]) >= 0.66  # BM25 on SciFact: ~0.665-0.68


@pytest.mark.parametrize(("ours", "theirs"), [
    ("hit_at_{k}_doc", "success_{k}"), ("precision_at_{k}_doc", "P_{k}"),
    ("recall_at_{k}_doc", "recall_{k}"),
])
def test_cutoff_metrics_agree_with_trec_eval(scifact_run, ours, theirs):
    qids, qrels, run, scores = scifact_run
    family = theirs.split("_")[0]
    result = trec(qrels, run, {f"{family}.{','.join(map(str, KS))}"})
    for k in KS:
        assert_agree(scores[ours.format(k=k)], qids, result, theirs.format(k=k))


def test_ndcg_at_10_agrees_with_trec_eval(scifact_run):
    qids, qrels, run, scores = scifact_run
    assert_agree(scores["ndcg_at_10_doc"], qids, trec(qrels, run, {"ndcg_cut_10"}),
                 "ndcg_cut_10")


def test_mrr_at_10_agrees_with_recip_rank_of_the_top_10(scifact_run):
    qids, qrels, run, scores = scifact_run
    top10 = {q: {d: s for d, s in docs.items() if s > DEPTH - 11} for q, docs in run.items()}
    assert all(len(d) == min(10, len(run[q])) for q, d in top10.items())
    assert_agree(scores["mrr_doc"], qids, trec(qrels, top10, {"recip_rank"}), "recip_rank")
