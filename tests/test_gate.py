"""The gate a CI team relies on (issues 17 and 22): ground-truth levels, the primary metric,
Holm with --gate, exact p, MDE, --margin, --max-regressions, run ids across experiments, CI
formats and exit codes, `power`, the 80-column table."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sp
from scipy.optimize import brentq
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.cli.compare_table import render_table
from kebab_mlflow.comparison import to_json, to_junit, to_markdown
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.verdict import compare_runs
from kebab_mlflow.errors import GoldenSetError
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.golden import parse_golden_set
from kebab_mlflow.records import Hit
from tests.conftest import GOLDEN, KB, ROOT, SHARED
from tests.test_ci_comment import forge  # noqa: F401 - the fake API fixture

runner = CliRunner()
SCIFACT = SHARED / "datasets" / "scifact"


def _doc_row(qid: str, rank: int, ndcg: float | None = None) -> PerQueryRow:
    """A doc-level-only query (a BEIR set): no chunk truth; first relevant doc at ``rank``
    (0 = a miss)."""
    hits = tuple(Hit(rank=i + 1, chunk_id=f"d{i}", doc_id=f"d{i}", score=10.0 - i)
                 for i in range(10))
    value = (1 / math.log2(rank + 1) if rank else 0.0) if ndcg is None else ndcg
    scores = {"mrr": None, "hit_at_5": None, "mrr_doc": 1 / rank if rank else 0.0,
              "ndcg_at_10_doc": value, "recall_at_100_doc": 1.0}
    return PerQueryRow(id=qid, query=f"claim {qid}", hits=hits, answer=None, scores=scores,
                       latency_ms=1.0, error=None,
                       first_relevant_rank={"chunk": None, "doc": rank})


def _side(run_id: str, rows, **tags) -> RunSide:
    base = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": "g",
            "kebab.git_commit": "abc", "kebab.git_dirty": "false", **tags}
    params = {"parser_version": "p1", "chunker_version": "c1", "embedding_version": "e",
              "index_version": "i", "prompt_template_version": "t"}
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=base,
                   rows=tuple(rows), per_query_sha256="x")


# ---------------------------------------------------------------------------------------------
# levels from the ground truth (issue 22 item 1)


def test_doc_level_set_counts_regressions_at_doc_level_and_gates_on_ndcg():
    """A BM25 → random-like change on a doc-only set: 250 of 300 queries go hit → miss."""
    base = [_doc_row(f"q{i}", 1 + i % 3) for i in range(300)]
    cand = [_doc_row(f"q{i}", 0 if i < 250 else 1 + i % 3) for i in range(300)]
    result = compare_runs(_side("b", base), _side("c", cand), CompareOptions(resamples=500))
    assert (result.level, result.n_with_truth, result.counts["Regression"]) == ("doc", 300, 250)
    assert result.verdict == "Regressed" and result.exit_code == 1
    assert [(m.name, m.role) for m in result.metrics] == [("ndcg_at_10_doc", "primary")]
    first = to_json(result)["queries"][0]
    assert (first["level"], first["kind"], first["candidate_rank"]) == ("doc", "Regression",
                                                                          None)
    assert "300 with ground truth), doc level" in to_markdown(result)


def test_four_doc_level_queries_that_all_regress_are_regressed_by_the_small_set_rule():
    base = [_doc_row(f"q{i}", 1) for i in range(4)]
    cand = [_doc_row(f"q{i}", 0) for i in range(4)]
    result = compare_runs(_side("b", base), _side("c", cand), CompareOptions(resamples=500))
    assert result.verdict == "Regressed" and result.counts["Regression"] == 4
    # with 4 queries the smallest exact p is 2^(1-4) = 0.125: statistics alone cannot say it
    assert result.primary.p_value == pytest.approx(0.125) and result.primary.p_exact
    assert result.primary.significant is None
    assert result.reasons == ("small set: 4 queries with ground truth (< 30) and 4 "
                              "Regression query(ies) at doc level",)
    same = compare_runs(_side("b", base), _side("c", base), CompareOptions(resamples=500))
    assert same.verdict == "Same"
    assert same.reasons[0] == "no gated metric differs significantly and no query regressed " \
                              "at doc level"


@pytest.mark.skipif(not SCIFACT.exists(), reason="needs ../shared/datasets/scifact")
def test_scifact_bm25_vs_random_retrieval_is_regressed_at_doc_level(tmp_path, store_uri):
    golden = tmp_path / "scifact.yaml"
    res = runner.invoke(app, ["import-beir", str(SCIFACT), "--split", "test", "--out",
                              str(golden)])
    assert res.exit_code == 0, res.output
    for name, preset in (("bm25", "naive_baseline"), ("rand", "random_retrieval")):
        execute(RunOptions(golden=str(golden), corpus=str(SCIFACT / "corpus.jsonl.gz"),
                           preset=preset, overrides={"chunker.mode": "document"},
                           tracking_uri=store_uri, run_name=name))
    res = runner.invoke(app, ["compare", "bm25", "rand", "--format", "json", "--no-log",
                              "--tracking-uri", store_uri])
    data = json.loads(res.stdout)
    assert res.exit_code == 1 and data["verdict"] == "Regressed"
    assert data["level"] == "doc" and data["n"]["with_ground_truth"] == 300
    assert data["counts"]["Regression"] >= 200
    assert data["settings"]["primary"] == "ndcg_at_10_doc"
    assert data["metrics"][0]["significant"] == "worse"


# ---------------------------------------------------------------------------------------------
# the primary metric, Holm with --gate, exact p, MDE (issue 17 items 1-3)


def _chunk_rows(deltas_mrr, n=40, base_mrr=0.5, **extra):
    hits = (Hit(rank=1, chunk_id="d#0", doc_id="d", score=1.0),)
    b, c = [], []
    for i in range(n):
        d = deltas_mrr[i] if i < len(deltas_mrr) else 0.0
        common = {"recall_at_10_doc": 1.0, **extra}
        b.append(PerQueryRow(id=f"q{i}", query="q", hits=hits, answer=None,
                             scores={"mrr": base_mrr, **common}, latency_ms=1.0, error=None,
                             first_relevant_rank={"chunk": 2, "doc": 2}))
        rank = 2 if d == 0 else (1 if d > 0 else 4)
        c.append(PerQueryRow(id=f"q{i}", query="q", hits=hits, answer=None,
                             scores={"mrr": base_mrr + d, **common}, latency_ms=1.0,
                             error=None, first_relevant_rank={"chunk": rank, "doc": rank}))
    return b, c


def test_a_change_touching_six_queries_can_be_flagged_by_the_primary_alone():
    """Under Holm over four gates no change touching <= 7 queries could be flagged; the
    primary alone at 0.05 flags six concordant losses: exact p = 2^(1-6) = 0.03125."""
    b, c = _chunk_rows([-0.25] * 6)
    result = compare_runs(_side("b", b), _side("c", c), CompareOptions(resamples=100))
    (m,) = result.metrics
    assert m.p_exact and m.p_value == 2.0 ** -5 and m.p_holm == 2.0 ** -5
    assert result.verdict == "Regressed" and m.significant == "worse"
    # same seed, same result; another seed, same result too (nothing was resampled for p)
    again = compare_runs(_side("b", b), _side("c", c), CompareOptions(resamples=100, seed=9))
    assert again.metrics[0].p_value == m.p_value


def test_an_unchanged_gate_is_reported_and_left_out_of_holm():
    b, c = _chunk_rows([-0.25] * 6)
    result = compare_runs(_side("b", b), _side("c", c),
                          CompareOptions(gates=("recall_at_10_doc",), resamples=100))
    primary, gate = result.metrics
    assert (gate.name, gate.role, gate.unchanged, gate.p_holm) == ("recall_at_10_doc", "gate",
                                                                   True, None)
    assert primary.p_holm == primary.p_value  # a correction over one metric
    assert result.verdict == "Regressed"
    assert "unchanged" in to_markdown(result)
    # a second gate that changed does share the correction: Holm over 2
    b2, c2 = _chunk_rows([-0.25] * 6, hit_at_5=1.0)
    c2 = [PerQueryRow(id=r.id, query=r.query, hits=r.hits, answer=None,
                      scores={**r.scores, "hit_at_5": 0.0 if i < 3 else 1.0}, latency_ms=1.0,
                      error=None,
                      first_relevant_rank=r.first_relevant_rank) for i, r in enumerate(c2)]
    result = compare_runs(_side("b", b2), _side("c", c2),
                          CompareOptions(gates=("hit_at_5",), resamples=100))
    p1, p2 = (m.p_value for m in result.metrics)
    assert p2 == 2.0 ** -2  # three concordant losses
    assert result.metrics[0].p_holm == pytest.approx(min(1, 2 * p1))
    assert result.verdict == "Same"  # 0.0625 after the correction


def _power_at_random(drop: float, d: np.ndarray, losses: np.ndarray) -> float:
    """The sign-flip test's power (normal approximation) for a drop falling on a random
    subset, each query hit losing a loss drawn like `losses`: Σ_k P(K = k)·P(reject | k),
    K ~ Binomial(n, drop / E[L]), the delta method given k (written out from the definitions:
    T = Σd/√Σd², d = ε·|noise| − L on the k hit). The noise here is continuous: the exact
    test's discreteness changes nothing."""
    n, za = d.size, sp.norm.ppf(0.975)
    l1, l2, l3, l4 = (np.mean(losses**k) for k in (1, 2, 3, 4))
    noise2 = np.mean(d**2)
    k = np.arange(n + 1)
    e1, e2 = -k * l1, n * noise2 + k * l2
    v1 = n * noise2 + k * (l2 - l1 * l1)
    v2 = k * (4 * noise2 * l2 + l4 - l2 * l2)
    c12 = -k * (2 * noise2 * l1 + l3 - l1 * l2)
    g1, g2 = 1 / np.sqrt(e2), -e1 / (2 * e2**1.5)
    sd_t = np.sqrt(g1 * g1 * v1 + 2 * g1 * g2 * c12 + g2 * g2 * v2)
    given_k = sp.norm.cdf((-za - e1 / np.sqrt(e2)) / sd_t)
    return float(np.dot(sp.binom.pmf(k, n, drop / l1), given_k))


