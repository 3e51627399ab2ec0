"""Sweep wall time: a five-row SciFact sweep with ``--jobs 2`` against ``--jobs 1``.

Rows: BM25 (primary), BM25 k1=1.2 (variant), random_retrieval and single_chunk (floors), oracle
(ceiling); chunker.mode=document (SciFact's ground truth is per document), k=10, the 300
queries of the test split. Each sweep is the real CLI (``kebab-mlflow sweep FILE --json``) in
a fresh process, against one SQLite store created beforehand; the index cache is warmed first
so both settings load the same cached indexes. Runs alternate (1, 2, 1, 2, ...) so background
load hits both alike; the table reports each run and the ratio of the medians. The last run's
gauge is printed too (the README's SciFact figures).

    .venv/bin/python bench/bench_sweep.py [--repeats 2] [--cold]

``--cold`` empties the index cache before every sweep instead (a first sweep over a new corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
RESULTS = ROOT / "bench" / "results" / "bench_sweep.txt"

SWEEP = """\
name: scifact-test
golden: {golden}
corpus: {corpus}
k: 10
set: {{chunker.mode: document}}
primary: bm25
floors: [random_retrieval, single_chunk]
ceiling: oracle
gauge_metrics: [hit_at_10_doc, mrr_doc, ndcg_at_10_doc]
resamples: 10000
seed: 0
rows:
  - {{name: bm25, preset: naive_baseline}}
  - {{name: bm25_k1_1.2, preset: naive_baseline, bm25.k1: 1.2}}
"""  # + the implicit rows random_retrieval, single_chunk (floors) and oracle (ceiling)


def cli() -> list[str]:
    return [sys.executable, "-c", "from kebab_mlflow.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cold", action="store_true",
                        help="empty the index cache before every sweep (a first sweep over a "
                             "new corpus: each BM25 row builds its index)")
    args = parser.parse_args()

    from kebab_mlflow.config import build_config
    from kebab_mlflow.importers.beir import import_beir
    from kebab_mlflow.pipeline.reference import build_pipeline
    from kebab_mlflow.sweep.outputs import GAUGE_COLUMNS, gauge_rows
    from kebab_mlflow.sweep.spec import load_sweep

    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    env = {**os.environ, "KEBAB_CACHE_DIR": str(work / "cache")}
    os.environ["KEBAB_CACHE_DIR"] = env["KEBAB_CACHE_DIR"]
    golden = work / "scifact.yaml"
    import_beir(SCIFACT, "test", golden, None)
    sweep_file = work / "sweep.yaml"
    sweep_file.write_text(SWEEP.format(golden=golden, corpus=SCIFACT / "corpus.jsonl.gz"))
    spec = load_sweep(sweep_file)
    for row in spec.rows:  # warm the index cache (chunks, BM25 weights) for both settings
        build_pipeline(build_config(row.preset, dict(row.overrides)), spec.corpus)
    uri = f"sqlite:///{work / 'store' / 'mlflow.db'}"
    subprocess.run([*cli(), "runs", "--tracking-uri", uri], env=env, cwd=work,
                   capture_output=True, check=False)  # creates the store and its tables

    timings: dict[int, list[float]] = {1: [], 2: []}
    last: dict = {}
    loads: list[float] = []
    for _ in range(args.repeats):
        for jobs in (1, 2):
            if args.cold:
                shutil.rmtree(work / "cache", ignore_errors=True)
            t0 = time.perf_counter()
            proc = subprocess.run([*cli(), "sweep", str(sweep_file), "--jobs", str(jobs),
                                   "--tracking-uri", uri, "--json"], env=env, cwd=work,
                                  capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                sys.exit(f"sweep --jobs {jobs} failed ({proc.returncode}):\n{proc.stderr}")
            timings[jobs].append(wall)
            loads.append(os.getloadavg()[0])
            last = json.loads(proc.stdout)
            print(f"  --jobs {jobs}: {wall:6.1f} s (load average {loads[-1]:.1f})", flush=True)

    med = {j: statistics.median(t) for j, t in timings.items()}
    lines = [f"five-row SciFact sweep ({len(spec.query_ids)} test queries, rows: "
             f"{', '.join(r.name for r in spec.rows)}), {os.cpu_count()} CPUs, "
             f"{args.repeats} alternating repeat(s), "
             f"{'index cache emptied before each sweep' if args.cold else 'warm index cache'}, "
             "whole CLI process; "
             f"1-minute load average during the runs {min(loads):.1f}-{max(loads):.1f} "
             "(other work on the machine)",
             "",
             "| setting | runs (s) | median (s) |",
             "|---|---|---|"]
    for jobs in (1, 2):
        lines.append(f"| --jobs {jobs} | {', '.join(f'{t:.1f}' for t in timings[jobs])} | "
                     f"{med[jobs]:.1f} |")
    lines += ["", f"wall-time ratio --jobs 2 / --jobs 1 = {med[2] / med[1]:.2f} (goal <= 0.65)",
              "", f"gauge of the last run (overall: {last['signal_state']}):", "",
              "| " + " | ".join(GAUGE_COLUMNS) + " |", "|" + "---|" * len(GAUGE_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in gauge_rows(last["gauge"])]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    (RESULTS.with_name("bench_sweep_cold.txt") if args.cold else RESULTS).write_text(text)


if __name__ == "__main__":
    main()
