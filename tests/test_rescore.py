"""`kebab-mlflow rescore`: a stored run under another golden version (issue 30, item 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.api import evaluate, reference_pipeline, rescore
from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.errors import InputError
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.evaluation.rescore import rescore as rescore_in_memory
from kebab_mlflow.evaluation.rescore import run_of_result
from kebab_mlflow.golden import load_golden_set
from tests.conftest import GOLDEN, KB, SHARED, mlflow_client

runner = CliRunner()
# ../shared beside the checkout, or where $KEBAB_SHARED_DIR says (a worktree elsewhere)
SCIFACT = Path(os.environ.get("KEBAB_SHARED_DIR", SHARED)) / "datasets" / "scifact"


def edited_golden(path: Path, *, drop: tuple[str, ...] = (), regrade: str | None = None,
                  add_truth: tuple[str, str] | None = None) -> Path:
    """A copy of the fixture golden set with queries dropped, one query's doc truth replaced
    by a grade-2 judgment of another doc, or one doc judged relevant for a query."""
    data = yaml.safe_load(GOLDEN.read_text())
    data["queries"] = [q for q in data["queries"] if q["id"] not in drop]
    for q in data["queries"]:
        if q["id"] == regrade:
            q["expected_doc_ids"] = {"parks-department": 2}
            q.pop("expected_chunk_ids", None)
            q.pop("group", None)  # a group's queries share their truth
        if add_truth and q["id"] == add_truth[0]:
            q["expected_doc_ids"] = [*q.get("expected_doc_ids", []), add_truth[1]]
            q.pop("group", None)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def _rows_by_id(path: Path) -> dict:
    return {r.id: r for r in read_per_query(path)}


def test_rescore_under_its_own_golden_set_gives_back_bytes_and_metrics(store_uri, tmp_path):
    source = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                                run_name="src"))
    res = runner.invoke(app, ["rescore", "src", "--golden", str(GOLDEN), "--json",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    client = mlflow_client(store_uri)
    src, der = client.get_run(source.run_id), client.get_run(out["run_id"])
    assert der.data.tags["kebab.kind"] == "rescore"
    assert der.data.tags["kebab.rescored_from"] == source.run_id
    assert der.data.tags["kebab.golden_sha256"] == src.data.tags["kebab.golden_sha256"]
    assert der.data.tags["kebab.per_query_sha256"] == src.data.tags["kebab.per_query_sha256"]
    assert der.data.metrics == src.data.metrics
    assert der.data.params == src.data.params
    assert der.data.tags["kebab.config_sha256"] == src.data.tags["kebab.config_sha256"]
    assert src.data.tags["kebab.golden_path"] == str(GOLDEN)
    # the same LoggedModel: the metrics of both runs name one model id
    models = {m.model_id for r in (src, der) for m in r.outputs.model_outputs}
    assert len(models) == 1
    a = client.download_artifacts(source.run_id, "per_query.jsonl", str(tmp_path / "a"))
    b = client.download_artifacts(out["run_id"], "per_query.jsonl", str(tmp_path / "b"))
    assert Path(a).read_bytes() == Path(b).read_bytes()
    agg = [Path(client.download_artifacts(r, "aggregate.json", str(tmp_path / r)))
           .read_bytes() for r in (source.run_id, out["run_id"])]
    assert agg[0] == agg[1]


def test_rescore_under_an_edited_set_equals_a_fresh_run_query_by_query(store_uri, tmp_path):
    edited = edited_golden(tmp_path / "edited.yaml", drop=("g005",), regrade="g001",
                           add_truth=("g002", "parks-department"))
    execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                       run_name="src"))
    fresh = execute(RunOptions(golden=str(edited), corpus=str(KB), tracking_uri=store_uri,
                               run_name="fresh"))
    res = runner.invoke(app, ["rescore", "src", "--golden", str(edited), "--json",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["removed_queries"] == 1 and out["n_queries"] == 42
    client = mlflow_client(store_uri)
    der, new = client.get_run(out["run_id"]), client.get_run(fresh.run_id)
    assert der.data.metrics == new.data.metrics
    assert der.data.tags["kebab.golden_sha256"] == load_golden_set(edited).digest
    a = _rows_by_id(Path(client.download_artifacts(fresh.run_id, "per_query.jsonl",
                                                   str(tmp_path / "a"))))
    b = _rows_by_id(Path(client.download_artifacts(out["run_id"], "per_query.jsonl",
                                                   str(tmp_path / "b"))))
    assert a.keys() == b.keys() and "g005" not in b
    for qid in a:
        assert a[qid].scores == b[qid].scores, qid
        assert a[qid].first_relevant_rank == b[qid].first_relevant_rank, qid
    # the edit changed what was scored: g001's truth moved to another document
    assert a["g001"].first_relevant_rank["doc"] != 1


def test_queries_the_run_never_saw_are_an_error_unless_intersect(store_uri, tmp_path):
    small = edited_golden(tmp_path / "small.yaml", drop=("g003", "g004"))
    execute(RunOptions(golden=str(small), corpus=str(KB), tracking_uri=store_uri,
                       run_name="src"))
    res = runner.invoke(app, ["rescore", "src", "--golden", str(GOLDEN),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2
    assert "2 queries run" in res.output and "g003, g004" in res.output
    assert "--intersect" in res.output
    res = runner.invoke(app, ["rescore", "src", "--golden", str(GOLDEN), "--intersect",
                              "--json", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["unseen_queries"] == 2 and out["n_queries"] == 41
    tags = mlflow_client(store_uri).get_run(out["run_id"]).data.tags
    assert tags["kebab.rescore_dropped_queries"] == "2"


def test_rescore_in_memory_through_the_python_api(tmp_path):
    pipeline = reference_pipeline("naive_baseline", KB)
    result = evaluate(pipeline, GOLDEN)
    same = rescore(result, GOLDEN)
    assert same.per_query_sha256 == result.per_query_sha256
    assert same.metrics == result.metrics
    edited = edited_golden(tmp_path / "e.yaml", regrade="g001")
    fresh, again = evaluate(pipeline, edited), rescore(result, edited)
    assert_same_scores(again, fresh)


def assert_same_scores(rescored, fresh) -> None:
    """Query by query, the scores and first relevant ranks of both (latencies differ: a
    fresh run measures its own)."""
    assert rescored.overall == fresh.overall
    assert rescored.scores.keys() == fresh.scores.keys()
    for name, values in fresh.scores.items():
        np.testing.assert_array_equal(rescored.scores[name], values, err_msg=name)
    pairs = zip(rescored.rows(), fresh.rows(), strict=True)
    assert all((a.id, a.scores, a.first_relevant_rank) == (b.id, b.scores, b.first_relevant_rank)
               for a, b in pairs)


def test_private_run_with_answer_checks_is_refused_not_scored_zero(tmp_path):
    data = yaml.safe_load(GOLDEN.read_text())
    data["private"] = True
    private = tmp_path / "private.yaml"
    private.write_text(yaml.safe_dump(data, sort_keys=False))
    result = evaluate(reference_pipeline("naive_baseline", KB), private)
    with pytest.raises(InputError, match="recorded no answer text"):
        rescore_in_memory(run_of_result(result), load_golden_set(private))


@pytest.mark.skipif(not SCIFACT.exists(), reason="needs ../shared/datasets/scifact")
def test_scifact_rescore_matches_fresh_runs(tmp_path):
    golden = tmp_path / "scifact.yaml"
    res = runner.invoke(app, ["import-beir", str(SCIFACT), "--split", "test", "--out",
                              str(golden)])
    assert res.exit_code == 0, res.output
    pipeline = reference_pipeline("naive_baseline", SCIFACT / "corpus.jsonl.gz",
                                  chunker__mode="document")
    result = evaluate(pipeline, golden)
    assert rescore(result, golden).per_query_sha256 == result.per_query_sha256
    data = yaml.safe_load(golden.read_text())
    # judge every query's top-ranked document relevant (grade 1), as a curator might
    top = {r.id: r.hits[0].doc_id for r in result.rows() if r.hits}
    for q in data["queries"][:100]:
        if q["id"] in top:
            truth = q["expected_doc_ids"]
            truth = truth if isinstance(truth, dict) else dict.fromkeys(truth, 1)
            q["expected_doc_ids"] = {top[q["id"]]: 1, **truth}
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    fresh, again = evaluate(pipeline, edited), rescore(result, edited)
    assert_same_scores(again, fresh)
    assert again.overall != result.overall


# ---------------------------------------------------------------------------------------------
# compare across golden versions (item 2)


def test_compare_across_golden_versions_refuses_naming_digests_and_rescore(store_uri, tmp_path):
    edited = edited_golden(tmp_path / "edited.yaml", regrade="g001")
    src = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                             run_name="src"))
    execute(RunOptions(golden=str(edited), corpus=str(KB), tracking_uri=store_uri,
                       overrides={"bm25.k1": 0.6}, run_name="new"))
    res = runner.invoke(app, ["compare", "src", "new", "--no-log", "--tracking-uri", store_uri])
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert load_golden_set(GOLDEN).digest[:12] in text
    assert load_golden_set(edited).digest[:12] in text
    assert f"kebab-mlflow rescore {src.run_id} --golden {edited}" in text
    assert "compare --rescore" in text


def test_compare_rescore_equals_comparing_the_derived_run(store_uri, tmp_path):
    edited = edited_golden(tmp_path / "edited.yaml", regrade="g001", drop=("g007",))
    execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                       run_name="src"))
    execute(RunOptions(golden=str(edited), corpus=str(KB), tracking_uri=store_uri,
                       overrides={"bm25.k1": 0.6}, run_name="new"))
    before = len(mlflow_client(store_uri).search_runs(["0", "1"]))
    res = runner.invoke(app, ["compare", "src", "new", "--rescore", "--no-log", "--format",
                              "json", "--tracking-uri", store_uri])
    assert res.exit_code in (0, 1), res.output
    in_memory = json.loads(res.stdout)
    assert len(mlflow_client(store_uri).search_runs(["0", "1"])) == before  # nothing logged
    res = runner.invoke(app, ["rescore", "src", "--golden", str(edited), "--run-name", "derived",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["compare", "derived", "new", "--no-log", "--format", "json",
                              "--tracking-uri", store_uri])
    logged = json.loads(res.stdout)
    assert in_memory["verdict"] == logged["verdict"]
    assert in_memory["metrics"] == logged["metrics"] and in_memory["n"] == logged["n"]
    assert in_memory["baseline"]["golden_sha256"] == load_golden_set(edited).digest


# ---------------------------------------------------------------------------------------------
# golden versions as MLflow datasets, runs, baseline set --force (item 6)


def test_golden_versions_are_datasets_shown_by_runs_and_guarded_by_baseline(store_uri,
                                                                           tmp_path):
    edited = edited_golden(tmp_path / "edited.yaml", regrade="g001")
    old, new = load_golden_set(GOLDEN), load_golden_set(edited)
    a = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                           run_name="on-old"))
    b = execute(RunOptions(golden=str(edited), corpus=str(KB), tracking_uri=store_uri,
                           run_name="on-new"))
    client = mlflow_client(store_uri)
    datasets = {(i.dataset.name, i.dataset.digest) for r in (a, b)
                for i in client.get_run(r.run_id).inputs.dataset_inputs}
    assert datasets == {(old.name, old.digest[:36]), (new.name, new.digest[:36])}
    assert client.get_run(b.run_id).data.tags["kebab.golden_version"] == \
        f"kebab-fixtures@{new.digest[:8]}"
    res = runner.invoke(app, ["runs", "--wide", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    assert f"kebab-fixtures@{old.digest[:8]}" in res.stdout
    assert f"kebab-fixtures@{new.digest[:8]}" in res.stdout
    assert runner.invoke(app, ["baseline", "set", "on-old", "--tracking-uri",
                               store_uri]).exit_code == 0
    res = runner.invoke(app, ["baseline", "set", "on-new", "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "--force" in res.output
    assert f"kebab-fixtures@{old.digest[:8]}" in " ".join(res.output.split())
    res = runner.invoke(app, ["baseline", "set", "on-new", "--force", "--tracking-uri",
                              store_uri])
    assert res.exit_code == 0 and b.run_id in res.stdout