def test_mde_models_the_loss_and_a_same_verdict_says_it_everywhere():
    rng = np.random.default_rng(5)
    n = 300
    base_v = rng.uniform(0.2, 0.9, n)
    cand_v = np.clip(base_v + rng.normal(0, 0.1, n), 0, 1)
    rows = lambda vals: [_doc_row(f"q{i}", 1, ndcg=float(v)) for i, v in enumerate(vals)]  # noqa: E731
    result = compare_runs(_side("b", rows(base_v)), _side("c", rows(cand_v)),
                          CompareOptions(resamples=2000))
    m = result.primary
    # independently: the expected drop whose power is 80% when it falls on a random subset of
    # the queries, each losing its whole baseline score (printed: the conservative figure), or
    # a change like the observed ones (|d|), by root finding on the power
    d = cand_v - base_v
    whole = brentq(lambda x: _power_at_random(x, d, base_v) - 0.8, 1e-6, base_v.mean())
    spread = brentq(lambda x: _power_at_random(x, d, np.abs(d[d != 0])) - 0.8, 1e-6,
                    np.abs(d).mean())
    assert m.loss_size == pytest.approx(np.sum(d**2) / np.sum(np.abs(d)), rel=1e-9)
    assert m.mde == pytest.approx(max(whole, spread), rel=1e-6)
    assert m.mde_whole == m.mde and m.mde_spread == pytest.approx(spread, rel=1e-6)
    za, zp = sp.norm.ppf(0.975), sp.norm.ppf(0.8)
    assert m.mde > (za + zp) * np.std(d, ddof=1) / math.sqrt(n)  # above the thin lower bound
    assert (f"alpha 0.05; conservative: a loss of any shape, whole queries being the hardest "
            f"to see; one spread like the observed changes is seen from {m.mde_spread:.4f})"
            in result.reasons[-1])
    assert result.verdict == "Same", result.reasons
    words = f"could not have detected a loss smaller than {m.mde:.4f} ndcg_at_10_doc with " \
            f"these 300 queries"
    assert words in " ".join(result.reasons)
    assert words in to_markdown(result)
    assert words in json.dumps(to_json(result))
    assert words in " ".join(render_table(result, width=80, wide=False, color=False).split())


