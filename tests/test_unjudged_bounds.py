"""Bounds for unjudged hits on every run (issue 30, item 5): each doc-level metric with unjudged
documents in its cut-off also reports its value with them counted relevant (grade 1).

Expected values are hand-computed on small cases and, on real runs, computed by trec_eval
(pytrec_eval) from a qrels in which the unjudged documents the run retrieved within the
metric's cut-off are added as relevant — at the retrieved depth, every unjudged retrieved
document. The runs: a seeded synthetic one (graded qrels, queries without doc truth, short and
empty runs; through the Hit path and the run-file code path), BM25 on the shipped fixtures
(chunks, so the doc ranking is by first appearance) and BM25 on SciFact test (top 10, document
chunks; skipped without ../shared).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import GOLDEN, KB, SHARED

from kebab_mlflow.evaluation.evaluate import EvalResult, evaluate, reference_pipeline
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenQuery, GoldenSet, load_golden_set
from kebab_mlflow.metrics.retrieval import first_appearance
from kebab_mlflow.records import Hit

SCIFACT = SHARED / "datasets" / "scifact"


def _run(hits_by_query: dict[str, list[str]], k: int = 10, cutoffs: str = "1,3,10"
         ) -> RecordedRun:
    rows = tuple(PerQueryRow(id=qid, query="q", hits=tuple(
        Hit(rank=i + 1, chunk_id=f"{d}#{i}", doc_id=d, score=float(100 - i))
        for i, d in enumerate(docs)), answer=None, scores={}, latency_ms=1.0, error=None)
        for qid, docs in hits_by_query.items())
    return RecordedRun(run_id="r", rows=rows, params={"k": str(k), "cutoffs": cutoffs})


def _golden(queries: list[GoldenQuery]) -> GoldenSet:
    return GoldenSet(name="g", queries=tuple(queries), digest="0" * 64)


# ---------------------------------------------------------------------------------------------
# hand-computed


@pytest.fixture(scope="module")
def small() -> EvalResult:
    golden = _golden([
        # d2 unjudged at rank 1, d1 relevant at 2, d0 judged non-relevant at 3
        GoldenQuery(id="q1", query="a", expected_doc_ids={"d1": 1, "d0": 0}),
        # the judged relevant document first, the unjudged dx after two judged non-relevant
        GoldenQuery(id="q2", query="b", expected_doc_ids={"d5": 2, "d6": 0, "d7": 0}),
        # no doc truth (a grade-0 judgment only): no doc metric, no bound, no count
        GoldenQuery(id="q3", query="c", expected_doc_ids={"d9": 0}),
    ])
    run = _run({"q1": ["d2", "d1", "d0"], "q2": ["d5", "d6", "d7", "dx"],
                "q3": ["d8", "d9"]})
    return rescore(run, golden).result


def test_hand_computed_bounds_per_query(small):
    upper = small.bound_scores
    log2 = np.log2
    # q1 at cut-off 3: d2 (grade 1) and d1 at ranks 1, 2 — the ideal order; usual 1/log2(3)
    assert small.scores["ndcg_at_3_doc"][0] == pytest.approx(1 / log2(3))
    assert upper["ndcg_at_3_doc_upper"][0] == pytest.approx(1.0)
    # cut-off 1: only d2 is added — P@1 0 → 1, recall@1 0 → 1/2 (two relevant now)
    assert upper["precision_at_1_doc_upper"][0] == pytest.approx(1.0)
    assert upper["recall_at_1_doc_upper"][0] == pytest.approx(0.5)
    # map (the depth, 10): AP (1/1 + 2/2) / 2 = 1, usual (1/2) / 1; r_precision R = 2: 2/2
    assert (small.scores["map_doc"][0], upper["map_doc_upper"][0]) == (0.5, 1.0)
    assert (small.scores["r_precision_doc"][0], upper["r_precision_doc_upper"][0]) == (0, 1)
    assert (small.scores["mrr_doc"][0], upper["mrr_doc_upper"][0]) == (0.5, 1.0)
    # q2: dx at rank 4 counted relevant lowers nDCG@10 and MAP (the ideal and the
    # denominator grow): the "upper" value is not above the usual one here
    assert small.scores["ndcg_at_10_doc"][1] == pytest.approx(1.0)
    assert upper["ndcg_at_10_doc_upper"][1] == pytest.approx(
        (2 + 1 / log2(5)) / (2 + 1 / log2(3)))
    assert upper["map_doc_upper"][1] == pytest.approx((1 + 2 / 4) / 2)
    assert upper["ndcg_at_3_doc_upper"][1] == pytest.approx(1.0)  # dx is past 3
    assert upper["precision_at_10_doc_upper"][1] == pytest.approx(0.2)
    # q3 has no doc truth: NaN everywhere (not counted)
    assert all(math.isnan(v[2]) for v in upper.values())
    assert list(upper["unjudged_hits_at_1_doc"][:2]) == [1, 0]
    assert list(upper["unjudged_hits_at_3_doc"][:2]) == [1, 0]
    assert list(upper["unjudged_hits_at_10_doc"][:2]) == [1, 1]


def test_hand_computed_aggregate_block_and_mlflow_metrics(small):
    block = small.aggregate.unjudged_bounds
    assert block is not None
    assert block["unjudged_hits"] == {"unjudged_hits_at_1_doc": 0.5,
                                      "unjudged_hits_at_3_doc": 0.5,
                                      "unjudged_hits_at_10_doc": 1.0}
    upper = block["upper"]
    assert upper["ndcg_at_3_doc"] == pytest.approx((1.0 + 1.0) / 2)
    assert upper["map_doc"] == pytest.approx((1.0 + 0.75) / 2)
    assert upper["precision_at_1_doc"] == pytest.approx((1.0 + 1.0) / 2)
    # only metrics with unjudged hits in their cut-off: q1's d2 is in every cut-off, so all
    assert set(upper) == {n for n in small.overall if n.endswith("_doc")
                          and not n.startswith("judged")}
    # aggregate.json round trip; MLflow names <metric>_upper and unjudged_hits_at_<k>_doc
    data = json.loads(small.aggregate.to_json())
    assert data["unjudged_bounds"] == json.loads(json.dumps(block))
    assert small.metrics["ndcg_at_3_doc_upper"] == upper["ndcg_at_3_doc"]
    assert small.metrics["unjudged_hits_at_10_doc"] == 1.0
    from kebab_mlflow.metrics.aggregate import Aggregate

    assert Aggregate.from_json(small.aggregate.to_json()) == small.aggregate


def test_no_unjudged_hit_in_a_cut_off_means_no_bound_there():
    golden = _golden([GoldenQuery(id="q1", query="a", expected_doc_ids={"d1": 1}),
                      GoldenQuery(id="q2", query="b", expected_doc_ids={"d2": 1})])
    result = rescore(_run({"q1": ["d1", "u1"], "q2": ["d2", "d1", "u2"]}), golden).result
    block = result.aggregate.unjudged_bounds
    assert block["unjudged_hits"]["unjudged_hits_at_1_doc"] == 0.0
    assert "ndcg_at_1_doc" not in block["upper"] and "precision_at_1_doc" not in block["upper"]
    # q1: d1, u1 → 2/3; q2: d2, then d1 (judged for q1, not for q2) and u2 → 3/3
    assert block["upper"]["precision_at_3_doc"] == pytest.approx((2 / 3 + 3 / 3) / 2)
    assert result.metrics.get("ndcg_at_1_doc_upper") is None


def test_a_set_without_doc_truth_has_no_bounds_block():
    golden = _golden([GoldenQuery(id="q1", query="a", expected_chunk_ids=("d1#0",))])
    result = rescore(_run({"q1": ["d1", "u1"]}), golden).result
    assert result.aggregate.unjudged_bounds is None
    assert "unjudged_bounds" not in json.loads(result.aggregate.to_json())
    assert not any(n.startswith("unjudged") or n.endswith("_upper") for n in result.metrics)


def test_one_definition_with_compare_optimistic_rescore(small):
    """compare --unjudged rescores under optimistic_golden(unjudged_docs(..., 10)): its
    scores at cut-off 10 are the run's upper values."""
    from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_docs

    golden = small.golden
    rows = small.rows()
    run = RecordedRun(run_id="r", rows=rows, params={"k": "10", "cutoffs": "1,3,10"})
    optimistic = rescore(run, optimistic_golden(golden, unjudged_docs(golden, rows, 10))).result
    for name in ("ndcg_at_10_doc", "precision_at_10_doc", "recall_at_10_doc", "map_doc",
                 "mrr_doc", "r_precision_doc"):
        np.testing.assert_allclose(optimistic.scores[name], small.bound_scores[f"{name}_upper"],
                                   rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# trec_eval cross-check

pytrec_eval = pytest.importorskip("pytrec_eval")


def trec_upper(golden: GoldenSet, rankings: dict[str, list[str]], cutoff: int, depth: int
               ) -> dict[str, dict[str, float]]:
    """trec_eval's measures at ``cutoff`` with every unjudged document among the first
    ``cutoff`` of each doc ranking added to the qrels at grade 1 (queries with doc truth)."""
    qrels = {}
    for q in golden.queries:
        if not q.has_doc_truth:
            continue
        ranked = rankings.get(q.id, [])[:cutoff]
        qrels[q.id] = {**{d: int(g) for d, g in q.expected_doc_ids.items()},
                       **{d: 1 for d in ranked if d not in q.expected_doc_ids}}
    run = {q: {d: float(depth - r) for r, d in enumerate(rankings.get(q, []))} for q in qrels}
    measures = {f"ndcg_cut.{cutoff}", f"P.{cutoff}", f"recall.{cutoff}", f"success.{cutoff}",
                "map", "Rprec"}
    out = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(
        {q: r for q, r in run.items() if r})
    if cutoff == 10:  # MRR@10 = recip_rank on the run cut at 10
        top = {q: {d: s for d, s in r.items() if s > depth - 11} for q, r in run.items()}
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
            {q: r for q, r in top.items() if r})
        for q in out:
            out[q]["recip_rank"] = rr.get(q, {}).get("recip_rank", 0.0)
    return {q: out.get(q, {}) for q in qrels}  # an empty run: trec_eval leaves it out (0)


