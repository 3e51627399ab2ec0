"""What a user waits for, against the floor every MLflow tool pays: ``python -c "import mlflow"``.

Three commands, each a fresh interpreter as a user starts it, timed the same way (bench/common.py
``alternate``: one warm-up each, then the three take turns; medians):

- the floor: ``python -c "import mlflow"``;
- for reference, not a goal: importing MLflow's SQLAlchemy store module as well, which any
  command that opens a SQLite store pays (the share of the compare goal it already takes);
- a cached ``kebab-mlflow run`` on SciFact test (300 queries, k 100, BM25, document chunks; the
  index cache and the store exist from the warm-up), ``--json`` so nothing is drawn on a terminal;
- ``kebab-mlflow compare`` of two such runs (``--no-log``: reading, not recording).

Goals (issue 32): run ≤ 2.0× the floor, compare ≤ 1.3×. The machine may be shared: the ratios,
taken in one run with the sides alternating, are the figures; the load average is printed.

With ``--old REF`` the run and the compare are timed with git REF's code too (``before``, its
kebab_mlflow first on PYTHONPATH), in the same alternation.

Run: .venv/bin/python bench/bench_startup.py [--repeats 5] [--old REF]
(writes bench/results/bench_startup.txt)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import SCIFACT_CORPUS, WORK, alternate, emit, git_code, load_line, scifact_golden

STORE_MODULE = "mlflow.store.tracking.sqlalchemy_store"  # imports mlflow first
STORE_FLOOR = "import mlflow + its SQLAlchemy store module"
FLOOR = 'python -c "import mlflow"'
RUN = "kebab-mlflow run (cached, SciFact 300 q)"
COMPARE = "kebab-mlflow compare (2 × 300 q, --no-log)"


def command(args: list[str], env: dict[str, str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True, env=env,
                          cwd=WORK).stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old", default=None,
                        help="also time git REF's code (`before`) beside this checkout's")
    parsed = parser.parse_args()
    repeats = parsed.repeats
    start_load = os.getloadavg()[0]
    WORK.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{WORK / 'startup-store' / 'mlflow.db'}"
    env = {**os.environ, "KEBAB_CACHE_DIR": str(WORK / "cache")}
    cli = [sys.executable, "-m", "kebab_mlflow.cli"]
    run = [*cli, "run", "--golden", str(scifact_golden()), "--corpus", str(SCIFACT_CORPUS),
           "--set", "chunker.mode=document", "--k", "100", "--tracking-uri", store, "--json",
           "--experiment", "startup"]
    ids = [json.loads(command(run, env))["run_id"] for _ in range(2)]
    compare = [*cli, "compare", *ids, "--tracking-uri", store, "--experiment", "startup",
               "--no-log"]

    def compare_ok(env: dict[str, str]) -> None:  # exit 1 (Regressed/Inconclusive): a verdict
        proc = subprocess.run(compare, capture_output=True, text=True, env=env, cwd=WORK)
        if proc.returncode not in (0, 1):
            raise RuntimeError(proc.stderr[-2000:])

    sides = {
        FLOOR: lambda: command([sys.executable, "-c", "import mlflow"], env),
        # not a goal: the floor of anything that opens a SQLite store through MLflow
        STORE_FLOOR: lambda: command([sys.executable, "-c", f"import {STORE_MODULE}"], env),
        RUN: lambda: command(run, env),
        COMPARE: lambda: compare_ok(env),
    }
    if parsed.old:
        old, commit = git_code(parsed.old, WORK / "old-code")
        before = {**env, "PYTHONPATH": str(old)}
        sides[f"{RUN} ({commit})"] = lambda: command(run, before)
        sides[f"{COMPARE} ({commit})"] = lambda: compare_ok(before)
    timings = alternate(sides, repeats)
    floor = timings[FLOOR].median
    goals = {RUN: 2.0, COMPARE: 1.3}
    lines = [f"bench_startup: fresh interpreters, median of {repeats} after a warm-up, sides "
             f"alternating; {load_line(start_load)}",
             f"{'command':54}{'median s':>10}{'best s':>9}{'ratio':>8}{'goal':>7}"]
    for name, t in timings.items():
        goal = goals.get(name)
        lines.append(f"{name:54}{t.median:>10.3f}{t.best:>9.3f}{t.median / floor:>8.2f}"
                     f"{(f'≤ {goal}' if goal else ''):>7}"
                     + ("" if goal is None else
                        ("  met" if t.median / floor <= goal else "  NOT met")))
    emit("bench_startup", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