# ---------------------------------------------------------------------------------------------
# --margin, --max-regressions (items 4, 5)


def test_margin_makes_an_unproven_same_inconclusive_exit_1():
    rng = np.random.default_rng(1)
    base_v = rng.uniform(0.2, 0.9, 60)
    cand_v = np.clip(base_v + rng.normal(0, 0.15, 60), 0, 1)
    rows = lambda vals: [_doc_row(f"q{i}", 1, ndcg=float(v)) for i, v in enumerate(vals)]  # noqa: E731
    b, c = _side("b", rows(base_v)), _side("c", rows(cand_v))
    plain = compare_runs(b, c, CompareOptions(resamples=2000))
    assert plain.verdict == "Same"
    low = plain.primary.ci_low
    tight = compare_runs(b, c, CompareOptions(resamples=2000, margin=-low / 2))
    assert tight.verdict == "Inconclusive" and tight.exit_code == 1
    assert tight.reasons[0].startswith("not shown non-inferior: ndcg_at_10_doc's CI worse bound")
    loose = compare_runs(b, c, CompareOptions(resamples=2000, margin=-low * 2))
    assert loose.verdict == "Same" and loose.primary.within_margin


def test_max_regressions_counts_hit_to_miss_queries():
    base = [_doc_row(f"q{i}", 1) for i in range(100)]
    cand = [_doc_row(f"q{i}", 0 if i < 3 else 1) for i in range(100)]
    b, c = _side("b", base), _side("c", cand)
    assert compare_runs(b, c, CompareOptions(resamples=200)).verdict == "Same"
    assert compare_runs(b, c, CompareOptions(resamples=200, max_regressions=3)).verdict == "Same"
    capped = compare_runs(b, c, CompareOptions(resamples=200, max_regressions=2))
    assert capped.verdict == "Regressed"
    assert "3 Regression queries (hit → miss at doc level) > --max-regressions 2" in \
        capped.reasons


