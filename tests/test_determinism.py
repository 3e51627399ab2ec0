"""Same inputs, same numbers — also in another process, whose ``PYTHONHASHSEED`` (and so the
iteration order of every set and dict of strings built from hashes) differs."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import GOLDEN, KB, ROOT

SCRIPT = """
import json, sys, tempfile
from pathlib import Path
from kebab_mlflow.config import build_config
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.pipeline.reference import build_pipeline
from kebab_mlflow.evaluation.runner import run_queries
from kebab_mlflow.metrics.scoring import cutoffs_for

golden = load_golden_set(sys.argv[1])
pipeline = build_pipeline(build_config(sys.argv[3]), sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    outcome = run_queries(pipeline, golden, 10, cutoffs_for(10), Path(tmp) / "per_query.jsonl")
aggregate = {k: v for k, v in outcome.aggregate.as_dict().items() if k != "latency"}
print(json.dumps(aggregate, sort_keys=True))  # a float's repr round-trips: same text, same bits
for name, values in sorted(outcome.scores.items()):
    print(name, [float(v).hex() for v in values])
"""


def _run_elsewhere(tmp_path, preset: str, hash_seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed),
           "KEBAB_CACHE_DIR": str(tmp_path / f"cache-{hash_seed}")}  # each builds its own index
    return subprocess.run([sys.executable, "-c", SCRIPT, str(GOLDEN), str(KB), preset],
                          capture_output=True, text=True, check=True, cwd=ROOT, env=env).stdout


def test_a_run_gives_bit_identical_numbers_under_other_hash_seeds(tmp_path):
    for preset in ("naive_baseline", "random_retrieval"):
        first, second = (_run_elsewhere(tmp_path, preset, seed) for seed in (1, 2))
        assert "contains_all" in first and "hit_at_1" in first
        assert first == second, preset
