"""What a user waits for, against the floor every MLflow tool pays: ``python -c "import mlflow"``.

Three commands, each a fresh interpreter as a user starts it, timed the same way (bench/common.py
``alternate``: one warm-up each, then the three take turns; medians):

- the floor: ``python -c "import mlflow"``;
- a cached ``kebab-mlflow run`` on SciFact test (300 queries, k 100, BM25, document chunks; the
  index cache and the store exist from the warm-up), ``--json`` so nothing is drawn on a terminal;
- ``kebab-mlflow compare`` of two such runs (``--no-log``: reading, not recording).

Goals (issue 32): run ≤ 2.0× the floor, compare ≤ 1.3×. The machine may be shared: the ratios,
taken in one run with the sides alternating, are the figures; the load average is printed.

Run: .venv/bin/python bench/bench_startup.py [--repeats 5]  (writes bench/results/bench_startup.txt)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import SCIFACT_CORPUS, WORK, alternate, emit, load_line, scifact_golden


def command(args: list[str], env: dict[str, str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True, env=env,
                          cwd=WORK).stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
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

    def compare_ok() -> None:  # exit 1 (Regressed/Inconclusive) is a verdict, not a failure
        proc = subprocess.run(compare, capture_output=True, text=True, env=env, cwd=WORK)
        if proc.returncode not in (0, 1):
            raise RuntimeError(proc.stderr[-2000:])

    timings = alternate({
        'python -c "import mlflow"': lambda: command([sys.executable, "-c", "import mlflow"],
                                                     env),
        "kebab-mlflow run (cached, SciFact 300 q)": lambda: command(run, env),
        "kebab-mlflow compare (2 × 300 q, --no-log)": compare_ok,
    }, repeats)
    floor = timings['python -c "import mlflow"'].median
    goals = {"kebab-mlflow run (cached, SciFact 300 q)": 2.0,
             "kebab-mlflow compare (2 × 300 q, --no-log)": 1.3}
    lines = [f"bench_startup: fresh interpreters, median of {repeats} after a warm-up, sides "
             f"alternating; {load_line(start_load)}",
             f"{'command':46}{'median s':>10}{'best s':>9}{'ratio':>8}{'goal':>7}"]
    for name, t in timings.items():
        goal = goals.get(name)
        lines.append(f"{name:46}{t.median:>10.3f}{t.best:>9.3f}{t.median / floor:>8.2f}"
                     f"{(f'≤ {goal}' if goal else ''):>7}"
                     + ("" if goal is None else
                        ("  met" if t.median / floor <= goal else "  NOT met")))
    emit("bench_startup", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