# ---------------------------------------------------------------------------------------------
# real runs: references across experiments, CI formats and exit codes, power


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEBAB_CACHE_DIR", str(root / "cache"))
        mp.chdir(root)

        def run(name, experiment="kebab-eval", preset="naive_baseline"):
            return execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=uri,
                                      preset=preset, run_name=name,
                                      experiment=experiment)).run_id

        ids = {"a": run("a", "team-a"), "b": run("b", "team-b"),
               "rand": run("rand", "team-a", "random_retrieval")}
    return {"uri": uri, "ids": ids, "root": root}


def _cli(runs, *args, env=None):
    return runner.invoke(app, [*args, "--tracking-uri", runs["uri"]], env=env)


def test_run_ids_resolve_in_any_experiment_and_the_output_says_so(runs):
    ids = runs["ids"]
    res = _cli(runs, "compare", ids["a"], ids["b"], "--format", "json", "--no-log")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["baseline"]["experiment"] == "team-a"
    assert data["candidate"]["experiment"] == "team-b"
    assert "the runs are in different experiments (baseline in 'team-a', candidate in " \
           "'team-b')" in data["notes"]
    # names stay experiment-scoped
    res = _cli(runs, "compare", "a", "b", "--experiment", "team-a", "--no-log")
    assert res.exit_code == 2 and "no run named or with id 'b' in experiment 'team-a'" in \
        res.output


def test_junit_has_a_testcase_per_gate_and_per_regressed_query(runs, tmp_path):
    out = tmp_path / "compare.xml"
    res = _cli(runs, "compare", "a", "rand", "--experiment", "team-a", "--gate", "hit_at_5",
               "--format", "junit", "--out", str(out), "--no-log")
    assert res.exit_code == 1, res.output
    suite = ET.parse(out).getroot()
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names[:2] == ["primary mrr", "gate hit_at_5"]
    regressed = [n for n in names if n.startswith("query ")]
    data = json.loads(_cli(runs, "compare", "a", "rand", "--experiment", "team-a",
                           "--format", "json", "--no-log").stdout)
    assert len(regressed) == data["counts"]["Regression"] > 0
    failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert int(suite.get("failures")) == len(failures) >= len(regressed) + 1
    assert int(suite.get("tests")) == len(names)
    # a passing gate lists its regressed queries without failing them (exit 0 = no failure)
    b = [_doc_row(f"q{i}", 1) for i in range(100)]
    c = [_doc_row(f"q{i}", 0 if i < 2 else 1) for i in range(100)]
    result = compare_runs(_side("b", b), _side("c", c), CompareOptions(resamples=200))
    suite = ET.fromstring(to_junit(result).split("\n", 1)[1])
    assert result.verdict == "Same" and suite.get("failures") == "0"
    assert [t.get("name") for t in suite.iter("testcase")][1:] == ["query q0", "query q1"]


