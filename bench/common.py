"""Shared helpers for the benchmarks: paths, the SciFact golden set, result files."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
# The one setting every benchmark finds its data through: KEBAB_DATASETS, else ../shared/datasets
# beside the checkout (so a bench runs from any checkout location).
DATASETS = Path(os.environ.get("KEBAB_DATASETS", SHARED / "datasets"))
SCIFACT = DATASETS / "scifact"
XQUAD = DATASETS / "xquad_en"
KORQUAD_DEV = DATASETS / "korquad_v1_dev" / "KorQuAD_v1.0_dev.json"
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


def alternate(sides: dict[str, Callable[[], Any]], repeats: int,
              warmup: int = 1) -> dict[str, Timing]:
    """Time every side the same way: ``warmup`` untimed calls each, then ``repeats`` timed calls
    each, the sides taking turns within every repeat (a shared machine's load falls on all of
    them alike). The statistic reported is the median."""
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    last: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in sides.items():
            start = time.perf_counter()
            last[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: Timing(median=statistics.median(ts), best=min(ts), repeats=repeats,
                         result=last[name]) for name, ts in times.items()}


@dataclass(frozen=True, kw_only=True)
class Timing:
    """One side's timings from :func:`alternate` (seconds) and its last result."""

    median: float
    best: float
    repeats: int
    result: Any


def git_code(ref: str, into: Path) -> tuple[Path, str]:
    """(a folder holding git ``ref``'s kebab_mlflow — put it first on PYTHONPATH to run that
    code —, the short commit)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "kebab_mlflow"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref],
                            check=True, capture_output=True, text=True).stdout.strip()
    return into, commit

