"""An HTTP target with 50 ms simulated latency over the SciFact test queries, at several
``--concurrency`` levels.

The target is the shipped example server (fixtures/targets/http_target.py, threaded, standard
library only) in its own process, answering every query with 10 made-up hits after sleeping
LATENCY_MS. Each row drives the SciFact test golden set (the queries judged in
qrels/test.tsv) through ``runner.run_queries`` — the path of ``kebab-mlflow run --target``
minus MLflow — with ``load_target(url, concurrency=c)``. Baselines, side by side:

- ``urllib loop``: a plain serial loop of ``urllib.request`` POSTs (no kebab) — the overhead
  of kebab's target layer and scoring at concurrency 1;
- ``ideal``: n x latency / c, the wall time of perfect parallelism (speed-up = c).

Run: .venv/bin/python bench/bench_http_target.py [LATENCY_MS]
(writes bench/results/bench_http_target.txt)
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import SCIFACT, emit  # noqa: E402 - bench/ is the script's folder

from kebab_mlflow.evaluation.runner import run_queries  # noqa: E402
from kebab_mlflow.golden import GoldenQuery, GoldenSet  # noqa: E402
from kebab_mlflow.targets import load_target  # noqa: E402

CONCURRENCY = (1, 4, 16, 64)
DEPTH = 10


def scifact_test() -> GoldenSet:
    grades: dict[str, dict[str, int]] = {}
    with (SCIFACT / "qrels" / "test.tsv").open() as fh:
        next(fh)
        for line in fh:
            qid, doc, score = line.rstrip("\n").split("\t")
            grades.setdefault(qid, {})[doc] = int(score)
    texts = {}
    with (SCIFACT / "queries.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            texts[row["_id"]] = row["text"]
    queries = tuple(GoldenQuery(id=qid, query=texts[qid], expected_doc_ids=grades[qid])
                    for qid in sorted(grades, key=int))
    return GoldenSet(name="scifact-test", queries=queries)


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "fixtures/targets/http_target.py"),
                             "--port", "0", "--latency-ms", str(latency_ms),
                             "--fake-hits", str(DEPTH)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()  # "listening on http://127.0.0.1:PORT/search"
    return proc, line.rsplit(" ", 1)[-1]


def urllib_loop(url: str, golden: GoldenSet) -> float:
    start = time.perf_counter()
    for q in golden.queries:
        body = json.dumps({"query": q.query, "k": DEPTH, "ask": False}).encode()
        req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
            json.loads(resp.read())
    return time.perf_counter() - start


def main() -> None:
    latency_ms = float(sys.argv[1]) if len(sys.argv) > 1 else 50.0
    golden = scifact_test()
    n = len(golden)
    proc, url = start_server(latency_ms)
    rows = []
    try:
        load_target(url)  # warm up: versions call, first connection
        loop_s = urllib_loop(url, golden)
        with tempfile.TemporaryDirectory() as tmp:
            for c in CONCURRENCY:
                target = load_target(url, concurrency=c)
                start = time.perf_counter()
                outcome = run_queries(target, golden, DEPTH, [1, 3, 5, 10],
                                      Path(tmp) / f"per_query_{c}.jsonl")
                wall = time.perf_counter() - start
                errors = outcome.aggregate.overall["error_rate"]
                rows.append((c, wall, outcome.aggregate.latency, errors))
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    base = rows[0][1]
    lines = [
        f"HTTP target, {latency_ms:g} ms simulated latency, SciFact test: {n} queries, k={DEPTH}",
        f"python {platform.python_version()}, {platform.machine()}; shared machine: read the "
        "ratios, not the seconds",
        "",
        f"{'run':<22}{'wall s':>9}{'queries/s':>11}{'speed-up':>10}{'x ideal':>9}"
        f"{'p50 ms':>9}{'p95 ms':>9}{'errors':>8}",
        f"{'urllib loop (serial)':<22}{loop_s:>9.2f}{n / loop_s:>11.1f}{base / loop_s:>10.2f}"
        f"{'':>9}{'':>9}{'':>9}{'':>8}",
    ]
    for c, wall, lat, errors in rows:
        ideal = n * latency_ms / 1000.0 / c
        lines.append(f"{'kebab concurrency ' + str(c):<22}{wall:>9.2f}{n / wall:>11.1f}"
                     f"{base / wall:>10.2f}{ideal / wall:>9.2f}{lat['p50_ms']:>9.1f}"
                     f"{lat['p95_ms']:>9.1f}{errors:>8.3f}")
    lines += [
        "",
        "speed-up = wall(concurrency 1) / wall; x ideal = (n x latency / c) / wall (1.0 = "
        "perfect parallelism).",
        f"kebab at concurrency 1 vs a bare urllib loop: {base / loop_s:.3f}x the time.",
        "Queries go to the target in the runner's batches of 64, so 64 is the most that can "
        "be in flight.",
    ]
    emit("bench_http_target", "\n".join(lines))


if __name__ == "__main__":
    main()
