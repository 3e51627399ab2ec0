"""The gate's error rates on SciFact test: false alarms, power, and the printed MDE.

Data: SciFact test (300 queries, graded doc-level qrels), two real BM25 configurations of the
reference pipeline in document mode, retrieved to depth 100: A = the default (k1 0.9, b 0.4)
and B = (k1 1.5, b 0.75). Their per-query nDCG@10 is recomputed here from the ranked lists
and checked against the tool's ``ndcg_at_10_doc`` (to 1e-9) before anything else.

Every trial is judged with the code ``compare`` runs: :func:`kebab_mlflow.stats.resampling.
paired_tests` (10,000 resamples, sign-flip p exact when enumerable) over the trial's paired
deltas, :func:`kebab_mlflow.stats.resampling.holm` and
:func:`kebab_mlflow.comparison.verdict.significance` at alpha 0.05 on the default primary
(``ndcg_at_10_doc`` for this doc-level set), and
:func:`kebab_mlflow.comparison.verdict.detectable_effect` for the MDE — vectorised over trials
(one row per trial) rather than one CLI call each.

1. **Exchangeable null**: per query a seeded coin decides which side gets A and which B, so
   candidate − baseline is ±(B − A) with random signs; a trial is a false alarm when it is
   ``Regressed`` (and ``Better`` is counted too). 2,000 trials at 300 and at 150 queries
   (a seeded subset per trial).
2. **Controlled drops** on top of that null: in a seeded random order of the queries whose
   candidate ranking has a relevant document in its top 10, the first relevant document is
   moved down ``SHIFT`` ranks until the summed nDCG@10 loss reaches ``drop × n`` (whole
   queries, so the realised mean loss overshoots the nominal ``drop`` a little): 0.01, 0.02,
   0.04 and a grid for the 80% point, 300 trials per cell, at 150 and 300 queries. Power =
   share of trials ``Regressed``; next to it a paired t-test (scipy ``ttest_rel``, two-sided
   p < 0.05 and a negative mean) on the same trials.
3. **MDE**: the mean MDE printed on the null trials (what a ``Same`` verdict says) against the
   realised mean drop the simulation detects 80% of the time (linear interpolation of the power
   curve; the nominal one too). Next to it the same formula with other loss models: spread
   thinly (``m = 0``), whole queries (the ``mde_whole`` a ``Same`` verdict also prints), and
   the applied losses' own ``m`` — which separates the error of the variance model from the
   error of guessing how a loss falls on the queries.
4. **sizing**: what ``kebab-mlflow power`` assumes from one run (the per-query sd of nDCG@10 of
   A, a loss of whole queries) against the real paired deltas B − A.

Run: .venv/bin/python bench/bench_gate.py   (writes bench/results/bench_gate.txt; ``--shift S``
moves the document S ranks instead of 3: bench_gate_shiftS.txt)
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import SCIFACT_CORPUS, emit, scifact_golden  # noqa: E402

SEED = 20261201
ALPHA, RESAMPLES, DEPTH = 0.05, 10_000, 100
SHIFT = int(sys.argv[sys.argv.index("--shift") + 1]) if "--shift" in sys.argv else 3
NULL_TRIALS, DROP_TRIALS = 2_000, 300
SIZES = (300, 150)
REPORTED_DROPS = (0.01, 0.02, 0.04)
GRID = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06)
CONFIGS = {"A": {}, "B": {"bm25.k1": 1.5, "bm25.b": 0.75}}


# ---------------------------------------------------------------------------------------------
# the two real runs


def ndcg_at_10(ranked: list[str], grades: dict[str, int]) -> float:
    """trec_eval's ndcg_cut_10: linear gain, log2(rank + 1) discount."""
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def runs(golden_path: Path | None = None, corpus: Path = SCIFACT_CORPUS
         ) -> tuple[list, dict[str, list[list[str]]], dict[str, np.ndarray]]:
    """Both CONFIGS on a golden set (SciFact test by default): queries, each system's ranked
    doc ids, and its per-query nDCG@10 (checked against ndcg_at_10 to 1e-9)."""
    from kebab_mlflow.api import evaluate, load_golden_set, reference_pipeline

    golden = load_golden_set(golden_path or scifact_golden())
    ranked, scores = {}, {}
    for name, overrides in CONFIGS.items():
        pipeline = reference_pipeline("naive_baseline", corpus, **{
            "chunker__mode": "document", **{k.replace(".", "__"): v
                                            for k, v in overrides.items()}})
        rows = {r.id: r for r in evaluate(pipeline, golden, k=DEPTH).rows()}
        ranked[name] = [[h.doc_id for h in rows[q.id].hits] for q in golden.queries]
        scores[name] = np.array([rows[q.id].scores["ndcg_at_10_doc"] for q in golden.queries])
        mine = np.array([ndcg_at_10(r, q.relevant_doc_grades)
                         for r, q in zip(ranked[name], golden.queries, strict=True)])
        assert np.allclose(mine, scores[name], atol=1e-9, rtol=0), name
    return list(golden.queries), ranked, scores