def assert_upper_agrees(result: EvalResult, rankings: dict[str, list[str]]) -> int:
    """Every _upper value of the run against trec_eval; the number of values compared."""
    depth = result.k
    ids = [q.id for q in result.golden.queries]
    ours = result.bound_scores
    compared = 0
    pairs = [(f"{fam}_at_{k}_doc", k, f"{trec}_{k}") for k in result.cutoffs
             for fam, trec in (("ndcg", "ndcg_cut"), ("precision", "P"), ("recall", "recall"),
                               ("hit", "success"))]
    pairs += [("map_doc", depth, "map"), ("r_precision_doc", depth, "Rprec")]
    pairs += [("mrr_doc", 10, "recip_rank")] if depth >= 10 else []
    by_cutoff: dict[int, dict[str, dict[str, float]]] = {}
    for name, cutoff, measure in pairs:
        theirs = by_cutoff.setdefault(cutoff, trec_upper(result.golden, rankings, cutoff, depth))
        values = ours[f"{name}_upper"]
        for i, qid in enumerate(ids):
            if qid not in theirs:
                assert math.isnan(values[i]), (name, qid)
                continue
            expected = theirs[qid].get(measure, 0.0)
            assert values[i] == pytest.approx(expected, abs=1e-9), (name, qid)
            compared += 1
    # the aggregate's upper values are the means of these
    for name, value in (result.aggregate.unjudged_bounds or {}).get("upper", {}).items():
        assert value == pytest.approx(float(np.nanmean(ours[f"{name}_upper"])), abs=1e-12)
    return compared


