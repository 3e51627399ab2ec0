"""Scale: peak memory and wall time of `kebab-mlflow run` as the golden set grows.

Synthetic golden sets over the SciFact corpus (5,183 abstracts): each query is one sentence
sampled (seeded) from a random document, truncated to 30 words, with ``expected_doc_ids`` =
that document. Each size runs through the real CLI in a fresh process (``run --k 10 --set
chunker.mode=document --json``, per_query.jsonl streamed to disk) against its own SQLite store;
the index cache is warmed first so every size loads the same cached BM25 index. Peak RSS is
the child's own ``ru_maxrss`` (``os.wait4``). The baseline is the 5,000-query run: the goal is
that memory grows far slower than the query count (10x queries -> much less than 10x RSS).

    .venv/bin/python bench/bench_scale.py [--sizes 500,5000,50000] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"
RESULTS = ROOT / "bench" / "results" / "bench_scale.txt"
KEBAB = str(Path(sys.executable).with_name("kebab-mlflow"))
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def synthetic_golden(n: int, seed: int, out: Path) -> Path:
    docs = []
    with gzip.open(SCIFACT, "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            sentences = [s for s in SENTENCE.split(d["text"]) if len(s.split()) >= 6]
            if sentences:
                docs.append((str(d["_id"]), sentences))
    rng = random.Random(seed)
    lines = [f"name: scifact-synthetic-{n}", f"description: seed {seed}", "queries:"]
    for i in range(n):
        doc_id, sentences = docs[rng.randrange(len(docs))]
        words = rng.choice(sentences).split()[:30]
        lines.append(f"  - id: s{i:06d}")
        lines.append(f"    query: {json.dumps(' '.join(words))}")
        lines.append(f"    expected_doc_ids: [{json.dumps(doc_id)}]")
    out.write_text("\n".join(lines) + "\n")
    return out


def run(golden: Path, store: Path, env: dict) -> dict:
    args = [KEBAB, "run", "--golden", str(golden), "--corpus", str(SCIFACT), "--k", "10",
            "--set", "chunker.mode=document", "--tracking-uri",
            f"sqlite:///{store / 'mlflow.db'}", "--json"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{err[-3000:]}")
    reply = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "reply": reply}


def measured(golden: Path, store: Path, env: dict) -> dict:
    """Run in a fresh child and read that child's peak RSS from os.wait4."""
    args = [KEBAB, "run", "--golden", str(golden), "--corpus", str(SCIFACT), "--k", "10",
            "--set", "chunker.mode=document", "--tracking-uri",
            f"sqlite:///{store / 'mlflow.db'}", "--json"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"run failed ({proc.returncode}):\n{err.read()[-3000:]}")
        reply = json.loads(out.read().strip().splitlines()[-1])
    per_query = sum(p.stat().st_size for p in store.rglob("per_query.jsonl"))
    return {"wall_s": wall, "rss_mib": usage.ru_maxrss / 1024, "reply": reply,
            "per_query_mib": per_query / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="500,5000,50000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-scale-"))
    env = {**os.environ, "KEBAB_CACHE_DIR": str(tmp / "cache"),
           "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
    print(f"warming the index cache ({SCIFACT.name}, chunker.mode=document) ...", flush=True)
    run(synthetic_golden(20, args.seed, tmp / "warm.yaml"), tmp / "warm-store", env)
    rows = []
    for n in sizes:
        golden = synthetic_golden(n, args.seed, tmp / f"golden-{n}.yaml")
        r = measured(golden, tmp / f"store-{n}", env)
        t = r["reply"]["timings"]
        rows.append((n, r, t))
        print(f"  {n:>6} queries: {r['wall_s']:.1f} s, peak RSS {r['rss_mib']:.0f} MiB",
              flush=True)
    base = next((row for row in rows if row[0] == 5000), rows[0])
    lines = [
        "bench_scale — `kebab-mlflow run` on synthetic SciFact golden sets "
        f"(seed {args.seed}; k 10; chunker.mode=document; cached BM25 index; fresh process "
        "per size; peak RSS = the child's ru_maxrss)",
        "",
        f"{'queries':>8} {'wall s':>8} {'q/s':>8} {'peak RSS MiB':>13} {'RSS x':>7} "
        f"{'queries x':>10} {'per_query MiB':>14} {'hit_at_10_doc':>14}",
    ]
    for n, r, _t in rows:
        lines.append(
            f"{n:>8} {r['wall_s']:>8.1f} {n / r['wall_s']:>8.0f} {r['rss_mib']:>13.0f} "
            f"{r['rss_mib'] / base[1]['rss_mib']:>7.2f} {n / base[0]:>10.1f} "
            f"{r['per_query_mib']:>14.1f} "
            f"{r['reply']['metrics'].get('hit_at_10_doc', float('nan')):>14.3f}")
    lines += ["", "timings of each run (s, from `run --json`):"]
    for n, _r, t in rows:
        lines.append(f"  {n:>6}: " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))
    lines += ["", f"ratios are against the {base[0]}-query run; the machine is shared, so wall "
              "times are noisy — read the ratios."]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
