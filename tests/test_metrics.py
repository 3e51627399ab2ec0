"""Retrieval metrics, hand-computed: every metric and its edges (DESIGN §5)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kebab_mlflow.errors import ConfigError
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics import METRICS, get_metric, metric_names
from kebab_mlflow.metrics.aggregate import (
    Aggregate,
    aggregate_block,
    metric_key,
)
from kebab_mlflow.metrics.registry import Level, MetricDef, parse_metric, registry
from kebab_mlflow.metrics.retrieval import (
    RelevanceTable,
    first_appearance,
    hit_at_k,
    mrr,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
)
from kebab_mlflow.metrics.scoring import cutoffs_for, score_results
from kebab_mlflow.records import Hit, QueryResult


def table(rankings, relevance, depth):
    return RelevanceTable.from_rankings(rankings, relevance, depth)


def rel(*ids, grade=1):
    return dict.fromkeys(ids, grade)


# --- precision_at_k: the design's own plan ---------------------------------------------------

@pytest.mark.parametrize(("ranking", "expected", "value"), [
    (["a", "x", "b", "y", "c"], rel("a", "b", "c"), 0.6),  # 5 hits, 3 expected
    (["a", "b", "c"], rel("a", "b", "c"), 0.6),  # 3 hits (< k = 5), all expected: k stays 5
    (["x", "y", "z", "v", "w", "a"], rel("a"), 0.0),  # expected only below the top 5
    ([], rel("a"), 0.0),  # nothing came back
])
def test_precision_at_5(ranking, expected, value):
    assert precision_at_k(table([ranking], [expected], 10), 5)[0] == pytest.approx(value, abs=0)


def test_precision_is_null_when_no_query_has_expected_chunks():
    queries = [GoldenQuery(id=f"q{i}", query=f"query {i}") for i in range(3)]
    hit = Hit(chunk_id="d#0", doc_id="d", score=1.0, rank=1)
    results = [QueryResult(query_id=q.id, hits=(hit,)) for q in queries]
    scores = score_results(queries, results, 5, cutoffs_for(5))
    assert np.isnan(scores["precision_at_5_chunk"]).all()
    block = aggregate_block(scores)
    assert block["precision_at_5_chunk"] is None
    assert block["hit_at_5"] is None
    assert "precision_at_5_chunk" not in Aggregate(overall=block).flat_metrics()
    assert json.loads(Aggregate(overall=block).to_json())["overall"]["hit_at_5"] is None


def test_queries_without_truth_are_skipped_not_counted_as_zero():
    queries = [GoldenQuery(id="q1", query="a", expected_chunk_ids=("d#0",)),
               GoldenQuery(id="q2", query="b")]
    results = [QueryResult(query_id="q1",
                           hits=(Hit(chunk_id="d#0", doc_id="d", score=1.0, rank=1),)),
               QueryResult(query_id="q2", hits=())]
    block = aggregate_block(score_results(queries, results, 5, cutoffs_for(5)))
    assert block["hit_at_1"] == 1.0  # the mean over q1 alone, not (1 + 0) / 2
    assert block["precision_at_1_chunk"] == 1.0


# --- hit, mrr, recall, ndcg ------------------------------------------------------------------

def test_hit_at_k():
    t = table([["x", "y", "a"], ["x"]], [rel("a"), rel("a")], 5)
    assert hit_at_k(t, 1).tolist() == [0.0, 0.0]
    assert hit_at_k(t, 3).tolist() == [1.0, 0.0]
    assert hit_at_k(t, 5).tolist() == [1.0, 0.0]


@pytest.mark.parametrize(("first_rank", "value"), [
    (1, 1.0), (2, 0.5), (4, 0.25), (10, 0.1), (11, 0.0), (None, 0.0),
])
def test_mrr_cutoff_10(first_rank, value):
    ranking = [f"x{i}" for i in range(1, 13)]
    if first_rank is not None:
        ranking[first_rank - 1] = "a"
    assert mrr(table([ranking], [rel("a")], 12))[0] == value


def test_mrr_uses_the_first_relevant_only():
    t = table([["x", "b", "a"]], [rel("a", "b")], 10)
    assert mrr(t)[0] == 0.5


def test_recall_at_k():
    t = table([["a", "x", "b", "y", "z", "c"]], [rel("a", "b", "c", "d")], 10)
    assert recall_at_k(t, 1)[0] == 0.25
    assert recall_at_k(t, 5)[0] == 0.5
    assert recall_at_k(t, 10)[0] == 0.75


def test_ndcg_graded_by_hand():
    # ranking: x (0), b (2), c (1); judged: b=2, c=1, d=3 (d never retrieved)
    t = table([["x", "b", "c"]], [{"b": 2, "c": 1, "d": 3}], 5)
    dcg3 = 2 / math.log2(3) + 1 / math.log2(4)
    idcg3 = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(t, 3)[0] == pytest.approx(dcg3 / idcg3, abs=1e-15)
    assert ndcg_at_k(t, 1)[0] == 0.0
    # at 5 the ideal has only 3 grades: the same sums
    assert ndcg_at_k(t, 5)[0] == pytest.approx(dcg3 / idcg3, abs=1e-15)


def test_ndcg_perfect_and_binary():
    t = table([["a", "b", "x"], ["x", "a"]], [rel("a", "b"), rel("a")], 3)
    assert ndcg_at_k(t, 3)[0] == pytest.approx(1.0, abs=1e-15)
    assert ndcg_at_k(t, 3)[1] == pytest.approx(1 / math.log2(3), abs=1e-15)


def test_zero_and_negative_grades_are_not_relevant():
    t = table([["a", "b", "c"]], [{"a": 0, "b": -1, "c": 1}], 3)
    assert t.n_relevant.tolist() == [1]
    assert mrr(t, 3)[0] == pytest.approx(1 / 3)
    assert precision_at_k(t, 3)[0] == pytest.approx(1 / 3)


def test_an_id_listed_twice_counts_once():
    t = table([["a", "a", "b"]], [rel("a")], 3)
    assert recall_at_k(t, 3)[0] == 1.0
    assert precision_at_k(t, 3)[0] == pytest.approx(1 / 3)


@pytest.mark.parametrize("fn", [hit_at_k, precision_at_k, recall_at_k, ndcg_at_k])
def test_k_deeper_than_the_retrieval_depth_is_refused(fn):
    t = table([["a"]], [rel("a")], 5)
    with pytest.raises(ValueError, match="cut-off 10 is deeper than the retrieval depth 5"):
        fn(t, 10)


def test_mrr_needs_depth_10():
    with pytest.raises(ValueError, match="deeper than the retrieval depth 5"):
        mrr(table([["a"]], [rel("a")], 5))


def test_cutoffs_never_exceed_the_depth_and_mrr_needs_10():
    assert cutoffs_for(5) == [1, 3, 5]
    assert cutoffs_for(100) == [1, 3, 5, 10, 100]
    assert cutoffs_for(7) == [1, 3, 5, 7]
    q = [GoldenQuery(id="q", query="x", expected_chunk_ids=("d#0",))]
    hit = Hit(chunk_id="d#0", doc_id="d", score=1.0, rank=1)
    scores = score_results(q, [QueryResult(query_id="q", hits=(hit,))], 5, cutoffs_for(5))
    assert "mrr" not in scores and "hit_at_10" not in scores and "hit_at_5" in scores
    assert "precision_at_100_doc" not in METRICS  # a run's cut-off registers nothing
    assert parse_metric("precision_at_100_doc").k == 100  # its name defines it


# --- doc level -----------------------------------------------------------------------------

def hits(*chunk_ids):
    return tuple(Hit(chunk_id=c, doc_id=c.split("#")[0], score=1.0 / r, rank=r)
                 for r, c in enumerate(chunk_ids, 1))


def test_first_appearance():
    assert first_appearance(["d1", "d1", "d2", "d1", "d3"]) == ["d1", "d2", "d3"]


def test_doc_level_ranks_documents_by_first_appearance():
    q = GoldenQuery(id="q", query="x", expected_doc_ids={"d2": 1, "d3": 2})
    result = QueryResult(query_id="q", hits=hits("d1#0", "d1#1", "d2#0", "d1#2", "d2#1", "d3#0"))
    s = {k: v[0] for k, v in score_results([q], [result], 10, cutoffs_for(10)).items()}
    # doc ranking: d1, d2, d3 — later chunks of d1/d2 dropped
    assert s["hit_at_1_doc"] == 0.0
    assert s["mrr_doc"] == 0.5
    assert s["precision_at_3_doc"] == pytest.approx(2 / 3)
    assert s["recall_at_3_doc"] == 1.0
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 + 1 / math.log2(3)
    assert s["ndcg_at_3_doc"] == pytest.approx(dcg / idcg, abs=1e-15)
    # chunk level has no truth here
    assert math.isnan(s["hit_at_3"]) and math.isnan(s["mrr"])


def test_chunk_level_names_keep_the_original_names():
    q = GoldenQuery(id="q", query="x", expected_chunk_ids=("d1#1",))
    s = score_results([q], [QueryResult(query_id="q", hits=hits("d1#0", "d1#1"))], 10,
                      cutoffs_for(10))
    assert s["hit_at_1"][0] == 0.0 and s["hit_at_3"][0] == 1.0 and s["mrr"][0] == 0.5
    assert s["precision_at_3_chunk"][0] == pytest.approx(1 / 3)
    assert s["recall_at_1_chunk"][0] == 0.0


# --- run-level rates -------------------------------------------------------------------------

def test_no_hit_rate_and_error_rate():
    queries = [GoldenQuery(id=f"q{i}", query=f"x{i}") for i in range(4)]
    results = [QueryResult(query_id="q0", hits=hits("d#0")), QueryResult(query_id="q1", hits=()),
               QueryResult(query_id="q2", hits=(), error="RuntimeError: boom"),
               QueryResult(query_id="q3", hits=hits("d#1"))]
    s = score_results(queries, results, 5, cutoffs_for(5))
    assert s["no_hit_rate"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert s["error_rate"].tolist() == [0.0, 0.0, 1.0, 0.0]
    block = aggregate_block(s)
    assert block["no_hit_rate"] == 0.25 and block["error_rate"] == 0.25


# --- the vectorised builder ------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_from_codes_equals_from_rankings(seed):
    rng = np.random.default_rng(seed)
    n, depth = 40, 12
    ranked = np.full((n, depth), -1)
    rankings, relevance = [], []
    triples = []
    for q in range(n):
        length = int(rng.integers(0, depth + 1))
        items = rng.choice(30, size=length, replace=False)
        ranked[q, :length] = items
        rankings.append([f"i{x}" for x in items])
        judged = rng.choice(30, size=int(rng.integers(0, 15)), replace=False)
        grades = rng.integers(-1, 4, size=judged.size)
        relevance.append({f"i{x}": int(g) for x, g in zip(judged, grades, strict=True)})
        triples += [(q, int(x), int(g)) for x, g in zip(judged, grades, strict=True)]
    a = RelevanceTable.from_rankings(rankings, relevance, depth)
    qs, items, gs = (np.array(c) for c in zip(*triples, strict=True))
    b = RelevanceTable.from_codes(ranked, qs, items, gs)
    assert np.array_equal(a.gains, b.gains)
    assert np.array_equal(a.n_relevant, b.n_relevant)
    assert np.array_equal(a.ideal, b.ideal)


# --- aggregates ----------------------------------------------------------------------------

def test_aggregate_round_trips_through_json():
    aggregate = Aggregate(overall={"hit_at_5": 0.1 + 0.2, "mrr": None, "ndcg_at_10_doc": 1 / 3},
                          counts={"queries": 3},
                          by_query_type={"comparison": {"mrr": 0.5, "hit_at_5": None}},
                          reliability_bins=((0.0, None, None, 0), (0.5, 0.55, 1.0, 2)))
    loaded = Aggregate.from_json(aggregate.to_json())
    assert loaded == aggregate  # floats exactly (repr round-trips), nulls kept
    assert loaded.metric("hit_at_5") == 0.1 + 0.2
    assert loaded.metric("mrr", "by_query_type", "comparison") == 0.5


def test_an_aggregate_from_before_a_metric_existed_still_loads():
    old = '{"overall": {"hit_at_5": 0.5, "mrr": 0.25}, "counts": {"queries": 2}}'
    loaded = Aggregate.from_json(old)
    assert loaded.metric("ndcg_at_10_doc") is None  # absent, not an error
    assert loaded.metric("mrr", "by_query_type", "comparison") is None
    assert loaded.metric("hit_at_5") == 0.5
    assert loaded.flat_metrics() == {"hit_at_5": 0.5, "mrr": 0.25}


def test_nan_never_goes_into_or_comes_out_of_an_aggregate():
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        Aggregate(overall={"mrr": float("nan")}).to_json()
    with pytest.raises(ValueError, match="NaN is not valid in an aggregate"):
        Aggregate.from_json('{"overall": {"mrr": NaN}}')
    with pytest.raises(ValueError, match="not an aggregate"):
        Aggregate.from_json('{"counts": {}}')


def test_empty_denominator_is_none():
    assert aggregate_block({"m": np.array([np.nan, np.nan])}) == {"m": None}
    assert aggregate_block({"m": np.array([])}) == {"m": None}
    assert aggregate_block({"m": np.array([1.0, np.nan, 0.0])}) == {"m": 0.5}
    mask = np.array([True, False, False])
    assert aggregate_block({"m": np.array([1.0, np.nan, 0.0])}, mask) == {"m": 1.0}


def test_metric_keys_are_mlflow_legal():
    assert metric_key("by_hardcase_category", "multi hop?", "mrr") == \
        "by_hardcase_category/multi hop_/mrr"
    assert metric_key("by_query_type", "", "x") == "by_query_type/_/x"


# --- registry ------------------------------------------------------------------------------

def test_registry_has_every_design_metric_with_a_description():
    for name in ("hit_at_1", "hit_at_10", "mrr", "precision_at_5_chunk", "recall_at_5_doc",
                 "ndcg_at_10_doc", "hit_at_5_doc", "mrr_doc", "no_hit_rate", "error_rate",
                 "contains_all", "refusal_rate", "ask_grounded_rate"):
        assert name in METRICS, name
        assert METRICS[name].description
    assert set(metric_names("run")) == {"no_hit_rate", "error_rate"}
    assert get_metric("mrr").k == 10
    assert not get_metric("error_rate").higher_is_better


def test_unknown_metric_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown metric 'hit@5'; valid metrics: .*hit_at_5"):
        get_metric("hit@5")


def test_registering_a_metric_twice_is_refused():
    again = MetricDef(name="mrr", level=Level.CHUNK, description="again", family="mrr")
    with pytest.raises(ValueError, match="registered twice"):
        registry(iter([METRICS["mrr"], again]))


def test_the_registry_is_read_only():
    with pytest.raises(TypeError):
        METRICS["hit_at_7"] = METRICS["hit_at_5"]  # type: ignore[index]


@pytest.mark.parametrize(("name", "family", "k", "level"), [
    ("ndcg_at_10_doc", "ndcg", 10, "doc"), ("ndcg_at_100_doc", "ndcg", 100, "doc"),
    ("hit_at_7", "hit", 7, "chunk"), ("hit_at_7_doc", "hit", 7, "doc"),
    ("precision_at_1000_chunk", "precision", 1000, "chunk"), ("mrr", "mrr", 10, "chunk"),
    ("mrr_doc", "mrr", 10, "doc"), ("r_precision_chunk", "r_precision", None, "chunk"),
    ("map_doc", "map", None, "doc"), ("judged_at_20_doc", "judged", 20, "doc"),
    ("contains_all", "contains_all", None, "answer"), ("error_rate", "error_rate", None, "run"),
])
def test_a_metric_is_parsed_from_its_name_and_spells_it_back(name, family, k, level):
    metric = parse_metric(name)
    assert (metric.name, metric.family, metric.k, metric.level) == (name, family, k, level)


@pytest.mark.parametrize("name", ["hit_at_5_chunk", "precision_at_5", "judged_at_5_chunk",
                                  "mrr_at_5", "ndcg_at_0_doc", "ndcg_doc", "hit@5", "recall"])
def test_names_that_are_not_the_canonical_spelling_parse_to_nothing(name):
    assert parse_metric(name) is None


def test_a_parsed_metric_carries_its_computation():
    ranked = [["a", "x", "b"], ["x", "y", "z"]]
    table = RelevanceTable.from_rankings(ranked, [{"a": 1, "b": 1}, {"q": 1}], 3)
    # query 1: relevant at ranks 1 and 3 of 3; query 2: nothing relevant retrieved
    assert parse_metric("precision_at_3_chunk").score(table).tolist() == [2 / 3, 0.0]
    assert parse_metric("hit_at_2").score(table).tolist() == [1.0, 0.0]
    assert parse_metric("recall_at_2_chunk").score(table).tolist() == [0.5, 0.0]


# --- average precision, R-precision, judged_at_k (hand-computed) -----------------------------

def test_average_precision_divides_by_every_relevant_item():
    from kebab_mlflow.metrics.retrieval import average_precision

    # relevant at ranks 1 and 3, a third relevant item never retrieved: (1/1 + 2/3) / 3
    t = table([["a", "x", "b", "y"]], [rel("a", "b", "c")], 4)
    assert average_precision(t)[0] == pytest.approx((1 + 2 / 3) / 3, abs=1e-15)
    assert np.isnan(average_precision(table([["a"]], [{}], 4))[0])  # no truth: skipped


def test_r_precision_reads_the_top_r_and_a_short_depth():
    from kebab_mlflow.metrics.retrieval import r_precision

    # R = 2: top 2 = a, x -> 1/2
    assert r_precision(table([["a", "x", "b"]], [rel("a", "b")], 3))[0] == 0.5
    # R = 3 deeper than the depth 2: both retrieved are relevant -> 2/3
    assert r_precision(table([["a", "b"]], [rel("a", "b", "c")], 2))[0] == pytest.approx(2 / 3)


def test_judged_at_k_counts_grade_zero_judgments_and_divides_by_k():
    q = GoldenQuery(id="q", query="q", expected_doc_ids={"a": 0, "b": 2})
    hits = tuple(Hit(chunk_id=f"{d}#0", doc_id=d, score=1.0, rank=r)
                 for r, d in enumerate(["a", "x", "b"], 1))
    s = score_results([q], [QueryResult(query_id="q", hits=hits)], 5, cutoffs_for(5))
    assert s["judged_at_1_doc"][0] == 1.0  # "a" is judged (grade 0) though not relevant
    assert s["judged_at_3_doc"][0] == pytest.approx(2 / 3)
    assert s["judged_at_5_doc"][0] == pytest.approx(2 / 5)  # a short list lowers it
    assert s["precision_at_1_doc"][0] == 0.0
    assert "judged_at_5_chunk" not in s  # chunk judgments are all positive: = precision


def test_explicit_cutoffs_replace_the_standard_ones_and_are_checked_against_the_depth():
    from kebab_mlflow.metrics.scoring import parse_cutoffs, run_cutoffs

    assert run_cutoffs(1000, parse_cutoffs("1000,10,100,10")) == [10, 100, 1000]
    assert run_cutoffs(20) == cutoffs_for(20)
    with pytest.raises(ConfigError, match="deeper than the retrieval depth --k 100"):
        run_cutoffs(100, [10, 1000])
    with pytest.raises(ConfigError, match="comma-separated"):
        parse_cutoffs("10,a")
    with pytest.raises(ConfigError, match=">= 1"):
        run_cutoffs(10, [0, 5])


def test_display_order_puts_cutoffs_in_numeric_order_even_for_unregistered_ones():
    from kebab_mlflow.metrics.registry import display_order

    names = ["by_query_type/x/mrr", "recall_at_100_doc", "hit_at_10_doc", "recall_at_1000_doc",
             "hit_at_100", "hit_at_10", "error_rate", "recall_at_10_doc", "map_doc", "mrr"]
    assert display_order(names) == [
        "hit_at_10", "hit_at_100", "mrr", "hit_at_10_doc", "map_doc", "recall_at_10_doc",
        "recall_at_100_doc", "recall_at_1000_doc", "error_rate", "by_query_type/x/mrr"]