def _rankings(result: EvalResult) -> dict[str, list[str]]:
    """Each query's doc ranking (first appearance), from its per_query.jsonl."""
    return {row.id: first_appearance([h.doc_id for h in row.hits])[:result.k]
            for row in result.rows()}


def _synthetic(depth: int = 40) -> tuple[GoldenSet, dict[str, list[str]]]:
    rng = np.random.default_rng(30)
    queries, rankings = [], {}
    for n in range(300):
        qid = f"s{n:03d}"
        judged = rng.choice(200, size=int(rng.integers(1, 10)), replace=False)
        grades = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
        queries.append(GoldenQuery(id=qid, query=qid, expected_doc_ids=grades))
        length = int(rng.choice([0, 1, 3, 10, 25, depth]))
        ranked = rng.permutation(np.concatenate([judged, rng.choice(200, 80)]))
        rankings[qid] = list(dict.fromkeys(f"d{d}" for d in ranked))[:length]
    return _golden(queries), rankings


def test_synthetic_upper_values_agree_with_trec_eval_on_both_scoring_paths(tmp_path):
    depth = 40
    golden, rankings = _synthetic(depth)
    assert sum(not q.has_doc_truth for q in golden.queries) >= 10  # grade-0-only queries
    run = RecordedRun(run_id="s", rows=tuple(PerQueryRow(
        id=q, query=q, hits=tuple(Hit(rank=r, chunk_id=d, doc_id=d, score=float(depth - r))
                                  for r, d in enumerate(docs, 1)),
        answer=None, scores={}, latency_ms=1.0, error=None) for q, docs in rankings.items()),
        params={"k": str(depth), "cutoffs": "1,3,5,10,25,40"})
    by_hits = rescore(run, golden).result
    assert assert_upper_agrees(by_hits, rankings) > 4000
    # the run-file target scores from integer codes (evaluation/coded.py): the same bounds
    trec_file = tmp_path / "run.trec"
    trec_file.write_text("".join(f"{q} Q0 {d} {r} {depth - r} sys\n"
                                 for q, docs in rankings.items()
                                 for r, d in enumerate(docs, 1)))
    by_codes = evaluate(f"run:{trec_file}", golden, k=depth, cutoffs=[1, 3, 5, 10, 25, 40])
    assert set(by_codes.bound_scores) == set(by_hits.bound_scores)
    for name, values in by_hits.bound_scores.items():
        np.testing.assert_allclose(by_codes.bound_scores[name], values, rtol=0, atol=1e-12,
                                   err_msg=name)
    assert by_codes.aggregate.unjudged_bounds == by_hits.aggregate.unjudged_bounds


