"""What a run shows in the MLflow UI (issue 16): headline metrics first and alone by default,
breakdowns as a table, the experiment kind, the dataset's schema and profile, pipeline versions
as LoggedModels, and opt-in per-query traces."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.metrics.aggregate import Aggregate
from kebab_mlflow.records import Hit
from tests.conftest import GOLDEN, KB, ROOT, mlflow_client, runs_in, write

runner = CliRunner()
TARGETS = ROOT / "fixtures" / "targets"


def _run(store_uri: str, **kw):
    return execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri, **kw))


@dataclass(frozen=True)
class Runs:
    uri: str
    base: Any  # defaults
    again: Any  # the same configuration, --traces all
    other: Any  # bm25.k1=1.5, --traces failures, --log-breakdowns


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """One store and three fixture runs shared by this module's read-only tests (a new
    SQLite store costs seconds)."""
    tmp = tmp_path_factory.mktemp("ui-layout")
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        mp.setenv("KEBAB_CACHE_DIR", str(tmp / ".kebab-cache"))
        return Runs(uri, _run(uri), _run(uri, traces="all"),
                    _run(uri, overrides={"bm25.k1": 1.5}, traces="failures",
                         log_breakdowns=True))


def _breakdown_values(aggregate: Aggregate) -> list[tuple[str, str, str, object]]:
    """Every (block, group, metric, value) of the aggregate outside ``overall``/``counts``,
    walked here independently of the code under test."""
    out = []
    for block in ("by_query_type", "by_hardcase_category", "by_metadata_field"):
        for group, metrics in getattr(aggregate, block).items():
            out += [(block, group, name, value) for name, value in metrics.items()]
    for block in ("abstention_outcomes", "abstention_calibration", "abstention_calibration_raw",
                  "latency"):
        out += [(block, "", name, value)
                for name, value in (getattr(aggregate, block) or {}).items()]
    return out


def test_headline_metrics_alone_and_breakdowns_in_a_table(runs, tmp_path):
    result = runs.base
    client = mlflow_client(runs.uri)
    run = client.get_run(result.run_id)
    overall = result.aggregate.overall
    calibration = {"ece", "brier"}  # issue 31: headline metrics whenever confidences exist
    # and the bounds for unjudged hits of the headline doc metrics (tests/test_unjudged_bounds.py)
    from kebab_mlflow.evaluation.report import headline

    bounds = set(result.aggregate.bound_metrics(headline(overall)))
    assert "ndcg_at_10_doc_upper" in bounds and "unjudged_hits_at_10_doc" in bounds
    assert set(run.data.metrics) == ({n for n, v in overall.items() if v is not None}
                                     | calibration | bounds)
    assert "hit_at_10" in run.data.metrics and "by_query_type/comparison/mrr" not in (
        run.data.metrics)
    history = client.get_metric_history(result.run_id, "mrr")
    assert len(history) == 1 and history[0].value == pytest.approx(overall["mrr"])
    # the table holds every breakdown value, nulls included, under its old metric name
    table = json.loads(Path(client.download_artifacts(result.run_id, "breakdowns.json",
                                                      str(tmp_path))).read_text())
    assert table["columns"] == ["block", "group", "metric", "value", "mlflow_metric"]
    expected = _breakdown_values(result.aggregate)
    assert [tuple(r[:3]) for r in table["data"]] == [e[:3] for e in expected]
    for row, (*_, value) in zip(table["data"], expected, strict=True):  # pandas writes 10 decimals
        assert row[3] == (None if value is None else pytest.approx(value, abs=1e-10))
    comparison_mrr = [r for r in table["data"] if r[4] == "by_query_type/comparison/mrr"]
    assert comparison_mrr[0][3] == pytest.approx(
        result.aggregate.by_query_type["comparison"]["mrr"], abs=1e-10)
    assert {"path": "breakdowns.json", "type": "table"} in json.loads(
        run.data.tags["mlflow.loggedArtifacts"])
    # --json keeps every value, as before (its consumers read breakdowns from it)
    assert result.metrics["by_query_type/comparison/mrr"] == pytest.approx(comparison_mrr[0][3])


def test_log_breakdowns_logs_everything_headline_first(runs):
    result = runs.other
    metrics = mlflow_client(runs.uri).get_run(result.run_id).data.metrics
    assert set(metrics) == set(result.metrics)
    non_null = [r for r in _breakdown_values(result.aggregate)
                if isinstance(r[3], (int, float)) and not isinstance(r[3], bool)]
    assert len(metrics) == len(non_null) + sum(v is not None for v in
                                               result.aggregate.overall.values()) + len(
        result.aggregate.calibration_headline()) + len(result.aggregate.bound_metrics())


def test_experiment_kind_is_set(runs):
    from kebab_mlflow.tracking.store import Tracker

    client = mlflow_client(runs.uri)
    assert client.get_experiment_by_name("kebab-eval").tags["mlflow.experimentKind"] == (
        "custom_model_development")
    # an experiment made without the tag (older version, by hand) gets it when next used
    exp = client.create_experiment("older")
    assert "mlflow.experimentKind" not in client.get_experiment(exp).tags
    assert Tracker(runs.uri).experiment_id("older") == exp
    assert client.get_experiment(exp).tags["mlflow.experimentKind"] == "custom_model_development"


def test_dataset_has_schema_and_profile(runs):
    dataset = mlflow_client(runs.uri).get_run(runs.base.run_id).inputs.dataset_inputs[0].dataset
    fields = {c["name"]: c["type"] for c in json.loads(dataset.schema)["mlflow_colspec"]}
    data = yaml.safe_load(GOLDEN.read_text())
    used = {key for q in data["queries"] for key, value in q.items() if value not in (None, [])}
    assert set(fields) == used - {"case_insensitive"} and fields["expected_chunk_ids"] == "array"
    profile = json.loads(dataset.profile)
    queries = data["queries"]
    assert profile["queries"] == len(queries) == 43
    assert profile["with_chunk_truth"] == sum(bool(q.get("expected_chunk_ids")) for q in queries)
    assert profile["with_must_contain"] == sum(bool(q.get("must_contain")) for q in queries)
    assert profile["ground_truth_levels"] == ["chunk", "doc", "answer"]
    assert profile["source"] == str(GOLDEN)


def test_one_logged_model_per_version_snapshot(runs):
    first, second, other = runs.base, runs.again, runs.other
    client = mlflow_client(runs.uri)
    exp = client.get_experiment_by_name("kebab-eval").experiment_id
    models = client.search_logged_models([exp])
    assert len(models) == 2

    def model_of(run_id: str) -> str:
        outputs = client.get_run(run_id).outputs.model_outputs
        assert len(outputs) == 1
        return outputs[0].model_id

    assert model_of(first.run_id) == model_of(second.run_id) != model_of(other.run_id)
    model = client.get_logged_model(model_of(other.run_id))
    assert model.status.to_int() == 2 or str(model.status) in ("READY", "LoggedModelStatus.READY")
    assert model.params["index_version"] == other.versions["index_version"]
    assert model.tags["mlflow.model.isExternal"] == "true"
    linked = {(m.key, m.run_id): m.value for m in model.metrics}
    assert linked[("mrr", other.run_id)] == pytest.approx(other.aggregate.overall["mrr"])
    digest = client.get_run(other.run_id).inputs.dataset_inputs[0].dataset.digest
    assert {m.dataset_digest for m in model.metrics} == {digest}


def test_a_target_gets_its_model_from_its_versions_none_when_unknown(runs):
    tiny = _run(runs.uri, target=f"python:{TARGETS / 'python_target.py'}:TinyPipeline",
                experiment="targets")
    bare = _run(runs.uri, target="python:fixtures.targets.python_target:search_only",
                experiment="targets")
    client = mlflow_client(runs.uri)
    model_id = client.get_run(tiny.run_id).outputs.model_outputs[0].model_id
    assert client.get_logged_model(model_id).params == tiny.versions
    assert set(tiny.versions.values()) != {"unknown"}
    assert client.get_run(bare.run_id).outputs.model_outputs == []


def _failing(rows) -> set[str]:
    """Queries with an error, a miss at any level with truth, or contains_all 0."""
    return {r.id for r in rows if r.error
            or 0 in (r.first_relevant_rank or {}).values() or r.scores.get("contains_all") == 0}


def _traces(store_uri: str, run_id: str):
    client = mlflow_client(store_uri)
    exp = client.get_run(run_id).info.experiment_id
    return client.search_traces(locations=[exp], run_id=run_id, max_results=500)


def _rows(uri: str, run_id: str, tmp_path: Path) -> dict:
    local = mlflow_client(uri).download_artifacts(run_id, "per_query.jsonl", str(tmp_path))
    return {r.id: r for r in read_per_query(Path(local))}


def test_traces_failures_and_all(runs, tmp_path):
    assert _traces(runs.uri, runs.base.run_id) == []
    rows = _rows(runs.uri, runs.other.run_id, tmp_path / "other")
    expected = _failing(rows.values())
    assert 0 < len(expected) < len(rows)
    traced = _traces(runs.uri, runs.other.run_id)
    assert {t.info.tags["kebab.query_id"] for t in traced} == expected
    all_run = runs.again.run_id
    rows = _rows(runs.uri, all_run, tmp_path / "again")
    everything = _traces(runs.uri, all_run)
    assert len(everything) == len(rows) == 43
    trace = next(t for t in everything if t.info.tags["kebab.query_id"] == "g001")
    row = rows["g001"]
    retriever = next(s for s in trace.data.spans if s.span_type == "RETRIEVER")
    docs = retriever.outputs
    assert [(d["metadata"]["chunk_id"], d["metadata"]["doc_id"]) for d in docs] == [
        (h.chunk_id, h.doc_id) for h in row.hits]
    assert docs[0]["metadata"]["score"] == pytest.approx(row.hits[0].score)
    chunk_file = (KB / f"{row.hits[0].doc_id}.md")
    assert docs[0]["page_content"].split("\n\n")[-1][:40] in chunk_file.read_text()
    answer = next(s for s in trace.data.spans if s.name == "answer")
    assert answer.outputs["text"] == row.answer.text
    scores = {a.name: a.value for a in trace.info.assessments}
    assert scores and all(scores[n] == pytest.approx(row.scores[n]) for n in scores)
    model_id = mlflow_client(runs.uri).get_run(all_run).outputs.model_outputs[0].model_id
    assert trace.info.trace_metadata["mlflow.sourceRun"] == all_run
    assert trace.info.trace_metadata["mlflow.modelId"] == model_id


def test_a_private_golden_set_is_never_traced(runs, tmp_path):
    data = yaml.safe_load(GOLDEN.read_text())
    data["private"] = True
    golden = write(tmp_path / "private.yaml", yaml.safe_dump(data, sort_keys=False))
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(KB),
                              "--tracking-uri", runs.uri, "--traces", "failures",
                              "--experiment", "private-traces"])
    assert res.exit_code == 2, res.output
    assert "is private and is never traced" in res.output
    assert runs_in(runs.uri, "private-traces") == []
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                              "--tracking-uri", runs.uri, "--traces", "some"])
    assert res.exit_code == 2 and "--traces must be one of none, failures, all" in res.output


def test_publishing_traces_again_duplicates_nothing(runs):
    """`upload` of a recovery folder publishes its traces again: same ids, one copy."""
    from kebab_mlflow.tracking.store import Tracker
    from kebab_mlflow.tracking.traces import TracePayload

    tracker = Tracker(runs.uri)
    exp = tracker.experiment_id("republish")
    run_id = tracker.start_run(exp, "r", {})
    hit = {"doc_id": "d", "chunk_id": "d#0", "score": 2.5, "rank": 1, "text": "the text"}
    payloads = [TracePayload(query_id=f"q{i}", query=f"query {i}", hits=(hit,), answer=None,
                             scores={"mrr": 1.0 / (i + 1)},
                             error=None, latency_ms=1.5, failure=("miss",)) for i in range(3)]
    assert tracker.log_traces(exp, run_id, payloads) == 3
    assert tracker.log_traces(exp, run_id, payloads) == 3
    traces = _traces(runs.uri, run_id)
    assert len(traces) == 3
    assert sorted(len(t.info.assessments) for t in traces) == [1, 1, 1]
    assert {t.info.request_preview: t.info.assessments[0].value for t in traces} == {
        "query 0": 1.0, "query 1": 0.5, "query 2": pytest.approx(1 / 3)}


def _expected_judgment(item: dict, hit: Hit) -> tuple[str, int | None]:
    """A hit's judgment read off the golden YAML entry by hand: relevant when its chunk is
    listed or its doc is listed with a grade > 0; a doc listed with grade 0, or any other
    chunk of a query with chunk truth, not relevant; anything else unjudged."""
    docs = item.get("expected_doc_ids") or []
    grades = docs if isinstance(docs, dict) else dict.fromkeys(docs, 1)
    if hit.chunk_id in (item.get("expected_chunk_ids") or []):
        return "relevant", 1
    if grades.get(hit.doc_id, 0) > 0:
        return "relevant", grades[hit.doc_id]
    if hit.doc_id in grades:
        return "not relevant", 0
    return ("not relevant", 0) if item.get("expected_chunk_ids") else ("unjudged", None)


def test_spans_last_their_own_measured_times(runs, tmp_path):
    rows = _rows(runs.uri, runs.again.run_id, tmp_path / "again")
    traces = {t.info.tags["kebab.query_id"]: t for t in _traces(runs.uri, runs.again.run_id)}
    asked = [r for r in rows.values() if r.answer is not None and not r.error]
    assert asked and len(asked) < len(rows)
    for row in rows.values():
        # per_query.jsonl: the loop's stage times, which sum to the query's latency
        assert set(row.stage_ms) == ({"search", "answer"} if row.answer is not None
                                     else {"search"})
        assert sum(row.stage_ms.values()) == pytest.approx(row.latency_ms, rel=1e-9)
        trace = traces[row.id]
        assert trace.info.tags["kebab.stage_times"] == "measured"
        spans = {s.name: s for s in trace.data.spans}
        root, retrieve = spans[f"query {row.id}"], spans["retrieve"]

        def ms(span):
            return (span.end_time_ns - span.start_time_ns) / 1e6

        assert ms(root) == pytest.approx(max(row.latency_ms, 0.001), abs=1e-5)
        assert ms(retrieve) == pytest.approx(row.stage_ms["search"], abs=1e-5)
        if row.answer is not None:
            answer = spans["answer"]
            assert answer.start_time_ns == retrieve.end_time_ns  # the answer after the search
            assert ms(answer) == pytest.approx(row.stage_ms["answer"], abs=1e-5)
    # different stages, different times: not every span the query's total any more
    row = asked[0]
    spans = {s.name: s for s in traces[row.id].data.spans}
    assert len({spans[n].end_time_ns - spans[n].start_time_ns
                for n in (f"query {row.id}", "retrieve", "answer")}) == 3


def test_the_retriever_span_marks_each_document_with_its_judgment(runs, tmp_path):
    items = {q["id"]: q for q in yaml.safe_load(GOLDEN.read_text())["queries"]}
    rows = _rows(runs.uri, runs.again.run_id, tmp_path / "again")
    seen = set()
    for trace in _traces(runs.uri, runs.again.run_id):
        qid = trace.info.tags["kebab.query_id"]
        retriever = next(s for s in trace.data.spans if s.span_type == "RETRIEVER")
        docs = retriever.outputs or []
        assert len(docs) == len(rows[qid].hits)
        for doc, hit in zip(docs, rows[qid].hits, strict=True):
            meta = doc["metadata"]
            want = _expected_judgment(items[qid], hit)
            assert (meta["judgment"], meta["judgment_grade"]) == want, (qid, hit)
            seen.add(want[0])
    assert {"relevant", "not relevant"} <= seen  # both kinds among the fixture set's hits


def test_judgments_of_graded_and_unjudged_documents():
    from dataclasses import replace

    from kebab_mlflow.golden import GoldenQuery
    from kebab_mlflow.records import Hit
    from kebab_mlflow.tracking.traces import judgment

    q = GoldenQuery(id="q", query="x", expected_doc_ids={"a": 2, "b": 0})
    hit = Hit(chunk_id="a#0", doc_id="a", score=1.0, rank=1)
    assert judgment(hit, q) == {"judgment": "relevant", "judgment_grade": 2,
                                "judgment_level": "doc"}
    assert judgment(replace(hit, doc_id="b"), q)["judgment"] == "not relevant"
    assert judgment(replace(hit, doc_id="c"), q) == {"judgment": "unjudged",
                                                     "judgment_grade": None,
                                                     "judgment_level": "doc"}
    chunked = GoldenQuery(id="q", query="x", expected_chunk_ids=("a#1",))
    assert judgment(replace(hit, chunk_id="a#1"), chunked)["judgment"] == "relevant"
    assert judgment(hit, chunked)["judgment_level"] == "chunk"
    assert judgment(hit, GoldenQuery(id="q", query="x"))["judgment"] == "unjudged"


def test_a_target_without_stage_times_is_tagged_not_measured(runs):
    """A run file reports one time per query: the child spans last the whole query, and the
    trace says its stage times are not measured rather than making them up."""
    from kebab_mlflow.tracking.store import Tracker
    from kebab_mlflow.tracking.traces import TracePayload

    tracker = Tracker(runs.uri)
    exp = tracker.experiment_id("unmeasured")
    run_id = tracker.start_run(exp, "r", {})
    hit = {"doc_id": "d", "chunk_id": "d#0", "score": 2.5, "rank": 1, "text": "t"}
    p = TracePayload(query_id="q0", query="query 0", hits=(hit,), answer=None, scores={},
                     error=None, latency_ms=2.0, failure=())
    assert tracker.log_traces(exp, run_id, [p]) == 1
    (trace,) = _traces(runs.uri, run_id)
    assert trace.info.tags["kebab.stage_times"] == "not_measured"
    assert {(s.end_time_ns - s.start_time_ns) for s in trace.data.spans} == {2_000_000}
