"""`run`, `compare` and `sweep` end to end against a real `mlflow server` (issue 8).

The server (SQLite backend, artifacts served by the server from its own folder) is started once
per test session by ``tests/servers.py``; each test uses its own experiment.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.per_query import file_digest, read_per_query
from tests import servers
from tests.conftest import GOLDEN, KB, write

runner = CliRunner()


@pytest.fixture(scope="session")
def mlflow_server():
    return servers.shared_mlflow_server()


def experiment_name() -> str:
    return f"server-{uuid.uuid4().hex[:10]}"


def run_cli(url: str, experiment: str, *extra: str):
    return runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                               "--tracking-uri", url, "--experiment", experiment, "--json",
                               *extra])


def run_json(result) -> dict:
    """The JSON object `run --json` prints (its last stdout line; see the strict test below)."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_json_output_against_a_server_is_one_object(mlflow_server):
    """`--json` stdout is machine-readable: MLflow must not print its "View run" links there."""
    result = run_cli(mlflow_server.url, experiment_name())
    assert result.exit_code == 0, result.output
    assert "View run" not in result.stdout
    assert json.loads(result.stdout)["status"] == "FINISHED"


def test_run_logs_everything_to_the_server_and_nothing_locally(mlflow_server, tmp_path):
    exp = experiment_name()
    reply = run_json(run_cli(mlflow_server.url, exp, "--run-name", "on-server"))
    client = mlflow_server.client()
    run = client.get_run(reply["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "on-server"
    assert client.get_experiment(run.info.experiment_id).name == exp
    assert run.data.params["n_queries"] == "43"
    assert run.data.metrics["hit_at_5"] == reply["metrics"]["hit_at_5"]
    names = {a.path for a in client.list_artifacts(reply["run_id"])}
    assert {"per_query.jsonl", "aggregate.json", "report.md", "metric_vs_k.png"} <= names
    local = Path(client.download_artifacts(reply["run_id"], "per_query.jsonl", str(tmp_path)))
    assert file_digest(local) == run.data.tags["kebab.per_query_sha256"]
    assert len(list(read_per_query(local))) == 43
    # the server stores the artifacts in its own artifact root; the client keeps nothing
    stored = list(mlflow_server.artifacts_dir.rglob(f"*{reply['run_id']}*/**/per_query.jsonl"))
    assert len(stored) == 1 and file_digest(stored[0]) == file_digest(local)
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "kebab-recovery").exists()
    assert list((tmp_path / ".kebab-cache" / "work").iterdir()) == []  # work folder published
    assert len(run.inputs.dataset_inputs) == 1


def test_tracking_uri_from_the_environment(mlflow_server, monkeypatch):
    exp = experiment_name()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    first = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                                "--experiment", exp, "--json"])
    reply = run_json(first)
    run = mlflow_server.client().get_run(reply["run_id"])
    assert run.info.status == "FINISHED"
    shown = runner.invoke(app, ["baseline", "set", reply["run_id"], "--experiment", exp])
    assert shown.exit_code == 0, shown.output
    assert mlflow_server.client().get_experiment(run.info.experiment_id).tags[
        "kebab.baseline_run_id"] == reply["run_id"]


def test_compare_two_runs_on_the_server(mlflow_server):
    exp = experiment_name()
    base = run_json(run_cli(mlflow_server.url, exp, "--run-name", "base"))["run_id"]
    same = run_json(run_cli(mlflow_server.url, exp, "--run-name", "same"))["run_id"]
    worse = run_json(run_cli(mlflow_server.url, exp, "--run-name", "worse",
                             "--preset", "random_retrieval"))["run_id"]
    args = ["--tracking-uri", mlflow_server.url, "--experiment", exp, "--format", "json",
            "--resamples", "500"]
    same_cmp = runner.invoke(app, ["compare", base, same, *args])
    assert same_cmp.exit_code == 0, same_cmp.output
    verdict = json.loads(same_cmp.stdout)
    assert verdict["verdict"] == "Same"
    assert verdict["baseline"]["run_id"] == base and verdict["candidate"]["run_id"] == same
    worse_cmp = runner.invoke(app, ["compare", "base", "worse", *args])  # by run name
    assert worse_cmp.exit_code == 1, worse_cmp.output
    assert json.loads(worse_cmp.stdout)["verdict"] == "Regressed"
    # the verdicts are recorded on the candidate runs, on the server
    client = mlflow_server.client()
    assert client.get_run(same).data.tags["kebab.verdict"] == "Same"
    assert client.get_run(worse).data.tags["kebab.verdict"] == "Regressed"


def small_sweep(tmp_path: Path) -> Path:
    return write(tmp_path / "sweep.yaml", f"""
name: server-sweep
golden: {GOLDEN}
corpus: {KB}
k: 10
primary: bm25
floors: [random_retrieval, single_chunk]
gauge_metrics: [hit_at_5, mrr]
resamples: 300
seed: 0
rows:
  - {{name: bm25, preset: naive_baseline}}
  - {{name: random_retrieval, preset: random_retrieval}}
  - {{name: single_chunk, preset: single_chunk}}
""")


def check_sweep(server, reply: dict) -> None:
    client = server.client()
    parent = client.get_run(reply["parent_run_id"])
    assert parent.info.status == "FINISHED"
    children = client.search_runs(
        [parent.info.experiment_id],
        f"tags.mlflow.parentRunId = '{reply['parent_run_id']}'")
    assert sorted(c.info.run_name for c in children) == ["bm25", "random_retrieval",
                                                         "single_chunk"]
    assert all(c.info.status == "FINISHED" for c in children)
    assert parent.data.tags["kebab.signal_state"] == reply["signal_state"]
    assert "gauge/hit_at_5/alive" in parent.data.metrics
    names = {a.path for a in client.list_artifacts(reply["parent_run_id"])}
    assert {"distinguishing_power.json", "leaderboard.csv", "sweep.yaml"} <= names


def test_sweep_on_the_server(mlflow_server, tmp_path):
    result = runner.invoke(app, ["sweep", str(small_sweep(tmp_path)), "--tracking-uri",
                                 mlflow_server.url, "--experiment", experiment_name(), "--json"])
    assert result.exit_code == 0, result.output
    check_sweep(mlflow_server, json.loads(result.stdout.strip().splitlines()[-1]))
