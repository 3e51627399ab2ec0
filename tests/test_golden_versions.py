"""Golden versions (issue 30): `golden diff`, the judging queue and `golden merge`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.golden_versions.diff import Aspect, diff_golden
from tests.conftest import GOLDEN, KB, mlflow_client, runs_in, write

runner = CliRunner()

BASE = """\
name: g
queries:
  - id: q1
    query: "first question"
    expected_doc_ids: {d1: 2, d2: 1}
  - id: q2
    query: "second question"
    expected_doc_ids: [d3]
    query_type: single_doc
  - id: q3
    query: "third question"
    must_contain: ["42"]
    ask: true
"""


def _set(tmp_path: Path, name: str, text: str, private: bool = False) -> Path:
    return write(tmp_path / name, ("private: true\n" if private else "") + text)


@pytest.mark.parametrize("old, new, aspect, detail", [
    ("expected_doc_ids: {d1: 2, d2: 1}", "expected_doc_ids: {d1: 2, d2: 1, d9: 1}",
     Aspect.TRUTH, "doc: +d9"),
    ("expected_doc_ids: {d1: 2, d2: 1}", "expected_doc_ids: {d1: 1, d2: 1}",
     Aspect.GRADES, "d1: 2 -> 1"),
    ('must_contain: ["42"]', 'must_contain: ["43"]', Aspect.ANSWER,
     "must_contain: ['42'] -> ['43']"),
    ("query_type: single_doc", "query_type: comparison", Aspect.TYPE,
     "query_type: 'single_doc' -> 'comparison'"),
    ('"second question"', '"second question, edited"', Aspect.TEXT,
     "'second question' -> 'second question, edited'"),
    ("ask: true", "ask: false", Aspect.LABELS, "ask: True -> False"),
])
def test_diff_names_each_aspect(tmp_path, old, new, aspect, detail):
    a = load_golden_set(_set(tmp_path, "a.yaml", BASE))
    b = load_golden_set(_set(tmp_path, "b.yaml", BASE.replace(old, new)))
    result = diff_golden(a, b)
    assert len(result.changed) == 1 and not result.added and not result.removed
    assert dict(result.changed[0].details) == {aspect: detail}
    assert result.counts[str(aspect)] == 1 and result.counts["unchanged"] == 2


def test_diff_cli_lists_added_removed_changed_and_json(tmp_path):
    a = _set(tmp_path, "a.yaml", BASE)
    edited = BASE.replace("  - id: q3", "  - id: q4").replace("{d1: 2, d2: 1}", "{d1: 1}")
    b = _set(tmp_path, "b.yaml", edited)
    res = runner.invoke(app, ["golden", "diff", str(a), str(b)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[1] == ("added 1, removed 1, changed 1 (truth 1, grades 1, answer 0, type 0, "
                        "text 0, labels 0), unchanged 1")
    assert f"+ q4 ({b}:10)  'third question'" in lines
    assert f"- q3 ({a}:10)  'third question'" in lines
    assert "    truth: doc: -d2" in lines and "    grades: d1: 2 -> 1" in lines
    res = runner.invoke(app, ["golden", "diff", str(a), str(b), "--format", "json"])
    data = json.loads(res.stdout)
    assert data["counts"]["added"] == 1 and data["added"][0] == {
        "id": "q4", "line": 10, "query": "third question"}
    assert data["changed"][0]["aspects"] == {"truth": "doc: -d2", "grades": "d1: 2 -> 1"}


def test_diff_of_a_private_set_shows_no_text(tmp_path):
    a = _set(tmp_path, "a.yaml", BASE, private=True)
    edited = BASE.replace('"first question"', '"secret wording"').replace('["42"]',
                                                                           '["SECRETWORD"]')
    b = _set(tmp_path, "b.yaml", edited.replace("  - id: q2", "  - id: q5"), private=True)
    for args in ([], ["--format", "json"]):
        res = runner.invoke(app, ["golden", "diff", str(a), str(b), *args])
        assert res.exit_code == 0, res.output
        for secret in ("secret", "first question", "third question", '"42"', "SECRETWORD"):
            assert secret not in res.stdout, (secret, args)
    data = json.loads(res.stdout)
    assert data["changed"][0]["aspects"] == {"text": "changed"}
    assert data["changed"][1]["aspects"] == {"answer": "must_contain"}
    assert data["a"]["path"] is None


# ---------------------------------------------------------------------------------------------
# judge + golden merge (item 4)


def _graded(queue: Path, grade_of) -> Path:
    """The queue with every item graded by ``grade_of(index)``."""
    lines, index = [], 0
    for line in queue.read_text().splitlines():
        if line.strip() == "grade:":
            line = f"{line} {grade_of(index)}"
            index += 1
        lines.append(line)
    out = queue.with_name("graded.yaml")
    out.write_text("\n".join(lines) + "\n")
    return out


def _two_runs(store_uri: str, golden: Path) -> None:
    from kebab_mlflow.app.run import RunOptions, execute

    for name, k1 in (("a", 1.2), ("b", 0.4)):
        execute(RunOptions(golden=str(golden), corpus=str(KB), tracking_uri=store_uri,
                           run_name=name, overrides={"bm25.k1": k1}))


def test_judge_merge_rescore_equals_a_fresh_run_with_the_merged_set(store_uri, tmp_path):
    from kebab_mlflow.app.run import RunOptions, execute

    golden = tmp_path / "golden.yaml"
    golden.write_text(GOLDEN.read_text())
    _two_runs(store_uri, golden)
    res = runner.invoke(app, ["judge", "a", "b", "--out", str(tmp_path / "q.yaml"),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    queue = yaml.safe_load((tmp_path / "q.yaml").read_text())
    pairs = [(i["query_id"], i["doc_id"]) for i in queue["items"]]
    assert len(pairs) == len(set(pairs)) and all(i["grade"] is None for i in queue["items"])
    judged = {(q.id, d) for q in load_golden_set(golden).queries for d in q.expected_doc_ids}
    assert not judged & set(pairs) and all(i["rank"] <= 10 for i in queue["items"])
    assert any(len(i["runs"]) == 2 for i in queue["items"])  # both runs retrieved it: one item
    assert all(i["passage"] and i["query"] for i in queue["items"])
    graded = _graded(tmp_path / "q.yaml", lambda i: i % 3)
    merged = tmp_path / "merged.yaml"
    res = runner.invoke(app, ["golden", "merge", str(golden), str(graded), "--out", str(merged)])
    assert res.exit_code == 0, res.output
    assert merged.read_text().startswith(GOLDEN.read_text().split("name:")[0])  # comments kept
    res = runner.invoke(app, ["rescore", "a", "--golden", str(merged), "--json",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    rescored = json.loads(res.stdout)["run_id"]
    fresh = execute(RunOptions(golden=str(merged), corpus=str(KB), tracking_uri=store_uri,
                               run_name="fresh", overrides={"bm25.k1": 1.2}))
    client = mlflow_client(store_uri)
    assert client.get_run(rescored).data.metrics == client.get_run(fresh.run_id).data.metrics
    # every item of run a's top 10 is judged now: judged_at_10_doc is 1 wherever a hit exists
    res = runner.invoke(app, ["judge", "a", "--golden", str(merged), "--no-log", "--out",
                              str(tmp_path / "again.yaml"), "--tracking-uri", store_uri])
    assert res.exit_code == 0 and yaml.safe_load((tmp_path / "again.yaml").read_text())[
        "items"] == []


def test_merge_conflict_names_both_lines_and_writes_nothing(tmp_path):
    golden = _set(tmp_path, "g.yaml", BASE)
    queue = write(tmp_path / "q.yaml", """\
