"""`kebab-mlflow run`: one eval = one MLflow run (issue 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.per_query import file_digest, read_per_query
from tests.conftest import GOLDEN, KB, ROOT, mlflow_client, runs_in, write

runner = CliRunner()


def _options(store_uri: str, **kw) -> RunOptions:
    return RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri, **kw)


def test_run_logs_params_metrics_artifacts_tags_and_dataset(store_uri, tmp_path):
    result = execute(_options(store_uri, run_name="first"))
    run = mlflow_client(store_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED"
    params = run.data.params
    for key in ("parser_version", "chunker_version", "embedding_version", "index_version",
                "prompt_template_version", "preset", "backend", "k", "golden_set",
                "n_queries", "seed", "config.bm25.k1"):
        assert key in params, key
    assert params["n_queries"] == "43" and params["preset"] == "naive_baseline"
    metrics = run.data.metrics
    assert metrics["hit_at_5"] == pytest.approx(result.aggregate.overall["hit_at_5"])
    # headline only by default: the breakdowns are in breakdowns.json (tests/test_ui_layout.py)
    # plus ECE and Brier, logged on every run with confidences (tests/test_headline_calibration.py)
    # and the bounds for unjudged hits: <metric>_upper of the headline doc metrics with
    # unjudged hits in their cut-off, the unjudged hits per query at each cut-off
    # (tests/test_unjudged_bounds.py)
    from kebab_mlflow.evaluation.report import headline

    overall = result.aggregate.overall
    bounds = {f"{n}_upper" for n in headline(overall) if result.aggregate.upper(n) is not None}
    assert bounds >= {"ndcg_at_10_doc_upper", "map_doc_upper"}
    assert set(metrics) == ({k for k, v in overall.items() if v is not None}
                            | {"ece", "brier"} | bounds
                            | {f"unjudged_hits_at_{k}_doc" for k in (1, 3, 5, 10)})
    assert all("@" not in m for m in metrics)
    tags = run.data.tags
    assert len(tags["kebab.git_commit"]) in (7, 12) or tags["kebab.git_commit"] == "unknown"
    assert tags["kebab.kind"] == "eval"
    assert len(tags["kebab.golden_sha256"]) == 64 and len(tags["kebab.config_sha256"]) == 64
    assert "hit_at_5" in tags["mlflow.note.content"]
    names = {a.path for a in mlflow_client(store_uri).list_artifacts(result.run_id)}
    assert {"per_query.jsonl", "aggregate.json", "report.md", "metric_vs_k.png"} <= names
    local = Path(mlflow_client(store_uri).download_artifacts(result.run_id, "per_query.jsonl",
                                                       str(tmp_path)))
    assert file_digest(local) == tags["kebab.per_query_sha256"]
    rows = list(read_per_query(local))
    assert [r.id for r in rows][:3] == ["g001", "g002", "g003"] and len(rows) == 43
    agg = json.loads(Path(mlflow_client(store_uri).download_artifacts(
        result.run_id, "aggregate.json", str(tmp_path))).read_text())
    assert agg["overall"]["hit_at_5"] == result.aggregate.overall["hit_at_5"]
    inputs = run.inputs.dataset_inputs
    assert len(inputs) == 1 and inputs[0].dataset.digest == tags["kebab.golden_sha256"][:36]


def test_dataset_digest_changes_when_a_query_changes(store_uri, tmp_path):
    text = GOLDEN.read_text()
    first = execute(_options(store_uri))
    changed = write(tmp_path / "g.yaml", text.replace("g001", "g001x", 1))
    second = execute(RunOptions(golden=str(changed), corpus=str(KB), tracking_uri=store_uri))
    def digest(run_id: str) -> str:
        return mlflow_client(store_uri).get_run(run_id).inputs.dataset_inputs[0].dataset.digest

    assert digest(first.run_id) != digest(second.run_id)


def test_same_inputs_same_numbers(store_uri):
    a = execute(_options(store_uri))
    b = execute(_options(store_uri))
    def scores(r):  # wall-clock latency is the one thing that may differ
        return {k: v for k, v in r.metrics.items() if not k.startswith("latency/")}

    assert scores(a) == scores(b)


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "unknown preset 'nope'; valid presets: naive_baseline"),
    (["--set", "bm25.k3=1"], "unknown config key 'bm25.k3'"),
    (["--k", "0"], "--k must be an integer from 1 to 10,000"),
])
def test_bad_input_exits_2_and_creates_no_run(store_uri, args, message):
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                              "--tracking-uri", store_uri, *args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert runs_in(store_uri) == []


def test_bad_golden_set_and_missing_ids_create_no_run(store_uri, tmp_path):
    bad = write(tmp_path / "bad.yaml", "queries:\n  - id: a\n    query: q\n    colour: red\n")
    res = runner.invoke(app, ["run", "--golden", str(bad), "--corpus", str(KB),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "unknown key 'colour'" in res.output
    missing = write(tmp_path / "missing.yaml",
                    "queries:\n  - id: a\n    query: q\n    expected_chunk_ids: [zz#9, aa#1]\n")
    res = runner.invoke(app, ["run", "--golden", str(missing), "--corpus", str(KB),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2
    assert "2 expected chunk id(s) not in the index: aa#1, zz#9" in res.output
    assert runs_in(store_uri) == []


def test_json_output_is_one_object(store_uri):
    res = subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                          str(GOLDEN), "--corpus", str(KB), "--tracking-uri", store_uri,
                          "--json"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) >= {"run_id", "experiment_id", "status", "metrics"}
    assert data["status"] == "FINISHED" and 0 <= data["metrics"]["hit_at_5"] <= 1


class Exploding:
    """A pipeline whose search raises for one query."""

    def __init__(self, inner):
        self.inner = inner
        self.versions = inner.versions

    def search(self, query, k):
        if "Bayline" in query:
            raise RuntimeError("boom")
        return self.inner.search(query, k)

    def ask(self, query, hits):
        return self.inner.ask(query, hits)


def test_a_query_that_raises_is_recorded_and_counted(tmp_path):
    from kebab_mlflow.config import build_config
    from kebab_mlflow.errors import QueryFailed
    from kebab_mlflow.evaluation.runner import run_queries
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.reference import build_pipeline

    golden = load_golden_set(GOLDEN)
    pipeline = Exploding(build_pipeline(build_config(), KB))
    outcome = run_queries(pipeline, golden, 10, [1, 5, 10], tmp_path / "pq.jsonl")
    failing = [q for q in golden.queries if "Bayline" in q.query]
    assert failing
    assert outcome.aggregate.overall["error_rate"] == pytest.approx(len(failing) / 43)
    rows = {r.id: r for r in read_per_query(tmp_path / "pq.jsonl")}
    assert rows[failing[0].id].error == "RuntimeError: boom" and rows[failing[0].id].hits == ()
    with pytest.raises(QueryFailed, match="boom"):
        run_queries(pipeline, golden, 10, [1, 5, 10], tmp_path / "pq2.jsonl", fail_fast=True)


def test_a_batch_without_ask_queries_keeps_the_answer_scores_aligned(tmp_path):
    # the runner scores 64 queries at a time; a batch with no ask query must still give every
    # answer metric one (NaN) value per query, or the arrays no longer line up with the set
    import dataclasses

    from kebab_mlflow.config import build_config
    from kebab_mlflow.evaluation.runner import BATCH_SIZE, run_queries
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.reference import build_pipeline

    fixture = load_golden_set(GOLDEN)
    plain = [q for q in fixture.queries if not q.ask]
    asked = [q for q in fixture.queries if q.ask and q.answerable][:2]
    queries = [dataclasses.replace(plain[i % len(plain)], id=f"p{i}")
               for i in range(BATCH_SIZE + 1)] + asked
    golden = dataclasses.replace(fixture, queries=tuple(queries))
    outcome = run_queries(build_pipeline(build_config(), KB), golden, 10, [1, 5, 10],
                          tmp_path / "pq.jsonl")
    contains = outcome.scores["contains_all"]
    assert contains.shape == (len(queries),)
    assert np.isnan(contains[:-2]).all() and not np.isnan(contains[-2:]).any()
    assert outcome.aggregate.overall["contains_all"] == pytest.approx(contains[-2:].mean())
    assert outcome.aggregate.by_query_type  # breakdowns index the arrays by query


def test_help_does_not_import_mlflow():
    code = ("import sys; sys.argv=['kebab-mlflow', '{}', '--help']\n"
            "from kebab_mlflow import cli\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "print('MLFLOW' if 'mlflow' in sys.modules else 'CLEAN')")
    for sub in ("run", "compare", "sweep"):
        out = subprocess.run([sys.executable, "-c", code.format(sub)], capture_output=True,
                             text=True, cwd=ROOT, check=True).stdout
        assert out.strip().endswith("CLEAN"), (sub, out[-300:])


def test_sigterm_ends_the_run_killed(store_uri, tmp_path):
    """SIGTERM once the query loop started (the checkpoint's marker, not a guessed delay) →
    the MLflow run is KILLED, exit 130."""
    from kebab_mlflow.tracking.store import Tracker

    Tracker(store_uri)  # the store exists before we look into it
    marker = tmp_path / "in-the-loop"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_FAULT_POINT": f"batch-start={marker}"}
    proc = subprocess.Popen([sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                             str(GOLDEN), "--corpus", str(KB), "--tracking-uri", store_uri],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err
    runs = runs_in(store_uri)
    assert [r.info.status for r in runs] == ["KILLED"]
    assert "KILLED" in err


def test_four_processes_on_a_brand_new_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(GOLDEN),
           "--corpus", str(KB), "--tracking-uri", uri, "--json"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e[-500:] for _, e in outs]
    runs = runs_in(uri)
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}


def test_runs_show_and_baseline_commands(store_uri):
    first = execute(_options(store_uri, run_name="base"))
    execute(_options(store_uri, run_name="cand", preset="random_retrieval"))
    res = runner.invoke(app, ["runs", "--tracking-uri", store_uri])
    assert res.exit_code == 0 and "base" in res.output and "cand" in res.output
    res = runner.invoke(app, ["baseline", "set", "base", "--tracking-uri", store_uri])
    assert res.exit_code == 0 and first.run_id in res.output
    res = runner.invoke(app, ["show", "@baseline", "--tracking-uri", store_uri])
    assert res.exit_code == 0 and first.run_id in res.output and "chunker_version" in res.output
    res = runner.invoke(app, ["show", "nope", "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "no run named or with id 'nope'" in res.output


def test_default_store_is_mlruns_in_the_working_directory(tmp_path):
    res = subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                          str(GOLDEN), "--corpus", str(KB), "--json"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "mlruns" / "mlflow.db").is_file()
    run_id = json.loads(res.stdout)["run_id"]
    artifacts = tmp_path / "mlruns" / "artifacts" / "kebab-eval" / run_id / "artifacts"
    assert (artifacts / "per_query.jsonl").is_file()


def test_score_columns_filled_a_batch_at_a_time_are_the_batches_joined():
    """The runner writes each batch's scores into arrays made once for every query
    (evaluation/runner.py _Columns): what joining the batches gives, names first seen late,
    a wider type and more values than queries included."""
    from kebab_mlflow.evaluation.runner import _Columns

    rng = np.random.default_rng(3)
    batches = [{"a": rng.random(4), "b": np.arange(4)}, {"a": rng.random(3), "b": np.arange(3),
                                                        "c": rng.random(3)},
               {"a": rng.random(5), "b": rng.random(5) + 0.5, "c": rng.random(5)}]
    columns = _Columns(10)
    for batch in batches:
        columns.put(batch)
    got = columns.arrays()
    assert sorted(got) == ["a", "b", "c"]
    for name, values in got.items():
        joined = np.concatenate([b[name] for b in batches if name in b])
        assert values.dtype == joined.dtype and np.array_equal(values, joined)
