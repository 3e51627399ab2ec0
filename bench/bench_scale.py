"""Scale: wall time and peak memory of `validate` and `run` as the golden set grows.

Three parts (fresh process each; peak RSS = the child's own ``ru_maxrss`` from ``os.wait4``):

- ``validate``: synthetic golden sets (12-word query, two expected doc ids), ``kebab-mlflow
  validate FILE`` at each size (default 200,000 and 1,000,000);
- ``run-file``: a synthetic golden set and a TREC run file of 100 hits per query written by
  this script (pyarrow's CSV writer), then ``kebab-mlflow run --target run:FILE --k 100 --json``
  against a fresh SQLite store; the breakdown is the run's own ``timings`` (``index_s`` =
  loading the golden set and reading + sorting the run file);
- ``pipeline``: the reference pipeline on SciFact, below.

    .venv/bin/python bench/bench_scale.py validate [--sizes 200000,1000000]
    .venv/bin/python bench/bench_scale.py run-file [--sizes 100000,300000,1000000]
    .venv/bin/python bench/bench_scale.py pipeline [--sizes 500,5000,50000]
    .venv/bin/python bench/bench_scale.py compare [--sizes 10000,100000] [--old REF]
    .venv/bin/python bench/bench_scale.py rescore [--sizes 10000,100000] [--old REF]

``compare``: two runs of ``run --target run:FILE --k 100`` per size (the synthetic set and run
files of seeds 0 and 1) in one SQLite store, then ``kebab-mlflow compare r0 r1 --format json
--no-log`` in a fresh process, by default (bounds for unjudged hits: both runs rescored) and
with ``--unjudged off``: the code of git REF (``before``, default ``main``; ``git archive``
into a temporary folder put first on PYTHONPATH) and of this checkout (``after``), alternated,
the same command and the same store; peak RSS from ``os.wait4``, a watchdog kills a child past
``--limit-mib`` (its largest RSS seen is reported). Both sides' JSON outputs are compared byte
for byte. Then where the time goes in ``after``, in one process: import + open the store,
load (download, digest, compact read), compare_runs, the bounds, render.

``rescore``: one such run (seed 0) and ``kebab-mlflow rescore r0 --golden EDITED --json``
with the code of REF (``before``) and of this checkout (``after``), the same way; the derived
runs' ``per_query.jsonl`` digests are compared.

``pipeline``: peak memory and wall time of `kebab-mlflow run` as the golden set grows.

Synthetic golden sets over the SciFact corpus (5,183 abstracts): each query is one sentence
sampled (seeded) from a random document, truncated to 30 words, with ``expected_doc_ids`` =
that document. Each size runs through the real CLI in a fresh process (``run --k 10 --set
chunker.mode=document --json``, per_query.jsonl streamed to disk) against its own SQLite store;
the index cache is warmed first so every size loads the same cached BM25 index. Peak RSS is
the child's own ``ru_maxrss`` (``os.wait4``). The baseline is the 5,000-query run: the goal is
that memory grows far slower than the query count (10x queries -> much less than 10x RSS).

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

from common import SCIFACT as SCIFACT_DIR  # noqa: E402 - bench/ is the script's folder
from common import git_code

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = SCIFACT_DIR / "corpus.jsonl.gz"
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


def pipeline_main(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-scale-"))
    env = bench_env(tmp)
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


# --------------------------------------------------------------------------- synthetic sets

N_DOCS = 1_000_000
HITS = 100


def synthetic_set(n: int, seed: int, out: Path) -> Path:
    """n queries: id, a 12-word text, two expected doc ids (one usually in the run file)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    with out.open("w", encoding="utf-8") as fh:
        fh.write(f"name: synthetic-{n}\ndescription: seed {seed}\nqueries:\n")
        for i in range(n):
            base = _base(i)
            fh.write(f"  - id: s{i:07d}\n    query: \"{' '.join(rng.choices(words, k=12))}\"\n"
                     f"    expected_doc_ids: [d{base + rng.randrange(2 * HITS)}, "
                     f"d{rng.randrange(N_DOCS)}]\n")
    return out


def _base(i: int) -> int:
    return (i * 7919) % (N_DOCS - 2 * HITS)


