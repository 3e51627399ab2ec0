"""Sweep wall time: eight SciFact rows of several seconds each, run with ``--jobs 1``,
``--jobs 2`` (local processes) and ``--executor dask --jobs 2`` (a LocalCluster the sweep starts),
plus the five-row fixture-size SciFact sweep's ``--jobs 2 / --jobs 1`` ratio for reference.

The long sweep: the 809 SciFact train queries against the whole-document index at depth 1000
(the per-query records, 1000 hits each, and the metrics at every cut-off are what make a row
cost ~5 s on an idle core; the 300 test queries cost ~1.8 s, too little for the fixed costs of
a process and a cluster to fade): BM25 (primary), six BM25 variants (k1, b) and the random
floor. Each sweep is the real CLI
(``kebab-mlflow sweep FILE --json``) in a fresh process against one SQLite store created
beforehand; the index cache (``KEBAB_CACHE_DIR``, which the Dask workers inherit) is warmed
first. Settings alternate within each repeat so background load hits them alike; the table
reports each run and the ratio of the medians. Per-row overhead of Dask: what a row costs beyond
its own work, ``(jobs × wall − Σ row seconds) / rows`` for each setting, the difference between
the Dask and the local figure being what scheduling, shipping the task and its reply, and the
cluster's start cost a row.

    .venv/bin/python bench/bench_sweep.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SCIFACT  # noqa: E402 - bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "bench_sweep.txt"

LONG = """\
name: scifact-train-depth-1000
golden: {golden}
corpus: {corpus}
k: 1000
set: {{chunker.mode: document}}
primary: bm25
floors: [random_retrieval]
gauge_metrics: [mrr_doc, ndcg_at_10_doc]
resamples: 2000
seed: 0
rows:
  - {{name: bm25}}
  - {{name: bm25_k1_0.6, bm25.k1: 0.6}}
  - {{name: bm25_k1_0.9, bm25.k1: 0.9}}
  - {{name: bm25_k1_1.5, bm25.k1: 1.5}}
  - {{name: bm25_b_0.3, bm25.b: 0.3}}
  - {{name: bm25_b_0.5, bm25.b: 0.5}}
  - {{name: bm25_b_0.9, bm25.b: 0.9}}
"""  # + the implicit floor row random_retrieval: eight rows

SHORT = """\
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
"""  # + random_retrieval, single_chunk (floors) and oracle (ceiling): five rows

LONG_SETTINGS = (("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]),
                 ("--executor dask --jobs 2", ["--executor", "dask", "--jobs", "2"]))
SHORT_SETTINGS = LONG_SETTINGS[:2]


def cli() -> list[str]:
    return [sys.executable, "-c", "from kebab_mlflow.cli import main; main()"]


def sweep(path: Path, args: list[str], uri: str, env: dict, cwd: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([*cli(), "sweep", str(path), *args, "--tracking-uri", uri, "--json"],
                          env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"sweep {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall, json.loads(proc.stdout)


def warm(path: Path) -> None:
    from kebab_mlflow.config import build_config
    from kebab_mlflow.pipeline.reference import build_pipeline
    from kebab_mlflow.sweep.spec import load_sweep

    spec = load_sweep(path)
    for row in spec.rows:  # the index cache (chunks, BM25 weights) for every setting
        build_pipeline(build_config(row.preset, dict(row.overrides)), spec.corpus)


def measure(settings, path: Path, repeats: int, uri: str, env: dict, work: Path, loads: list):
    walls: dict[str, list[float]] = {name: [] for name, _ in settings}
    row_s: dict[str, list[float]] = {name: [] for name, _ in settings}
    last: dict = {}
    for _ in range(repeats):
        for name, args in settings:
            wall, out = sweep(path, args, uri, env, work)
            walls[name].append(wall)
            row_s[name].append(sum(out["row_seconds"].values()))
            loads.append(os.getloadavg()[0])
            last = out
            print(f"  {path.stem} {name}: {wall:6.1f} s, rows {row_s[name][-1]:.1f} s "
                  f"(load average {loads[-1]:.1f})", flush=True)
    return walls, row_s, last


def table(walls: dict, row_s: dict, n_rows: int, jobs_of: dict) -> list[str]:
    base = statistics.median(walls["--jobs 1"])
    lines = ["| setting | runs (s) | median (s) | ratio to --jobs 1 | Σ row work (s) | "
             "overhead per row (s) |", "|---|---|---|---|---|---|"]
    for name, runs in walls.items():
        med = statistics.median(runs)
        work = statistics.median(row_s[name])
        overhead = (jobs_of[name] * med - work) / n_rows
        lines.append(f"| {name} | {', '.join(f'{t:.1f}' for t in runs)} | {med:.1f} | "
                     f"{med / base:.2f} | {work:.1f} | {overhead:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    from kebab_mlflow.importers.beir import import_beir
    from kebab_mlflow.stats.gauge import GaugeMetric
    from kebab_mlflow.sweep.outputs import GAUGE_COLUMNS, gauge_rows

    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    env = {**os.environ, "KEBAB_CACHE_DIR": str(work / "cache")}
    os.environ["KEBAB_CACHE_DIR"] = env["KEBAB_CACHE_DIR"]
    golden, train = work / "scifact.yaml", work / "scifact-train.yaml"
    import_beir(SCIFACT, "test", golden, None)
    import_beir(SCIFACT, "train", train, None)
    paths = {}
    for name, text in (("long", LONG), ("short", SHORT)):
        paths[name] = work / f"{name}.yaml"
        paths[name].write_text(text.format(golden=train if name == "long" else golden,
                                           corpus=SCIFACT / "corpus.jsonl.gz"))
        warm(paths[name])
    uri = f"sqlite:///{work / 'store' / 'mlflow.db'}"
    subprocess.run([*cli(), "runs", "--tracking-uri", uri], env=env, cwd=work,
                   capture_output=True, check=False)  # creates the store and its tables

    loads: list[float] = []
    jobs_of = {"--jobs 1": 1, "--jobs 2": 2, "--executor dask --jobs 2": 2}
    walls, row_s, last = measure(LONG_SETTINGS, paths["long"], args.repeats, uri, env, work,
                                 loads)
    s_walls, s_row_s, _ = measure(SHORT_SETTINGS, paths["short"], args.repeats, uri, env, work,
                                  loads)
    lines = [f"eight-row SciFact sweep at depth 1000 ({', '.join(last['rows'])}; 809 train "
             f"queries), {os.cpu_count()} CPUs, {args.repeats} alternating repeat(s), warm "
             "index cache, whole CLI process; 1-minute load average during the runs "
             f"{min(loads):.1f}-{max(loads):.1f} (other work on the machine)", "",
             *table(walls, row_s, 8, jobs_of), "",
             "goals: --jobs 2 <= 0.60, --executor dask --jobs 2 <= 0.65 of --jobs 1", "",
             "five-row SciFact sweep at depth 10 (the fixture-size reference):", "",
             *table(s_walls, s_row_s, 5, jobs_of), "",
             f"gauge of the last eight-row run (overall: {last['signal_state']}):", "",
             "| " + " | ".join(GAUGE_COLUMNS) + " |", "|" + "---|" * len(GAUGE_COLUMNS)]
    gauge = {m: GaugeMetric.from_dict(block) for m, block in last["gauge"].items()}
    lines += ["| " + " | ".join(r) + " |" for r in gauge_rows(gauge)]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
