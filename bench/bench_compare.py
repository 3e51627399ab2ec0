"""`compare` on two synthetic 10,000-query runs, side by side with ranx.compare.

Data (seeded): 10,000 queries, 1–3 relevant documents each (one chunk per document, so chunk
and doc ids coincide), 10 hits per query. The baseline ranks each relevant document somewhere
in its top 10 with probability 0.7; the candidate is the baseline with the first relevant
document moved to rank 1 on 4% of the queries and one relevant document dropped on 3%;
``contains_all`` flips on 1% of the queries either way. Both runs are logged to a fresh SQLite
MLflow store exactly as ``kebab-mlflow run`` logs them (tags, versions, per_query.jsonl).

Measured (wall clock; the machine may be shared, so read the ratios):

1. statistics alone — :func:`kebab_mlflow.stats.paired_tests` (paired bootstrap CI + sign-flip
   p, 10,000 resamples each) + Holm on 5 metrics × 10,000 queries: the compare's real deltas,
   and a worst case of continuous deltas (no two values equal); against the previous kebab
   implementation (joint bincount bootstrap + int8 sign flips, float64) on the same data;
2. end to end — open the store, resolve both runs, download and verify per_query.jsonl, parse,
   classify, statistics, render JSON + markdown (mlflow import excluded); and recording the
   verdict (tags + 2 artifacts) on top;
3. ranx.compare (student t-test and Fisher randomization, 10,000 permutations, max_p 0.05) on
   the same qrels/runs — the 4 retrieval metrics ranx has (hit_rate@5, mrr@10, precision@5,
   recall@10); cold (first call in the process: numba compile or cache load) and warm; and
   ranx's tests alone on the same per-query arrays. Significance calls are compared: ranx's
   uncorrected p ≤ 0.05 against kebab's raw randomization p < 0.05 and against kebab's verdict
   rule (Holm-adjusted p < 0.05 over the five gated metrics).

Run: .venv/bin/python bench/bench_compare.py   (writes bench/results/bench_compare.txt)
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import WORK, emit  # noqa: E402

SEED, N, DEPTH, RESAMPLES = 20240917, 10_000, 10, 10_000
METRICS = ["hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_doc", "contains_all"]
RANX = {"hit_at_5": "hit_rate@5", "mrr": "mrr@10", "precision_at_5_chunk": "precision@5",
        "recall_at_10_doc": "recall@10"}
VERSIONS = {"parser_version": "parser-v1", "chunker_version": "structure-v1",
            "embedding_version": "e1", "index_version": "i1", "prompt_template_version": "p1"}


# ---------------------------------------------------------------------------------------------
# synthetic runs


def synthetic(rng: np.random.Generator):
    qrels, base, cand = {}, {}, {}
    for i in range(N):
        q = f"q{i:05d}"
        rel = [f"d{i}_{j}" for j in range(rng.integers(1, 4))]
        qrels[q] = rel
        ranking = [f"n{i}_{r}" for r in range(DEPTH)]
        slots = rng.permutation(DEPTH)
        for j, doc in enumerate(rel):
            if rng.random() < 0.7:
                ranking[slots[j]] = doc
        base[q] = ranking
        c = list(ranking)
        u = rng.random()
        present = [r for r, d in enumerate(c) if d in rel]
        if u < 0.04 and present and present[0] > 0:
            c.insert(0, c.pop(present[0]))
        elif 0.04 <= u < 0.07 and present:
            c[present[-1]] = f"x{i}"
        cand[q] = c
    contains_b = (rng.random(N) < 0.6).astype(float)
    flip = rng.random(N)
    contains_c = np.where(flip < 0.01, 1.0 - contains_b, contains_b)
    return qrels, base, cand, contains_b, contains_c


def scores_of(ranking: list[str], rel: list[str]) -> dict[str, float]:
    relset = set(rel)
    flags = [d in relset for d in ranking]
    first = next((r + 1 for r, f in enumerate(flags) if f), None)
    out = {"mrr": 1.0 / first if first and first <= 10 else 0.0}
    for k in (1, 3, 5, 10):
        hits = sum(flags[:k])
        out[f"hit_at_{k}"] = float(hits > 0)
        out[f"precision_at_{k}_chunk"] = hits / k
        out[f"recall_at_{k}_chunk"] = hits / len(rel)
        for name in ("hit", "precision", "recall"):
            src = f"{name}_at_{k}" if name == "hit" else f"{name}_at_{k}_chunk"
            out[f"{name}_at_{k}_doc"] = out[src]
    out["mrr_doc"] = out["mrr"]
    return out


def write_per_query(path: Path, qrels, runs, contains) -> str:
    with path.open("wb") as fh:
        sha = hashlib.sha256()
        for i, (q, ranking) in enumerate(runs.items()):
            s = scores_of(ranking, qrels[q])
            s["contains_all"] = float(contains[i])
            rec = {"id": q, "query": f"synthetic query {q}",
                   "hits": [{"rank": r + 1, "chunk_id": f"{d}#0", "doc_id": d,
                             "score": float(DEPTH - r)} for r, d in enumerate(ranking)],
                   "answer": None, "scores": s, "latency_ms": 1.0, "error": None}
            line = (json.dumps(rec) + "\n").encode()
            fh.write(line)
            sha.update(line)
    return sha.hexdigest()


def log_run(tracker, exp: str, name: str, path: Path, digest: str) -> str:
    run_id = tracker.start_run(exp, name, {
        "kebab.kind": "eval", "kebab.golden_sha256": "synthetic-golden",
        "kebab.per_query_sha256": digest, "kebab.git_commit": "abc123",
        "kebab.git_dirty": "false", "kebab.private": "false"})
    tracker.log_batch(run_id, params={**VERSIONS, "preset": name, "golden_set": "synthetic"})
    tracker.log_artifact(run_id, path)
    tracker.end_run(run_id, "FINISHED")
    return run_id


# ---------------------------------------------------------------------------------------------
# the previous implementation (kebab stats before this issue), for the ratio


def old_stats(deltas: np.ndarray, resamples: int, seed: int):
    m, n = deltas.shape
    rng = np.random.default_rng(seed)
    out = np.empty((m, resamples))
    done = 0
    while done < resamples:
        b = min(256, resamples - done)
        idx = rng.integers(0, n, size=(b, n), dtype=np.int64)
        offsets = (np.arange(b, dtype=np.int64) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=b * n).reshape(b, n)
        out[:, done:done + b] = (counts @ deltas.T).T / n
        done += b
    ci = np.quantile(out, [0.025, 0.975], axis=1)
    observed = np.abs(deltas.mean(axis=1))
    rng = np.random.default_rng(seed)
    extreme = np.zeros(m, dtype=np.int64)
    done = 0
    while done < resamples:
        b = min(1024, resamples - done)
        signs = rng.integers(0, 2, size=(b, n), dtype=np.int8).astype(np.float64) * 2 - 1
        extreme += (np.abs(signs @ deltas.T) / n >= observed - 1e-12).sum(axis=0)
        done += b
    return ci, (1 + extreme) / (1 + resamples)


def cpu_of(fn) -> float:
    """CPU seconds of all threads (a loaded machine inflates wall time, not this)."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


