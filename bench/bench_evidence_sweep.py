"""Chunk-policy sweep through evidence spans (issue 29), on XQuAD and on KorQuAD 1.0 dev.

    .venv/bin/python bench/bench_evidence_sweep.py [--only xquad|korquad]

For each collection: `kebab-mlflow import-squad` into a temporary folder (KorQuAD's licence
forbids committing a converted copy; the answer spans become evidence), the shipped
examples/evidence/chunk-policy-sweep.yaml copied beside it and run with `kebab-mlflow sweep`
into a temporary sqlite store, then `kebab-mlflow compare --no-log --format json` between
neighbouring policies (max_chars 200→400→800→1600→document at each overlap, and overlap 0→100
at each max_chars). The table reads each row's run from the store; mean chunk characters
come from the chunker. The share of a run spent resolving evidence is measured in memory
(`evaluate`, its `evidence_s` timing over the run's total) for the policy with the most
chunks and for one chunk per document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import SHARED, emit, load_line  # noqa: E402 - bench/ is the script's folder

# ../shared beside the checkout; KEBAB_SHARED names it for a checkout elsewhere (a worktree)
DATASETS = Path(os.environ.get("KEBAB_SHARED", SHARED)) / "datasets"
SOURCES = {"xquad": DATASETS / "xquad_en",
           "korquad": DATASETS / "korquad_v1_dev" / "KorQuAD_v1.0_dev.json"}
SWEEP = ROOT / "examples" / "evidence" / "chunk-policy-sweep.yaml"
SIZES, OVERLAPS = (200, 400, 800, 1600), (0, 100)
COLUMNS = ("hit_at_5", "mrr", "ndcg_at_10_chunk", "evidence_precision_at_5",
           "evidence_recall_at_5", "retrieved_chars_at_5")


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", *args], env=env,
                          capture_output=True, text=True, check=False)


def row_name(size: int | None, overlap: int | None) -> str:
    return "bm25_document" if size is None else f"bm25_max_chars-{size}_overlap_chars-{overlap}"


def neighbours() -> list[tuple[str, str]]:
    pairs = []
    for overlap in OVERLAPS:
        names = [row_name(s, overlap) for s in SIZES] + [row_name(None, None)]
        pairs += list(zip(names, names[1:], strict=False))
    pairs += [(row_name(s, 0), row_name(s, 100)) for s in SIZES]
    return pairs


def mean_chunk_chars(corpus: Path) -> dict[str, float]:
    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus
    from kebab_mlflow.pipeline.corpus import load_corpus

    docs = load_corpus(corpus)
    configs = {row_name(s, o): ChunkerConfig("structure", s, o) for s in SIZES for o in OVERLAPS}
    configs[row_name(None, None)] = ChunkerConfig("document", 800, 100)
    out = {}
    for name, config in configs.items():
        chunks = chunk_corpus(docs, config)
        out[name] = sum(len(c.text) for c in chunks) / len(chunks)
    return out


def evidence_share(golden: Path, corpus: Path) -> list[str]:
    """Seconds resolving evidence over the whole in-memory run, for two policies."""
    import kebab_mlflow as km

    lines = []
    for name, options in (("max_chars 200, overlap 100", {"chunker__max_chars": 200}),
                          ("one chunk per document", {"chunker__mode": "document"})):
        t0 = time.perf_counter()
        pipeline = km.reference_pipeline("naive_baseline", corpus, **options)
        build = time.perf_counter() - t0
        result = km.evaluate(pipeline, golden, ask=False)
        total = time.perf_counter() - t0
        ev = result.timings["evidence_s"]
        lines.append(f"  {name}: evidence {ev:.2f} s of a {total:.2f} s run ({ev / total:.1%};"
                     f" index build/load {build:.2f} s, queries "
                     f"{result.timings['pipeline_s']:.2f} s)")
    return lines


def collection(label: str, source: Path, env: dict[str, str]) -> str:
    from mlflow.tracking import MlflowClient

    with tempfile.TemporaryDirectory(prefix=f"kebab-evidence-{label}-") as tmp:
        work = Path(tmp)
        done = cli("import-squad", str(source), "--out", str(work / "squad"), env=env)
        if done.returncode:
            raise SystemExit(done.stderr)
        shutil.copy(SWEEP, work / SWEEP.name)
        store = f"sqlite:///{work / 'mlflow.db'}"
        t0 = time.perf_counter()
        swept = cli("sweep", str(work / SWEEP.name), "--tracking-uri", store, "--json", env=env)
        sweep_s = time.perf_counter() - t0
        if swept.returncode:
            raise SystemExit(swept.stderr[-3000:])
        runs = json.loads(swept.stdout)["rows"]
        client = MlflowClient(tracking_uri=store)
        chars = mean_chunk_chars(work / "squad" / "corpus")
        lines = [f"## {label} ({source.name}): sweep of {len(runs)} rows in {sweep_s:.0f} s",
                 "", "| policy | " + " | ".join(COLUMNS) + " | mean chunk chars |",
                 "|---" * (len(COLUMNS) + 2) + "|"]
        for name in [row_name(s, o) for o in OVERLAPS for s in SIZES] + [row_name(None, None)]:
            metrics = client.get_run(runs[name]).data.metrics
            cells = [f"{metrics[c]:.4f}" if c != "retrieved_chars_at_5" else f"{metrics[c]:.0f}"
                     for c in COLUMNS]
            lines.append(f"| {name.removeprefix('bm25_')} | " + " | ".join(cells)
                         + f" | {chars[name]:.0f} |")
        lines += ["", "| baseline → candidate | verdict | level | primary | mean delta | MDE |",
                  "|---|---|---|---|---|---|"]
        for base, cand in neighbours():
            res = cli("compare", runs[base], runs[cand], "--tracking-uri", store, "--no-log",
                      "--format", "json", env=env)
            c = json.loads(res.stdout)
            primary = next(m for m in c["metrics"] if m["name"] == c["settings"]["primary"])
            lines.append(f"| {base.removeprefix('bm25_')} → {cand.removeprefix('bm25_')} | "
                         f"{c['verdict']} | {c['level']} | {primary['name']} | "
                         f"{primary['delta']:+.4f} | {_mde(primary)} |")
        lines += ["", "time to resolve evidence (in memory):",
                  *evidence_share(work / "squad" / "test.yaml", work / "squad" / "corpus")]
        return "\n".join(lines)


def _mde(metric: dict) -> str:
    value = metric.get("mde")
    return "n/a" if value is None else f"{value:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=sorted(SOURCES))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.setdefault("KEBAB_CACHE_DIR", tempfile.mkdtemp(prefix="kebab-evidence-cache-"))
    start = os.getloadavg()[0]
    parts = [collection(label, SOURCES[label], env)
             for label in SOURCES if args.only in (None, label)]
    emit(f"evidence_sweep{'_' + args.only if args.only else ''}",
         "\n\n".join(parts) + "\n\n" + load_line(start))


if __name__ == "__main__":
    main()
