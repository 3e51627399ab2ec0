"""Nothing lost at any moment (issue 18 items 1, 2): SIGINT/SIGTERM at named checkpoints over a
run's life ends its run KILLED (or creates none) and removes its work folder or keeps it for
`upload`; SIGKILL during the creation of a brand-new SQLite store never leaves it unusable.

Each process is signalled once it touched its checkpoint's marker — the event, not a guess of
how long the work takes. The full matrix (every point x both signals) is bench/bench_faults.py;
the tests run the points of the window after the query loop, where runs used to stay RUNNING.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from kebab_mlflow.tracking.store import Tracker
from tests import faultpoints


@pytest.mark.parametrize("point", ["prepared", "run-created", "params-logged", "queries-done",
                                   "outputs-written", "manifest-written", "published"])
def test_a_signal_at_any_moment_ends_the_run_killed_and_cleans_up(tmp_path, store_uri, point):
    Tracker(store_uri)  # the store exists; its creation is tested below
    started = {}
    for name, signum in faultpoints.SIGNALS.items():
        folder = tmp_path / f"{point}-{name}"
        started[name] = (*faultpoints.start_run(point, folder, store_uri), folder, signum)
    for proc, marker, _, signum in started.values():
        faultpoints.wait_for(marker, proc)
        proc.send_signal(signum)
    outcomes = {name: faultpoints.outcome(proc, folder, store_uri)
                for name, (proc, _, folder, _) in started.items()}  # every process ended
    for name, got in outcomes.items():
        assert faultpoints.problems(point, got) == [], (name, got.stderr[-1500:])


def test_sigkill_while_a_new_store_is_created_never_bricks_it(tmp_path):
    outcomes = faultpoints.kill_during_creation(tmp_path)
    assert {code for _, _, code in outcomes} == {-signal.SIGKILL}, outcomes  # each one killed
    broken = {at: why for at, uri, _ in outcomes if (why := faultpoints.store_usable(uri))}
    assert broken == {}
    assert not list(tmp_path.rglob(".mlflow.db.creating-*"))  # the killed creators' strays


def test_a_half_created_store_without_runs_is_set_aside_and_rebuilt(tmp_path, caplog):
    db = tmp_path / "store" / "mlflow.db"
    uri = faultpoints.build_half_created_store(db)
    assert "already exists" in _mlflow_refusal(uri)  # what MLflow alone says of it
    assert faultpoints.store_usable(uri) is None
    (aside,) = db.parent.glob("mlflow.db.broken-*")
    assert aside.stat().st_size > 0
    assert any("half-created" in r.getMessage() for r in caplog.records)
    assert faultpoints.store_usable(uri) is None  # the rebuilt store opens as it is
    assert len(list(tmp_path.rglob("*.broken-*"))) == 1


def _mlflow_refusal(uri: str) -> str:
    from mlflow.tracking import MlflowClient

    from kebab_mlflow.tracking.store import _forget_engine

    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - whichever error MLflow raises
        return str(exc)
    finally:
        _forget_engine(uri)
    return ""


SWEEP_CASES = {p.name: p for p in faultpoints.SWEEP_POINTS}


@pytest.mark.parametrize("name", ["parent-created", "2-rows-publish/j2"])
def test_a_signal_at_any_moment_of_a_sweep_ends_its_runs_killed(tmp_path, store_uri, name):
    """While the parent is created (its id not yet known: it stayed RUNNING before the signal
    was held there), and in two rows of --jobs 2 publishing at once. The 17 points of a sweep
    (each a 3-row sweep, ~20 s) are bench/bench_faults.py --only signals."""
    point = SWEEP_CASES[name]
    Tracker(store_uri)
    started = {}
    for signame, signum in faultpoints.SIGNALS.items():
        folder = tmp_path / f"{name.replace('/', '-')}-{signame}"
        started[signame] = (*faultpoints.start_sweep(point, folder, store_uri), folder, signum)
    for proc, marker, _, signum in started.values():
        faultpoints.wait_for(marker, proc, count=point.reached_by)
        proc.send_signal(signum)
    for signame, (proc, marker, folder, _) in started.items():
        got = faultpoints.sweep_outcome(proc, folder, store_uri, marker)
        assert faultpoints.sweep_problems(point, got) == [], (signame, got.stderr[-1500:])


def test_a_signal_while_the_tune_parent_is_created_ends_it_killed(tmp_path, store_uri):
    """The parent existed before its id was known: it stayed RUNNING (SIGTERM even killed the
    process outright, exit -15) until the signal was held there."""
    Tracker(store_uri)
    started = {}
    for signame, signum in faultpoints.SIGNALS.items():
        folder = tmp_path / f"tune-{signame}"
        started[signame] = (*faultpoints.start_tune("run-created", folder, store_uri), folder,
                            signum)
    for proc, marker, _, signum in started.values():
        faultpoints.wait_for(marker, proc)
        proc.send_signal(signum)
    for signame, (proc, _, folder, _) in started.items():
        got = faultpoints.outcome(proc, folder, store_uri)
        assert (got.returncode, got.statuses) == (130, ["KILLED"]), (signame, got.stderr[-1500:])
        assert "Traceback" not in got.stderr and not got.work_left


# A target that signals itself from inside a finalizer, the moment the issue saw swallowed:
# Python runs the handler there, and an exception leaving a finalizer (or a gc callback) is
# printed as "Exception ignored in ..." and dropped. Deterministic: the signal is sent from the
# finalizer itself, on the second query.
FINALIZER_SIGNAL_TARGET = """\
import os, signal
from kebab_mlflow.records import Hit