items:
  - query_id: q1
    doc_id: d1
    grade: 0
  - query_id: q2
    doc_id: d7
    grade: 2
  - query_id: q9
    doc_id: d7
    grade: 1
  - query_id: q2
    doc_id: d8
    grade: -1
  - query_id: q2
    doc_id: d9
    grade:
""")
    before = golden.read_bytes()
    res = runner.invoke(app, ["golden", "merge", str(golden), str(queue)])
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert f"{queue}:11" in text and "grade' must be an integer >= 0" in text
    queue.write_text(queue.read_text().replace("grade: -1", "grade: 1"))
    res = runner.invoke(app, ["golden", "merge", str(golden), str(queue)])
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert f"conflict: {golden}:3 grades d1 2 for q1, {queue}:2 grades it 0" in text
    assert "query 'q9' is not in" in text
    assert golden.read_bytes() == before


def test_merge_adds_grades_in_the_files_own_form(tmp_path):
    golden = _set(tmp_path, "g.yaml", "# curator's note\n" + BASE)
    queue = write(tmp_path / "q.yaml", """\
items:
  - {query_id: q1, doc_id: d5, grade: 1}
  - {query_id: q2, doc_id: d4, grade: 1}
  - {query_id: q3, doc_id: d6, grade: 2}
  - {query_id: q3, doc_id: d7}
