"""The terminal (issue 31): `runs` at 80 columns keeps each listed golden set's primary metric,
`show` prints metrics before params, a sweep says a warning once, a new store prints no MLflow
INFO line, and `ui` prints its URL once the server answers."""

from __future__ import annotations

import io
import logging
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kebab_mlflow import progress
from kebab_mlflow.cli import app
from kebab_mlflow.cli.runs import primary_metric, serve_ui
from tests.conftest import GOLDEN, KB, ROOT, write
from tests.test_run_outputs import doc_only_set

runner = CliRunner()


def _run(store_uri: str, golden: Path, corpus: Path, *args: str) -> None:
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(corpus),
                              "--tracking-uri", store_uri, *args])
    assert res.exit_code == 0, res.output


def test_runs_at_80_columns_keeps_each_golden_sets_primary_metric(store_uri, tmp_path,
                                                                 monkeypatch):
    docs, corpus = doc_only_set(tmp_path)
    _run(store_uri, GOLDEN, KB, "--run-name", "fixture-run-with-a-long-name")
    _run(store_uri, docs, corpus, "--set", "chunker.mode=document", "--run-name", "doc-set")
    screen = io.StringIO()
    monkeypatch.setattr("kebab_mlflow.cli.console.out",
                        Console(file=screen, force_terminal=True, width=80, color_system=None))
    res = runner.invoke(app, ["runs", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    lines = screen.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    header = " ".join(lines[1:3]).split()
    assert "mrr" in header and "ndcg@10" in header  # the fixture's and the doc set's primary
    assert "hit@5" not in header  # left out first: no golden set's primary
    doc_row = next(line for line in lines if line.startswith("doc-set"))
    assert any(cell[0].isdigit() for cell in doc_row.split()[4:])  # a value, not only dashes
    assert "not shown at 80 columns: hit_at_5" in screen.getvalue()


@pytest.mark.parametrize(("metrics", "tags", "expected"), [
    ({"mrr": 0.5, "ndcg_at_10_doc": 0.4}, {}, "mrr"),
    ({"ndcg_at_10_doc": 0.4, "map_doc": 0.3}, {}, "ndcg_at_10_doc"),
    ({"contains_all": 0.7}, {}, "contains_all"),
    ({"mrr": 0.5}, {"kebab.primary_metric": "recall_at_10_doc"}, "recall_at_10_doc"),
    ({}, {}, None),
])
def test_primary_metric_of_a_listed_run(metrics, tags, expected):
    assert primary_metric(metrics, tags) == expected


def test_show_prints_metrics_before_params(store_uri):
    _run(store_uri, GOLDEN, KB)
    res = runner.invoke(app, ["show", "@latest", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    assert 0 < res.output.index("metrics") < res.output.index("params") < res.output.index(
        "tags")


def _warn_twice(message: str) -> None:
    progress.warn(message)
    progress.warn(message)


class _Said(logging.Handler):
    """Every process's warnings, appended to one file (a forked worker writes there too)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        with self.path.open("a") as f:
            f.write(record.getMessage() + "\n")

    @property
    def messages(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.is_file() else []


def test_a_warning_repeated_inside_warnings_once_is_said_once_across_processes(
        monkeypatch, tmp_path):
    said = _Said(tmp_path / "said.txt")
    monkeypatch.setattr(progress.logger, "handlers", [said])
    monkeypatch.setattr(progress.logger, "propagate", False)
    with progress.warnings_once():
        fork = multiprocessing.get_context("fork")
        workers = [fork.Process(target=_warn_twice, args=("same words",)) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert all(w.exitcode == 0 for w in workers)
        _warn_twice("same words")  # a worker claimed it: the parent stays quiet too
        _warn_twice("other words")
    assert said.messages == ["same words", "other words"]
    assert progress.WARNINGS_ONCE_ENV not in os.environ
    _warn_twice("outside")  # outside a sweep every warning is shown
    assert said.messages == ["same words", "other words", "outside", "outside"]


def test_a_new_store_prints_no_mlflow_info_lines(tmp_path):
    uri = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    res = subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                          str(GOLDEN), "--corpus", str(KB), "--tracking-uri", uri],
                         capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "new" / "mlflow.db").is_file()
    assert "INFO" not in res.stderr and "Creating initial" not in res.stderr


FAKE_UI = """
import http.server, sys
port, log = int(sys.argv[1]), sys.argv[2]
answered = 0
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global answered
        answered += 1
        ready = answered >= 3  # not serving on the first two requests
        if ready:
            open(log, "a").write("answered 200\\n")
        self.send_response(200 if ready else 503)
        self.end_headers()
        if ready:
            self.server.shutdown_requested = True
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Health)
server.shutdown_requested = False
while not server.shutdown_requested:
    server.handle_request()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Screen(io.StringIO):
    """Records, at each write, whether the fake server had answered 200 by then."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log, self.writes = log, []

    def write(self, text: str) -> int:
        self.writes.append((text, self.log.is_file()))
        return super().write(text)


def test_ui_announces_its_url_only_once_the_server_answers_health(tmp_path, monkeypatch):
    script = write(tmp_path / "fake_ui.py", FAKE_UI)
    log, port = tmp_path / "answered.log", _free_port()
    screen = _Screen(log)
    monkeypatch.setattr("kebab_mlflow.cli.console.err",
                        Console(file=screen, force_terminal=False, width=200))
    status = serve_ui([sys.executable, str(script), str(port), str(log)], dict(os.environ),
                      f"http://127.0.0.1:{port}/health", "open: http://the.url/")
    assert status == 0
    announced = [seen for text, seen in screen.writes if "http://the.url/" in text]
    assert announced == [True]


def test_ui_whose_server_exits_first_announces_nothing_and_passes_its_status(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr("kebab_mlflow.cli.console.err", Console(file=screen, width=200))
    status = serve_ui([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ),
                      f"http://127.0.0.1:{_free_port()}/health", "open: http://the.url/")
    assert status == 3 and "http://the.url/" not in screen.getvalue()
