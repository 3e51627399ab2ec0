"""`kebab-mlflow tune` (issue 19 item 3): a seeded TPE search on a train split, nested trial
runs, the best judged on a held-out test split; validation; no optuna; Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import TuneError
from kebab_mlflow.sweep.tune_spec import load_tune
from tests.conftest import FIXTURES, KB, mlflow_client, runs_in, write
from tests.faultpoints import sigint_at_default

pytest.importorskip("optuna", reason="the `tune` extra (optuna) is not installed")

runner = CliRunner()
TRAIN, TEST = FIXTURES / "tune" / "train.yaml", FIXTURES / "tune" / "test.yaml"


def _tune_file(tmp_path: Path, body: str, head: str | None = None) -> Path:
    head = head if head is not None else f"train: {TRAIN}\ntest: {TEST}\ncorpus: {KB}\n"
    return write(tmp_path / "tune.yaml", head + body)


SMALL = """\
name: small-tune
objective: mrr
trials: 4
startup_trials: 2      # trials 2 and 3 come from TPE's model, not random sampling
seed: 3
space:
  bm25.k1: [0.3, 2.0]
  bm25.b: [0.0, 1.0]
"""


def _tune(path: Path, uri: str) -> dict:
    res = runner.invoke(app, ["tune", str(path), "--tracking-uri", uri, "--json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


def test_the_shipped_tune_file_and_splits_are_valid_and_disjoint():
    spec = load_tune(FIXTURES / "tune.yaml")
    assert (spec.n_train, spec.n_test) == (17, 26)  # the 43 fixture queries, split by group
    assert [p.key for p in spec.space] == ["bm25.k1", "bm25.b"]
    assert all(p.kind == "float" for p in spec.space)


def test_same_seed_same_best_parameters_and_runs_nested(tmp_path, store_uri):
    import kebab_mlflow as km

    path = _tune_file(tmp_path, SMALL)
    first = _tune(path, store_uri)  # the CLI, then the Python API: the same search
    second = km.tune(path, tracking_uri=store_uri).as_json()
    assert first["parent_run_id"] != second["parent_run_id"]
    assert first["best_params"] == second["best_params"]  # bit for bit: floats compared exactly
    assert [t["params"] for t in first["trials"]] == [t["params"] for t in second["trials"]]
    assert [t["value"] for t in first["trials"]] == [t["value"] for t in second["trials"]]
    assert len({json.dumps(t["params"]) for t in first["trials"]}) == 4  # it did search

    client = mlflow_client(store_uri)
    parent = client.get_run(first["parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["kebab.kind"] == "tune"
    children = {r.data.tags["kebab.tune_role"] + r.data.tags.get("kebab.tune_trial", ""): r
                for r in runs_in(store_uri)
                if r.data.tags.get("mlflow.parentRunId") == first["parent_run_id"]}
    assert set(children) == {"trial0", "trial1", "trial2", "trial3", "train-baseline",
                             "test-baseline", f"test-best{first['best_trial']}"}
    assert all(r.info.status == "FINISHED" for r in children.values())
    # the best is the best of the trial runs' own logged metric (an independent path)
    trial_mrr = {int(r.data.tags["kebab.tune_trial"]): r.data.metrics["mrr"]
                 for k, r in children.items() if k.startswith("trial")}
    assert first["best_value"] == pytest.approx(max(trial_mrr.values()))
    assert trial_mrr[first["best_trial"]] == max(trial_mrr.values())
    # trials ran on train, the verdict's two runs on test, the best's config on test-best
    assert {r.data.params["golden_set"] for k, r in children.items()
            if k.startswith(("trial", "train"))} == {"kebab-fixtures-train"}
    best_run = client.get_run(first["test"]["best_run_id"])
    assert best_run.data.params["golden_set"] == "kebab-fixtures-test"
    for key, value in first["best_params"].items():
        assert float(best_run.data.params[f"config.{key}"]) == value
        assert float(parent.data.params[f"best.{key}"]) == value
    # compare's verdict, recorded on the test-best run as `compare` does, and on the parent
    assert best_run.data.tags["kebab.verdict"] == first["test"]["verdict"] == \
        parent.data.tags["kebab.verdict"]
    assert best_run.data.tags["kebab.compared_to"] == first["test"]["baseline_run_id"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"best_params.json", "tune_history.png", "trials.csv", "compare.md",
            "tune.yaml"} <= artifacts
    best_json = json.loads(Path(client.download_artifacts(parent.info.run_id, "best_params.json",
                                                          str(tmp_path))).read_text())
    assert best_json["params"] == first["best_params"]
    png = Path(client.download_artifacts(parent.info.run_id, "tune_history.png", str(tmp_path)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_problem_of_a_tune_file_with_its_line(tmp_path):
    path = _tune_file(tmp_path, """\