def synthetic_run_file(n: int, seed: int, out: Path) -> Path:
    """A TREC run: per query 100 distinct docs from a window of 200, scores descending."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    rng = np.random.default_rng(seed)
    options = pa_csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    with pa_csv.CSVWriter(str(out), pa.schema([("qid", pa.string()), ("q0", pa.string()),
                                               ("docid", pa.string()), ("rank", pa.int64()),
                                               ("score", pa.float64()), ("tag", pa.string())]),
                          write_options=options) as writer:
        for start in range(0, n, 10_000):
            rows = min(10_000, n - start)
            queries = np.arange(start, start + rows)
            bases = (queries * 7919) % (N_DOCS - 2 * HITS)
            offsets = np.argsort(rng.random((rows, 2 * HITS)), axis=1)[:, :HITS]
            docs = (bases[:, None] + offsets).ravel()
            ranks = np.tile(np.arange(1, HITS + 1), rows)
            qid = pc.binary_join_element_wise(
                "s", pc.utf8_lpad(pc.cast(pa.array(np.repeat(queries, HITS)), pa.string()), 7,
                                  "0"), "")
            writer.write_table(pa.table({
                "qid": qid, "q0": pa.array(["Q0"] * docs.size),
                "docid": pc.binary_join_element_wise(
                    "d", pc.cast(pa.array(docs), pa.string()), ""),
                "rank": pa.array(ranks), "score": pa.array((HITS + 1 - ranks) / 10.0),
                "tag": pa.array(["synthetic"] * docs.size)}))
    return out


def child(args: list[str], env: dict) -> tuple[float, float, str, float]:
    """(wall s, peak RSS MiB, stdout, CPU s = user + system) of a fresh process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{args[1]} failed ({code}):\n{err.read()[-3000:]}")
        return wall, usage.ru_maxrss / 1024, out.read(), usage.ru_utime + usage.ru_stime


def validate_main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-validate-"))
    lines = ["bench_scale validate — `kebab-mlflow validate FILE` on synthetic golden sets "
             f"(seed {args.seed}; fresh process each; load average {os.getloadavg()[0]:.1f})",
             "", f"{'queries':>10} {'file MiB':>9} {'wall s':>8} {'CPU s':>7} "
             f"{'peak RSS MiB':>13}"]
    for n in [int(s) for s in args.sizes.split(",")]:
        golden = synthetic_set(n, args.seed, tmp / f"g{n}.yaml")
        wall, rss, _, cpu = child([KEBAB, "validate", str(golden)], dict(os.environ))
        lines.append(f"{n:>10,} {golden.stat().st_size / 2**20:>9.1f} {wall:>8.1f} {cpu:>7.1f} "
                     f"{rss:>13.0f}")
        print(lines[-1], flush=True)
        golden.unlink()
    lines += ["", f"load average {os.getloadavg()[0]:.1f} at the end; goal: 200,000 queries in "
              "< 10 s and < 500 MB (CPU s is the steadier figure on a shared machine)"]
    _write("bench_scale_validate", lines)
    shutil.rmtree(tmp, ignore_errors=True)


