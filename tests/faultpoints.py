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
    "run-created": ("KILLED", False),  # created, its id not yet returned (the signal is held)
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


def sigint_at_default() -> None:  # in the child, between fork and exec
    """A process started from a shell's background job (`cmd &`) inherits SIGINT ignored, and
    Python keeps it so (no KeyboardInterrupt): the matrix would measure that, not the tool. A
    terminal's Ctrl-C reaches a foreground process whose SIGINT is at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(point: str, folder: Path, store_uri: str) -> tuple[subprocess.Popen, Path]:
    """A `run` of the fixtures in its own folder (cwd, cache, experiment) that stops at
    ``point``; (the process, the marker it touches there)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache"),
           "KEBAB_FAULT_POINT": f"{point}={marker}"}
    args = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(GOLDEN),
            "--target", TARGET, "--tracking-uri", store_uri, "--experiment", folder.name]
    proc = subprocess.Popen(args, cwd=folder, env=env, text=True, preexec_fn=sigint_at_default,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def reached(marker: Path) -> list[int]:
    """The pids of the processes that reached the checkpoint (one line each)."""
    try:
        return [int(line) for line in marker.read_text().split()]
    except (FileNotFoundError, ValueError):  # not yet, or a line being written
        return []


def wait_for(marker: Path, proc: subprocess.Popen, timeout_s: float = 300,
             count: int = 1) -> None:
    """Until ``count`` processes reached the checkpoint (the event), or fail if the one
    started ended first."""
    deadline = time.monotonic() + timeout_s
    while len(reached(marker)) < count:
        if proc.poll() is not None:
            raise AssertionError(f"ended before {marker}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker} not reached {count}x in {timeout_s} s")
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


# --------------------------------------------------------------------------- sweeps

# A sweep of three rows over the fixtures (jobs 1 runs them slowest first: the implicit
# random_retrieval floor, then bm25, then bm25_k1); few resamples keep the gauge quick.
SWEEP = f"""\
golden: {GOLDEN}
corpus: {ROOT / "fixtures" / "kb"}
floors: [random_retrieval]
gauge_metrics: [hit_at_5, mrr]
resamples: 200
rows:
  - {{name: bm25, preset: naive_baseline}}
  - {{name: bm25_k1, preset: naive_baseline, set: {{bm25.k1: 1.5}}}}
"""
DONE = ["FINISHED"] * 3


@dataclass(frozen=True)
class SweepPoint:
    """A moment of a sweep's life and what a signal there must leave."""

    name: str  # shown in the matrix
    checkpoint: str
    jobs: int
    parent: str | None  # the parent's status (None: no parent run)
    children: list[str]  # the child runs' statuses, sorted
    recovery: int = 0  # row folders kept for `upload`
    reached_by: int = 1  # processes that must reach the checkpoint (rows in flight)


SWEEP_POINTS = [
    SweepPoint("store-opened", "sweep-store-opened", 1, None, []),
    SweepPoint("parent-created", "run-created", 1, "KILLED", []),
    SweepPoint("parent-logged", "sweep-parent-logged", 1, "KILLED", []),
    SweepPoint("workers-started/j2", "sweep-workers-started", 2, "KILLED", []),
    SweepPoint("row-prepared", "prepared", 1, "KILLED", []),
    SweepPoint("row-queries", "batch-start", 1, "KILLED", ["KILLED"]),
    SweepPoint("2-rows-queries/j2", "batch-start", 2, "KILLED", ["KILLED"] * 2, 0, 2),
    SweepPoint("row-outputs", "outputs-written", 1, "KILLED", ["KILLED"]),
    SweepPoint("row-publishing", "manifest-written", 1, "KILLED", ["KILLED"], 1),
    SweepPoint("2-rows-publish/j2", "manifest-written", 2, "KILLED", ["KILLED"] * 2, 2, 2),
    SweepPoint("row-published", "published", 1, "KILLED", ["FINISHED"]),
    SweepPoint("between-rows", "sweep-row-done", 1, "KILLED", ["FINISHED"]),
    SweepPoint("rows-done", "sweep-rows-done", 1, "KILLED", DONE),
    SweepPoint("gauged", "sweep-gauged", 1, "KILLED", DONE),
    SweepPoint("outputs-written", "sweep-outputs-written", 1, "KILLED", DONE),
    SweepPoint("final-update", "sweep-artifacts-logged", 1, "KILLED", DONE),
    SweepPoint("published", "sweep-published", 1, "FINISHED", DONE),
]


@dataclass(frozen=True)
class SweepOutcome:
    returncode: int
    parent: list[str]  # statuses of runs without a parent (one, or none)
    children: list[str]  # sorted
    work_left: list[str]
    recovery: list[str]
    workers_alive: list[int]  # processes that reached the checkpoint still alive (not us)
    stderr: str


def start_sweep(point: SweepPoint, folder: Path, store_uri: str
                ) -> tuple[subprocess.Popen, Path]:
    """`sweep` of :data:`SWEEP` in its own folder (cwd, cache, experiment) that stops at the
    point's checkpoint; (the process, the marker)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.yaml").write_text(SWEEP)
    marker = folder / "reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache"),
           "KEBAB_FAULT_POINT": f"{point.checkpoint}={marker}"}
    args = [sys.executable, "-m", "kebab_mlflow.cli", "sweep", str(folder / "sweep.yaml"),
            "--jobs", str(point.jobs), "--tracking-uri", store_uri, "--experiment", folder.name]
    proc = subprocess.Popen(args, cwd=folder, env=env, text=True, preexec_fn=sigint_at_default,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def sweep_outcome(proc: subprocess.Popen, folder: Path, store_uri: str,
                  marker: Path) -> SweepOutcome:
    _, err = proc.communicate(timeout=300)
    from mlflow.tracking import MlflowClient

    others = [pid for pid in reached(marker) if pid != proc.pid]
    deadline = time.monotonic() + 300  # a worker ends once its row is KILLED: wait for that
    while any(_alive(pid) for pid in others) and time.monotonic() < deadline:
        time.sleep(0.05)
    client = MlflowClient(tracking_uri=store_uri)
    exp = client.get_experiment_by_name(folder.name)
    runs = [] if exp is None else client.search_runs([exp.experiment_id])
    parent = [r.info.status for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = sorted(r.info.status for r in runs if "mlflow.parentRunId" in r.data.tags)
    work = folder / "cache" / "work"
    recovery = folder / "kebab-recovery"
    return SweepOutcome(proc.returncode, parent, children,
                        sorted(p.name for p in work.iterdir()) if work.is_dir() else [],
                        sorted(p.name for p in recovery.iterdir()) if recovery.is_dir() else [],
                        [pid for pid in others if _alive(pid)], err)


def sweep_problems(point: SweepPoint, got: SweepOutcome) -> list[str]:
    """What is wrong with the outcome of a signal at ``point`` (empty: nothing)."""
    wrong = []
    if got.returncode != 130:
        wrong.append(f"exit {got.returncode}, not 130")
    if got.parent != ([point.parent] if point.parent else []):
        wrong.append(f"parent {got.parent}, expected {point.parent}")
    if got.children != point.children:
        wrong.append(f"children {got.children}, expected {point.children}")
    if got.work_left:
        wrong.append(f"work folder left: {got.work_left}")
    if len(got.recovery) != point.recovery:
        wrong.append(f"recovery folders {got.recovery}, expected {point.recovery}")
    if got.workers_alive:
        wrong.append(f"workers still alive: {got.workers_alive}")
    said = {"FINISHED": "had FINISHED", "KILLED": "ended as KILLED",
            None: "interrupted before the sweep started"}[point.parent]
    if said not in got.stderr:
        wrong.append(f"stderr does not say {said!r}")
    if "Traceback" in got.stderr:
        wrong.append("a traceback on stderr")
    return wrong


def start_tune(point: str, folder: Path, store_uri: str) -> tuple[subprocess.Popen, Path]:
    """`tune` of fixtures/tune.yaml (2 trials) in its own folder, stopping at ``point``."""
    folder.mkdir(parents=True, exist_ok=True)
    fixtures = ROOT / "fixtures"
    spec = (fixtures / "tune.yaml").read_text().replace("trials: 12", "trials: 2")
    for key, path in (("train", "tune/train.yaml"), ("test", "tune/test.yaml"),
                      ("corpus", "kb")):
        spec = spec.replace(f"\n{key}: {path}\n", f"\n{key}: {fixtures / path}\n")
    (folder / "tune.yaml").write_text(spec)
    marker = folder / "reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache"),
           "KEBAB_FAULT_POINT": f"{point}={marker}"}
    args = [sys.executable, "-m", "kebab_mlflow.cli", "tune", str(folder / "tune.yaml"),
            "--tracking-uri", store_uri, "--experiment", folder.name]
    proc = subprocess.Popen(args, cwd=folder, env=env, text=True, preexec_fn=sigint_at_default,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


# SIGKILL while a brand-new SQLite store is created. The moment is "MLflow's SQL statement
# number N of the creation is about to run", counted by an SQLAlchemy event in the creating
# process itself: the same statement on every machine, idle or loaded (a file size polled from
# outside could be passed over while the creator ran on). CREATION_POINTS are fractions of the
# statements a creation runs (counted first, the same way), from the first to the last one.
CREATION_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
CREATE = """\
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
seen, kill_at = 0, int(sys.argv[2])
@event.listens_for(Engine, "before_cursor_execute")
def _count(*_):
    global seen
    seen += 1
    if seen == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
from kebab_mlflow.tracking.store import Tracker
Tracker(sys.argv[1])
print(seen)
"""


def _creation(folder: Path, kill_at: int) -> tuple[subprocess.Popen, str]:
    folder.mkdir(parents=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CREATE, uri, str(kill_at)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, uri


def creation_statements(folder: Path) -> int:
    """How many SQL statements creating a brand-new store runs (no kill)."""
    proc, _ = _creation(folder / "count", 0)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, proc.returncode
    return int(out)


def kill_during_creation(folder: Path, points: tuple[float, ...] = CREATION_POINTS,
                         ) -> list[tuple[int, str, int]]:
    """One store creation per point, each SIGKILLed just before its statement number
    ``1 + point × (total - 1)`` (all started at once); (statement, uri, exit code) each."""
    total = creation_statements(folder)
    started = []
    for point in points:
        at = 1 + round(point * (total - 1))
        started.append((at, *_creation(folder / f"kill-at-{at}", at)))
    outcomes = []
    for at, proc, uri in started:
        proc.communicate(timeout=600)
        outcomes.append((at, uri, proc.returncode))
    return outcomes


# A store MLflow began to migrate in place (as kebab-mlflow did before issue 18) and that was
# killed after a migration's DDL but before its version stamp: the datasets table exists while
# alembic_version still names the revision before it. MLflow then refuses it for good ("table
# datasets already exists"). Built step by step, so the test does not hope a kill lands there.
DATASETS_REVISION, BEFORE_DATASETS_REVISION = "7f2a7d5fae7d", "3500859a5d39"


def build_half_created_store(db: Path) -> str:
    """A half-migrated SQLite store at ``db`` holding no run; its URI."""
    import sqlalchemy
    from alembic import command
    from mlflow.store.db.utils import _get_alembic_config
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase

    uri = f"sqlite:///{db}"
    db.parent.mkdir(parents=True, exist_ok=True)
    engine = sqlalchemy.create_engine(uri)
    try:
        InitialBase.metadata.create_all(engine)
        config = _get_alembic_config(uri)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, DATASETS_REVISION)
        with engine.begin() as connection:  # the stamp the kill did not let alembic write
            connection.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = "
                                               f"'{BEFORE_DATASETS_REVISION}'"))
    finally:
        engine.dispose()
    return uri


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
