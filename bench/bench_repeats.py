"""Flaky queries, single run vs ``run --repeat 5`` (issue 27 item 4), simulated from per-query
outcomes.

Model of a noisy pipeline on 300 queries (the noisy example target's shape): 80% of the
queries are deterministic (a hit with probability 0.7, fixed per query), 20% are flaky — each
call hits with the query's own probability p ~ U(0.2, 0.8) (an LLM that sometimes answers,
an approximate index). Two runs of the *same* configuration draw their calls independently.

* **Regression counts**: per trial, the queries that go from a hit to a miss between the two
  runs as ``compare`` counts them for ``--max-regressions`` and the small-set rule: single run
  — every hit → miss; ``--repeat 5`` — a hit → miss of the first repeats whose query is not
  flaky on either side (flaky = its repeats disagree: flip rate > 0), as
  :func:`kebab_mlflow.comparison.verdict.compare_runs` leaves them out by default.
* **Power at a real drop**: the candidate loses ``DROP`` deterministic hits (hit → miss for
  good); Regressed = the primary (the hit rate, per-query means over the repeats) worse by the
  sign-flip test at alpha 0.05 (:func:`kebab_mlflow.stats.resampling.paired_tests`,
  :func:`kebab_mlflow.comparison.verdict.significance`), and the same for a null trial.

Run: .venv/bin/python bench/bench_repeats.py   (writes bench/results/bench_repeats.txt)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import emit, load_line  # noqa: E402

SEED, N, TRIALS, REPEAT, DROP = 20261201, 300, 200, 5, 15
FLAKY_SHARE, ALPHA, RESAMPLES = 0.2, 0.05, 2_000


def draw_queries(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per query its per-call hit probability, and whether it is deterministic."""
    fixed = rng.random(N) >= FLAKY_SHARE
    p = np.where(fixed, (rng.random(N) < 0.7).astype(float), rng.uniform(0.2, 0.8, N))
    return p, fixed


def calls(rng: np.random.Generator, p: np.ndarray, repeat: int) -> np.ndarray:
    return rng.random((repeat, p.size)) < p  # repeat × queries


def regressions(base: np.ndarray, cand: np.ndarray, leave_out_flaky: bool) -> int:
    hit_to_miss = base[0] & ~cand[0]
    if not leave_out_flaky:
        return int(hit_to_miss.sum())
    steady = (base.all(0) | ~base.any(0)) & (cand.all(0) | ~cand.any(0))
    return int((hit_to_miss & steady).sum())


def regressed(base: np.ndarray, cand: np.ndarray, seed: int) -> bool:
    from kebab_mlflow.comparison.verdict import significance
    from kebab_mlflow.stats.resampling import paired_tests

    delta = cand.mean(0) - base.mean(0)
    (t,) = paired_tests([delta], RESAMPLES, seed)
    return significance(t.p_value, t.mean, True, ALPHA) == "worse"


def main() -> None:
    t0, load = time.perf_counter(), os.getloadavg()[0]
    rng = np.random.default_rng(SEED)
    counts = {1: [], REPEAT: []}
    power = {(r, d): 0 for r in (1, REPEAT) for d in (0, DROP)}
    for trial in range(TRIALS):
        p, fixed = draw_queries(rng)
        lost = rng.choice(np.flatnonzero(fixed & (p == 1.0)), DROP, replace=False)
        p_drop = p.copy()
        p_drop[lost] = 0.0
        for repeat in (1, REPEAT):
            base, cand = calls(rng, p, repeat), calls(rng, p, repeat)
            counts[repeat].append(regressions(base, cand, leave_out_flaky=repeat > 1))
            power[(repeat, 0)] += regressed(base, cand, trial)
            power[(repeat, DROP)] += regressed(base, calls(rng, p_drop, repeat), trial)
    lines = [f"bench_repeats — simulated noisy pipeline, {N} queries ({FLAKY_SHARE:.0%} flaky, "
             f"per-call hit p ~ U(0.2, 0.8)), {TRIALS} trials, seed {SEED}", "",
             "Regression queries between two runs of the SAME configuration "
             "(what --max-regressions and the small-set rule count):"]
    for repeat, label in ((1, "single run"), (REPEAT, f"--repeat {REPEAT} (flaky left out)")):
        c = np.array(counts[repeat])
        lines.append(f"  {label:<32} mean {c.mean():5.2f}, median {np.median(c):4.1f}, "
                     f"max {c.max():3d}; trials with >= 1: {np.mean(c > 0):.0%}")
    lines += ["", f"Regressed by the primary (hit rate, sign-flip p < {ALPHA}, two-sided):"]
    for repeat in (1, REPEAT):
        lines.append(f"  repeat {repeat}: null (same configuration) "
                     f"{power[(repeat, 0)] / TRIALS:6.1%}; a real drop of {DROP} hits "
                     f"({DROP / N:.3f} hit rate) "
                     f"{power[(repeat, DROP)] / TRIALS:6.1%}")
    lines.append("")
    lines.append(f"total {time.perf_counter() - t0:.0f} s; " + load_line(load))
    emit("bench_repeats", "\n".join(lines))


if __name__ == "__main__":
    main()
