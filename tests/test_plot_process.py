"""A single run's plots drawn in a second process (evaluation/plots.py, issue 32: the plot was
0.9 s of a cached run's 3.1 s): the same PNG bytes as drawn in-process, drawn in-process when
that process fails, no process left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.evaluation import plots
from tests.conftest import GOLDEN, KB, mlflow_client

OVERALL = {"hit_at_1": 0.25, "hit_at_5": 0.5, "hit_at_10": 0.75, "ndcg_at_10_doc": 0.4,
           "ndcg_at_5_doc": 0.3, "mrr": 0.33, "recall_at_10": None}
BINS = [[0.0, 0.05, 0.0, 3], [0.5, 0.6, 0.5, 4], [0.9, None, None, 0]]


def _jobs(folder):
    return [("metric_vs_k", {"overall": OVERALL, "path": str(folder / "k.png"), "title": "t"}),
            ("reliability_diagram", {"bins": BINS, "path": str(folder / "r.png"),
                                     "title": "t: confidence vs accuracy"})]


def test_the_plot_process_draws_the_bytes_drawn_here(tmp_path, monkeypatch):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    for kind, args in _jobs(here):
        plots.draw(kind, args)
    # from here on only the process can draw: finish() drawing a plot here would fail
    monkeypatch.setattr(plots, "draw", lambda *a: pytest.fail("drawn here, not by the process"))
    with plots.plot_process() as plotter:
        assert plotter is not None
        for kind, args in _jobs(there):
            plotter.draw(kind, **args)
        plotter.finish()
    for name in ("k.png", "r.png"):
        assert (there / name).read_bytes() == (here / name).read_bytes()
        assert (here / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _no_process(*args, **kwargs):
    raise BlockingIOError(11, "Resource temporarily unavailable")  # fork at a process limit


@pytest.mark.parametrize("failure", ["exits at once", "cannot start"])
def test_a_failed_plot_process_is_drawn_here_instead(tmp_path, monkeypatch, failure):
    if failure == "exits at once":
        monkeypatch.setattr(sys, "executable", "/bin/false")  # the process exits 1
    else:
        monkeypatch.setattr(plots.subprocess, "Popen", _no_process)
    with plots.plot_process() as plotter:
        assert plotter is not None
        for kind, args in _jobs(tmp_path):
            plotter.draw(kind, **args)
        plotter.finish()
    assert (tmp_path / "k.png").stat().st_size > 0 and (tmp_path / "r.png").stat().st_size > 0


def test_an_unused_plot_process_is_ended_with_its_block():
    with plots.plot_process() as plotter:
        assert plotter is not None
        proc = plotter._proc
        assert proc is not None and proc.poll() is None
    assert proc.returncode is not None  # killed and reaped, not left running


def test_serve_refuses_an_empty_job_list_and_draws_a_given_one(tmp_path):
    serve = [sys.executable, "-P", "-c",
             "from kebab_mlflow.evaluation.plots import serve; serve()"]
    assert subprocess.run(serve, input=b"", capture_output=True).returncode == 1
    done = subprocess.run(serve, input=json.dumps(_jobs(tmp_path)).encode(),
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.png").exists() and (tmp_path / "r.png").exists()


@pytest.mark.parametrize("through", ["cli", "execute"])
def test_a_run_logs_the_plot_drawn_here_whether_drawn_aside_or_not(tmp_path, store_uri,
                                                                  monkeypatch, through):
    """The CLI's run draws aside; execute() (sweeps, tuning, the API) draws in-process. The
    PNG logged is the one drawn in-process either way."""
    from kebab_mlflow.app.run import RunOptions, execute

    started = []
    real = plots.PlotProcess.__init__

    def spy(self):
        started.append(True)
        real(self)

    monkeypatch.setattr(plots.PlotProcess, "__init__", spy)
    if through == "cli":
        res = CliRunner().invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                                       "--run-name", "p", "--json", "--tracking-uri",
                                       store_uri])
        assert res.exit_code == 0, res.output
        run_id = json.loads(res.stdout)["run_id"]
    else:
        run_id = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), run_name="p",
                                    tracking_uri=store_uri)).run_id
    assert started == ([True] if through == "cli" else [])
    client = mlflow_client(store_uri)
    png = Path(client.download_artifacts(run_id, "metric_vs_k.png", str(tmp_path / "a")))
    aggregate = json.loads(Path(client.download_artifacts(run_id, "aggregate.json",
                                                          str(tmp_path / "a"))).read_text())
    plots.metric_vs_k(aggregate["overall"], tmp_path / "here.png", "p")
    assert png.read_bytes() == (tmp_path / "here.png").read_bytes()


def test_plots_not_drawn_when_publishing_fails_are_drawn_by_upload(tmp_path, store_uri,
                                                                   monkeypatch):
    """The manifest is written while the plot process draws (app/run.py finish_run): a run
    whose store fails before the PNGs are awaited keeps a folder without them (the process
    is ended before the folder moves), and ``upload`` draws and logs the bytes drawn here;
    a half-written PNG (a dot file) is not logged."""
    import errno

    from kebab_mlflow.app import run as log
    from kebab_mlflow.app.run import RunOptions, execute, upload
    from kebab_mlflow.errors import TrackingError

    ended = []
    monkeypatch.setattr(plots.PlotProcess, "start", lambda self: None)  # never handed over
    real_close, real_checkpoint = plots.PlotProcess.close, log.checkpoint
    monkeypatch.setattr(plots.PlotProcess, "close",
                        lambda self: ended.append(self._proc is not None) or real_close(self))

    def lost(name: str) -> None:
        if name == "dataset-logged":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_checkpoint(name)

    monkeypatch.setattr(log, "checkpoint", lost)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrackingError, match="results kept in"):
        execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), run_name="p",
                           tracking_uri=store_uri, plots_aside=True))
    assert ended[0] is True  # the live process was ended before the folder was kept
    monkeypatch.undo()
    (folder,) = (tmp_path / "kebab-recovery").iterdir()
    assert not list(folder.glob("*.png"))
    (folder / ".metric_vs_k.png.part").write_bytes(b"\x89PNG half")
    run_id = upload(folder)
    client = mlflow_client(store_uri)
    logged = {a.path for a in client.list_artifacts(run_id)}
    assert {"metric_vs_k.png", "aggregate.json"} <= logged
    assert not any(name.startswith(".") for name in logged)
    png = Path(client.download_artifacts(run_id, "metric_vs_k.png", str(tmp_path / "a")))
    aggregate = json.loads(Path(client.download_artifacts(run_id, "aggregate.json",
                                                          str(tmp_path / "a"))).read_text())
    plots.metric_vs_k(aggregate["overall"], tmp_path / "here.png", "p")
    assert png.read_bytes() == (tmp_path / "here.png").read_bytes()


def test_the_run_publishes_while_the_plots_are_drawn(tmp_path, store_uri, monkeypatch):
    """The jobs are handed over before the manifest is written and awaited only after the
    metrics are logged: drawing overlaps the first publishing steps."""
    from kebab_mlflow.app import run as log
    from kebab_mlflow.app.run import RunOptions, execute

    events = []
    real_start, real_finish, real_checkpoint = (plots.PlotProcess.start,
                                                plots.PlotProcess.finish, log.checkpoint)
    monkeypatch.setattr(plots.PlotProcess, "start",
                        lambda self: events.append("start") or real_start(self))
    monkeypatch.setattr(plots.PlotProcess, "finish",
                        lambda self: events.append("finish") or real_finish(self))
    monkeypatch.setattr(log, "checkpoint", lambda name: events.append(name) or
                        real_checkpoint(name))
    execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), run_name="p",
                       tracking_uri=store_uri, plots_aside=True))
    order = [e for e in events if e in ("start", "finish", "manifest-written",
                                        "metrics-logged", "artifacts-logged")]
    assert order == ["start", "manifest-written", "metrics-logged", "finish",
                     "artifacts-logged"]