def run_file_main(args: argparse.Namespace) -> None:
    """With ``--old REF``: REF's code and this checkout's on the same files, alternated."""
    if args.old:
        tmp, code, commit = before_and_after(args, "runfile")
        how = sides_words(args, commit, "fresh process and SQLite store each, alternated")
    else:
        tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-runfile-", dir=args.tmp))
        code = {"after": bench_env(tmp)}
        how = f"fresh process and SQLite store each; {load_words()}"
    lines = ["bench_scale run-file — `kebab-mlflow run --target run:FILE --k 100 --json` on "
             f"synthetic sets of 100 hits a query (seed {args.seed}; {how})", "",
             f"{'queries':>10} {'code':>7} {'run MiB':>8} {'wall s':>8} {'CPU s':>7} "
             f"{'peak RSS MiB':>13} {'per_query MiB':>14} {'ndcg_at_10_doc':>15}"]
    breakdown = []
    for n in [int(s) for s in args.sizes.split(",")]:
        golden = synthetic_set(n, args.seed, tmp / f"g{n}.yaml")
        run_file = synthetic_run_file(n, args.seed, tmp / f"run{n}.trec")
        for side, env in code.items():
            store = tmp / f"store-{n}-{side}"
            wall, rss, out, cpu = child(
                [KEBAB, "run", "--golden", str(golden), "--target", f"run:{run_file}", "--k",
                 "100", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--json"], env)
            reply = json.loads(out.strip().splitlines()[-1])
            per_query = sum(p.stat().st_size for p in store.rglob("per_query.jsonl"))
            lines.append(f"{n:>10,} {side:>7} {run_file.stat().st_size / 2**20:>8.0f} "
                         f"{wall:>8.1f} {cpu:>7.1f} {rss:>13.0f} {per_query / 2**20:>14.0f} "
                         f"{reply['metrics'].get('ndcg_at_10_doc', float('nan')):>15.4f}")
            print(lines[-1], flush=True)
            breakdown.append(f"  {n:>9,} {side}: " + ", ".join(
                f"{k} {v:.1f}" for k, v in reply["timings"].items()))
            shutil.rmtree(store, ignore_errors=True)
        for p in (golden, run_file):
            p.unlink()
    lines += ["", "where the time goes (s, the run's own `timings`):", *breakdown]
    _write("bench_scale_run_file", lines)
    shutil.rmtree(tmp, ignore_errors=True)


def watched(args: list[str], env: dict, limit_mib: float, cwd: Path) -> dict:
    """(wall, CPU, peak RSS MiB, stdout, killed) of a fresh process, killed past the limit."""
    import threading

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        # cwd: not the checkout, whose kebab_mlflow `python -c` would put before PYTHONPATH
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, text=True, cwd=cwd)
        seen = {"rss": 0.0, "killed": False}

        def watch() -> None:
            status = Path(f"/proc/{proc.pid}/status")
            while proc.poll() is None:
                try:
                    kb = next(int(line.split()[1]) for line in status.read_text().splitlines()
                              if line.startswith("VmRSS:"))
                except (OSError, StopIteration, ValueError):
                    break
                seen["rss"] = max(seen["rss"], kb / 1024)
                if kb / 1024 > limit_mib:
                    seen["killed"] = True
                    proc.kill()
                    break
                time.sleep(0.1)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        thread.join()
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1) and not seen["killed"]:
            raise SystemExit(f"compare failed ({proc.returncode}):\n{err.read()[-3000:]}")
        return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                "rss": max(usage.ru_maxrss / 1024, seen["rss"]), "out": out.read(),
                "killed": seen["killed"]}


PHASES = """
import sys, time, json
t0 = time.perf_counter()
from kebab_mlflow import comparison as cmp
from kebab_mlflow.comparison.rescoring import candidate_golden_file
from kebab_mlflow.comparison.unjudged import UnjudgedMode, with_unjudged_bounds
from kebab_mlflow.tracking.store import Tracker
tracker = Tracker(sys.argv[1]); tracker.experiment_id("rf", create=False)
t1 = time.perf_counter()
b, c = cmp.load_pair(tracker, "rf", "r0", "r1")
t2 = time.perf_counter()
options = cmp.CompareOptions()
result = cmp.compare_runs(b, c, options)
t3 = time.perf_counter()
golden = candidate_golden_file(c)  # as compare does: hashed here, streamed by the bounds
t4 = time.perf_counter()
result = with_unjudged_bounds(result, b, c, golden, options, UnjudgedMode.REPORT)
t5 = time.perf_counter()
text = cmp.dumps(result)
t6 = time.perf_counter()
print(json.dumps({"import mlflow + open the store": t1 - t0,
                  "load (download, sha256, compact read of both)": t2 - t1,
                  "compare_runs": t3 - t2, "check the golden file's digest": t4 - t3,
                  "bounds for unjudged hits (golden streamed, both rescored)": t5 - t4,
                  "render json": t6 - t5}))
"""


