"""ECE and Brier are headline metrics whenever a run has confidences (issue 31): `make run`'s
equivalent logs them with the values of aggregate.json, on the run and on its LoggedModel, in
the description, the saved runs view, `runs` and `show`; the uncalibrated pair after a
calibrator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.calibrate import fit_on_golden_set
from kebab_mlflow.metrics.aggregate import Aggregate
from kebab_mlflow.tracking.ui_view import VIEW_TAG, view_metrics
from tests.conftest import GOLDEN, KB, mlflow_client, runs_in

runner = CliRunner()


def _run_args(store_uri: str) -> list[str]:
    """`make run`'s command (`kebab-mlflow run`: the fixtures), with a temporary store."""
    return ["run", "--golden", str(GOLDEN), "--corpus", str(KB), "--tracking-uri", store_uri]


def _aggregate_json(uri: str, run_id: str, tmp_path: Path) -> dict:
    path = mlflow_client(uri).download_artifacts(run_id, "aggregate.json", str(tmp_path))
    return json.loads(Path(path).read_text())


def test_make_run_logs_ece_and_brier_equal_to_aggregate_json(store_uri, tmp_path):
    result = runner.invoke(app, _run_args(store_uri))
    assert result.exit_code == 0, result.output
    (run,) = runs_in(store_uri)
    block = _aggregate_json(store_uri, run.info.run_id, tmp_path)["abstention_calibration"]
    assert block["n"] == 40
    metrics = run.data.metrics
    assert metrics["ece"] == pytest.approx(block["ece"], abs=0, rel=1e-12)
    assert metrics["brier"] == pytest.approx(block["brier"], abs=0, rel=1e-12)
    assert "ece_uncalibrated" not in metrics  # no calibrator: nothing to pair it with
    assert "abstention_calibration/ece" not in metrics  # the breakdowns stay off by default
    client = mlflow_client(store_uri)
    model = client.get_logged_model(run.outputs.model_outputs[0].model_id)
    linked = {m.key: m.value for m in model.metrics}
    assert linked["ece"] == pytest.approx(block["ece"]) and linked["brier"] == pytest.approx(
        block["brier"])
    assert f"| ece | {block['ece']:.4f} |" in run.data.tags["mlflow.note.content"]
    experiment = client.get_experiment(run.info.experiment_id)
    assert {"ece", "brier"} <= set(view_metrics(experiment.tags[VIEW_TAG]))


def test_runs_and_show_list_ece_and_brier(store_uri):
    assert runner.invoke(app, _run_args(store_uri)).exit_code == 0
    (run,) = runs_in(store_uri)
    listed = runner.invoke(app, ["runs", "--tracking-uri", store_uri])
    header = next(line for line in listed.output.splitlines() if "status" in line)
    assert header.split()[-2:] == ["ece", "brier"]
    assert f"{run.data.metrics['ece']:.4f}" in listed.output
    shown = runner.invoke(app, ["show", "@latest", "--tracking-uri", store_uri]).output
    metric_rows = [line.split()[1] for line in shown.splitlines()
                   if line.startswith("│") and len(line.split()) > 3]
    # ECE and Brier come after the answer-level metrics, before the run-level block ends
    assert metric_rows.index("ece") == metric_rows.index("brier") - 1
    assert metric_rows.index("citation_validity") < metric_rows.index("ece")


def test_a_calibrated_run_logs_the_uncalibrated_pair_too(store_uri, tmp_path):
    fit = fit_on_golden_set(GOLDEN, KB, method="isotonic")  # stored with the index
    result = runner.invoke(app, _run_args(store_uri))
    assert result.exit_code == 0, result.output
    (run,) = runs_in(store_uri)
    aggregate = _aggregate_json(store_uri, run.info.run_id, tmp_path)
    calibrated, raw = aggregate["abstention_calibration"], aggregate["abstention_calibration_raw"]
    assert raw["brier"] == pytest.approx(fit.before["brier"])
    assert calibrated["brier"] != raw["brier"]
    metrics = run.data.metrics
    assert metrics["brier"] == pytest.approx(calibrated["brier"])
    assert metrics["ece_uncalibrated"] == pytest.approx(raw["ece"])
    assert metrics["brier_uncalibrated"] == pytest.approx(raw["brier"])


@pytest.mark.parametrize(("calibrated", "raw", "expected"), [
    (None, None, {}),
    ({"ece": 0.2, "brier": 0.3, "n": 4}, {"ece": 0.2, "brier": 0.3, "n": 4},
     {"ece": 0.2, "brier": 0.3}),
    ({"ece": 0.1, "brier": 0.15, "n": 4}, {"ece": 0.2, "brier": 0.3, "n": 4},
     {"ece": 0.1, "brier": 0.15, "ece_uncalibrated": 0.2, "brier_uncalibrated": 0.3}),
])
def test_calibration_headline_of_an_aggregate(calibrated, raw, expected):
    aggregate = Aggregate(overall={"mrr": 0.5}, abstention_calibration=calibrated,
                          abstention_calibration_raw=raw)
    assert aggregate.calibration_headline() == expected


@pytest.mark.parametrize(("backend", "index_version", "expected"), [
    ("lexical", "bm25-k1=0.9-b=0.4", "lexical-bm25-k1=0_9-b=0_4-c0b14c39"),
    ("random", "sha256-random-v1", "random-sha256-random-v1-c0b14c39"),
    ("python", "unknown", "python-c0b14c39"),
])
def test_a_logged_model_is_named_for_its_backend_and_key_settings(backend, index_version,
                                                                   expected):
    from mlflow.utils.validation import _validate_logged_model_name

    from kebab_mlflow.tracking.layout import model_name

    name = model_name(backend, {"index_version": index_version}, "c0b14c39" + "0" * 56)
    assert name == expected
    _validate_logged_model_name(name)  # MLflow accepts it (it refuses "." "/" ":" "%")