""")
    res = runner.invoke(app, ["golden", "merge", str(golden), str(queue)])
    assert res.exit_code == 0, res.output
    assert "3 judgments added, 0 already there, 1 ungraded" in res.stdout
    text = golden.read_text()
    assert text.startswith("# curator's note\nname: g\n")
    assert "expected_doc_ids: {d1: 2, d2: 1, d5: 1}" in text
    assert "expected_doc_ids: [d3, d4]" in text
    assert "expected_doc_ids: {d6: 2}" in text
    assert load_golden_set(golden).queries[2].expected_doc_ids == {"d6": 2}


def test_judge_on_a_private_set_writes_no_text_anywhere(store_uri, tmp_path):
    data = yaml.safe_load(GOLDEN.read_text())
    data["private"] = True
    golden = tmp_path / "private.yaml"
    golden.write_text(yaml.safe_dump(data, sort_keys=False))
    _two_runs(store_uri, golden)
    out = tmp_path / "q.yaml"
    res = runner.invoke(app, ["judge", "a", "b", "--golden", str(golden), "--out", str(out),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    client = mlflow_client(store_uri)
    run_a = next(r.info.run_id for r in runs_in(store_uri) if r.info.run_name == "a")
    copy = Path(client.download_artifacts(run_a, "judging/q.yaml", str(tmp_path / "dl")))
    secrets = [q["query"] for q in data["queries"]] + ["Port Alden", "euros"]
    for text in (out.read_text(), copy.read_text(), res.output):
        assert not [s for s in secrets if s in text]
    assert "passage" not in copy.read_text() and "query:" not in copy.read_text()
    assert yaml.safe_load(out.read_text())["items"]


# ---------------------------------------------------------------------------------------------
# bounds for unjudged hits (item 5)


def _recorded(hits_by_query: dict[str, list[str]]):
    from kebab_mlflow.evaluation.per_query import PerQueryRow
    from kebab_mlflow.evaluation.rescore import RecordedRun
    from kebab_mlflow.records import Hit

    rows = tuple(PerQueryRow(id=qid, query="q", hits=tuple(
        Hit(rank=i + 1, chunk_id=d, doc_id=d, score=1.0 / (i + 1))
        for i, d in enumerate(docs)), answer=None, scores={}, latency_ms=1.0, error=None)
        for qid, docs in hits_by_query.items())
    return RecordedRun(run_id="r", rows=rows, params={"k": "10", "cutoffs": "1,10"})


def test_bounds_count_unjudged_hits_relevant_hand_computed(tmp_path):
    from kebab_mlflow.evaluation.bounds import unjudged_bounds

    golden = load_golden_set(_set(tmp_path, "g.yaml", """\
name: g
queries:
  - {id: q1, query: a, expected_doc_ids: {d1: 1, d0: 0}}
"""))
    # d2 unjudged at rank 1, d1 relevant at rank 2, d0 judged non-relevant at rank 3
    bounds = unjudged_bounds(_recorded({"q1": ["d2", "d1", "d0"]}), golden, k=10)
    assert bounds.unjudged_hits == 1 and bounds.unjudged_per_query == 1.0
    lower, upper = bounds.metric("ndcg_at_10_doc")
    assert lower == pytest.approx(1 / np.log2(3))  # DCG 1/log2(3), ideal 1
    assert upper == pytest.approx(1.0)  # d2 and d1 relevant at ranks 1, 2: ideal order
    assert bounds.metric("map_doc") == (pytest.approx(0.5), pytest.approx(1.0))
    assert bounds.metric("precision_at_10_doc") == (pytest.approx(0.1), pytest.approx(0.2))


def test_unjudged_gate_makes_a_flipping_verdict_inconclusive(tmp_path):
    from kebab_mlflow.comparison.records import CompareOptions, RunSide
    from kebab_mlflow.comparison.unjudged import UnjudgedMode, with_unjudged_bounds
    from kebab_mlflow.comparison.verdict import compare_runs
    from kebab_mlflow.evaluation.rescore import rescore

    n = 40
    golden_path = _set(tmp_path, "g.yaml", "name: g\nqueries:\n" + "".join(
        f"  - {{id: q{i}, query: q, expected_doc_ids: [d1]}}\n" for i in range(n)))
    golden = load_golden_set(golden_path)

    def side(name: str, docs: list[str]) -> RunSide:
        result = rescore(_recorded({f"q{i}": docs for i in range(n)}), golden).result
        tags = {"kebab.golden_sha256": golden.digest,
                "kebab.per_query_sha256": result.per_query_sha256}
        return RunSide(run_id=name, name=name, status="FINISHED", params={"k": "10",
                       "cutoffs": "1,10"}, tags=tags, rows=result.rows(),
                       per_query_sha256=result.per_query_sha256)

    # the candidate puts an unjudged document first: worse as judged, better if it is relevant
    base, cand = side("b", ["d1", "d8"]), side("c", ["dx", "d1"])
    options = CompareOptions(resamples=500)
    usual = compare_runs(base, cand, options)
    assert usual.verdict == "Regressed"
    reported = with_unjudged_bounds(usual, base, cand, golden, options, UnjudgedMode.REPORT)
    assert reported.verdict == "Regressed" and reported.exit_code == 1
    assert "unjudged hits in the top 10: baseline 40 (1.0/query), candidate 40 (1.0/query)" \
        in reported.notes
    gated = with_unjudged_bounds(usual, base, cand, golden, options, UnjudgedMode.GATE)
    assert gated.verdict == "Inconclusive (unjudged)" and gated.exit_code == 1
    assert "Regressed does not hold" in gated.notes[-1]