def compare_main(args: argparse.Namespace) -> None:
    tmp, code, commit = before_and_after(args, "compare")
    lines = [f"bench_scale compare — `kebab-mlflow compare r0 r1 --format json --no-log` of two "
             f"`run --target run:FILE --k 100` runs (100 hits a query; seed 0 vs 1), "
             f"{sides_words(args, commit, 'fresh process each, alternated')}", "",
             f"{'queries':>10} {'--unjudged':>10} {'code':>7} {'wall s':>8} {'CPU s':>7} "
             f"{'peak RSS MiB':>13}  output"]
    phases = []
    for n in [int(s) for s in args.sizes.split(",")]:
        store = tmp / f"store-{n}"
        golden = synthetic_set(n, args.seed, tmp / f"g{n}.yaml")
        for name, seed in (("r0", 0), ("r1", 1)):
            run_file = synthetic_run_file(n, seed, tmp / f"{name}.trec")
            child([KEBAB, "run", "--golden", str(golden), "--target", f"run:{run_file}", "--k",
                   "100", "--run-name", name, "--experiment", "rf", "--tracking-uri",
                   f"sqlite:///{store / 'mlflow.db'}", "--json"], code["after"])
            run_file.unlink()
        uri = f"sqlite:///{store / 'mlflow.db'}"
        for mode in ("report", "off"):
            outputs = {}
            for side in (("before", "after") if mode == "report" else ("after", "before")):
                r = watched([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                             "compare", "r0", "r1", "--format", "json", "--no-log",
                             "--unjudged", mode, "--experiment", "rf", "--tracking-uri", uri],
                            code[side], args.limit_mib, tmp)
                outputs[side] = None if r["killed"] else r["out"]
                lines.append(f"{n:>10,} {mode:>10} {side:>7} {figures(r)}  "
                             f"{len(r['out']):,} bytes")
                print(lines[-1], flush=True)
            lines.append(f"{'':>10} {'':>10} outputs byte-identical: {identical(outputs)}")
        out = subprocess.run([sys.executable, "-c", PHASES, uri], env=code["after"], check=True,
                             capture_output=True, text=True, cwd=tmp).stdout
        phases.append(f"  {n:>9,}: " + ", ".join(
            f"{k} {v:.1f}" for k, v in json.loads(out.strip().splitlines()[-1]).items()))
        shutil.rmtree(store, ignore_errors=True)
        golden.unlink()
    lines += ["", "where the time goes after (s, one process, --unjudged report):", *phases]
    _write("bench_scale_compare", lines)
    shutil.rmtree(tmp, ignore_errors=True)


def edited_set(golden: Path, out: Path) -> Path:
    """``golden`` as a new version: every 10th query keeps only its first judgment."""
    with golden.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as fh:
        seen = 0
        for line in src:
            if line.startswith("description:"):
                line = "description: edited\n"
            elif line.startswith("    expected_doc_ids:"):
                if seen % 10 == 0:
                    line = line.split(",")[0] + "]\n"
                seen += 1
            fh.write(line)
    return out


def before_and_after(args: argparse.Namespace, part: str) -> tuple[Path, dict, str]:
    """(a fresh temporary folder, the two sides' environments, the short commit of
    ``args.old``): :func:`old_code` in that folder."""
    tmp = Path(tempfile.mkdtemp(prefix=f"kebab-bench-{part}-", dir=args.tmp))
    env = bench_env(tmp)
    code, commit = old_code(args, tmp, env)
    return tmp, code, commit


def sides_words(args: argparse.Namespace, commit: str, how: str) -> str:
    """The header's words on the two sides, how they ran, peak RSS and the load."""
    return (f"before (git {args.old} = {commit}) and after (this checkout) in one script run; "
            f"{how}; peak RSS = ru_maxrss (or the watchdog's largest RSS when it killed the "
            f"child past {args.limit_mib:,.0f} MiB); {load_words()}")


def load_words() -> str:
    return f"load average {os.getloadavg()[0]:.1f} at start on {os.cpu_count()} CPUs"


