"""Rescoring a stored run vs a fresh run, and the bounds for unjudged hits on SciFact.

Two parts (``nice -n 10`` on a shared machine):

    .venv/bin/python bench/bench_rescore.py timing [--sizes 300,100000] [--repeats 3]
    .venv/bin/python bench/bench_rescore.py bounds

``timing``: in memory (no MLflow: the store's logging costs the same on both sides), side by
side with :func:`common.alternate` (one untimed warm-up call per side, then ``--repeats``
timed calls taking turns; the median):

- **fresh run**: ``evaluate(pipeline, golden)`` — the BM25 reference pipeline over the SciFact
  corpus (``chunker.mode=document``, k 10), its index built once before the timing (a run
  with a cached index); every query searched and scored, bounds for unjudged hits included;
- **fresh run, bounds off**: the same with the bounds' scoring pass patched out — what the
  bounds cost every run;
- **rescore**: ``rescore(run_of_result(fresh), golden)`` — the recorded ``per_query.jsonl``
  read back and scored again under the same golden set, no pipeline call (what
  ``kebab-mlflow rescore`` does between downloading the file and logging the derived run).

Sizes: 300 = SciFact test (the real golden set); 100,000 = a synthetic set over the SciFact
corpus from ``bench_scale.synthetic_golden`` (one sentence of a random abstract as the query,
that abstract as its judged document; seed 0).

``bounds``: SciFact test, BM25 top 10: the unjudged hits per query and each doc metric's
usual value and its value with the unjudged hits counted relevant (the run's
``unjudged_bounds`` block); then ``compare`` of BM25 default against two other settings with
``--unjudged gate`` semantics (comparison/unjudged.py; 2000 resamples, seed 0): does the
verdict hold within the bounds? Results: bench/results/bench_rescore.txt and
bench/results/bench_rescore_bounds.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import synthetic_golden  # noqa: E402 - bench/ is the script's folder
from common import SCIFACT_CORPUS, alternate, emit, load_line, scifact_golden  # noqa: E402

SMALL = 1000  # a set this small is timed with --small-repeats


def _pipeline(preset: str = "naive_baseline", **options: object):
    from kebab_mlflow import progress
    from kebab_mlflow.evaluation.evaluate import reference_pipeline

    with progress.silenced():
        return reference_pipeline(preset, SCIFACT_CORPUS, chunker__mode="document", **options)


def _golden(n: int, tmp: Path):
    from kebab_mlflow.golden import load_golden_set

    return load_golden_set(scifact_golden() if n == 300 else
                           synthetic_golden(n, 0, tmp / f"synthetic-{n}.yaml"))


def _sides(pipeline, golden, fresh) -> dict:
    """The three timed sides: a fresh run, one with the bounds patched out, a rescore."""
    from kebab_mlflow.evaluation import runner
    from kebab_mlflow.evaluation.evaluate import evaluate
    from kebab_mlflow.evaluation.rescore import rescore, run_of_result

    real_bounds = runner.bound_scores

    def no_bounds(*_: object, **__: object) -> dict:
        return {}

    def run_unbounded():
        runner.bound_scores = no_bounds
        try:
            return evaluate(pipeline, golden, k=10)
        finally:
            runner.bound_scores = real_bounds

    return {"fresh": lambda: evaluate(pipeline, golden, k=10), "unbounded": run_unbounded,
            "rescore": lambda: rescore(run_of_result(fresh), golden, quiet=True).result}


def timing_main(args: argparse.Namespace) -> None:
    from kebab_mlflow import progress
    from kebab_mlflow.evaluation.evaluate import evaluate

    start = os.getloadavg()[0]
    pipeline = _pipeline()
    tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-rescore-"))
    lines = ["bench_rescore timing — in memory, BM25 over SciFact (chunker.mode=document, k 10, "
             "index built before timing); sides alternate, 1 warm-up each, median of the "
             "repeats (best in brackets)", "",
             f"{'queries':>8} {'repeats':>8} {'fresh run s':>14} {'bounds off s':>14} "
             f"{'rescore s':>14} {'rescore / fresh':>16} {'bounds cost':>12} "
             f"{'same per_query':>15}"]
    for n in [int(s) for s in args.sizes.split(",")]:
        golden = _golden(n, tmp)
        with progress.silenced():
            fresh = evaluate(pipeline, golden, k=10)
            repeats = args.repeats if n > SMALL else args.small_repeats
            t = alternate(_sides(pipeline, golden, fresh), repeats)
        same = t["rescore"].result.per_query_path.read_bytes() == \
            fresh.per_query_path.read_bytes()
        assert t["unbounded"].result.aggregate.unjudged_bounds is None
        f, u, r = (t[s].median for s in ("fresh", "unbounded", "rescore"))
        lines.append(
            f"{n:>8,} {repeats:>8} {f:>7.2f} ({t['fresh'].best:.2f}) "
            f"{u:>7.2f} ({t['unbounded'].best:.2f}) "
            f"{r:>7.2f} ({t['rescore'].best:.2f}) {r / f:>16.2f} {(f - u) / u:>+11.1%} "
            f"{'yes' if same else 'NO':>15}")
        print(lines[-1], flush=True)
    lines += ["", "same per_query: the rescore's per_query.jsonl has the fresh run's bytes "
              "(latencies are the recorded ones).", "bounds cost: (fresh - bounds off) / "
              "bounds off.", load_line(start)]
    emit("bench_rescore", "\n".join(lines))


def _bounds_table(result) -> list[str]:
    block = result.aggregate.unjudged_bounds
    hits = block["unjudged_hits"]
    lines = ["unjudged hits per query (distinct documents among the first k): " + ", ".join(
        f"top {name.split('_')[3]} {value:.2f}" for name, value in hits.items()),
        f"judged_at_10_doc {result.overall['judged_at_10_doc']:.4f}", "",
        f"{'metric':<22} {'usual (lower)':>14} {'unjudged relevant':>18}"]
    lines += [f"{name:<22} {result.overall[name]:>14.4f} {value:>18.4f}"
              for name, value in block["upper"].items()]
    return lines


def bounds_main(args: argparse.Namespace) -> None:
    from kebab_mlflow import progress
    from kebab_mlflow.api import side_of_result
    from kebab_mlflow.comparison.records import CompareOptions
    from kebab_mlflow.comparison.unjudged import UnjudgedMode, with_unjudged_bounds
    from kebab_mlflow.comparison.verdict import compare_runs
    from kebab_mlflow.evaluation.evaluate import evaluate
    from kebab_mlflow.golden import load_golden_set

    start = os.getloadavg()[0]
    golden = load_golden_set(scifact_golden())
    settings: dict[str, dict[str, object]] = {
        "BM25 default (k1 0.9, b 0.4)": {},
        "BM25 k1 0.5, b 0.3": {"bm25__k1": 0.5, "bm25__b": 0.3},
        "BM25 k1 2.0, b 1.0": {"bm25__k1": 2.0, "bm25__b": 1.0},
        "BM25 k1 0.1, b 0.0": {"bm25__k1": 0.1, "bm25__b": 0.0},
        "random retrieval": {"preset": "random_retrieval"}}
    with progress.silenced():
        results = {name: evaluate(_pipeline(**options), golden, k=10)
                   for name, options in settings.items()}
    base_name, base = next(iter(results.items()))
    lines = [f"bench_rescore bounds — SciFact test ({len(golden)} queries), {base_name}, "
             "top 10, chunker.mode=document", "", *_bounds_table(base), ""]
    options = CompareOptions(resamples=args.resamples, seed=0)
    for name, result in list(results.items())[1:]:
        b, c = side_of_result(base, "baseline"), side_of_result(result, "candidate")
        t0 = time.perf_counter()
        usual = compare_runs(b, c, options)
        gated = with_unjudged_bounds(usual, b, c, golden, options, UnjudgedMode.GATE)
        lines += [f"compare {base_name} → {name} ({usual.primary.name}, "
                  f"{args.resamples} resamples, {time.perf_counter() - t0:.1f} s with bounds):",
                  f"  verdict {usual.verdict}; under --unjudged gate: {gated.verdict}",
                  *(f"  {note}" for note in gated.notes if "unjudged" in note), ""]
    lines.append(load_line(start))
    emit("bench_rescore_bounds", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=("timing", "bounds"))
    parser.add_argument("--sizes", default="300,100000")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats, large sets")
    parser.add_argument("--small-repeats", type=int, default=21,
                        help=f"timed repeats for sets of at most {SMALL} queries")
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    {"timing": timing_main, "bounds": bounds_main}[args.part](args)


if __name__ == "__main__":
    main()