# ---------------------------------------------------------------------------------------------


def main() -> None:
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.stats import resampling as stats

    rng = np.random.default_rng(SEED)
    qrels, base, cand, contains_b, contains_c = synthetic(rng)
    work = WORK / "compare"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    work.mkdir(parents=True)
    pq_b, pq_c = work / "baseline" / "per_query.jsonl", work / "candidate" / "per_query.jsonl"
    pq_b.parent.mkdir()
    pq_c.parent.mkdir()
    dig_b = write_per_query(pq_b, qrels, base, contains_b)
    dig_c = write_per_query(pq_c, qrels, cand, contains_c)
    size_mb = pq_b.stat().st_size / 1e6

    t0 = time.perf_counter()
    import mlflow  # noqa: F401 - the import is not part of the measured compare

    t_import = time.perf_counter() - t0
    from kebab_mlflow.tracking.store import Tracker

    uri = f"sqlite:///{work / 'mlflow.db'}"
    setup = Tracker(uri)
    exp = setup.experiment_id("bench-compare")
    run_b = log_run(setup, exp, "baseline", pq_b, dig_b)
    run_c = log_run(setup, exp, "candidate", pq_c, dig_c)
    del setup

    # --- 2. end to end ---------------------------------------------------------------------
    timings: dict[str, list[float]] = {}

    def end_to_end(record: bool):
        t = [time.perf_counter()]
        tracker = Tracker(uri)
        t.append(time.perf_counter())
        b, c = cmp.load_pair(tracker, "bench-compare", run_b, run_c)
        t.append(time.perf_counter())
        # the primary (mrr) plus the other four as --gate: Holm over all five, as before
        result = cmp.compare_runs(b, c, cmp.CompareOptions(seed=0, gates=tuple(METRICS)))
        t.append(time.perf_counter())
        cmp.dumps(result)
        cmp.to_markdown(result)
        t.append(time.perf_counter())
        if record:
            cmp.record(tracker, result)
        t.append(time.perf_counter())
        timings.setdefault("open store", []).append(t[1] - t[0])
        timings.setdefault("resolve+download+verify+parse", []).append(t[2] - t[1])
        timings.setdefault("classify+statistics", []).append(t[3] - t[2])
        timings.setdefault("render json+md", []).append(t[4] - t[3])
        if record:
            timings.setdefault("record verdict", []).append(t[5] - t[4])
        return result

    e2e, result = best_of(lambda: end_to_end(False))
    e2e_log, _ = best_of(lambda: end_to_end(True))

    # --- 1. statistics alone ---------------------------------------------------------------
    real = [np.array([c.scores[m] - b.scores[m] for b, c in zip(*_rows(cmp, uri, run_b, run_c),
                                                                 strict=True)])
            for m in METRICS]
    cont = [np.random.default_rng(i).normal(0.002, 0.3, N) for i in range(5)]

    def ours(rows):
        tests = stats.paired_tests(rows, RESAMPLES, 0)
        stats.holm(np.array([t.p_value for t in tests]))
        return tests

    t_real, _ = best_of(lambda: ours(real))
    t_cont, _ = best_of(lambda: ours(cont))
    cpu_real, cpu_cont = cpu_of(lambda: ours(real)), cpu_of(lambda: ours(cont))
    t_old_real, _ = best_of(lambda: old_stats(np.stack(real), RESAMPLES, 0), repeat=2)
    t_old_cont, _ = best_of(lambda: old_stats(np.stack(cont), RESAMPLES, 0), repeat=2)

    # --- 3. ranx ---------------------------------------------------------------------------
    t0 = time.perf_counter()
    import warnings

    import ranx
    from numba.core.errors import NumbaTypeSafetyWarning
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    t_ranx_import = time.perf_counter() - t0
    warnings.simplefilter("ignore", NumbaTypeSafetyWarning)  # ranx's own uint64 casts
    qrels_r = ranx.Qrels({q: {d: 1 for d in rel} for q, rel in qrels.items()})
    runs_r = [ranx.Run({q: {d: float(DEPTH - r) for r, d in enumerate(lst)}
                        for q, lst in runs.items()}, name=name)
              for name, runs in (("baseline", base), ("candidate", cand))]
    metrics_r = list(RANX.values())
    ranx_times, ranx_reports = {}, {}
    for test in ("student", "fisher"):
        for state in ("cold", "warm"):
            t0 = time.perf_counter()
            ranx_reports[test] = ranx.compare(qrels_r, runs_r, metrics_r, stat_test=test,
                                              n_permutations=RESAMPLES, max_p=0.05,
                                              random_seed=42)
            ranx_times[(test, state)] = time.perf_counter() - t0
    per_query_r = {name: ranx.evaluate(qrels_r, run, metrics_r, return_mean=False)
                   for name, run in zip(("baseline", "candidate"), runs_r, strict=True)}
    b_rows, c_rows = _rows(cmp, uri, run_b, run_c)
    max_diff = max(float(np.max(np.abs(np.array([r.scores[m] for r in rows])
                                       - per_query_r[side][RANX[m]])))
                   for m in RANX for side, rows in (("baseline", b_rows), ("candidate", c_rows)))

    def ranx_tests(test):
        out = {}
        for m, rm in RANX.items():
            x, y = per_query_r["baseline"][rm], per_query_r["candidate"][rm]
            out[m] = (fisher_randomization_test(x, y, RESAMPLES, 0.05, 42) if test == "fisher"
                      else paired_student_t_test(x, y, 0.05))
        return out

    t_tests, ranx_p = {}, {}
    for test in ("student", "fisher"):  # Fisher at 10,000 permutations is slow: once
        t_tests[test], ranx_p[test] = best_of(lambda test=test: ranx_tests(test), repeat=1)

    # --- report ----------------------------------------------------------------------------
    by_name = {m.name: m for m in result.metrics}
    lines = [
        f"bench_compare: {N} queries × {len(METRICS)} gated metrics, {RESAMPLES} bootstrap "
        f"resamples + {RESAMPLES} sign flips, seed 0; per_query.jsonl {size_mb:.1f} MB per run",
        f"(mlflow import {t_import:.2f} s and ranx import {t_ranx_import:.2f} s not counted; "
        "best of 3 wall-clock unless said; machine shared — read ratios)",
        "",
        "1. statistics alone (bootstrap CI + randomization p + Holm, 5 metrics × 10,000 queries)",
        "",
        "| deltas | kebab now (wall) | kebab now (CPU, all threads) | previous kebab (wall) "
        "| speed-up (wall) |",
        "|---|---|---|---|---|",
        f"| this compare's deltas (hit/mrr/P@5/R@10/contains) | {t_real:.3f} s | "
        f"{cpu_real:.3f} s | {t_old_real:.3f} s | {t_old_real / t_real:.0f}× |",
        f"| continuous worst case (all values distinct) | {t_cont:.3f} s | {cpu_cont:.3f} s | "
        f"{t_old_cont:.3f} s | {t_old_cont / t_cont:.1f}× |",
        "",
        "2. end to end, two 10,000-query runs in a SQLite store (best of 3)",
        "",
        "| step | seconds |",
        "|---|---|",
    ]
    lines += [f"| {k} | {min(v):.3f} |" for k, v in timings.items()]
    lines += [f"| **total, --no-log** | **{e2e:.3f}** |",
              f"| **total, verdict recorded** | **{e2e_log:.3f}** |",
              "",
              f"verdict {result.verdict}; counts {result.counts}",
              "",
              "3. side by side with ranx.compare (4 retrieval metrics; ranx computes them from "
              "qrels+runs itself)",
              "",
              f"per-query scores: kebab vs ranx.evaluate max |difference| = {max_diff:.1e}",
              "",
              "| | seconds | ranx / kebab stats (real deltas) |",
              "|---|---|---|"]
    for (test, state), t in ranx_times.items():
        lines.append(f"| ranx.compare {test}, {state} | {t:.3f} | {t / t_real:.1f}× |")
    for test, t in t_tests.items():
        lines.append(f"| ranx {test} test alone on the per-query arrays (warm) | {t:.3f} | "
                     f"{t / t_real:.1f}× |")
    lines.append(f"| kebab statistics (5 metrics, CI + p + Holm) | {t_real:.3f} | 1.0× |")
    lines += ["", "| metric | delta | kebab p | kebab Holm p | kebab 95% CI | kebab call | "
              "ranx t-test p | ranx Fisher p | agree (raw p<.05) | agree (kebab rule) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    agree_raw = agree_rule = 0
    for m in RANX:
        km = by_name[m]
        p_t = float(ranx_p["student"][m][0])
        p_f = float(ranx_p["fisher"][m][0])
        ranx_sig = {p_t <= 0.05, p_f <= 0.05}
        raw = km.p_value < 0.05
        rule = km.significant is not None
        a_raw = ranx_sig == {raw}
        a_rule = ranx_sig == {rule}
        agree_raw += a_raw
        agree_rule += a_rule
        lines.append(f"| {m} | {km.delta:+.4f} | {km.p_value:.4f} | {km.p_holm:.4f} | "
                     f"[{km.ci_low:+.4f}, {km.ci_high:+.4f}] | {km.significant or '—'} | "
                     f"{p_t:.4f} | {p_f:.4f} | {'yes' if a_raw else 'NO'} | "
                     f"{'yes' if a_rule else 'NO'} |")
    lines += ["", "exact sign-flip p where every non-zero delta has the same size (a "
              "binomial sign test), to judge the Monte-Carlo p-values above:", ""]
    for m in RANX:
        d = real[METRICS.index(m)]
        mags = np.unique(np.round(np.abs(d[d != 0]), 12))  # 0.2 and 0.19999999999999998
        if mags.size == 1:
            k = int(np.count_nonzero(d))
            heads = int(round((k + abs(d.sum()) / mags[0]) / 2))
            exact = min(1.0, 2 * binom.sf(heads - 1, k, 0.5))
            ties = 2 * binom.pmf(heads, k, 0.5)
            lines.append(f"- {m}: exact p = {exact:.4f} ({k} non-zero deltas; "
                         f"P(|sum| = observed) = {ties:.4f})")
    lines += ["", f"significance calls agree with both ranx tests on {agree_raw}/4 metrics "
              f"(raw p < 0.05) and {agree_rule}/4 (kebab's Holm rule); ranx corrects for "
              "nothing and reports no interval. Where a call differs, compare both p-values "
              "with the exact p: ranx's Fisher test compares float means with no tolerance, so "
              "it misses exact ties that rounding put a hair below the observed value."]
    emit("bench_compare", "\n".join(lines))


def _rows(cmp, uri, run_b, run_c, _cache={}):  # noqa: B006 - a deliberate memo
    if "rows" not in _cache:
        from kebab_mlflow.tracking.store import Tracker

        b, c = cmp.load_pair(Tracker(uri), "bench-compare", run_b, run_c)
        _cache["rows"] = (b.rows, c.rows)
    return _cache["rows"]


if __name__ == "__main__":
    main()
