"""False alarms of the gate under each ``--alternative`` (issue 27 item 3).

The exchangeable null of ``bench/bench_gate.py`` (its construction reused: SciFact test, two
real BM25 configurations A and B of the reference pipeline in document mode, per query a seeded
coin decides which side gets A, so candidate − baseline is ±(B − A)), 2,000 trials at 300 and
at 150 queries. Each trial is judged by the code ``compare`` runs:
:func:`kebab_mlflow.stats.resampling.paired_tests`, :func:`kebab_mlflow.comparison.verdict.
gate_p` (the p of the chosen alternative), :func:`kebab_mlflow.stats.resampling.holm` and
:func:`kebab_mlflow.comparison.verdict.significance` at alpha 0.05 on the primary
``ndcg_at_10_doc``. A false alarm is a ``Regressed`` trial; the budget is alpha (5%).

Run: KEBAB_DATASETS=/work/shared/datasets .venv/bin/python bench/bench_gate_level.py
(writes bench/results/bench_gate_level.txt)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_gate import ALPHA, NULL_TRIALS, RESAMPLES, SEED, SIZES, runs, trial_deltas  # noqa: E402
from bench.common import emit, load_line  # noqa: E402


def regressed_share(deltas: np.ndarray, alternative: str) -> tuple[float, float]:
    """(share Regressed, share Better) of the trials (rows) under ``alternative``."""
    from kebab_mlflow.comparison.records import CompareOptions
    from kebab_mlflow.comparison.verdict import gate_p, significance
    from kebab_mlflow.stats.alternative import Alternative
    from kebab_mlflow.stats.resampling import holm, paired_tests

    options = CompareOptions(alternative=Alternative(alternative), resamples=RESAMPLES)
    verdicts = []
    for t in paired_tests(list(deltas), RESAMPLES, seed=0):
        p = gate_p(t, True, options)
        p_adj = None if p is None else float(holm(np.array([p]))[0])
        verdicts.append(significance(p_adj, t.mean, True, ALPHA))
    v = np.array(verdicts, dtype=object)
    return float(np.mean(v == "worse")), float(np.mean(v == "better"))


def main() -> None:
    t0, load = time.perf_counter(), os.getloadavg()[0]
    _, _, scores = runs()
    lines = [f"bench_gate_level — SciFact test, exchangeable null of BM25 A vs B (bench_gate's "
             f"construction), {NULL_TRIALS:,} trials per row, alpha {ALPHA}, {RESAMPLES:,} "
             f"resamples, seed {SEED}", "",
             f"{'n':>4} {'alternative':<11} {'Regressed':>9} {'Better':>7}"]
    for n in SIZES:
        deltas = trial_deltas(scores, {}, n, 0.0, NULL_TRIALS, SEED).deltas
        for alternative in ("two-sided", "less"):
            worse, better = regressed_share(deltas, alternative)
            lines.append(f"{n:>4} {alternative:<11} {worse:>9.2%} {better:>7.2%}")
    lines += ["", "two-sided spends alpha/2 on the worse side (Regressed ~2.5%); less spends all "
              "of alpha there (~5%) and never concludes Better.",
              f"total {time.perf_counter() - t0:.0f} s; " + load_line(load)]
    emit("bench_gate_level", "\n".join(lines))


if __name__ == "__main__":
    main()