colour: blue
objective: no_hit_rate
set: {bm25.k1: 1.0}
space:
  bm25.k1: [0.3, 2.0]
  bm25.b: [0.8, 0.2]
  answer.context_k: [1.5, 4]
  hybrid.rrf_k: {low: 0, high: 60, log: true}
  bm25.k9: [1, 2]
  answer.refuse_below: [0.0, 1.5]
  top_k: [1, 3, 10]
  chunker.mode: {choice: [structure, pages]}
""", head=f"train: {TRAIN}\ntest: {TRAIN}\ncorpus: {KB}\n")
    with pytest.raises(TuneError) as info:
        load_tune(path)
    got = [str(p) for p in info.value.problems]
    expected = [
        f"{path}:4: unknown top-level key 'colour'",
        f"{path}:8: space: 'bm25.k1' is also fixed in 'set'",
        f"{path}:9: space: bm25.b needs low < high, both floats",
        f"{path}:10: space: answer.context_k needs low < high, both ints",
        f"{path}:11: space: hybrid.rrf_k needs low < high, both ints and > 0 with log: true",
        f"{path}:12: space: unknown config key 'bm25.k9'",
        f"{path}:13 space: answer.refuse_below must be >= 0 and <= 1, got 1.5",
        f"{path}:14: space: top_k must be [low, high] or {{low: L, high: H, log: true}} or "
        "{choice: [distinct values]}",
        f"{path}:15 space: chunker.mode must be 'structure' or 'document'",
        f"{path}:2: train and test share 17 query id(s) (g00",
        f"{path}:5: objective: no_hit_rate is lower-is-better",
    ]
    for needle in expected:
        assert any(p.startswith(needle) for p in got), (needle, got)
    assert len(got) == len(expected), got


def test_int_ranges_and_choices(tmp_path):
    spec = load_tune(_tune_file(tmp_path, """\
space:
  answer.context_k: [1, 5]
  bm25.k1: {low: 0.1, high: 3, log: true}
  chunker.mode: [structure, document]
  top_k: {choice: [1, 3, 10]}
"""))
    kinds = {p.key: (p.kind, p.low, p.high, p.log, p.choices) for p in spec.space}
    assert kinds == {"answer.context_k": ("int", 1, 5, False, ()),
                     "bm25.k1": ("float", 0.1, 3, True, ()),
                     "chunker.mode": ("choice", None, None, False, ("structure", "document")),
                     "top_k": ("choice", None, None, False, (1, 3, 10))}
    assert spec.objective == "mrr" and spec.trials == 20 and spec.startup_trials == 10


def test_a_bad_tune_file_exits_2_and_creates_no_run(tmp_path, store_uri):
    path = _tune_file(tmp_path, "space: {bm25.b: [0.0, 2.0]}\n")
    res = runner.invoke(app, ["tune", str(path), "--tracking-uri", store_uri])
    assert res.exit_code == 2 and "bm25.b must be >= 0 and <= 1, got 2.0" in res.output
    assert runs_in(store_uri) == []


def _cli(*args: str, prelude: str = "") -> list[str]:
    return [sys.executable, "-c", f"{prelude}from kebab_mlflow.cli import main; main()", *args]


def test_without_optuna_tune_exits_2_with_the_install_hint(tmp_path, store_uri):
    path = _tune_file(tmp_path, SMALL)
    res = subprocess.run(_cli("tune", str(path), "--tracking-uri", store_uri,
                              prelude="import sys; sys.modules['optuna'] = None; "),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2, res.stderr
    assert "needs optuna" in res.stderr and "pip install -e '.[tune]'" in res.stderr
    assert runs_in(store_uri) == []


def test_ctrl_c_ends_the_parent_and_the_running_trial_killed(tmp_path, store_uri):
    path = _tune_file(tmp_path, SMALL.replace("trials: 4", "trials: 500"))
    with subprocess.Popen(_cli("tune", str(path), "--tracking-uri", store_uri),
                          stderr=subprocess.PIPE, text=True, preexec_fn=sigint_at_default) as proc:
        seen = []
        for line in proc.stderr:  # wait for the event: the first trial finished
            seen.append(line)
            if line.startswith("… trial 0:"):
                break
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=600) == 130, "".join(seen) + rest
    assert "Traceback" not in rest and "ended as KILLED" in rest, rest
    runs = runs_in(store_uri)
    statuses = [r.info.status for r in runs]
    assert "RUNNING" not in statuses, statuses
    parent = next(r for r in runs if r.data.tags.get("kebab.kind") == "tune")
    assert parent.info.status == "KILLED"
    assert statuses.count("FINISHED") >= 1  # trial 0


def test_a_bad_name_or_seed_is_a_problem_not_a_default(tmp_path):
    path = _tune_file(tmp_path, "name: [a]\nseed: -1\nspace: {bm25.b: [0.0, 1.0]}\n")
    with pytest.raises(TuneError) as info:
        load_tune(path)
    assert [p.message.split(",")[0] for p in info.value.problems] == [
        "'name' must be a string", "'seed' must be an integer >= 0"]
