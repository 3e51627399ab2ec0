"""Metrics a run logs to MLflow, before (every breakdown value: what ``--log-breakdowns`` still
does) and after (the headline metrics only, breakdowns in breakdowns.json), on the fixture set
(`make run`) and on SciFact test (300 queries, k=100), with the wall time of each.

Each configuration runs through the real CLI in a fresh interpreter, interleaved over rounds
on one store (warm index cache), and the metric count is read back from the store.
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


def one_run(store: str, data: list[str], breakdowns: bool) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "kebab_mlflow.cli", "run", *data, "--tracking-uri", store,
           "--json", *(["--log-breakdowns"] if breakdowns else [])]
    env = {**os.environ, "KEBAB_CACHE_DIR": str(WORK / "cache")}
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    wall = time.perf_counter() - start
    from mlflow.tracking import MlflowClient

    run = MlflowClient(store).get_run(json.loads(out.stdout)["run_id"])
    return wall, len(run.data.metrics)


def main() -> None:
    load = os.getloadavg()[0]
    store = f"sqlite:///{WORK / 'layout-store' / 'mlflow.db'}"
    sets = {"fixtures (43 queries)": [],
            "SciFact test (300 q, k=100)": ["--golden", str(scifact_golden()), "--corpus",
                                           str(SCIFACT_CORPUS), "--set", "chunker.mode=document",
                                           "--k", "100"]}
    for data in sets.values():
        one_run(store, data, False)  # warm the index cache and the store
    walls: dict[tuple[str, bool], list[float]] = {}
    counts: dict[tuple[str, bool], int] = {}
    for _ in range(ROUNDS):
        for name, data in sets.items():
            for breakdowns in (True, False):
                wall, n = one_run(store, data, breakdowns)
                walls.setdefault((name, breakdowns), []).append(wall)
                counts[(name, breakdowns)] = n
    lines = [f"bench_metric_layout: metrics logged per run, before (every breakdown, now "
             f"--log-breakdowns) and after (headline only); median wall of {ROUNDS} rounds",
             f"{'golden set':<30}{'before':>8}{'after':>7}{'wall before':>13}{'wall after':>12}"]
    for name in sets:
        before, after = (name, True), (name, False)
        lines.append(f"{name:<30}{counts[before]:>8}{counts[after]:>7}"
                     f"{statistics.median(walls[before]):>12.2f}s"
                     f"{statistics.median(walls[after]):>11.2f}s")
    lines.append(load_line(load))
    emit("bench_metric_layout", "\n".join(lines))


if __name__ == "__main__":
    main()