def test_github_step_summary_gets_the_markdown_report(runs, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    res = _cli(runs, "compare", "a", "a", "--experiment", "team-a", "--no-log",
               env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert res.exit_code == 0, res.output
    text = summary.read_text()
    assert text.startswith("earlier step\n# Compare: Same") and "## Gated metrics" in text


def test_unwritable_outputs_exit_2_never_1(runs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    # a regression that cannot be written is still exit 2: the output failed, not the gate
    res = _cli(runs, "compare", "a", "rand", "--experiment", "team-a", "--no-log", "--out",
               str(blocker / "out.md"))
    assert res.exit_code == 2 and "cannot write --out" in res.output
    res = _cli(runs, "compare", "a", "rand", "--experiment", "team-a", "--no-log",
               env={"GITHUB_STEP_SUMMARY": str(blocker / "summary.md")})
    assert res.exit_code == 2 and "cannot append to $GITHUB_STEP_SUMMARY" in res.output


def test_a_broken_pipe_exits_2(runs):
    code = ("import sys; from kebab_mlflow.cli import main; sys.argv = ['kebab-mlflow', "
            f"'compare', 'a', 'rand', '--experiment', 'team-a', '--no-log', '--format', 'json', "
            f"'--tracking-uri', {runs['uri']!r}]; main()")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()  # the reader goes away before anything is written (`| head -0`)
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait() == 2, err
    assert "broken pipe" in err and "Traceback" not in err


def test_power_prints_the_mde_and_the_queries_needed(runs):
    res = _cli(runs, "power", "a", "--experiment", "team-a", "--metric", "mrr",
               "--delta", "0.05")
    assert res.exit_code == 0, res.output
    # independently: the per-query mrr of that run, from MLflow's stored artifact
    from kebab_mlflow.comparison.loading import load_side
    from kebab_mlflow.tracking.store import Tracker

    side = load_side(Tracker(runs["uri"]), "team-a", "a", "run")
    values = np.array([r.scores["mrr"] for r in side.rows if r.scores.get("mrr") is not None])
    # the model (README "How many queries do I need?"): noise of the run's sd, a loss of whole
    # queries losing their score (size E[s²]/E[s]); D detected at 80% when
    # D ≥ za·√((sd² + D·size)/n) + zp·sd/√n — the MDE by root finding, the n by search
    za, zp = sp.norm.ppf(0.975), sp.norm.ppf(0.8)
    sd, size = values.std(ddof=1), np.mean(values**2) / np.mean(values)
    gap = lambda d, n: d - za * math.sqrt((sd**2 + d * size) / n) - zp * sd / math.sqrt(n)  # noqa: E731
    text = " ".join(res.output.split())
    assert f"mrr on run a ({runs['ids']['a'][:8]}): {values.size} queries" in text
    assert f"per-query loss size {size:.4f}" in text
    assert f"with these {values.size} queries: {brentq(gap, 1e-9, 5, args=(values.size,)):.4f}" \
        in text
    needed = next(n for n in range(2, 100_000) if gap(0.05, n) >= 0)
    assert f"to detect a drop of 0.0500: {needed:,} queries" in text
    res = _cli(runs, "power", "a", "--experiment", "team-a", "--delta", "0")
    assert res.exit_code == 2 and "--delta must be > 0" in res.output


def test_the_table_fits_80_columns_and_wide_or_a_pipe_drops_nothing(runs):
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.tracking.store import Tracker

    b, c = cmp.load_pair(Tracker(runs["uri"]), "team-a", "a", "rand")
    result = compare_runs(b, c, CompareOptions(gates=("hit_at_5", "recall_at_10_doc")))
    narrow = render_table(result, width=80, wide=False, color=False)
    assert max(map(len, narrow.splitlines())) <= 80
    assert f"({result.candidate['run_id'][:8]})" in narrow and "--wide:" in narrow
    for m in result.metrics:
        assert m.name in narrow
    wide = render_table(result, width=None, wide=True, color=False)
    assert result.candidate["run_id"] in wide and "p Holm" in wide
    shown = [q for q in result.queries if q.kind != "Draw" or q.contains_all or q.refusal]
    assert all(q.id in wide for q in shown) and "…" not in wide
    # through the CLI (stdout is not a terminal here): the wide rendering
    res = _cli(runs, "compare", "a", "rand", "--experiment", "team-a", "--no-log")
    assert result.candidate["run_id"] in res.stdout and "--wide:" not in res.stdout


# ---------------------------------------------------------------------------------------------
# the golden set's primary_metric


def test_golden_primary_metric_is_validated_and_decides(runs, tmp_path, store_uri):
    data = yaml.safe_load(GOLDEN.read_text())
    bad = parse_golden_set
    with pytest.raises(GoldenSetError, match="'primary_metric' must be a metric name"):
        bad(yaml.safe_dump({**data, "primary_metric": 3}).encode(), "g.yaml")
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({**data, "primary_metric": "ndcg_at_11_doc"}))
    res = runner.invoke(app, ["run", "--golden", str(typo), "--corpus", str(KB),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "unknown primary_metric 'ndcg_at_11_doc'" in res.output
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({**data, "primary_metric": "hit_at_3"}))
    for name in ("x", "y"):
        execute(RunOptions(golden=str(good), corpus=str(KB), tracking_uri=store_uri,
                           run_name=name))
    res = runner.invoke(app, ["compare", "x", "y", "--format", "json", "--no-log",
                              "--tracking-uri", store_uri])
    settings = json.loads(res.stdout)["settings"]
    assert (settings["primary"], settings["primary_source"]) == ("hit_at_3",
                                                                 "golden set primary_metric")


# ---------------------------------------------------------------------------------------------
# the README's CI examples, run against a local store


def _ci_commands(path: Path) -> list[str]:
    """Every kebab-mlflow command of a CI example file, in order."""
    doc = yaml.safe_load(path.read_text())
    lines = []
    for job in (doc.get("jobs") or {k: v for k, v in doc.items() if isinstance(v, dict)}
                ).values():
        lines += [s["run"] for s in job.get("steps", []) if "run" in s]
        lines += job.get("script", [])
    return [line for line in lines if line.startswith("kebab-mlflow ")]


@pytest.mark.parametrize("example, env", [
    ("github-actions.yml", {"GITHUB_STEP_SUMMARY": "summary.md", "GITHUB_TOKEN": "t",
                            "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_PATH": "event.json"}),
    ("gitlab-ci.yml", {"CI_COMMIT_SHORT_SHA": "0a1b2c3", "CI_MERGE_REQUEST_IID": "7",
                       "GITLAB_TOKEN": "t", "CI_PROJECT_ID": "42"}),
])
def test_ci_examples_run_against_a_local_store(example, env, tmp_path, monkeypatch,
                                               forge):  # noqa: F811 - the fixture
    """Each kebab-mlflow line of the example, its variables expanded as the shell would, runs
    in-process (CliRunner) against a local SQLite store, in order: run, baseline set, run,
    compare (the pull-request comment), ci comment (to a loopback fake of the API), compare —
    and must exit 0 (the same pipeline twice: Same)."""
    commands = _ci_commands(ROOT / "examples" / "ci" / example)
    assert [c.split()[1] for c in commands] == ["run", "baseline", "run", "compare", "ci",
                                                "compare"]
    assert f"examples/ci/{example}" in (ROOT / "docs" / "compare.md").read_text()
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    (tmp_path / "event.json").write_text(json.dumps({"pull_request": {"number": 1234}}))
    state, api = forge
    for key, value in {**env, "GITHUB_API_URL": api, "CI_API_V4_URL": f"{api}/api/v4",
                       "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}",
                       }.items():
        monkeypatch.setenv(key, value)
    for command in commands:
        # GitHub's ${{ expression }} placeholders: any stable value will do here
        command = os.path.expandvars(re.sub(r"\$\{\{[^}]*\}\}", "1234", command))
        command = command.removesuffix(" || test $? -eq 1")  # the shell's: exit 1 tolerated
        res = runner.invoke(app, shlex.split(command)[1:])
        assert res.exit_code == 0, (command, res.output)
    assert [m for m, _, _ in state.log] == ["GET", "POST"]  # the comment was posted
    assert "### ⚪ Same" in state.comments[0]["body"]
    suite = ET.parse(tmp_path / "compare.xml").getroot()
    assert suite.get("failures") == "0" and suite.find("testcase") is not None
    if "GITHUB_STEP_SUMMARY" in env:
        assert (tmp_path / "summary.md").read_text().startswith("# Compare: Same")
