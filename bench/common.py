"""Shared helpers for the benchmarks: paths, the SciFact golden set, result files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# KEBAB_SHARED: the shared datasets folder when the checkout is not next to it (a worktree)
SHARED = Path(os.environ.get("KEBAB_SHARED", ROOT.parent / "shared"))
SCIFACT = SHARED / "datasets" / "scifact"
SCIFACT_CORPUS = SCIFACT / "corpus.jsonl.gz"
RESULTS = ROOT / "bench" / "results"
WORK = Path(os.environ.get("KEBAB_BENCH_DIR", ROOT / ".kebab-cache" / "bench"))


def scifact_golden() -> Path:
    """The SciFact test split as a golden set (written once)."""
    from kebab_mlflow.importers.beir import import_beir

    out = WORK / "scifact-test.yaml"
    if not out.is_file():
        import_beir(SCIFACT, "test", out)
    return out


def emit(name: str, text: str) -> None:
    """Print a result and keep it in bench/results/<name>.txt."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.txt").write_text(text + "\n")
    sys.stdout.write(text + "\n")


def load_line(start: float) -> str:
    """The 1-minute load average at the start and the end (the machine may be shared)."""
    return (f"1-minute load average: {start:.2f} at the start, {os.getloadavg()[0]:.2f} at "
            f"the end ({os.cpu_count()} CPUs)")
