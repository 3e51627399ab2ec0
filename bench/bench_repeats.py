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

**The noisy example target, end to end** (``--target noisy``): the same two figures with the
shipped ``fixtures/targets/noisy_target.py`` (its ``NoisyPipeline``: seeded per-call jitter of
the tie order, ``TIE_JITTER``) around the BM25 reference pipeline on SciFact test (300 queries,
document chunks, k 10), through :func:`kebab_mlflow.api.evaluate` (``repeat``) and
:func:`kebab_mlflow.api.compare` — the product's own classes, flaky marks, counts and verdict.
The reference pipeline's search is deterministic, so it runs once per query and is memoised;
only the noise is drawn again. Two runs of the same configuration take noise seeds 2t and
2t+1; the real drop is the second run with ``NOISY_DROP`` queries (seeded, among those with a
relevant document in the top 10) losing their relevant documents.

Run: .venv/bin/python bench/bench_repeats.py [--target simulated|noisy|both]
(writes bench/results/bench_repeats.txt)
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


def simulated() -> list[str]:
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
    return lines


# ---------------------------------------------------------------------------------------------
# the noisy example target around the reference pipeline on SciFact

NOISY_TRIALS, K, NOISY_DROP = 100, 10, 5


class _Memo:
    """The reference pipeline's search as the noisy target's engine wants it (dicts), run once
    per query; ``lost``: query texts whose relevant documents are removed (the real drop)."""

    def __init__(self, pipeline, lost: dict[str, set[str]] | None = None):
        self.pipeline, self.lost, self.cache = pipeline, lost or {}, {}

    def search(self, query: str, k: int) -> list[dict]:
        if (query, k) not in self.cache:
            self.cache[(query, k)] = [{"chunk_id": h.chunk_id, "doc_id": h.doc_id,
                                       "score": h.score, "text": h.text}
                                      for h in self.pipeline.search(query, k)]
        gone = self.lost.get(query, set())
        return [h for h in self.cache[(query, k)] if h["doc_id"] not in gone]


def _noisy_class():
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "fixtures" / "targets" / "noisy_target.py"
    spec = importlib.util.spec_from_file_location("noisy_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.NoisyPipeline


def noisy() -> list[str]:
    from bench.common import SCIFACT_CORPUS, scifact_golden
    from kebab_mlflow.api import compare, evaluate, load_golden_set, reference_pipeline
    from kebab_mlflow.comparison.records import QueryKind, Verdict

    golden = load_golden_set(scifact_golden())
    engine = _Memo(reference_pipeline("naive_baseline", SCIFACT_CORPUS,
                                      chunker__mode="document"))
    hit = [q for q in golden.queries
           if set(q.relevant_doc_grades) & {h["doc_id"] for h in engine.search(q.query, K)}]
    rng = np.random.default_rng(SEED)
    lost = {q.query: set(q.relevant_doc_grades)
            for q in (hit[i] for i in rng.choice(len(hit), NOISY_DROP, replace=False))}
    lossy = _Memo(engine.pipeline, lost)
    lossy.cache = engine.cache
    noisy_pipeline = _noisy_class()

    def run(seed: int, source: _Memo, repeat: int):
        pipeline = noisy_pipeline(seed=seed)
        pipeline.engine = source
        return evaluate(pipeline, golden, k=K, repeat=repeat)

    counted = {1: [], REPEAT: []}
    raw = {1: [], REPEAT: []}
    verdicts = {(r, d): 0 for r in (1, REPEAT) for d in (0, NOISY_DROP)}
    for trial in range(NOISY_TRIALS):
        for repeat in (1, REPEAT):
            base = run(2 * trial, engine, repeat)
            same = compare(base, run(2 * trial + 1, engine, repeat), seed=trial)
            drop = compare(base, run(2 * trial + 1, lossy, repeat), seed=trial)
            regressions = same.counts.get(QueryKind.REGRESSION, 0)
            raw[repeat].append(regressions)
            counted[repeat].append(regressions - same.flaky_regressions)
            verdicts[(repeat, 0)] += same.verdict is Verdict.REGRESSED
            verdicts[(repeat, NOISY_DROP)] += drop.verdict is Verdict.REGRESSED
    lines = [f"the noisy example target (fixtures/targets/noisy_target.py, TIE_JITTER) around "
             f"BM25 on SciFact test: {len(golden)} queries, k {K}, {NOISY_TRIALS} trials, "
             f"seed {SEED}; compare's defaults (primary {drop.primary.name})", "",
             "Regression queries between two runs of the SAME configuration:"]
    for repeat, label in ((1, "single run"), (REPEAT, f"--repeat {REPEAT}")):
        c, r = np.array(counted[repeat]), np.array(raw[repeat])
        lines.append(f"  {label:<12} counted (--max-regressions, small-set rule) mean "
                     f"{c.mean():5.2f}, max {c.max():3d}, trials with >= 1: {np.mean(c > 0):4.0%}"
                     f"; all Regression classes mean {r.mean():5.2f}")
    lines += ["", f"Regressed verdicts (a real drop: {NOISY_DROP} queries lose their relevant "
                  "documents):"]
    for repeat in (1, REPEAT):
        same, dropped = (verdicts[(repeat, d)] / NOISY_TRIALS for d in (0, NOISY_DROP))
        lines.append(f"  repeat {repeat}: same configuration {same:6.1%}; the real drop "
                     f"{dropped:6.1%}")
    return lines


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--target", choices=("simulated", "noisy", "both"), default="both")
    which = parser.parse_args().target
    t0, load = time.perf_counter(), os.getloadavg()[0]
    lines = simulated() if which != "noisy" else []
    if which != "simulated":
        lines += ([""] if lines else []) + noisy()
    lines.append("")
    lines.append(f"total {time.perf_counter() - t0:.0f} s; " + load_line(load))
    emit("bench_repeats", "\n".join(lines))


if __name__ == "__main__":
    main()
