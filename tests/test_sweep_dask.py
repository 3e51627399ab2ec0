"""`sweep --executor dask:ADDRESS` (issue 19): real processes on loopback — a `dask scheduler`,
two `dask worker` processes (started here from the venv, killed with the test, and with
PR_SET_PDEATHSIG should pytest itself die) and an `mlflow server` on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, KB, mlflow_client, write
from tests.servers import _die_with_parent, free_port
from tests.test_sweep import _alive, _until

pytest.importorskip("distributed")

SIX_ROWS = """\
primary: bm25
floors: [random_retrieval, single_chunk]
ceiling: oracle
gauge_metrics: [hit_at_5, mrr, ndcg_at_10_doc]
rows:
  - {name: bm25}
  - {name: bm25_k1_1.5, bm25.k1: 1.5}
  - {name: bm25_top3, top_k: 3}
"""  # + random_retrieval, single_chunk, oracle: six rows


@dataclass
class DaskCluster:
    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in [*self.workers, self.scheduler]:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def _spawn(args: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[DaskCluster]:
    """A scheduler and two single-thread workers without nannies (a killed worker stays dead)
    in their own working folder: every path a row gets must be absolute."""
    import distributed

    where = tmp_path / "dask"
    where.mkdir()
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    cluster = DaskCluster(address, _spawn(
        ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--no-dashboard"], where / "scheduler.log", where))
    try:
        for i in range(2):
            cluster.workers.append(_spawn(
                ["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--name", f"w{i}"], where / f"worker{i}.log", where))
        with distributed.Client(address, timeout="120s") as client:
            client.wait_for_workers(2, timeout=600)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_uri(pg_server) -> str:
    return pg_server.url


def _sweep(tmp_path: Path, body: str, name: str) -> Path:
    return write(tmp_path / f"{name}.yaml", f"name: {name}\ngolden: {GOLDEN}\ncorpus: {KB}\n"
                 f"resamples: 500\n{body}")


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=timeout)


def _children(uri: str, experiment: str, parent_id: str) -> list:
    client = mlflow_client(uri)
    exp = client.get_experiment_by_name(experiment)
    return [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("mlflow.parentRunId") == parent_id]


def test_dask_cluster_sweep_nests_children_and_matches_local_bit_for_bit(tmp_path, pg_uri,
                                                                         dask_cluster):
    path = _sweep(tmp_path, SIX_ROWS, "six")
    experiment = f"dask-{tmp_path.name}"
    results, stderr = {}, {}
    for executor in (f"dask:{dask_cluster.address}", "local"):
        done = _cli("sweep", str(path), "--executor", executor, "--jobs", "2",
                    "--tracking-uri", pg_uri, "--experiment", experiment, "--json")
        assert done.returncode == 0, done.stderr
        results[executor], stderr[executor] = json.loads(done.stdout), done.stderr
        assert results[executor]["status"] == "FINISHED"
    remote = results[f"dask:{dask_cluster.address}"]
    assert (f"running 6 row(s) in Dask cluster {dask_cluster.address}"
            in stderr[f"dask:{dask_cluster.address}"])
    # bit for bit: every mean, CI, gap and state of the gauge (JSON floats round-trip exactly)
    assert remote["gauge"] == results["local"]["gauge"]
    for out in results.values():
        children = _children(pg_uri, experiment, out["parent_run_id"])
        assert {c.info.run_id for c in children} == set(out["rows"].values())
        assert len(children) == 6
        assert all(c.info.status == "FINISHED" for c in children)
        assert {c.data.tags["kebab.sweep_row"] for c in children} == set(out["rows"])
    parent = mlflow_client(pg_uri).get_run(remote["parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert {a.path for a in mlflow_client(pg_uri).list_artifacts(remote["parent_run_id"])} >= {
        "distinguishing_power.json", "leaderboard.csv"}


PID_BLOCKING_TARGET = """\
import os, pathlib, time
from kebab_mlflow.records import Hit

HERE = pathlib.Path(__file__).parent
DEADLINE = time.monotonic() + 120  # whatever happens, this process blocks 120 s at most

def search(query, k):
    # the first process to run this row writes its pid and blocks (at most 120 s) until it is
    # killed; a retry elsewhere finds the file naming another process and runs straight through
    started = HERE / "started"
    if not started.exists():  # written whole, then renamed: a reader never sees it empty
        (HERE / "started.part").write_text(str(os.getpid()))
        os.replace(HERE / "started.part", started)
    while started.read_text() == str(os.getpid()) and time.monotonic() < DEADLINE:
        time.sleep(0.05)
    return [Hit("harbor-transit#0", "harbor-transit", 1.0, 1)]
"""


def _started_pid(tmp_path: Path, proc: subprocess.Popen) -> int:
    """The event: the row's worker has written its pid (not merely created the file)."""
    started = tmp_path / "started"
    return int(_until("the row to start on a worker",
                      lambda: started.exists() and started.read_text(), proc=proc))