def test_fixture_bm25_upper_values_agree_with_trec_eval():
    result = evaluate(reference_pipeline("naive_baseline", KB), GOLDEN)
    assert result.aggregate.unjudged_bounds["unjudged_hits"]["unjudged_hits_at_10_doc"] > 1
    assert assert_upper_agrees(result, _rankings(result)) > 500


def test_repeats_give_the_same_bounds_for_a_deterministic_pipeline():
    golden = load_golden_set(GOLDEN)
    pipeline = reference_pipeline("naive_baseline", KB)
    once = evaluate(pipeline, golden, ask=False)
    twice = evaluate(pipeline, golden, ask=False, repeat=2)
    assert twice.aggregate.unjudged_bounds == once.aggregate.unjudged_bounds


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl.gz").is_file(),
                    reason="needs ../shared/datasets/scifact")
def test_scifact_bm25_top10_upper_values_agree_with_trec_eval(tmp_path):
    from typer.testing import CliRunner

    from kebab_mlflow.cli import app

    golden_path = tmp_path / "scifact.yaml"
    res = CliRunner().invoke(app, ["import-beir", str(SCIFACT), "--split", "test", "--out",
                                   str(golden_path)])
    assert res.exit_code == 0, res.output
    pipeline = reference_pipeline("naive_baseline", SCIFACT / "corpus.jsonl.gz",
                                  chunker__mode="document")
    result = evaluate(pipeline, golden_path, k=10)
    hits = result.aggregate.unjudged_bounds["unjudged_hits"]["unjudged_hits_at_10_doc"]
    assert 8.5 < hits < 9.5  # about 9 of the top 10 unjudged (judged_at_10_doc ≈ 0.09)
    assert hits == pytest.approx(10 * (1 - result.overall["judged_at_10_doc"]), abs=0.05)
    assert assert_upper_agrees(result, _rankings(result)) == 300 * 19  # 4 cut-offs × 4 + 3


