"""The MLproject (issue 19 item 4): `mlflow run . -e sweep` runs a sweep whose parent nests
under the project's run, with every row under the parent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import GOLDEN, KB, ROOT, runs_in, write

MLFLOW = Path(sys.executable).with_name("mlflow")


def test_the_mlproject_declares_run_sweep_and_compare():
    project = yaml.safe_load((ROOT / "MLproject").read_text())
    assert set(project["entry_points"]) == {"run", "sweep", "compare"}
    assert "{file}" in project["entry_points"]["sweep"]["command"]


@pytest.mark.skipif(not MLFLOW.exists(), reason="no mlflow CLI beside this interpreter")
def test_mlflow_run_of_the_sweep_entry_point(tmp_path, store_uri):
    sweep = write(tmp_path / "sweep.yaml", f"golden: {GOLDEN}\ncorpus: {KB}\nresamples: 200\n"
                  "gauge_metrics: [hit_at_5]\nfloors: [random_retrieval]\nrows:\n"
                  "  - {name: bm25}\n  - {name: bm25_b1, bm25.b: 1.0}\n")
    env = {**os.environ, "MLFLOW_TRACKING_URI": store_uri, "PYTHONPATH": str(ROOT),
           "PATH": f"{MLFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("MLFLOW_RUN_ID", None)
    res = subprocess.run([str(MLFLOW), "run", str(ROOT), "-e", "sweep", "-P", f"file={sweep}",
                          "--env-manager", "local", "--experiment-name", "kebab-eval"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = {r.info.run_id: r for r in runs_in(store_uri)}
    project = [r for r in runs.values() if r.data.tags.get("mlflow.project.entryPoint") == "sweep"]
    assert len(project) == 1 and project[0].info.status == "FINISHED"
    assert project[0].data.params["file"] == str(sweep)
    parents = [r for r in runs.values() if r.data.tags.get("kebab.kind") == "sweep"]
    assert len(parents) == 1
    parent = parents[0]
    # the project's run is the umbrella: the sweep's parent nests under it, the rows under that
    assert parent.data.tags["mlflow.parentRunId"] == project[0].info.run_id
    assert parent.info.status == "FINISHED"
    rows = {r.data.tags["kebab.sweep_row"]: r for r in runs.values()
            if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(rows) == {"bm25", "bm25_b1", "random_retrieval"}
    assert all(r.info.status == "FINISHED" for r in rows.values())
    assert len(runs) == 5  # project, parent, three rows: nothing else