def drop_losses(queries, ranked) -> dict[str, np.ndarray]:
    """Per system and query: the nDCG@10 lost when the first relevant document in the top 10
    moves down SHIFT ranks (0 where there is none)."""
    out = {}
    for name, lists in ranked.items():
        losses = []
        for q, r in zip(queries, lists, strict=True):
            grades = q.relevant_doc_grades
            first = next((i for i, d in enumerate(r[:10]) if grades.get(d, 0) > 0), None)
            if first is None:
                losses.append(0.0)
                continue
            moved = r[:first] + r[first + 1:first + 1 + SHIFT] + [r[first]] + r[first + 1 + SHIFT:]
            losses.append(ndcg_at_10(r, grades) - ndcg_at_10(moved, grades))
        out[name] = np.array(losses)
    return out


# ---------------------------------------------------------------------------------------------
# trials


@dataclass(frozen=True)
class Trials:
    deltas: np.ndarray  # (trials × n) candidate − baseline
    baseline: np.ndarray  # (trials × n) the baseline side's scores
    loss: np.ndarray  # (trials × n) the loss applied to the candidate (0 on the null)


def trial_deltas(scores, losses, n: int, drop: float, trials: int, seed: int) -> Trials:
    """Paired deltas candidate − baseline: coin-assigned A/B plus the drop."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, round(drop * 1e4))))
    a, b = scores["A"], scores["B"]
    out, bases, applied = np.empty((trials, n)), np.empty((trials, n)), np.zeros((trials, n))
    for t in range(trials):
        idx = rng.choice(a.size, size=n, replace=False) if n < a.size else np.arange(a.size)
        coin = rng.random(n) < 0.5  # True: baseline A, candidate B
        base = np.where(coin, a[idx], b[idx])
        cand = np.where(coin, b[idx], a[idx])
        if drop:
            loss = np.where(coin, losses["B"][idx], losses["A"][idx])  # the candidate's system
            order = rng.permutation(np.flatnonzero(loss > 0))
            take = order[:np.searchsorted(np.cumsum(loss[order]), drop * n) + 1]
            applied[t, take] = loss[take]
        out[t], bases[t] = cand - applied[t] - base, base
    return Trials(out, bases, applied)


def judge(trials: Trials) -> dict[str, np.ndarray]:
    """Each row as compare judges its primary metric: verdict direction, p, MDE; and the
    paired t-test on the same row."""
    from kebab_mlflow.comparison.verdict import detectable_effect, significance
    from kebab_mlflow.stats.power import delta_sd, loss_size, mde
    from kebab_mlflow.stats.resampling import holm, paired_tests

    deltas = trials.deltas
    tests = paired_tests(list(deltas), RESAMPLES, seed=0)
    verdict = []
    for t in tests:
        p_adj = float(holm(np.array([t.p_value]))[0])  # the primary alone: Holm over one
        verdict.append(significance(p_adj, t.mean, True, ALPHA) or "same")
    t_p = sp.ttest_rel(deltas, np.zeros_like(deltas), axis=1).pvalue
    n = deltas.shape[1]
    # what compare prints: the MDE with a loss made of changes as large as the deltas', and
    # with one on whole queries; and, to show what the loss model does, one spread thinly
    effects = [detectable_effect(d, b, True, ALPHA)
               for d, b in zip(deltas, trials.baseline, strict=True)]
    return {"verdict": np.array(verdict),
            "ttest_worse": (t_p < ALPHA) & (deltas.mean(axis=1) < 0),
            "mde": np.array([e["mde"] for e in effects]),
            "mde_whole": np.array([e["mde_whole"] for e in effects]),
            "mde_spread": np.array([mde(delta_sd(d), n, ALPHA, loss=0.0) for d in deltas]),
            "mean": deltas.mean(axis=1),
            "realised": trials.loss.mean(axis=1),
            "loss_size": loss_size(trials.loss) if trials.loss.any() else None,
            "ci_excludes_0": np.array([t.ci_low > 0 or t.ci_high < 0 for t in tests]),
            "exact": np.array([t.p_exact for t in tests])}


def interpolate_80(drops, power) -> float | None:
    points = list(zip(drops, power, strict=True))
    for (d0, p0), (d1, p1) in zip(points, points[1:], strict=False):
        if p0 < 0.8 <= p1:
            return d0 + (0.8 - p0) * (d1 - d0) / (p1 - p0)
    return None


# ---------------------------------------------------------------------------------------------


def header(queries, scores) -> list[str]:
    from kebab_mlflow.stats.power import loss_size, mde

    a, b = scores["A"], scores["B"]
    sd_one, sd_pair = np.std(a, ddof=1), np.std(b - a, ddof=1)
    m_one, m_pair = loss_size(a), loss_size(b - a)
    return [f"bench_gate — SciFact test, {len(queries)} queries; A = BM25 default, B = "
            f"BM25 k1 1.5 b 0.75; nDCG@10 A {a.mean():.4f}, B {b.mean():.4f} (checked "
            f"against a direct nDCG@10 to 1e-9); {int(np.count_nonzero(a != b))} queries differ",
            f"judged as compare does: primary ndcg_at_10_doc alone, sign-flip p at alpha "
            f"{ALPHA}, {RESAMPLES:,} resamples; seed {SEED}", "",
            f"sizing: `power A` assumes sd {sd_one:.4f} (the per-query sd of nDCG@10) and a "
            f"loss of whole queries (loss size {m_one:.4f}): MDE at {a.size} queries "
            f"{mde(sd_one, a.size, ALPHA, loss=m_one):.4f}; `power A --paired-with B`: sd "
            f"{sd_pair:.4f} (ratio {sd_pair / sd_one:.2f}), loss size {m_pair:.4f}: MDE "
            f"{mde(sd_pair, a.size, ALPHA, loss=m_pair):.4f}", ""]


def null_lines(scores, losses) -> tuple[list[str], dict[int, dict[str, float]]]:
    lines, printed = [], {}
    for n in SIZES:
        j = judge(trial_deltas(scores, losses, n, 0.0, NULL_TRIALS, SEED))
        printed[n] = {k: float(j[k].mean()) for k in ("mde", "mde_spread", "mde_whole")}
        lines.append(f"null, {n} queries, {NULL_TRIALS:,} trials: Regressed "
                     f"{np.mean(j['verdict'] == 'worse'):.2%}, Better "
                     f"{np.mean(j['verdict'] == 'better'):.2%} (both sides: "
                     f"{np.mean(j['verdict'] != 'same'):.2%}); t-test worse "
                     f"{np.mean(j['ttest_worse']):.2%}; bootstrap CI alone excludes 0 in "
                     f"{np.mean(j['ci_excludes_0']):.2%}; exact p in {np.mean(j['exact']):.0%} "
                     f"of trials; printed MDE mean {printed[n]['mde']:.4f} (loss spread "
                     f"thinly {printed[n]['mde_spread']:.4f}, whole queries "
                     f"{printed[n]['mde_whole']:.4f})")
    return lines, printed


def drop_lines(scores, losses, n: int, printed: dict[str, float]) -> list[str]:
    from kebab_mlflow.stats.power import delta_sd, mde

    lines, nominal, realised, power, sizes = [], [], [], [], []
    null_sd = float(np.mean([delta_sd(d) for d in
                             trial_deltas(scores, losses, n, 0.0, NULL_TRIALS, SEED).deltas]))
    for drop in sorted(set(GRID) | set(REPORTED_DROPS)):
        j = judge(trial_deltas(scores, losses, n, drop, DROP_TRIALS, SEED))
        nominal.append(drop)
        realised.append(float(j["realised"].mean()))
        power.append(float(np.mean(j["verdict"] == "worse")))
        sizes.append(j["loss_size"])
        lines.append(f"{n:>4} {drop:>6.3f} {realised[-1]:>8.4f} {j['mean'].mean():>+8.4f} "
                     f"{power[-1]:>8.1%} {np.mean(j['ttest_worse']):>7.1%} "
                     f"{j['mde'].mean():>7.4f} {sizes[-1]:>6.3f}"
                     + ("  *" if drop in REPORTED_DROPS else ""))
    d80, r80 = interpolate_80(nominal, power), interpolate_80(realised, power)
    if not (d80 and r80):
        return lines + [f"  {n} queries: 80% not reached on the grid"]
    own = mde(null_sd, n, ALPHA, loss=float(np.mean(sizes)))
    return lines + [
        f"  {n} queries: the simulation detects 80% at a realised mean drop of {r80:.4f} "
        f"(nominal {d80:.4f}); printed MDE {printed['mde']:.4f} ({printed['mde'] / r80 - 1:+.1%}"
        f" of the realised, {printed['mde'] / d80 - 1:+.1%} of the nominal)",
        f"    loss model alternatives vs the realised 80% drop: spread thinly "
        f"{printed['mde_spread']:.4f} ({printed['mde_spread'] / r80 - 1:+.1%}); whole queries "
        f"{printed['mde_whole']:.4f} ({printed['mde_whole'] / r80 - 1:+.1%}); the drop's own "
        f"loss size {np.mean(sizes):.3f} {own:.4f} ({own / r80 - 1:+.1%})"]


def main() -> None:
    t0 = time.perf_counter()
    queries, ranked, scores = runs()
    losses = drop_losses(queries, ranked)
    lines = header(queries, scores)
    null, printed = null_lines(scores, losses)
    lines += null + [""]
    lines.append(f"controlled drops (first relevant doc moved down {SHIFT} ranks on a seeded "
                 f"subset), {DROP_TRIALS} trials per cell: power of compare vs paired t-test; "
                 "realised = the mean loss applied, net Δ = the mean paired delta, MDE = mean "
                 "printed, m = loss size of the applied losses")
    lines.append(f"{'n':>4} {'drop':>6} {'realised':>8} {'net Δ':>8} {'compare':>8} "
                 f"{'t-test':>7} {'MDE':>7} {'m':>6}")
    for n in SIZES:
        lines += drop_lines(scores, losses, n, printed[n])
    lines.append("")
    lines.append(f"total {time.perf_counter() - t0:.0f} s")
    emit("bench_gate" + ("" if SHIFT == 3 else f"_shift{SHIFT}"), "\n".join(lines))


if __name__ == "__main__":
    main()