def test_the_bounds_formulas_equal_the_metrics_on_the_counted_relevant_tables():
    """bound_scores derives each value from the doc table's sums; counted_relevant builds the
    table with the unjudged documents at grade 1 and the ordinary metric code scores it."""
    from kebab_mlflow.metrics.retrieval import RelevanceTable
    from kebab_mlflow.metrics.unjudged import (
        bound_scores,
        bounded_metrics,
        counted_relevant,
        unjudged_mask,
    )

    depth, cutoffs = 40, [1, 3, 5, 10, 25, 40]
    golden, rankings = _synthetic(depth)
    queries = golden.queries
    ranked = [rankings[q.id] for q in queries]
    doc = RelevanceTable.from_rankings(ranked, [q.relevant_doc_grades for q in queries], depth)
    judged = RelevanceTable.from_rankings(
        ranked, [dict.fromkeys(q.expected_doc_ids, 1) for q in queries], depth)
    lengths = np.array([len(r) for r in ranked])
    fast = bound_scores(doc, judged, lengths, cutoffs, depth)
    mask = unjudged_mask(doc, judged, lengths)
    for metric, k in bounded_metrics(cutoffs, depth):
        table, count = counted_relevant(doc, mask, k)
        np.testing.assert_allclose(fast[f"{metric.name}_upper"], metric.score(table), rtol=0,
                                   atol=1e-12, err_msg=metric.name)
        counted = np.where(doc.applicable, count, np.nan)
        np.testing.assert_array_equal(fast[f"unjudged_hits_at_{k}_doc"], counted)


def test_compares_bound_counts_unjudged_hits_within_the_primarys_own_cutoff():
    """compare's optimistic rescore counts the primary's unjudged documents within the same
    cut-off as the run's own <primary>_upper: its k, mrr's 10, the retrieved depth for map."""
    from types import SimpleNamespace

    from kebab_mlflow.comparison.unjudged import bound_depth

    deep, shallow = SimpleNamespace(params={"k": "100"}), SimpleNamespace(params={"k": "50"})
    assert bound_depth("ndcg_at_10_doc", (deep, shallow)) == 10
    assert bound_depth("recall_at_100_doc", (deep, deep)) == 100
    assert bound_depth("map_doc", (deep, shallow)) == 100  # each side's whole ranking
    assert bound_depth("r_precision_doc", (shallow, shallow)) == 50
    assert bound_depth("mrr_doc", (deep, deep)) == 10
    assert bound_depth("mrr", (deep, deep)) == 10  # chunk level: no doc bound, the default k


# ---------------------------------------------------------------------------------------------
# compare's optimistic sides from doc codes (evaluation/optimistic.py)

_COMPACT_SLOTS = ("id", "query", "first_relevant_rank", "abstention", "flip_rate",
                  "has_evidence", "has_hits", "refused", "top_score")


def _compact_fields(row) -> tuple[object, ...]:
    return (*(getattr(row, s) for s in _COMPACT_SLOTS), list(row.scores.items()))  # kept ones


def _coded(lines: list[dict]) -> list:
    from kebab_mlflow.evaluation.optimistic import CodedLine

    return [CodedLine.of(json.dumps(line).encode()) for line in lines]


def test_coded_optimistic_rows_equal_the_rescores_compact_rows(tmp_path):
    """coded_compact gives, field by field, what compare read back from the rescore's
    per_query.jsonl: hits past k, runs without hits, queries without doc truth, chunk truth,
    a golden query the run never saw, map and r_precision at the retrieved depth."""
    from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_doc_ids
    from kebab_mlflow.evaluation.optimistic import coded_compact
    from kebab_mlflow.evaluation.per_query import read_compact

    golden, rankings = _synthetic(40)
    queries = [q if i % 7 else dataclasses.replace(q, expected_chunk_ids=tuple(
        q.expected_doc_ids)[:1]) for i, q in enumerate(golden.queries)]
    golden = _golden([*queries, GoldenQuery(id="unseen", query="u",
                                            expected_doc_ids={"d1": 1})])
    rows = tuple(PerQueryRow(
        id=q, query=q, hits=tuple(Hit(rank=r, chunk_id=d, doc_id=d, score=float(40 - r))
                                  for r, d in enumerate(docs, 1)),
        answer=None, scores={}, latency_ms=1.0, error=None) for q, docs in rankings.items())
    params = {"k": "25", "cutoffs": "1,3,10"}
    recorded = rescore(RecordedRun(run_id="s", rows=rows, params=params), golden,
                       intersect=True, per_query_path=tmp_path / "pq.jsonl").result
    lines = [json.loads(line) for line in (tmp_path / "pq.jsonl").read_text().splitlines()]
    # the recorded lines hold the first 25 hits: give them all 40 back, as a deeper run has
    for line in lines:
        line["hits"] = [{"rank": r, "chunk_id": d, "doc_id": d, "score": float(40 - r)}
                        for r, d in enumerate(rankings[line["id"]], 1)]
    optimistic = optimistic_golden(golden, unjudged_doc_ids(
        golden, ((line["id"], rankings[line["id"]]) for line in lines), 10))
    names = {"ndcg_at_10_doc", "mrr", "mrr_doc", "map_doc", "r_precision_doc",
             "precision_at_1_doc", "recall_at_10", "contains_all"}
    coded = coded_compact(_coded(lines), optimistic, params, names)
    assert coded is not None and recorded.golden.queries
    by_hits = rescore(RecordedRun(run_id="s", rows=rows, params=params), optimistic,
                      intersect=True).result
    expected = list(read_compact(by_hits.per_query_path, keep_query=False, names=names))
    assert [_compact_fields(r) for r in coded] == [_compact_fields(r) for r in expected]
    assert sum(r.score("map_doc") is not None for r in coded) > 200
    # a line with an answer: the rescore's Hit path
    lines[0]["answer"] = {"text": "a", "citations": []}
    assert coded_compact(_coded(lines), optimistic, params, names) is None


