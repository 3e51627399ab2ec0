"""Where the wall time of `kebab-mlflow run` goes on SciFact test (300 queries, index cached).

Runs the real CLI in a fresh interpreter twice (the first builds the index cache and the
store) and reports the second: interpreter + imports, index load, pipeline, metrics, the
MLflow import, opening the store and the MLflow logging calls. Goal: logging calls ≤ 0.5 s and
≤ 10% of the rest of the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from common import ROOT, SCIFACT_CORPUS, WORK, emit, scifact_golden


def one_run(store: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden", str(scifact_golden()),
           "--corpus", str(SCIFACT_CORPUS), "--set", "chunker.mode=document", "--k", "100",
           "--tracking-uri", store, "--json"]
    env = {**os.environ, "KEBAB_CACHE_DIR": str(WORK / "cache")}
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start, json.loads(out.stdout)


def main() -> None:
    store = f"sqlite:///{WORK / 'run-store' / 'mlflow.db'}"
    one_run(store)  # warm: index cache and store exist afterwards
    wall, data = one_run(store)
    t = data["timings"]
    accounted = sum(t.values())
    interp = wall - accounted
    rest = wall - t["mlflow_logging_s"]
    rows = [("interpreter, imports, CLI, provenance", interp),
            ("golden set + corpus + index load", t["index_s"]),
            ("pipeline (300 queries)", t["pipeline_s"]),
            ("metrics + aggregates", t["metrics_s"]),
            ("report.md, aggregate.json, plots", t["outputs_s"]),
            ("import mlflow", t["mlflow_import_s"]),
            ("open store + experiment", t["mlflow_store_open_s"]),
            ("MLflow logging calls", t["mlflow_logging_s"])]
    lines = ["bench_run: kebab-mlflow run on SciFact test (300 queries, k=100, BM25, cached index)",
             f"{'part':<36}{'seconds':>9}{'share':>8}"]
    lines += [f"{name:<36}{sec:>9.3f}{sec / wall:>8.1%}" for name, sec in rows]
    lines += [f"{'total wall':<36}{wall:>9.3f}",
              f"metrics logged: {len(data['metrics'])}",
              f"MLflow logging calls / rest of run: {t['mlflow_logging_s'] / rest:.1%} "
              f"(goal <= 10%), absolute {t['mlflow_logging_s']:.3f} s (goal <= 0.5 s)"]
    emit("bench_run", "\n".join(lines))


if __name__ == "__main__":
    main()
