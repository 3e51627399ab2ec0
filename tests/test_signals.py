"""Nothing lost at any moment (issue 18 items 1, 2): SIGINT/SIGTERM at named checkpoints over a
run's life ends its run KILLED (or creates none) and removes its work folder or keeps it for
`upload`; SIGKILL during the creation of a brand-new SQLite store never leaves it unusable.

Each process is signalled once it touched its checkpoint's marker — the event, not a guess of
how long the work takes. The full matrix (every point x both signals) is bench/bench_faults.py;
the tests run the points of the window after the query loop, where runs used to stay RUNNING.
"""

from __future__ import annotations

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
    killed = faultpoints.kill_at_sizes(tmp_path, faultpoints.CREATION_POINTS)
    assert len(killed) >= 8, killed  # nearly every creation was caught mid-way
    broken = {size: why for size, uri in killed if (why := faultpoints.store_usable(uri))}
    assert broken == {}


def test_a_half_created_store_without_runs_is_set_aside_and_rebuilt(tmp_path, caplog):
    (size, uri), = faultpoints.kill_at_sizes(tmp_path, (300_000,), faultpoints.CREATE_IN_PLACE)
    assert faultpoints.store_usable(uri) is None
    (aside,) = tmp_path.glob("kill-at-300000/mlflow.db.broken-*")
    assert aside.stat().st_size > 0
    assert any("half-created" in r.getMessage() for r in caplog.records)
    assert faultpoints.store_usable(uri) is None  # the rebuilt store opens as it is
    assert len(list(tmp_path.rglob("*.broken-*"))) == 1


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
