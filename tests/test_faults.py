"""Faults — nothing lost (issue 8): a tracking server that is not there, a server lost mid-run,
Ctrl-C against a server, and eight `run` processes at once (server and embedded store).

The mid-run tests use a ``python:`` target whose ``search`` waits on a gate file, so the test
knows the run exists and its queries are in flight before it pulls the plug.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.per_query import file_digest
from tests import servers
from tests.conftest import GOLDEN, KB, ROOT, write
from tests.faultpoints import sigint_at_default
from tests.servers import start_mlflow_server

runner = CliRunner()


@pytest.fixture(scope="session")
def mlflow_server():
    return servers.shared_mlflow_server()
KEBAB = str(Path(sys.executable).with_name("kebab-mlflow"))

TARGET = '''
import os, time
from pathlib import Path

def search(query, k):
    calls = os.environ.get("KEBAB_TEST_CALLS")
    if calls:
        with open(calls, "a") as fh:
            fh.write(query + "\\n")
    gate = os.environ.get("KEBAB_TEST_GATE")
    if gate:
        Path(gate + ".started").touch()
        deadline = time.time() + 600
        while not Path(gate).exists() and time.time() < deadline:
            time.sleep(0.05)
    n = int(query.split()[-1])
    docs = [f"d{(n + i) % 3}" for i in range(3)]
    return [{"chunk_id": d + "#0", "doc_id": d, "score": 1.0 / (i + 1)}
            for i, d in enumerate(docs)]
'''
# query n -> hits d{n}, d{n+1}, d{n+2} (mod 3); every query expects d0:
# ranks 1, 3, 2 -> mrr = (1 + 1/3 + 1/2) / 3 = 11/18, hit_at_1 = 1/3, hit_at_3 = 1
GOLDEN_SET = """
name: fault-set
queries:
  - {id: q0, query: "query number 0", expected_chunk_ids: ["d0#0"], expected_doc_ids: [d0]}
  - {id: q1, query: "query number 1", expected_chunk_ids: ["d0#0"], expected_doc_ids: [d0]}
  - {id: q2, query: "query number 2", expected_chunk_ids: ["d0#0"], expected_doc_ids: [d0]}
"""


@pytest.fixture
def target_files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "gated_target.py", TARGET), write(tmp_path / "g.yaml", GOLDEN_SET)


def kebab(args: list[str], tmp_path: Path, **env: str) -> subprocess.Popen:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen([KEBAB, *args], cwd=tmp_path, env=full_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=sigint_at_default)


def run_args(target: Path, golden: Path, uri: str) -> list[str]:
    return ["run", "--golden", str(golden), "--target", f"python:{target}:search",
            "--tracking-uri", uri, "--experiment", "faults", "--json"]


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 600.0) -> None:
    """Until ``path`` exists (the event); ``timeout`` only bounds a hang."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run exited early ({proc.returncode}): {proc.stderr.read()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_unreachable_server_exits_2_before_any_query(tmp_path, target_files):
    target, golden = target_files
    calls = tmp_path / "calls.txt"
    with servers.refusing_server() as (url, attempts):
        proc = kebab(run_args(target, golden, url), tmp_path, KEBAB_TEST_CALLS=str(calls))
        out, err = proc.communicate(timeout=600)
    assert proc.returncode == 2, err
    assert f"cannot reach the MLflow tracking store {url}" in err
    assert "Traceback" not in err and out == ""
    assert not calls.exists()  # no query ran
    # fails fast: one request and MLFLOW_HTTP_REQUEST_MAX_RETRIES=2 retries (tracking/store.py),
    # not MLflow's default 7 with a backoff of minutes; counted, not timed
    assert 1 <= len(attempts) <= 3, attempts
    assert not (tmp_path / "kebab-recovery").exists()


