"""What `run --traces failures|all` adds to `kebab-mlflow run` on SciFact test (300 queries,
k=100, BM25, cached index, embedded SQLite store).

Runs the real CLI in fresh interpreters, side by side on one store: a warm-up, then rounds of
``--traces none``, ``failures`` and ``all`` (interleaved, so load on the machine hits them
alike), and reports the median wall time of each, the traces each logged (counted in the
store) and traces/s of the added time. Goals: ``failures`` adds <= 25% to the run, ``all``
costs <= 3x the run without traces.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from common import ROOT, SCIFACT_CORPUS, WORK, emit, load_line, scifact_golden

ROUNDS = int(os.environ.get("KEBAB_BENCH_ROUNDS", "3"))


def one_run(store: str, traces: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(scifact_golden()),
           "--corpus", str(SCIFACT_CORPUS), "--set", "chunker.mode=document", "--k", "100",
           "--tracking-uri", store, "--traces", traces, "--json"]
    env = {**os.environ, "KEBAB_CACHE_DIR": str(WORK / "cache")}
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start, json.loads(out.stdout)["run_id"]


def traces_of(store: str, run_id: str) -> int:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    experiment = client.get_run(run_id).info.experiment_id
    return len(client.search_traces(locations=[experiment], run_id=run_id, max_results=1000))


def main() -> None:
    load = os.getloadavg()[0]
    store = f"sqlite:///{WORK / 'traces-store' / 'mlflow.db'}"
    one_run(store, "none")  # warm: index cache and store exist afterwards
    walls: dict[str, list[float]] = {"none": [], "failures": [], "all": []}
    counts: dict[str, int] = {}
    for _ in range(ROUNDS):
        for mode in walls:
            wall, run_id = one_run(store, mode)
            walls[mode].append(wall)
            counts[mode] = traces_of(store, run_id)
    base = statistics.median(walls["none"])
    lines = [f"bench_traces: kebab-mlflow run --traces on SciFact test (300 queries, k=100, "
             f"BM25, cached index, SQLite), median of {ROUNDS} interleaved rounds",
             f"{'traces':<10}{'wall s':>9}{'added s':>9}{'vs none':>9}{'traces':>8}"
             f"{'traces/s':>10}"]
    for mode, values in walls.items():
        wall = statistics.median(values)
        added = wall - base
        rate = counts[mode] / added if mode != "none" and added > 0 else float("nan")
        lines.append(f"{mode:<10}{wall:>9.2f}{added:>9.2f}{wall / base:>8.2f}x"
                     f"{counts[mode]:>8}{rate:>10.1f}")
    fail = statistics.median(walls["failures"]) / base - 1
    full = statistics.median(walls["all"]) / base
    lines.append(f"failures adds {fail:.0%} (goal <= 25%); all costs {full:.2f}x (goal <= 3x)")
    lines.append(load_line(load))
    emit("bench_traces", "\n".join(lines))


if __name__ == "__main__":
    main()
