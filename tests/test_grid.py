"""Grid rows of a sweep file (issue 19 item 2): expansion, naming, validation before anything
runs, and grid children in a real sweep's leaderboard."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.sweep.grid import child_name, labels
from kebab_mlflow.sweep.spec import SweepError, load_sweep
from tests.conftest import GOLDEN, KB, mlflow_client, runs_in, write

runner = CliRunner()


def _sweep(tmp_path: Path, rows: str, head: str = "") -> Path:
    gauge = "" if "gauge_metrics:" in head else "gauge_metrics: [hit_at_5, mrr]\n"  # no key twice
    return write(tmp_path / "grid.yaml", f"golden: {GOLDEN}\ncorpus: {KB}\nresamples: 200\n"
                 f"{gauge}{head}rows:\n{rows}")


def _problems(path: Path) -> list[str]:
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    return [str(p) for p in info.value.problems]


def test_a_grid_row_expands_into_one_child_per_combination(tmp_path):
    spec = load_sweep(_sweep(tmp_path, """\
  - name: bm25
    k: 5
    set: {answer.context_k: 2}
    grid: {bm25.k1: [0.6, 0.9, 1.2], bm25.b: [0.3, 0.75]}
  - {name: plain, preset: naive_baseline}
""", head="set: {chunker.max_chars: 600}\ngauge_metrics: [hit_at_5]\n"))
    grid = [r for r in spec.rows if r.grid_row == "bm25"]
    # file key order, the last key fastest; named <row>_<leaf>-<value>_...
    assert [r.name for r in grid] == [
        "bm25_k1-0.6_b-0.3", "bm25_k1-0.6_b-0.75", "bm25_k1-0.9_b-0.3", "bm25_k1-0.9_b-0.75",
        "bm25_k1-1.2_b-0.3", "bm25_k1-1.2_b-0.75"]
    first = grid[0]
    assert dict(first.overrides) == {"chunker.max_chars": 600, "answer.context_k": 2,
                                     "bm25.k1": 0.6, "bm25.b": 0.3}
    assert dict(first.grid_values) == {"bm25.k1": 0.6, "bm25.b": 0.3}
    assert first.k == 5 and first.preset == "naive_baseline"
    assert first.grid_tags == {"kebab.sweep_grid": "bm25"}
    assert spec.primary == "bm25_k1-0.6_b-0.3"  # the first row, as without grids
    assert [r.name for r in spec.rows][6:] == ["plain", "random_retrieval", "single_chunk"]
    assert spec.row("plain").grid_tags == {}


def test_child_names_from_values():
    assert labels(["bm25.k1", "bm25.b"]) == {"bm25.k1": "k1", "bm25.b": "b"}
    # two keys with the same last part keep their whole key
    assert labels(["a.size", "b.size", "c.x"]) == {"a.size": "a.size", "b.size": "b.size",
                                                   "c.x": "x"}
    assert child_name("r", {"bm25.k1": 1e-05, "top_k": 3, "answer.calibrate": False,
                            "chunker.mode": "document"}) == \
        "r_k1-1e-05_top_k-3_calibrate-false_mode-document"


def test_every_grid_problem_is_listed_with_its_line(tmp_path):
    path = _sweep(tmp_path, """\
  - name: bad_value
    grid:
      bm25.b:
        - 0.3
        - 1.5
  - {name: unknown_key, grid: {bm25.k9: [1, 2]}}
  - {name: not_a_list, grid: {bm25.k1: 1.2}}
  - {name: empty, grid: {bm25.k1: []}}
  - {name: not_a_mapping, grid: [1, 2]}
  - {name: twice, grid: {bm25.k1: [0.6, 0.60]}}
  - {name: both, set: {bm25.k1: 1}, grid: {bm25.k1: [0.6]}}
  - {name: too_close, grid: {chunker.max_chars: [150, 800], chunker.overlap_chars: [100, 200]}}
  - {name: spaced, grid: {dense.model: [my model]}}
  - {name: g_k1-0.6}
  - {name: g, grid: {bm25.k1: [0.6, 0.9]}}