def test_server_lost_mid_run_keeps_results_and_upload_publishes_the_same_run(
        tmp_path, target_files):
    target, golden = target_files
    server = start_mlflow_server(root=tmp_path / "server")
    try:
        gate = tmp_path / "gate"
        proc = kebab(run_args(target, golden, server.url), tmp_path, KEBAB_TEST_GATE=str(gate))
        wait_for(Path(str(gate) + ".started"), proc)  # run created, first query in flight
        client = server.client()
        (running,) = client.search_runs([client.get_experiment_by_name("faults").experiment_id])
        assert running.info.status == "RUNNING"
        server.kill()
        gate.touch()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, err
        assert "lost the tracking store while publishing run " + running.info.run_id in err
        assert out == "" and "Traceback" not in err
        found = re.search(r"run `kebab-mlflow upload (\S+)` once it is back", err.replace("\n", ""))
        assert found, err
        recovery = Path(found.group(1))
        assert recovery == (tmp_path / "kebab-recovery" / running.info.run_id).resolve()
        assert {"manifest.json", "per_query.jsonl", "aggregate.json"} <= {
            p.name for p in recovery.iterdir()}
        kept_digest = file_digest(recovery / "per_query.jsonl")

        server.start()  # same port, same backend store and artifact root
        result = runner.invoke(app, ["upload", str(recovery), "--tracking-uri", server.url])
        assert result.exit_code == 0, result.output
        assert f"published run {running.info.run_id}" in result.output
        assert not recovery.exists()
        runs = client.search_runs([running.info.experiment_id])
        assert [r.info.run_id for r in runs] == [running.info.run_id]  # the same run, once
        run = runs[0]
        assert run.info.status == "FINISHED"
        assert run.data.metrics["mrr"] == pytest.approx(11 / 18)
        assert run.data.metrics["hit_at_1"] == pytest.approx(1 / 3)
        assert run.data.metrics["hit_at_3"] == 1.0
        assert run.data.tags["kebab.per_query_sha256"] == kept_digest
        local = client.download_artifacts(run.info.run_id, "per_query.jsonl", str(tmp_path))
        assert file_digest(Path(local)) == kept_digest
        assert len(run.inputs.dataset_inputs) == 1
    finally:
        server.stop()


def test_ctrl_c_against_the_server_ends_the_run_killed(tmp_path, target_files, mlflow_server):
    target, golden = target_files
    gate = tmp_path / "gate"
    args = run_args(target, golden, mlflow_server.url)
    args[args.index("faults")] = "faults-sigint"
    proc = kebab(args, tmp_path, KEBAB_TEST_GATE=str(gate))
    wait_for(Path(str(gate) + ".started"), proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err
    client = mlflow_server.client()
    (run,) = client.search_runs([client.get_experiment_by_name("faults-sigint").experiment_id])
    assert run.info.status == "KILLED"
    assert f"run {run.info.run_id} ended as KILLED" in err
    assert not (tmp_path / "kebab-recovery").exists()


def eight_runs(tmp_path: Path, uri: str | None, experiment: str = "eight") -> list[dict]:
    shared_env = {"KEBAB_CACHE_DIR": str(tmp_path / "shared-cache")}  # one index cache, raced
    procs = []
    for i in range(8):
        args = ["run", "--golden", str(GOLDEN), "--corpus", str(KB), "--experiment", experiment,
                "--run-name", f"r{i}", "--json"]
        if uri:
            args += ["--tracking-uri", uri]
        procs.append(kebab(args, tmp_path, **shared_env))
    replies = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        replies.append(json.loads(out.strip().splitlines()[-1]))
    return replies


def check_eight(client, replies: list[dict], experiment: str = "eight") -> None:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"r{i}" for i in range(8)]
    assert {r.info.run_id for r in runs} == {r["run_id"] for r in replies}
    assert all(r.info.status == "FINISHED" for r in runs)
    # same inputs, same numbers (latencies aside), every artifact there
    for name in ("mrr", "hit_at_5", "ndcg_at_10_doc", "contains_all"):
        assert len({r.data.metrics[name] for r in runs}) == 1, name
    for r in runs:
        assert "per_query.jsonl" in {a.path for a in client.list_artifacts(r.info.run_id)}


def test_eight_runs_at_once_against_the_server(tmp_path, mlflow_server):
    experiment = f"eight-{tmp_path.name}"
    replies = eight_runs(tmp_path, mlflow_server.url, experiment)
    check_eight(mlflow_server.client(), replies, experiment)


def test_eight_runs_at_once_on_a_brand_new_embedded_store(tmp_path):
    from mlflow.tracking import MlflowClient

    replies = eight_runs(tmp_path, None)  # default store: ./mlruns/mlflow.db, created racing
    check_eight(MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"), replies)
