"""Scaling of compare's statistics (kebab_mlflow.stats.resampling) in the number of queries.

Per size n: paired deltas of a hit-like metric (values -1/0/1: few distinct values) and an
nDCG-like one (normal, every value distinct: the worst case), ``bootstrap_ci`` and
``randomization_p`` with R resamples, CPU seconds (``time.process_time``).

Run: .venv/bin/python bench/bench_stats_scale.py [RESAMPLES]   (default 1000)
"""

from __future__ import annotations

import sys
import time

import numpy as np
from common import emit  # noqa: E402 - bench/ is the script's folder

from kebab_mlflow.stats.resampling import bootstrap_ci, randomization_p


def main() -> None:
    resamples = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(0)
    lines = [f"compare statistics, {resamples} resamples, CPU seconds", ""]
    for n in (100_000, 200_000, 400_000):
        hit = rng.integers(-1, 2, n).astype(float)
        ndcg = rng.normal(0, 0.2, n)
        row = []
        for name, deltas in (("hit", hit), ("ndcg", ndcg)):
            for fn in (bootstrap_ci, randomization_p):
                start = time.process_time()
                fn(deltas if fn is bootstrap_ci else [deltas], resamples=resamples, seed=0)
                row.append(f"{name} {fn.__name__} {time.process_time() - start:.2f}")
        lines.append(f"{n} " + "; ".join(row))
        print(lines[-1], flush=True)
    emit("bench_stats_scale", "\n".join(lines))


if __name__ == "__main__":
    main()
