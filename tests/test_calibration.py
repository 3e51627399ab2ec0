"""Abstention calibration (issue 5): ECE/Brier, null block, outcome buckets, the calibrator,
where it is stored, and `kebab-mlflow calibrate`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.config import build_config
from kebab_mlflow.evaluation.calibrate import fit_on_golden_set
from kebab_mlflow.evaluation.runner import build_aggregate
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.metrics.calibration import (
    abstention_outcomes,
    brier,
    calibration_block,
    calibration_pairs,
    ece,
    reliability_bins,
)
from kebab_mlflow.pipeline.calibrator import (
    CalibrationError,
    Calibrator,
    base_versions,
    calibrator_key,
    calibrator_path,
    platt_fit,
)
from kebab_mlflow.pipeline.reference import _load_calibrator, build_pipeline
from kebab_mlflow.records import VERSION_KEYS, Answer, VersionSnapshot
from tests.conftest import GOLDEN, KB, write

runner = CliRunner()


def _independent_ece(conf, correct):
    bins: dict[int, list[tuple[float, float]]] = {}
    for c, y in zip(conf, correct, strict=True):
        bins.setdefault(min(int(c * 10), 9), []).append((c, y))
    return sum(len(m) / len(conf) * abs(sum(y for _, y in m) / len(m) - sum(c for c, _ in m)
                                        / len(m)) for m in bins.values())


# --- ECE / Brier ------------------------------------------------------------------------------

def test_ece_and_brier_hand_computed():
    conf = np.array([0.1, 0.15, 0.8, 0.95])
    correct = np.array([0.0, 1.0, 1.0, 1.0])
    # bin 1: acc 0.5, conf 0.125 -> 2/4 * 0.375; bin 8: 1/4 * 0.2; bin 9: 1/4 * 0.05
    assert ece(conf, correct) == pytest.approx(0.1875 + 0.05 + 0.0125)
    assert brier(conf, correct) == pytest.approx((0.01 + 0.7225 + 0.04 + 0.0025) / 4)


def test_ece_bin_edges_follow_int_conf_times_10():
    # 0.3 belongs to bin 3 with 0.39 (one bin: |0.5 - 0.345|), not bin 2
    assert ece(np.array([0.3, 0.39]), np.array([1.0, 0.0])) == pytest.approx(0.155)
    # 1.0 is in bin 9 with 0.9; 0.0 in bin 0
    assert ece(np.array([0.9, 1.0]), np.array([1.0, 1.0])) == pytest.approx(0.05)
    assert ece(np.array([0.0]), np.array([0.0])) == 0.0
    assert [b[3] for b in reliability_bins(np.array([0.0, 0.3, 0.39, 1.0]),
                                           np.array([0, 1, 0, 1]))] == [1, 0, 0, 2, 0, 0, 0, 0,
                                                                         0, 1]


def test_brier_matches_sklearn_and_ece_an_independent_loop():
    from sklearn.metrics import brier_score_loss

    rng = np.random.default_rng(7)
    conf = rng.random(500)
    correct = (rng.random(500) < conf ** 2).astype(float)
    assert brier(conf, correct) == pytest.approx(brier_score_loss(correct, conf))
    assert ece(conf, correct) == pytest.approx(_independent_ece(conf, correct))


def test_reliability_bins_report_mean_confidence_accuracy_and_counts():
    bins = reliability_bins(np.array([0.05, 0.15, 0.25, 0.95]), np.array([0, 1, 1, 0]))
    assert bins[0] == (0.0, 0.05, 0.0, 1)
    assert bins[2] == (0.2, 0.25, 1.0, 1)
    assert bins[5] == (0.5, None, None, 0)


def _q(qid, answerable=True, ask=True, **kw):
    return GoldenQuery(id=qid, query=f"q {qid}", ask=ask, answerable=answerable, **kw)


def test_cases_without_a_usable_confidence_are_left_out_and_none_gives_null():
    queries = [_q("a"), _q("b"), _q("c"), _q("d"), _q("e", ask=False)]
    answers = [Answer(text="x", citations=("c#0",), refusal_reason=None, confidence=None),
               Answer(text="x", citations=("c#0",), refusal_reason=None, confidence=float("nan")),
               Answer(text="x", citations=("c#0",), refusal_reason=None, confidence=1.5),
               Answer(text="", citations=(), refusal_reason="gate", confidence=True), None]
    conf, correct = calibration_pairs(queries, answers, np.ones(5))
    assert conf.size == 0 and calibration_block(conf, correct) is None
    answers[0] = Answer(text="x", citations=("c#0",), refusal_reason=None, confidence=0.7)
    conf, correct = calibration_pairs(queries, answers, np.ones(5))
    assert conf.tolist() == [0.7] and correct.tolist() == [1.0]


def test_aggregate_calibration_block_is_null_without_confidence_and_json_clean():
    golden = GoldenSet(name="g", queries=(_q("a"), _q("b", answerable=False)))
    answers = [Answer(text="x", citations=("c#0",)),
               Answer(text="", citations=(), refusal_reason="gate")]
    scores = {"contains_all": np.array([1.0, np.nan])}
    agg = build_aggregate(golden, scores, answers, np.array([1.0, 2.0]))
    assert agg.abstention_calibration is None and agg.abstention_calibration_raw is None
    assert "reliability_bins" not in agg.as_dict()
    agg.to_json()  # refuses NaN


def test_aggregate_calibration_correctness_follows_design():
    # answerable + right answer (correct), unanswerable refused (correct), answerable refused
    # (wrong), unanswerable answered (wrong)
    golden = GoldenSet(name="g", queries=(_q("a"), _q("b", answerable=False), _q("c"),
                             _q("d", answerable=False)))
    answers = [Answer(text="x", citations=("c#0",), refusal_reason=None, confidence=0.9,
                      raw_confidence=0.9),
               Answer(text="", citations=(), refusal_reason="gate", confidence=0.8,
                      raw_confidence=0.2),
               Answer(text="", citations=(), refusal_reason="gate", confidence=0.6,
                      raw_confidence=0.4),
               Answer(text="y", citations=("c#0",), refusal_reason=None, confidence=0.3,
                      raw_confidence=0.3)]
    scores = {"contains_all": np.array([1.0, np.nan, 0.0, 0.0])}
    block = build_aggregate(golden, scores, answers, np.ones(4)).abstention_calibration
    conf, correct = np.array([0.9, 0.8, 0.6, 0.3]), np.array([1.0, 1.0, 0.0, 0.0])
    assert block == {"ece": pytest.approx(_independent_ece(conf, correct)),
                     "brier": pytest.approx(brier(conf, correct)), "n": 4}


# --- abstention outcomes ----------------------------------------------------------------------

def test_abstention_outcome_buckets_counts_and_shares():
    queries = [_q("a", False), _q("b", False), _q("c", False), _q("d", False), _q("e", False),
               _q("f"), _q("g", False, ask=False)]
    answers = [Answer(text="", citations=(), refusal_reason="gate"),  # correct_refusal
               Answer(text="the answer", citations=("x#0",)),  # incorrect_answer
               Answer(text="no cite"),  # boundary: answered without evidence
               Answer(text="", citations=("x#0",), refusal_reason="refused but cites"),  # boundary
               None,  # boundary: the pipeline raised
               Answer(text="", citations=(), refusal_reason="gate"),
               # answerable: not an abstention case
               None]  # not asked
    out = abstention_outcomes(queries, answers)
    assert out == {"n": 5, "correct_refusal": 1, "incorrect_answer": 1, "boundary_partial": 3,
                   "correct_refusal_share": 0.2, "incorrect_answer_share": 0.2,
                   "boundary_partial_share": 0.6}
    assert abstention_outcomes(queries[5:6], answers[5:6]) is None


# --- the calibrator ---------------------------------------------------------------------------

def _synthetic(n=400, seed=3):
    rng = np.random.default_rng(seed)
    raw = rng.random(n)
    refused = raw < 0.4
    p = np.where(refused, 0.9 - raw, 0.3 + 0.6 * raw)
    correct = (rng.random(n) < p).astype(float)
    return raw, refused, correct


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_calibrator_is_monotone_per_branch_and_lowers_in_sample_error(method):
    raw, refused, correct = _synthetic()
    cal = Calibrator.fit(raw, refused, correct, method)
    grid = np.linspace(0, 1, 21)
    answered = [cal(x, False) for x in grid]
    refusals = [cal(x, True) for x in grid]
    assert all(b >= a - 1e-12 for a, b in zip(answered, answered[1:], strict=False))
    assert all(b <= a + 1e-12 for a, b in zip(refusals, refusals[1:], strict=False))
    assert all(0.0 <= v <= 1.0 for v in answered + refusals)
    before = np.where(refused, 1 - raw, raw)
    after = cal.apply(raw, refused)
    assert brier(after, correct) < brier(before, correct)
    assert ece(after, correct) < ece(before, correct)


def test_platt_fit_minimises_its_objective():
    from scipy.optimize import minimize

    raw, refused, correct = _synthetic()
    x, y = raw[~refused], correct[~refused]
    a, b = platt_fit(x, y)
    n_pos, n_neg = y.sum(), y.size - y.sum()
    t = np.where(y > 0.5, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss(w):
        z = w[0] * x + w[1]
        return np.sum(np.logaddexp(0, z) - t * z)

    ref = minimize(loss, np.zeros(2), method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).x
    assert (a, b) == pytest.approx(tuple(ref), abs=1e-4)


def test_platt_fit_with_two_inputs_minimises_its_objective():
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    x = rng.random((300, 2))
    y = (rng.random(300) < 1 / (1 + np.exp(-(2 * x[:, 0] + 3 * x[:, 1] - 2)))).astype(float)
    w = platt_fit(x, y)
    n_pos, n_neg = y.sum(), y.size - y.sum()
    t = np.where(y > 0.5, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss(v):
        z = x @ v[:2] + v[2]
        return np.sum(np.logaddexp(0, z) - t * z)

    ref = minimize(loss, np.zeros(3), method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 40000}).x
    assert w == pytest.approx(tuple(ref), abs=1e-4)


def _with_similarity(n=600, seed=4):
    """Answers whose correctness depends on the similarity as much as on the raw confidence."""
    rng = np.random.default_rng(seed)
    raw, sim = rng.random(n), rng.random(n)
    refused = raw < 0.3
    p = np.where(refused, 0.8 - 0.6 * sim, 0.1 + 0.4 * raw + 0.45 * sim)
    return raw, refused, (rng.random(n) < p).astype(float), sim


def test_the_similarity_is_a_second_input_of_platt_and_ignored_by_isotonic(tmp_path):
    raw, refused, correct, sim = _with_similarity()
    cal = Calibrator.fit(raw, refused, correct, "platt", similarity=sim)
    assert cal.answered.similarity_slope > 0 > cal.refused.similarity_slope
    plain = Calibrator.fit(raw, refused, correct, "platt")
    assert plain.answered.similarity_slope is None
    with_sim, without = cal.apply(raw, refused, sim), plain.apply(raw, refused)
    assert brier(with_sim, correct) < brier(without, correct) - 0.005
    # isotonic regression is one-dimensional: the same map with or without it
    assert Calibrator.fit(raw, refused, correct, "isotonic", similarity=sim) == \
        Calibrator.fit(raw, refused, correct, "isotonic")
    with pytest.raises(ValueError, match="fitted with the answers' similarity"):
        cal(0.6, False)
    cal.save(tmp_path / "c.json")
    assert Calibrator.load(tmp_path / "c.json") == cal
    # a calibrator written before the similarity existed reads as one without it
    data = plain.to_json()
    for m in ("answered", "refused"):
        del data[m]["similarity_slope"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert Calibrator.load(tmp_path / "old.json") == plain


def test_one_outcome_only_gives_a_smoothed_constant_and_no_data_falls_back_to_raw():
    raw = np.array([0.6, 0.7, 0.8, 0.1])
    refused = np.array([False, False, False, True])
    cal = Calibrator.fit(raw, refused, np.array([1.0, 1.0, 1.0, 0.0]), "platt")
    assert cal(0.65, False) == pytest.approx(4 / 5)  # (3 + 1) / (3 + 2)
    assert cal(0.1, True) == pytest.approx(1 / 3)  # (0 + 1) / (1 + 2)
    only_answers = Calibrator.fit(raw[:3], refused[:3], np.array([1.0, 0.0, 1.0]), "isotonic")
    assert only_answers(0.25, True) == 0.75  # no refusal seen: 1 - raw


def test_unknown_method_is_rejected():
    with pytest.raises(CalibrationError, match="unknown calibration method 'beta'"):
        Calibrator.fit(np.array([0.5]), np.array([False]), np.array([1.0]), "beta")


def test_save_load_roundtrip_and_corrupt_file(tmp_path):
    raw, refused, correct = _synthetic()
    for method in ("isotonic", "platt"):
        cal = Calibrator.fit(raw, refused, correct, method, {"golden_set": "g"})
        cal.save(tmp_path / f"{method}.json")
        back = Calibrator.load(tmp_path / f"{method}.json")
        assert back == cal and back.info == {"golden_set": "g"}
        assert back(0.55, False) == cal(0.55, False)
    bad = write(tmp_path / "bad.json", '{"format": "kebab-calibrator/1", "method": "platt"}')
    with pytest.raises(CalibrationError, match="unreadable calibrator") as info:
        Calibrator.load(bad)
    assert str(bad) in str(info.value)


# --- storage key ------------------------------------------------------------------------------

V = VersionSnapshot(parser_version="parser-v1", chunker_version="document-v1",
                    embedding_version="bm25s-v1", index_version="bm25-k1=0.9-b=0.4",
                    prompt_template_version="extractive-v1-ctx3-sent1-gate0.5")


def _versions(values: list[str]) -> VersionSnapshot:
    return VersionSnapshot(**dict(zip(VERSION_KEYS, values, strict=True)))


def test_key_ignores_the_calibrated_suffix_but_not_backend_or_answerer_settings():
    calibrated = _versions([*list(V.as_dict().values())[:4],
                                   "extractive-v1-ctx3-sent1-gate0.5-calibrated"])
    assert calibrator_key(calibrated) == calibrator_key(V)
    assert base_versions(calibrated) == V.as_dict()
    other_index = _versions([*list(V.as_dict().values())[:3], "bm25-k1=1.2-b=0.75",
                                    V.prompt_template_version])
    other_gate = _versions([*list(V.as_dict().values())[:4],
                                   "extractive-v1-ctx3-sent1-gate0.4"])
    assert len({calibrator_key(V), calibrator_key(other_index), calibrator_key(other_gate)}) == 3


def test_load_calibrator_finds_the_file_for_these_versions_only(tmp_path):
    raw, refused, correct = _synthetic()
    cal = Calibrator.fit(raw, refused, correct, "platt")
    cal.save(calibrator_path(tmp_path, V))
    assert calibrator_path(tmp_path, V).name == f"calibrator-{calibrator_key(V)}.json"
    assert _load_calibrator(tmp_path, V) == cal
    other = _versions([*list(V.as_dict().values())[:3], "sha256-random-v1",
                              V.prompt_template_version])
    assert _load_calibrator(tmp_path, other) is None
    assert _load_calibrator(tmp_path) is None


# --- fitting on a golden set, `kebab-mlflow calibrate` ----------------------------------------

def test_fit_on_golden_set_stores_the_calibrator_with_the_index():
    fit = fit_on_golden_set(GOLDEN, KB, method="isotonic")
    assert fit.path.is_file() and fit.path.parent.parent.name == "index"
    data = json.loads(fit.path.read_text())
    assert data["method"] == "isotonic" and data["info"]["golden_set"] == "kebab-fixtures"
    assert data["info"]["versions"]["prompt_template_version"].endswith("gate0.5")
    assert fit.before["n"] == fit.after["n"] == fit.n_answered + fit.n_refused == 40
    assert fit.after["brier"] <= fit.before["brier"]
    pipeline = build_pipeline(build_config(), KB)
    assert _load_calibrator(pipeline.folder, pipeline.versions) == fit.calibrator


def test_calibrated_runs_use_the_stored_calibrator():
    """Needs ReferencePipeline.__init__ to pass its versions: `_load_calibrator(folder,
    self._versions)`."""

    fit = fit_on_golden_set(GOLDEN, KB, method="platt")
    pipeline = build_pipeline(build_config(), KB)
    assert pipeline.calibrator == fit.calibrator
    hits = pipeline.search("What is the budget of the Bayline Tram Extension?", 10)
    answer = pipeline.ask("What is the budget of the Bayline Tram Extension?", hits)
    assert answer.confidence == pytest.approx(fit.calibrator(answer.raw_confidence,
                                                             answer.refused))
    off = build_pipeline(build_config(overrides={"answer.calibrate": "false"}), KB)
    assert off.calibrator is None
    # the version says which calibrator: fitting another one changes it
    platt_version = pipeline.versions.prompt_template_version
    assert platt_version.endswith(f"-calibrated-{fit.calibrator.digest()[:8]}")
    fit_on_golden_set(GOLDEN, KB, method="isotonic")
    isotonic_version = build_pipeline(build_config(), KB).versions.prompt_template_version
    assert isotonic_version != platt_version
    assert base_versions({"prompt_template_version": isotonic_version}) == \
        base_versions({"prompt_template_version": platt_version})


def test_cli_calibrate_prints_before_after_and_the_path():
    result = runner.invoke(app, ["calibrate", "--golden", str(GOLDEN), "--corpus", str(KB),
                                 "--method", "isotonic"])
    assert result.exit_code == 0, result.output
    assert "raw (before)" in result.output and "calibrated (after)" in result.output
    assert "calibrator stored at " in result.output
    path = Path(result.output.split("calibrator stored at ")[1].split()[0])
    assert json.loads(path.read_text())["method"] == "isotonic"


def test_cli_calibrate_rejects_bad_input_with_exit_2(tmp_path):
    no_ask = write(tmp_path / "g.yaml", "queries:\n  - id: a\n    query: budget of the tram\n")
    result = runner.invoke(app, ["calibrate", "--golden", str(no_ask), "--corpus", str(KB)])
    assert result.exit_code == 2
    assert f"error: nothing to calibrate on: golden set {no_ask} has no 'ask: true' query" \
        in _flat(result.output)
    result = runner.invoke(app, ["calibrate", "--golden", str(GOLDEN), "--corpus", str(KB),
                                 "--method", "beta"])
    assert result.exit_code == 2
    assert "error: unknown calibration method 'beta'; valid: isotonic, platt" \
        in _flat(result.output)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_nan_never_reaches_the_block():
    conf, correct = calibration_pairs([_q("a")],
                                      [Answer(text="x", citations=(), refusal_reason=None,
                                              confidence=math.nan)],
                                      np.array([1.0]))
    assert calibration_block(conf, correct) is None


def test_a_run_that_cannot_use_the_calibrator_says_which_versions_differ(caplog):
    """Issue 27: after `calibrate`, changing only bm25.k1 dropped the calibration silently."""
    fit_on_golden_set(GOLDEN, KB, method="platt")
    with caplog.at_level("WARNING", logger="kebab_mlflow"):
        same = build_pipeline(build_config(), KB)
    assert same.calibrator is not None and "no calibrator" not in caplog.text
    with caplog.at_level("WARNING", logger="kebab_mlflow"):
        other = build_pipeline(build_config(overrides={"bm25.k1": "1.3"}), KB)
    assert other.calibrator is None
    assert "-calibrated-" not in other.versions.prompt_template_version
    assert "no calibrator was fitted for this answerer and retrieval" in caplog.text
    assert "index_version bm25-k1=0.9-b=0.4 → bm25-k1=1.3-b=0.4" in caplog.text
