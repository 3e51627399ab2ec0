"""Golden versions (issue 30): `golden diff`, the judging queue and `golden merge`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.golden_versions.diff import Aspect, diff_golden
from tests.conftest import write

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
