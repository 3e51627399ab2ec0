"""MAP, R-precision, judged_at_k and the cut-off metrics at depth 1000 agree with trec_eval
(pytrec_eval) to 1e-9 per query.

Two runs: synthetic graded data (seeded; runs on a fresh clone) and, when ``../shared`` is
there, BM25 on SciFact test at depth 1000 (chunker.mode=document). pytrec_eval ranks by score
(ties by doc id), so it gets scores made from our ranks. trec_eval names: ``map``, ``Rprec``,
``P_k``, ``recall_k``, ``ndcg_cut_k``; ``judged_at_k_doc`` is ``P_k`` with every judged document
counted relevant, grade 0 included (ir_measures' Judged@k; pytrec_eval refuses relevance level
0, so the grades are shifted by 1 instead).
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import SHARED

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.scoring import run_cutoffs, score_results
from kebab_mlflow.records import Hit, QueryResult

pytrec_eval = pytest.importorskip("pytrec_eval")
SCIFACT = SHARED / "datasets" / "scifact"
DEPTH = 1000
KS = (1, 5, 10, 100, 1000)


def doc_run(results):
    """query → doc → score from our doc ranking (first appearance of each doc)."""
    run = {}
    for r in results:
        docs = list(dict.fromkeys(h.doc_id for h in r.hits))
        run[r.query_id] = {d: float(DEPTH - rank) for rank, d in enumerate(docs)}
    return run


def trec(qrels, run, measures):
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def assert_agree(ours, qids, theirs, measure):
    assert set(theirs) == set(qids), "trec_eval left queries out: the comparison would be partial"
    reference = np.array([theirs[q][measure] for q in qids])
    assert not np.isnan(ours).any()
    worst = np.abs(np.asarray(ours) - reference).max()
    assert worst <= 1e-9, f"{measure}: max difference {worst}"


def synthetic():
    """60 queries over 3,000 docs of 1-3 chunks each: graded qrels (0, 1, 2, 3) with relevant
    docs inside and outside the retrieved depth, a few R > depth-reachable, short lists."""
    rng = np.random.default_rng(20261201)
    n_docs, queries, results = 3000, [], []
    for i in range(60):
        qid = f"q{i:02d}"
        judged = rng.choice(n_docs, size=int(rng.integers(1, 40)), replace=False)
        grades = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
        first = f"d{judged[0]}"
        grades[first] = max(grades[first], 1)  # every query has ground truth
        n_ret = int(rng.choice([2 * DEPTH, 2 * DEPTH, int(rng.integers(1, 200))]))
        order = list(rng.permutation(n_docs)[:n_ret])
        hits, rank = [], 1
        for d in order:  # a doc's extra chunks come later: documents rank by first appearance
            for c in range(int(rng.integers(1, 3)) if rank < 2 * DEPTH else 1):
                hits.append(Hit(chunk_id=f"d{d}#{c}", doc_id=f"d{d}", score=1.0 / rank, rank=rank))
                rank += 1
        queries.append(GoldenQuery(id=qid, query=qid, expected_doc_ids=grades))
        results.append(QueryResult(query_id=qid, hits=tuple(hits[:DEPTH])))
    return queries, results


@pytest.fixture(scope="module", params=["synthetic", "scifact"])
def graded_run(request):
    queries, results = synthetic() if request.param == "synthetic" else scifact()
    scores = score_results(queries, results, DEPTH, run_cutoffs(DEPTH, KS))
    qrels = {q.id: dict(q.expected_doc_ids) for q in queries}
    return [q.id for q in queries], qrels, doc_run(results), scores


def scifact():
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
    results = [QueryResult(query_id=q,
                           hits=tuple(Hit(chunk_id=chunks[i].chunk_id, doc_id=chunks[i].doc_id,
                                          score=s, rank=r)
                                    for r, (i, s) in enumerate(hits, 1)))
               for q, hits in zip(qids, ranked, strict=True)]
    return [GoldenQuery(id=q, query=texts[q], expected_doc_ids=qrels[q]) for q in qids], results


def test_the_synthetic_data_exercises_the_edges():
    queries, results = synthetic()
    depths = [len({h.doc_id for h in r.hits}) for r in results]
    assert min(depths) < 100 and max(depths) < DEPTH  # short lists; chunks repeat docs
    grades = [g for q in queries for g in q.expected_doc_ids.values()]
    assert {0, 1, 2, 3} <= set(grades)
    missed = sum(any(d not in {h.doc_id for h in r.hits} for d in q.relevant_doc_grades)
                 for q, r in zip(queries, results, strict=True))
    assert missed > 10  # relevant documents outside the retrieved depth


@pytest.mark.parametrize(("ours", "theirs"), [("map_doc", "map"), ("r_precision_doc", "Rprec")])
def test_rank_metrics_agree_with_trec_eval(graded_run, ours, theirs):
    qids, qrels, run, scores = graded_run
    assert_agree(scores[ours], qids, trec(qrels, run, {theirs}), theirs)


@pytest.mark.parametrize(("ours", "family", "theirs"), [
    ("precision_at_{k}_doc", "P", "P_{k}"), ("recall_at_{k}_doc", "recall", "recall_{k}"),
    ("ndcg_at_{k}_doc", "ndcg_cut", "ndcg_cut_{k}"),
])
def test_cutoff_metrics_agree_with_trec_eval_up_to_1000(graded_run, ours, family, theirs):
    qids, qrels, run, scores = graded_run
    result = trec(qrels, run, {f"{family}.{','.join(map(str, KS))}"})
    for k in KS:
        assert_agree(scores[ours.format(k=k)], qids, result, theirs.format(k=k))


def test_judged_at_k_is_precision_with_every_judgment_relevant(graded_run):
    qids, qrels, run, scores = graded_run
    shifted = {q: {d: g + 1 for d, g in docs.items()} for q, docs in qrels.items()}
    result = trec(shifted, run, {f"P.{','.join(map(str, KS))}"})
    for k in KS:
        assert_agree(scores[f"judged_at_{k}_doc"], qids, result, f"P_{k}")