def test_coded_optimistic_rows_of_chunk_hits_equal_the_rescores_compact_rows(tmp_path):
    """Hits that are chunks (``d7#0``, ``d7#1``: a document more than once, doc metrics on
    the order of first appearance) are scored from two code matrices, chunk and doc, as the
    rescore scores them: chunk truth on some queries, hits past k, runs without hits."""
    from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_doc_ids
    from kebab_mlflow.evaluation.optimistic import coded_compact
    from kebab_mlflow.evaluation.per_query import read_compact

    golden, rankings = _synthetic(40)
    rng = np.random.default_rng(32)
    hits = {qid: [(f"{d}#{j}", d) for d in docs for j in range(int(rng.integers(1, 3)))]
            for qid, docs in rankings.items()}
    for qid in list(hits)[::5]:  # interleaved: a document's second chunk further down
        hits[qid] = hits[qid][::2] + hits[qid][1::2]
    queries = [q if i % 4 else dataclasses.replace(q, expected_chunk_ids=tuple(
        chunk for chunk, _ in hits[q.id][1:3])) for i, q in enumerate(golden.queries)]
    golden = _golden(queries)
    rows = tuple(PerQueryRow(
        id=q, query=q, hits=tuple(Hit(rank=r, chunk_id=c, doc_id=d, score=float(80 - r))
                                  for r, (c, d) in enumerate(h, 1)),
        answer=None, scores={}, latency_ms=1.0, error=None) for q, h in hits.items())
    params = {"k": "25", "cutoffs": "1,3,10"}
    rescore(RecordedRun(run_id="s", rows=rows, params=params), golden, intersect=True,
            per_query_path=tmp_path / "pq.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "pq.jsonl").read_text().splitlines()]
    for line in lines:  # every hit back, past k, as a deeper run has them
        line["hits"] = [{"rank": r, "chunk_id": c, "doc_id": d, "score": float(80 - r)}
                        for r, (c, d) in enumerate(hits[line["id"]], 1)]
    optimistic = optimistic_golden(golden, unjudged_doc_ids(
        golden, ((line["id"], [d for _, d in hits[line["id"]]]) for line in lines), 10))
    names = {"ndcg_at_10_doc", "mrr", "mrr_doc", "map_doc", "r_precision_doc", "hit_at_3",
             "precision_at_1_doc", "recall_at_10", "recall_at_10_doc", "ndcg_at_10"}
    coded_lines = _coded(lines)
    assert sum(line.chunk_ids is not None for line in coded_lines) > 200
    coded = coded_compact(coded_lines, optimistic, params, names)
    assert coded is not None
    by_hits = rescore(RecordedRun(run_id="s", rows=rows, params=params), optimistic,
                      intersect=True).result
    expected = list(read_compact(by_hits.per_query_path, keep_query=False, names=names))
    assert [_compact_fields(r) for r in coded] == [_compact_fields(r) for r in expected]
    assert sum(r.score("mrr") is not None for r in coded) > 50  # chunk truth was scored
    assert any(r.score("mrr") for r in coded)
    assert len({r.score("ndcg_at_10_doc") for r in coded}) > 100
    # a chunk twice in one ranking: the Hit path's error, not codes
    lines[1]["hits"].append(dict(lines[1]["hits"][0], rank=len(lines[1]["hits"]) + 1))
    assert coded_compact(_coded(lines), optimistic, params, names) is None
