"""The fault matrix shared by tests/test_signals.py and bench/bench_faults.py: a `run` process
stopped at a named checkpoint (``KEBAB_FAULT_POINT``, kebab_mlflow/interrupts.py) and signalled
there once it touched the checkpoint's marker, then the store and the folders it left checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden_queries.yaml"
TARGET = "python:fixtures.targets.python_target:TinyPipeline"

# checkpoint -> (status the run must end with, None: no run; results kept for `upload`)
RUN_POINTS: dict[str, tuple[str | None, bool]] = {
    "prepared": (None, False),
    "run-started": ("KILLED", False),
    "params-logged": ("KILLED", False),
    "batch-start": ("KILLED", False),
    "queries-done": ("KILLED", False),
    "outputs-written": ("KILLED", False),
    "manifest-written": ("KILLED", True),
    "metrics-logged": ("KILLED", True),
    "artifacts-logged": ("KILLED", True),
    "published": ("FINISHED", False),
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


@dataclass(frozen=True)
class Outcome:
    returncode: int
    statuses: list[str]
    work_left: list[str]  # work folders left in the cache
    recovery: list[str]  # folders kept in kebab-recovery/
    stderr: str


def start_run(point: str, folder: Path, store_uri: str) -> tuple[subprocess.Popen, Path]:
    """A `run` of the fixtures in its own folder (cwd, cache, experiment) that stops at
    ``point``; (the process, the marker it touches there)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache"),
           "KEBAB_FAULT_POINT": f"{point}={marker}"}
    args = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(GOLDEN),
            "--target", TARGET, "--tracking-uri", store_uri, "--experiment", folder.name]
    proc = subprocess.Popen(args, cwd=folder, env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def wait_for(marker: Path, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    """Until the process reached its checkpoint (the event), or fail if it ended first."""
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"ended before {marker}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker} not reached in {timeout_s} s")
        time.sleep(0.02)


def outcome(proc: subprocess.Popen, folder: Path, store_uri: str) -> Outcome:
    _, err = proc.communicate(timeout=300)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store_uri)
    exp = client.get_experiment_by_name(folder.name)
    statuses = [] if exp is None else [r.info.status
                                       for r in client.search_runs([exp.experiment_id])]
    work = folder / "cache" / "work"
    recovery = folder / "kebab-recovery"
    return Outcome(proc.returncode, statuses,
                   sorted(p.name for p in work.iterdir()) if work.is_dir() else [],
                   sorted(p.name for p in recovery.iterdir()) if recovery.is_dir() else [],
                   err)


def problems(point: str, got: Outcome) -> list[str]:
    """What is wrong with the outcome of a signal at ``point`` (empty: nothing)."""
    status, kept = RUN_POINTS[point]
    wrong = []
    if got.returncode != 130:
        wrong.append(f"exit {got.returncode}, not 130")
    if got.statuses != ([status] if status else []):
        wrong.append(f"runs {got.statuses}, expected {[status] if status else []}")
    if got.work_left:
        wrong.append(f"work folder left: {got.work_left}")
    if bool(got.recovery) != kept:
        wrong.append(f"recovery folders {got.recovery}, expected {'one' if kept else 'none'}")
    if "Traceback" in got.stderr:
        wrong.append("a traceback on stderr")
    return wrong


# SIGKILL while a brand-new SQLite store is created: the moment is "a file of the store folder
# reached N bytes" (MLflow grows it to ~950 kB over its migrations), an event, not a guess.
CREATION_POINTS = (1, 28_000, 100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000,
                   800_000, 900_000)
CREATE = "from kebab_mlflow.tracking.store import Tracker; Tracker({uri!r})"
# MLflow alone, migrating in place (as kebab-mlflow did before issue 18)
CREATE_IN_PLACE = ("from mlflow.tracking import MlflowClient; "
                   "MlflowClient(tracking_uri={uri!r}).search_experiments()")


def start_store_creation(folder: Path, code: str = CREATE) -> tuple[subprocess.Popen, str]:
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code.format(uri=uri)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, uri


def largest_file(folder: Path) -> int:
    sizes = [0]
    for f in folder.glob("*"):
        try:
            sizes.append(f.stat().st_size if not f.name.endswith("-journal") else 0)
        except FileNotFoundError:  # renamed or removed while we looked
            pass
    return max(sizes)


def kill_at_sizes(folder: Path, sizes: tuple[int, ...],
                  code: str = CREATE) -> list[tuple[int, str]]:
    """One store creation per size, each SIGKILLed once a store file reached that size (all
    started at once); (size, uri) of those killed in time — one that finished first is left out
    (it is not a kill during creation)."""
    started = []
    for size in sizes:
        sub = folder / f"kill-at-{size}"
        sub.mkdir(parents=True)
        started.append((size, sub, *start_store_creation(sub, code)))
    killed, pending = [], list(started)
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for item in list(pending):
            size, sub, proc, uri = item
            if proc.poll() is not None:
                pending.remove(item)
            elif largest_file(sub) >= size:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed.append((size, uri))
                pending.remove(item)
        time.sleep(0.002)
    for _, _, proc, _ in pending:
        proc.kill()
        proc.wait()
    return killed


def store_usable(uri: str) -> str | None:
    """None when a run can be made in the store, else why not."""
    from kebab_mlflow.errors import KebabError
    from kebab_mlflow.tracking.store import Tracker

    try:
        tracker = Tracker(uri)
        run_id = tracker.start_run(tracker.experiment_id("after-kill"), "after", {})
        tracker.end_run(run_id)
        return None if tracker.get_run(run_id).status == "FINISHED" else "run not FINISHED"
    except KebabError as exc:
        return str(exc)[:300]
