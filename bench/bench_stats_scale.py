"""Scaling of compare's statistics (kebab_mlflow.stats.resampling) in the number of queries.

Per size n: paired deltas of a hit-like metric (values -1/0/1: few distinct values) and an
nDCG-like one (normal, every value distinct: the worst case), ``bootstrap_ci`` and
``randomization_p`` with R resamples, CPU seconds (``time.process_time``), and for the nDCG-like
rows the CPU nanoseconds per resample × query (flat = linear in the queries).

The wide paths work in blocks of about ``BLOCK_CELLS`` resample × query cells, so their
temporaries stay a few MB at any n. What still grows a little per cell is the bootstrap's random
gather: the row it reads outgrows the 2 MB L2 cache of this CPU past ~400,000 queries (float32).

Run: .venv/bin/python bench/bench_stats_scale.py [RESAMPLES]   (default 1000)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from common import emit  # noqa: E402 - bench/ is the script's folder

from kebab_mlflow.stats.resampling import bootstrap_ci, randomization_p


def main() -> None:
    resamples = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(0)
    lines = [f"compare statistics, {resamples} resamples, CPU seconds (load average "
             f"{os.getloadavg()[0]:.1f} at start)", ""]
    for n in (100_000, 200_000, 400_000, 800_000):
        hit = rng.integers(-1, 2, n).astype(float)
        ndcg = rng.normal(0, 0.2, n)
        row = []
        for name, deltas in (("hit", hit), ("ndcg", ndcg)):
            for fn in (bootstrap_ci, randomization_p):
                start = time.process_time()
                fn(deltas if fn is bootstrap_ci else [deltas], resamples=resamples, seed=0)
                spent = time.process_time() - start
                per_cell = f" ({spent / (resamples * n) * 1e9:.1f} ns/cell)" if name == "ndcg" \
                    else ""
                row.append(f"{name} {fn.__name__} {spent:.2f}{per_cell}")
        lines.append(f"{n} " + "; ".join(row))
        print(lines[-1], flush=True)
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    emit("bench_stats_scale", "\n".join(lines))


if __name__ == "__main__":
    main()
