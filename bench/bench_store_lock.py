"""A SQLite store held under ``BEGIN EXCLUSIVE`` for 25 s by another process while `run`
starts (issue 28 item 2): with the default wait (KEBAB_STORE_LOCK_WAIT_S=120) the run waits it
out and FINISHES; with a 5 s wait it exits 2 naming the lock. Either way the store and its
earlier run are untouched (no ``.broken-*`` file, nothing rebuilt).

    .venv/bin/python bench/bench_store_lock.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, WORK, emit, load_line  # noqa: E402
from tests import faultpoints  # noqa: E402

HOLD_S = 25
HOLD = f"""\
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep({HOLD_S})
con.execute("ROLLBACK")
"""


def _case(folder: Path, wait: str) -> str:
    db = folder / "store" / "mlflow.db"
    uri = f"sqlite:///{db}"
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(uri)
    before = tracker.start_run(tracker.experiment_id("locked"), "before", {})
    tracker.end_run(before)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache"),
           "KEBAB_STORE_LOCK_WAIT_S": wait}
    run = subprocess.Popen([sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                            str(faultpoints.GOLDEN), "--corpus", str(ROOT / "fixtures" / "kb"),
                            "--tracking-uri", uri, "--experiment", "locked"], cwd=folder,
                           env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           text=True)
    assert run.stderr is not None
    seen = []
    for line in run.stderr:  # the lock is taken as the run reaches for the store
        seen.append(line)
        if "connecting to the tracking store" in line:
            break
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    t0 = time.monotonic()
    rest = run.stderr.read()
    run.wait(timeout=1800)
    took = time.monotonic() - t0
    holder.wait(timeout=600)
    holder.stdout.close()
    run.stderr.close()
    said = [line for line in ("".join(seen) + rest).splitlines()
            if "locked" in line or line.startswith(("error", "run "))]
    statuses = sorted(r.status for r in Tracker(uri).find_runs(
        [Tracker(uri).experiment_id("locked")]))
    aside = sorted(p.name for p in db.parent.glob("*.broken-*"))
    return (f"wait {wait:>3} s: run exit {run.returncode} {took:.0f} s after the lock was "
            f"taken; runs {statuses}; "
            f"set aside: {aside or 'none'}; the earlier run "
            f"{Tracker(uri).get_run(before).status}\n    " + "\n    ".join(said[-3:]))


def main() -> None:
    start_load = os.getloadavg()[0]
    base = WORK / f"store-lock-{int(time.time())}"
    lines = [f"store held under BEGIN EXCLUSIVE for {HOLD_S} s while `run` starts"]
    try:
        for wait in ("120", "5"):
            lines.append(_case(base / f"wait-{wait}", wait))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    lines.append(load_line(start_load))
    emit("bench_store_lock", "\n".join(lines))


if __name__ == "__main__":
    main()