def bench_env(tmp: Path) -> dict:
    """The children's environment: their own index cache; MLflow's URL line not printed."""
    return {**os.environ, "KEBAB_CACHE_DIR": str(tmp / "cache"),
            "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


def figures(r: dict) -> str:
    """A watched child's wall s, CPU s and peak RSS MiB, as the tables print them."""
    return (f"{r['wall']:>8.1f} {r['cpu']:>7.1f} {r['rss']:>13.0f}"
            + (" (killed)" if r["killed"] else ""))


def identical(outputs: dict) -> bool | str:
    """Whether the two sides' outputs are the same (not compared when ``before`` was killed)."""
    if None in outputs.values():
        return "before killed: not compared"
    return outputs["before"] == outputs["after"]


def old_code(args: argparse.Namespace, tmp: Path, env: dict) -> tuple[dict, str]:
    """({"before": env with git ``args.old``'s kebab_mlflow first, "after": this checkout's},
    the short commit)."""
    old, commit = git_code(args.old, tmp / "old")
    return {"before": {**env, "PYTHONPATH": str(old)},
            "after": {**env, "PYTHONPATH": str(ROOT)}}, commit


def rescore_main(args: argparse.Namespace) -> None:
    tmp, code, commit = before_and_after(args, "rescore")
    lines = [f"bench_scale rescore — `kebab-mlflow rescore r0 --golden EDITED --json` of a "
             f"`run --target run:FILE --k 100` run (100 hits a query, seed {args.seed}; EDITED: "
             f"every 10th query keeps one of its two judgments), "
             f"{sides_words(args, commit, 'fresh process each')}", "",
             f"{'queries':>10} {'code':>7} {'wall s':>8} {'CPU s':>7} {'peak RSS MiB':>13}  "
             "derived per_query.jsonl sha256"]
    for n in [int(s) for s in args.sizes.split(",")]:
        store = tmp / f"store-{n}"
        uri = f"sqlite:///{store / 'mlflow.db'}"
        golden = synthetic_set(n, args.seed, tmp / f"g{n}.yaml")
        edited = edited_set(golden, tmp / f"g{n}-edited.yaml")
        run_file = synthetic_run_file(n, args.seed, tmp / "r0.trec")
        child([KEBAB, "run", "--golden", str(golden), "--target", f"run:{run_file}", "--k",
               "100", "--run-name", "r0", "--experiment", "rf", "--tracking-uri", uri,
               "--json"], code["after"])
        run_file.unlink()
        digests = {}
        for side in ("before", "after"):
            r = watched([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                         "rescore", "r0", "--golden", str(edited), "--json", "--run-name",
                         f"rescored-{side}", "--experiment", "rf", "--tracking-uri", uri],
                        code[side], args.limit_mib, tmp)
            digests[side] = None if r["killed"] else _derived_digest(r["out"], uri, code[side])
            lines.append(f"{n:>10,} {side:>7} {figures(r)}  {(digests[side] or '-')[:16]}")
            print(lines[-1], flush=True)
        lines.append(f"{'':>10} derived per_query.jsonl byte-identical: {identical(digests)}")
        shutil.rmtree(store, ignore_errors=True)
        for p in (golden, edited):
            p.unlink()
    _write("bench_scale_rescore", lines)
    shutil.rmtree(tmp, ignore_errors=True)


def _derived_digest(out: str, uri: str, env: dict) -> str:
    """The kebab.per_query_sha256 tag of the run ``rescore --json`` printed."""
    run_id = json.loads(out.strip().splitlines()[-1])["run_id"]
    script = ("import sys, mlflow; print(mlflow.MlflowClient(sys.argv[1]).get_run(sys.argv[2])"
              ".data.tags['kebab.per_query_sha256'])")
    return subprocess.run([sys.executable, "-c", script, uri, run_id], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


PREVIOUS = "\n# the previous measurement, kept below the new one:\n"


def _write(name: str, lines: list[str]) -> None:
    """The results file: these lines, then the file's latest measurement before them."""
    text = "\n".join(lines) + "\n"
    print(text)
    path = RESULTS.parent / f"{name}.txt"
    previous = path.read_text().split(PREVIOUS)[0] if path.exists() else ""
    path.write_text(text + (PREVIOUS + previous if previous else ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=("validate", "run-file", "pipeline", "compare",
                                         "rescore"))
    parser.add_argument("--old", default=None,
                        help="the git ref of `before` (compare, rescore: default main; "
                        "run-file: only this checkout unless given)")
    parser.add_argument("--limit-mib", type=float, default=6000,
                        help="compare: kill a child past this RSS")
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", default=None, help="folder for the generated files")
    args = parser.parse_args()
    args.sizes = args.sizes or {"validate": "200000,1000000",
                                "run-file": "100000,300000,1000000",
                                "pipeline": "500,5000,50000",
                                "compare": "10000,100000",
                                "rescore": "10000,100000"}[args.part]
    if args.part in ("compare", "rescore"):
        args.old = args.old or "main"
    {"validate": validate_main, "run-file": run_file_main, "pipeline": pipeline_main,
     "compare": compare_main, "rescore": rescore_main}[args.part](args)


if __name__ == "__main__":
    main()