""")
    got = _problems(path)
    expected = [
        f"{path}:10 row bad_value grid: bm25.b must be >= 0 and <= 1, got 1.5",  # its own line
        f"{path}:11 row unknown_key grid: unknown config key 'bm25.k9'",
        f"{path}:12: row not_a_list: grid 'bm25.k1' must be a non-empty list",
        f"{path}:13: row empty: grid 'bm25.k1' must be a non-empty list",
        f"{path}:14: row not_a_mapping: 'grid' must be a non-empty mapping",
        f"{path}:15: row twice: grid 'bm25.k1' lists 0.6 twice",
        f"{path}:16: row both: 'bm25.k1' is set both on the row and in its grid",
        f"{path}:17 row too_close_max_chars-150_overlap_chars-200: chunker.overlap_chars (200) "
        "must be less than chunker.max_chars (150)",  # only this combination is invalid
        f"{path}:18: row spaced: grid child name 'spaced_model-my model' is not a legal row "
        "name",
        f"{path}:20: duplicate row name 'g_k1-0.6' (first at {path}:19)",
    ]
    for needle in expected:
        assert any(p.startswith(needle) for p in got), (needle, got)
    assert len(got) == len(expected), got


def test_a_huge_grid_is_refused(tmp_path):
    values = ", ".join(str(v / 100) for v in range(40))
    path = _sweep(tmp_path, f"  - {{name: huge, grid: {{bm25.k1: [{values}], "
                            f"bm25.b: [{values}]}}}}\n")
    assert any("the grid makes 1600 rows, more than 1000" in p for p in _problems(path))


def test_a_bad_grid_exits_2_before_any_run(tmp_path, store_uri):
    path = _sweep(tmp_path, "  - {name: g, grid: {bm25.b: [0.5, 2.0]}}\n")
    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri])
    assert res.exit_code == 2
    assert "bm25.b must be >= 0 and <= 1, got 2.0" in res.output
    assert runs_in(store_uri) == []


def test_grid_children_run_nested_and_the_leaderboard_sorts_them(tmp_path, store_uri):
    path = _sweep(tmp_path, "  - {name: bm25, grid: {bm25.k1: [0.0, 1.2], bm25.b: [0.0, 1.0]}}"
                            "\n", head="primary: bm25_k1-1.2_b-1.0\n")
    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    names = ["bm25_k1-0.0_b-0.0", "bm25_k1-0.0_b-1.0", "bm25_k1-1.2_b-0.0", "bm25_k1-1.2_b-1.0"]
    assert set(names) <= set(out["rows"])
    client = mlflow_client(store_uri)
    metric_of = {}
    for name in names:
        run = client.get_run(out["rows"][name])
        assert run.data.tags["mlflow.parentRunId"] == out["parent_run_id"]
        assert run.data.tags["kebab.sweep_grid"] == "bm25"
        assert run.info.run_name == name and run.info.status == "FINISHED"
        k1, b = name.removeprefix("bm25_k1-").split("_b-")
        assert float(run.data.params["config.bm25.k1"]) == float(k1)
        assert float(run.data.params["config.bm25.b"]) == float(b)
        metric_of[name] = run.data.metrics["hit_at_5"]
    # k1 = 0 ignores term frequency: the grid's rows differ, so the order below says something
    assert len(set(metric_of.values())) > 1
    board = list(csv.DictReader(io.StringIO(Path(client.download_artifacts(
        out["parent_run_id"], "leaderboard.csv", str(tmp_path))).read_text())))
    means = [float(r["hit_at_5"]) for r in board]
    assert means == sorted(means, reverse=True)  # best first on the first gauge metric
    for r in board:  # each row's mean is its own run's metric (an independent path)
        if r["row"] in metric_of:
            assert float(r["hit_at_5"]) == pytest.approx(metric_of[r["row"]])
    assert {r["row"] for r in board} >= set(names)