calls = []

class Signals:
    def __del__(self):
        os.kill(os.getpid(), signal.{signame})
        calls.append("signalled")  # bytecode after the kill: the handler runs in here

def search(query, k):
    calls.append(query)
    if len(calls) == 2:
        Signals()  # dropped at once: its finalizer runs here
    return [Hit("harbor-transit#0", "harbor-transit", 1.0, 1)]
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_inside_a_finalizer_still_ends_the_run_killed(tmp_path, store_uri, signame):
    import subprocess
    import sys

    from tests.conftest import mlflow_client, write

    target = write(tmp_path / "finalizer_target.py",
                   FINALIZER_SIGNAL_TARGET.format(signame=signame))
    done = subprocess.run(
        [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(faultpoints.GOLDEN),
         "--target", f"python:{target}:search", "--tracking-uri", store_uri,
         "--experiment", "finalizer"], capture_output=True, text=True, timeout=600,
        cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(faultpoints.ROOT)},
        preexec_fn=faultpoints.sigint_at_default)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
    assert "ended as KILLED" in done.stderr
    client = mlflow_client(store_uri)
    runs = client.search_runs([client.get_experiment_by_name("finalizer").experiment_id])
    assert [r.info.status for r in runs] == ["KILLED"]


def test_a_signal_while_compare_records_its_verdict_leaves_all_of_it(tmp_path, store_uri):
    """Issue 28 item 6: SIGTERM/SIGINT once compare logged its artifacts is held until the
    verdict tags are in too (they are written last): report, compare.json and verdict, or
    none of them."""
    import subprocess
    import sys

    import yaml

    from kebab_mlflow.app.run import RunOptions, execute
    from tests.conftest import KB, mlflow_client

    data = yaml.safe_load(faultpoints.GOLDEN.read_text())
    data["queries"] = data["queries"][:3]
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(data, sort_keys=False))
    ids = [execute(RunOptions(golden=str(small), corpus=str(KB), tracking_uri=store_uri,
                              run_name=name, experiment="verdicts")).run_id
           for name in ("base", "cand-SIGTERM", "cand-SIGINT")]
    started = []
    for signame, candidate in zip(faultpoints.SIGNALS, ids[1:], strict=True):
        marker = tmp_path / f"{signame}.reached"
        env = {**__import__("os").environ, "PYTHONPATH": str(faultpoints.ROOT),
               "KEBAB_FAULT_POINT": f"compare-artifacts-logged={marker}"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "kebab_mlflow.cli", "compare", ids[0], candidate,
             "--tracking-uri", store_uri, "--experiment", "verdicts"], cwd=tmp_path, env=env,
            text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=faultpoints.sigint_at_default)
        started.append((proc, marker, faultpoints.SIGNALS[signame], candidate))
    for proc, marker, signum, _ in started:
        faultpoints.wait_for(marker, proc)
        proc.send_signal(signum)
    client = mlflow_client(store_uri)
    for proc, _, _, candidate in started:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 130, err[-2000:]
        assert "Traceback" not in err
        run = client.get_run(candidate)
        assert {a.path for a in client.list_artifacts(candidate, "compare")} == {
            "compare/report.md", "compare/compare.json"}
        assert run.data.tags["kebab.compared_to"] == ids[0] and "kebab.verdict" in run.data.tags


def test_a_run_stopped_while_its_plots_are_drawn_uploads_them_whole(tmp_path, store_uri):
    """SIGTERM once the manifest is written, the plot process perhaps still drawing (they
    overlap since issue 32): the process is ended before the folder is kept, and `upload`
    logs every plot the manifest lists, the bytes drawn here, and no half-written file."""
    import json

    from kebab_mlflow.app.run import upload
    from kebab_mlflow.evaluation import plots
    from tests.conftest import mlflow_client

    Tracker(store_uri)
    folder = tmp_path / "plots"
    proc, marker = faultpoints.start_run("manifest-written", folder, store_uri)
    faultpoints.wait_for(marker, proc)
    proc.send_signal(signal.SIGTERM)
    got = faultpoints.outcome(proc, folder, store_uri)
    assert faultpoints.problems("manifest-written", got) == [], got.stderr[-1500:]
    (kept,) = (folder / "kebab-recovery").iterdir()
    jobs = json.loads((kept / "manifest.json").read_text())["plots"]
    assert [kind for kind, _ in jobs][:1] == ["metric_vs_k"]
    for kind, args in jobs:  # what upload must log: drawn here from the manifest's jobs
        plots.draw(kind, {**args, "path": str(tmp_path / args["path"])})
    run_id = upload(kept)
    client = mlflow_client(store_uri)
    assert client.get_run(run_id).info.status == "FINISHED"
    logged = {a.path for a in client.list_artifacts(run_id)}
    assert not any(name.startswith(".") for name in logged)
    for _, args in jobs:
        png = Path(client.download_artifacts(run_id, args["path"], str(tmp_path / "logged")))
        assert png.read_bytes() == (tmp_path / args["path"]).read_bytes()