def test_a_worker_killed_mid_row_the_row_is_retried_and_the_sweep_goes_on(tmp_path, pg_uri,
                                                                          dask_cluster):
    target = write(tmp_path / "blocking.py", PID_BLOCKING_TARGET)
    path = _sweep(tmp_path, f"floors: [random_retrieval]\ngauge_metrics: [hit_at_5]\nrows:\n"
                  f"  - {{name: slow, target: 'python:{target}:search'}}\n", "killed")
    experiment = f"dask-kill-{tmp_path.name}"
    with subprocess.Popen([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                           "sweep", str(path), "--executor", f"dask:{dask_cluster.address}",
                           "--tracking-uri", pg_uri, "--experiment", experiment, "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        worker = _started_pid(tmp_path, proc)
        assert worker in {w.pid for w in dask_cluster.workers}
        os.kill(worker, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    _until("the killed worker to be reaped", lambda: not _alive(worker))
    out = json.loads(stdout)
    assert out["status"] == "FINISHED" and out["failed_rows"] == {}
    children = {c.info.run_id: c for c in _children(pg_uri, experiment, out["parent_run_id"])}
    assert children[out["rows"]["slow"]].info.status == "FINISHED"  # the retry
    # the attempt on the dead worker does not stay RUNNING: it ends FAILED, saying why
    lost = [c for c in children.values() if c.info.run_id not in out["rows"].values()]
    assert [c.info.status for c in lost] == ["FAILED"]
    assert lost[0].data.tags["kebab.sweep_row"] == "slow"
    assert "worker died" in lost[0].data.tags["kebab.sweep_row_lost"]


def test_sigterm_cancels_the_dask_rows_and_ends_every_run_killed(tmp_path, pg_uri,
                                                                 dask_cluster):
    target = write(tmp_path / "blocking.py", PID_BLOCKING_TARGET)
    path = _sweep(tmp_path, f"floors: [random_retrieval]\ngauge_metrics: [hit_at_5]\nrows:\n"
                  f"  - {{name: slow, target: 'python:{target}:search'}}\n", "stopped")
    experiment = f"dask-stop-{tmp_path.name}"
    with subprocess.Popen([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                           "sweep", str(path), "--executor", f"dask:{dask_cluster.address}",
                           "--tracking-uri", pg_uri, "--experiment", experiment],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _until("the row to start on a worker", lambda: (tmp_path / "started").exists(),
               proc=proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 130, stderr
    assert "ended as KILLED" in stderr and "Traceback" not in stderr
    # the running row stopped (it saw the cancel event inside the user's blocking target)
    # before the sweep exited: no worker is still busy with it
    import distributed

    with distributed.Client(dask_cluster.address, timeout="60s") as dask_client:
        assert not any(dask_client.processing().values()), dask_client.processing()
    client = mlflow_client(pg_uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    statuses = {r.info.run_name: r.info.status for r in runs}
    assert statuses["stopped"] == "KILLED" and statuses["slow"] == "KILLED", statuses
    assert "RUNNING" not in statuses.values()
    assert all(w.poll() is None for w in dask_cluster.workers)  # the cluster is not ours


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc), to see that no worker outlived a sweep."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_local_dask_cluster_forks_warm_workers_and_matches_local(tmp_path, store_uri):
    """`--executor dask` starts a LocalCluster whose workers fork from the sweep (warm, with
    the store connections they inherited dropped): same gauge as the local pool, every child
    FINISHED and nested, and no process left once the sweep exits."""
    path = _sweep(tmp_path, SIX_ROWS, "six-local")
    results = {}
    for executor in ("dask", "local"):
        done = _cli("sweep", str(path), "--executor", executor, "--jobs", "2",
                    "--tracking-uri", store_uri, "--experiment", "lc", "--json")
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        results[executor] = json.loads(done.stdout)
    assert results["dask"]["gauge"] == results["local"]["gauge"]
    children = _children(store_uri, "lc", results["dask"]["parent_run_id"])
    assert len(children) == 6 and all(c.info.status == "FINISHED" for c in children)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_ends_a_local_dask_cluster_sweep_killed_and_leaves_no_worker(tmp_path,
                                                                            store_uri):
    target = write(tmp_path / "blocking.py", PID_BLOCKING_TARGET)
    path = _sweep(tmp_path, f"floors: [random_retrieval]\ngauge_metrics: [hit_at_5]\nrows:\n"
                  f"  - {{name: slow, target: 'python:{target}:search'}}\n", "stopped-local")
    with subprocess.Popen([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                           "sweep", str(path), "--executor", "dask", "--jobs", "2",
                           "--tracking-uri", store_uri, "--experiment", "lc-stop"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        started = _started_pid(tmp_path, proc)
        workers = _descendants(proc.pid)
        assert started in workers  # the row runs in a worker
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 130, stderr
    assert "ended as KILLED" in stderr and "Traceback" not in stderr, stderr[-4000:]
    _until("the cluster's workers to exit", lambda: not any(_alive(p) for p in workers))
    client = mlflow_client(store_uri)
    runs = client.search_runs([client.get_experiment_by_name("lc-stop").experiment_id])
    statuses = {r.info.run_name: r.info.status for r in runs}
    assert statuses["stopped-local"] == "KILLED" and statuses["slow"] == "KILLED", statuses
    assert "RUNNING" not in statuses.values()
