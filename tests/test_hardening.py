"""Bad input refused up front, with its location, exit 2 and no run (issue 18 items 3, 8, 10):
names MLflow would refuse at publish time, out-of-range numbers, deeply nested JSON, corrupt
recovery folders, duplicated YAML keys; and no private text or credentials on the way out."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kebab_mlflow as km
from kebab_mlflow import names
from kebab_mlflow.cli import app
from kebab_mlflow.errors import PerQueryError, TrackingError
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.targets import load_target
from kebab_mlflow.targets.reply import ReplyError, decode_json
from kebab_mlflow.tracking.log import MANIFEST, finish_run
from kebab_mlflow.tracking.store import Tracker
from tests.conftest import GOLDEN, KB, ROOT, runs_in, write

runner = CliRunner()
NESTED = "[" * 100_000 + "]" * 100_000


def golden(tmp_path: Path, text: str) -> Path:
    return write(tmp_path / "g.yaml", text)


def run_cli(args: list[str]):
    return runner.invoke(app, args)


QUERY = "  - {id: q1, query: budget of the tram, expected_doc_ids: [harbor-transit]"


@pytest.mark.parametrize("text, where, message", [
    ("name: g\nqueries:\n" + QUERY + ", hardcase_categories: [ok, '..']}\n", ":3 [query q1]",
     "hardcase_category '..': makes the metric key 'by_hardcase_category/../"),
    ("name: g\nmetadata_fields: [budget, '.']\nqueries:\n" + QUERY + "}\n", ":2",
     "metadata_field '.': makes the metric key 'by_metadata_field/./"),
    ("name: " + "n" * 501 + "\nqueries:\n" + QUERY + "}\n", ":1",
     "'name' is 501 characters; MLflow takes at most 500"),
    ("name: g\nqueries:\n" + QUERY + ", hardcase_categories: [" + "t" * 202 + "]}\n",
     ":3 [query q1]", "longer than the 201 characters an MLflow metric key leaves for it"),
    ("name: g\nqueries:\n" + QUERY + ", hardcase_categories: ['a?', 'a!']}\n", ":3 [query q1]",
     "hardcase_category 'a!': becomes the same metric key as 'a?'"),
    ("name: g\nqueries:\n  - {id: q1, query: x, expected_doc_ids: {harbor-transit: "
     + "9" * 400 + "}}\n", ":3 [query q1]", "is out of range (|grade| <= 2,147,483,647"),
    ("name: g\nqueries:\n" + QUERY + "}\nname: h\n", ":4",
     "duplicated key 'name' (first at line 1; YAML would keep only the last)"),
    ("name: g\nqueries:\n  - {id: q1, query: x, id: q2}\n", ":3",
     "duplicated key 'id' (first at line 3"),
])
def test_what_mlflow_would_refuse_is_a_golden_set_error_with_its_line(
        tmp_path, store_uri, text, where, message):
    path = golden(tmp_path, text)
    res = run_cli(["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert f"{path}{where}: " in res.output and message in res.output
    res = run_cli(["run", "--golden", str(path), "--corpus", str(KB),
                   "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert runs_in(store_uri) == []


def test_legal_odd_groups_still_work_as_before(tmp_path):
    path = golden(tmp_path, "name: g\nqueries:\n" + QUERY + ", hardcase_categories: "
                  "['multi hop?', 'a.b', 'x/y']}\n")
    assert km.load_golden_set(path).queries[0].hardcase_categories == ("multi hop?", "a.b", "x/y")


def test_the_longest_metric_name_is_the_one_the_key_check_assumes(tmp_path):
    # a query with evidence: the evidence metrics are the longest names
    text = GOLDEN.read_text().replace(
        '    expected_chunk_ids: ["harbor-transit#2"]\n',
        '    expected_chunk_ids: ["harbor-transit#2"]\n'
        '    evidence: [{doc: harbor-transit, quote: "48.5 million euros"}]\n', 1)
    golden_path = tmp_path / "golden.yaml"
    golden_path.write_text(text)
    result = km.evaluate(km.reference_pipeline("naive_baseline", str(KB)), golden_path,
                         k=names.MAX_K)
    longest = max(result.aggregate.overall, key=len)
    assert len(longest) == len(names.LONGEST_METRIC), longest
    assert all(names.key_problem(key) is None for key in result.metrics)


@pytest.mark.parametrize("args, message", [
    (["--set", "bm25.k1=1e308"], "bm25.k1 must be >= 0 and <= 1,000, got 1e+308"),
    (["--k", "3000000"], "--k must be an integer from 1 to 10,000"),
    (["--set", "chunker.max_chars=" + "9" * 400], "chunker.max_chars must be >= 1 and <= "),
    (["--experiment", "e" * 501], "--experiment is 501 characters; MLflow takes at most 500"),
])
def test_out_of_range_options_exit_2_before_any_run(store_uri, args, message):
    res = run_cli(["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                   "--tracking-uri", store_uri, *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert runs_in(store_uri) == [] and runs_in(store_uri, "e" * 501) == []


def test_deeply_nested_json_is_a_located_input_error(tmp_path):
    path = write(tmp_path / "per_query.jsonl", NESTED + "\n")
    with pytest.raises(PerQueryError, match="JSON nested too deeply"):
        list(read_per_query(path))
    with pytest.raises(ReplyError, match="nested too deeply"):
        decode_json(NESTED.encode(), "the reply")
    folder = tmp_path / "kebab-recovery" / "r1"
    write(folder / MANIFEST, NESTED)
    res = run_cli(["upload", str(folder)])
    assert res.exit_code == 2 and "not JSON: nested too deeply" in res.output


@pytest.mark.parametrize("manifest, message", [
    ("{not json", "is not a recovery manifest"),
    ('["a list"]', "not a JSON object"),
    (json.dumps({"run_id": "abc", "experiment_id": "1", "tracking_uri": "sqlite:///x.db",
                 "description": "", "metrics": {"by_hardcase_category/../mrr": 1.0}, "tags": {},
                 "dataset": {"name": "g", "digest": "d", "tags": {}}}),
     "key 'by_hardcase_category/../mrr': MLflow reads it as the path 'mrr'"),
    (json.dumps({"run_id": "abc", "metrics": {"m": "NaN"}}), "'metrics' must map names to"),
])
def test_upload_of_a_bad_recovery_folder_is_a_clear_error(tmp_path, manifest, message):
    folder = tmp_path / "kebab-recovery" / "r1"
    write(folder / MANIFEST, manifest)
    res = run_cli(["upload", str(folder)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert folder.is_dir()  # nothing removed


class LosingTracker(Tracker):
    """A real store whose URI carries credentials and which is lost at publish time."""

    def log_batch(self, run_id, params=None, metrics=None, tags=None):
        if metrics:
            raise ConnectionError("server went away")
        super().log_batch(run_id, params, metrics, tags)


def test_the_recovery_manifest_stores_no_credentials(store_uri, tmp_path):
    result = km.evaluate(km.reference_pipeline("naive_baseline", str(KB)), GOLDEN)
    tracker = LosingTracker(store_uri)
    run_id = tracker.start_run(tracker.experiment_id("x"), "r", {})
    tracker.uri = "http://bob:hunter2@mlflow.example:5000"
    work = tmp_path / "work" / run_id
    work.mkdir(parents=True)
    with pytest.raises(TrackingError, match="results kept in"):
        finish_run(tracker, run_id, "0", result, work, "t")
    text = (tmp_path / "kebab-recovery" / run_id / MANIFEST).read_text()
    assert json.loads(text)["tracking_uri"] == "http://mlflow.example:5000"
    assert "hunter2" not in text and "bob" not in text


SECRET_TARGET = '''
def search(query, k):
    raise ValueError(f"cannot parse {query!r}")
'''


def test_private_set_with_fail_fast_shows_no_query_text(tmp_path, store_uri):
    target = write(tmp_path / "secret_target.py", SECRET_TARGET)
    path = golden(tmp_path, "name: g\nprivate: true\nqueries:\n"
                  "  - {id: q1, query: the acquisition of Zebracorp, expected_doc_ids: [d]}\n")
    res = run_cli(["run", "--golden", str(path), "--target", f"python:{target}:search",
                   "--tracking-uri", store_uri, "--fail-fast"])
    assert res.exit_code == 1, res.output
    assert "query q1 raised: ValueError (message withheld: private golden set)" in res.output
    assert "Zebracorp" not in res.output


def test_the_shipped_cmd_example_takes_a_query_that_looks_like_an_option():
    readme = (ROOT / "docs" / "targets.md").read_text()
    template = re.search(r"--target '(cmd:python fixtures/targets/cli_target\.py[^']*)'",
                         readme)[1]
    spec = template.replace("python", shlex.quote(sys.executable), 1).replace(
        "fixtures/", str(ROOT / "fixtures") + "/", 1)
    [(hits, _, error, _)] = load_target(spec).run_many([("--help", False)], 3)
    assert error is None and isinstance(hits, tuple)
    docstring = (ROOT / "fixtures" / "targets" / "cli_target.py").read_text()
    assert template in docstring


def test_key_rule_matches_mlflows_own_validation():
    """names.key_problem agrees with MLflow 3.17's validators on a spread of keys."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_metric_name

    for key in ["mrr", "a/b", "by_x/../m", "./m", "/m", "m/", "a//b", "a b:c", "é", "a?b",
                "..", ".", "x" * 251, "by_hardcase_category/near_duplicate/hit_at_5"]:
        try:
            _validate_metric_name(key)
            theirs = len(key) <= 250
        except MlflowException:
            theirs = False
        assert (names.key_problem(key) is None) == theirs, key


def test_a_port_that_contains_403_is_not_read_as_permission_denied():
    """An unreachable server on port 40389 is 'cannot reach', not a 403 (a flaky misreport)."""
    from kebab_mlflow.tracking.store import _tracking_error

    err = _tracking_error("http://127.0.0.1:40389",
                          ConnectionError("Max retries exceeded with url: http://127.0.0.1:40389"))
    assert "cannot reach the MLflow tracking store http://127.0.0.1:40389" in str(err)
    assert "permission" not in str(err)
    denied = _tracking_error("http://h:5000", RuntimeError("API request failed with 403"))
    assert "denied this user permission" in str(denied)
