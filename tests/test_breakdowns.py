"""Breakdown blocks (issue 5): by_query_type, by_hardcase_category, by_metadata_field —
full metric blocks, members only, MLflow metric names; and the run's artifacts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kebab_mlflow.errors import GoldenSetError
from kebab_mlflow.evaluation.runner import build_aggregate
from kebab_mlflow.golden import GoldenQuery, GoldenSet, parse_golden_set
from kebab_mlflow.metrics.aggregate import breakdowns
from kebab_mlflow.tracking.log import RunOptions, execute
from tests.conftest import GOLDEN, KB

NAN = math.nan

QUERIES = (
    GoldenQuery(id="a", query="x", query_type="single_doc", hardcase_categories=("numeric",),
                metadata_field="budget"),
    GoldenQuery(id="b", query="x", query_type="comparison",
                hardcase_categories=("numeric", "near_duplicate"), metadata_field="budget"),
    GoldenQuery(id="c", query="x", query_type="comparison"),  # no tags, no metadata_field
    GoldenQuery(id="d", query="x"),  # an old-style case: none of the keys
)
SCORES = {"mrr": np.array([1.0, 0.5, 0.0, 1.0]),
          "contains_all": np.array([1.0, NAN, 0.0, 1.0])}


def test_each_breakdown_is_the_full_block_over_its_members_only():
    b = breakdowns(QUERIES, SCORES)
    assert b["by_query_type"] == {
        "comparison": {"mrr": 0.25, "contains_all": 0.0},
        "single_doc": {"mrr": 1.0, "contains_all": 1.0}}
    # a query with two tags counts in both; queries without tags are simply not there
    assert b["by_hardcase_category"] == {
        "near_duplicate": {"mrr": 0.5, "contains_all": None},
        "numeric": {"mrr": 0.75, "contains_all": 1.0}}
    assert b["by_metadata_field"] == {"budget": {"mrr": 0.75, "contains_all": 1.0}}


def test_forward_compatibility_cases_without_keys_are_excluded_not_errors():
    old = parse_golden_set(b"queries:\n  - {id: a, query: x}\n  - {id: b, query: y}\n", "g.yaml")
    b = breakdowns(old.queries, {"mrr": np.array([1.0, 0.0])})
    assert b == {"by_query_type": {}, "by_hardcase_category": {}, "by_metadata_field": {}}
    agg = build_aggregate(old, {"mrr": np.array([1.0, 0.0])}, [None, None], np.ones(2))
    assert agg.overall["mrr"] == 0.5 and agg.by_metadata_field == {}
    assert not any(k.startswith("by_") for k in agg.flat_metrics())


def test_unknown_metadata_field_is_rejected_at_load_with_its_location():
    text = b"""metadata_fields: [agency, owner]
queries:
  - {id: a, query: x, metadata_field: owner}
  - {id: b, query: y, metadata_field: budget}
  - {id: c, query: z, metadata_field: colour}
"""
    with pytest.raises(GoldenSetError) as info:
        parse_golden_set(text, "g.yaml")
    message = str(info.value)
    assert "g.yaml:4 [query b]: unknown metadata_field 'budget' (this file's metadata_fields: " \
        "agency, owner)" in message
    assert "g.yaml:5 [query c]: unknown metadata_field 'colour'" in message
    assert "query a" not in message and "2 problem(s)" in message


def test_default_metadata_fields_apply_without_a_declaration():
    ok = parse_golden_set(b"queries:\n  - {id: a, query: x, metadata_field: deadline}\n", "g")
    assert ok.queries[0].metadata_field == "deadline"
    with pytest.raises(GoldenSetError, match="unknown metadata_field 'owner'"):
        parse_golden_set(b"queries:\n  - {id: a, query: x, metadata_field: owner}\n", "g")


def test_flat_metric_names_nest_block_key_metric_and_skip_nulls():
    agg = build_aggregate(GoldenSet(name="g", queries=QUERIES), SCORES, [None] * 4, np.ones(4))
    flat = agg.flat_metrics()
    assert flat["by_query_type/comparison/mrr"] == 0.25
    assert flat["by_hardcase_category/numeric/contains_all"] == 1.0
    assert flat["by_metadata_field/budget/mrr"] == 0.75
    assert "by_hardcase_category/near_duplicate/contains_all" not in flat  # null
    nested = json.loads(agg.to_json())
    assert nested["by_hardcase_category"]["near_duplicate"]["contains_all"] is None


def test_fixture_run_logs_breakdowns_calibration_and_the_reliability_diagram(store_uri):
    """With --log-breakdowns the blocks are MLflow metrics under their old names (without it,
    only in aggregate.json and the breakdowns.json table: tests/test_ui_layout.py)."""
    from mlflow.tracking import MlflowClient

    result = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                                log_breakdowns=True))
    agg = result.aggregate
    assert set(agg.by_query_type) == {"single_doc", "comparison", "follow_up", "abstention"}
    assert set(agg.by_query_type["comparison"]) == set(agg.overall)
    assert agg.abstention_outcomes["n"] == 4
    assert agg.abstention_calibration["n"] == agg.counts["ask"]
    client = MlflowClient(tracking_uri=store_uri)
    metrics = client.get_run(result.run_id).data.metrics
    assert metrics["by_query_type/comparison/mrr"] == pytest.approx(
        agg.by_query_type["comparison"]["mrr"])
    assert metrics["by_metadata_field/budget/contains_all"] == pytest.approx(
        agg.by_metadata_field["budget"]["contains_all"])
    assert metrics["abstention_calibration/ece"] == pytest.approx(
        agg.abstention_calibration["ece"])
    assert "abstention_outcomes/correct_refusal_share" in metrics
    names = {a.path for a in client.list_artifacts(result.run_id)}
    assert "reliability_diagram.png" in names
