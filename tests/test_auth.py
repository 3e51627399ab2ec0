"""A tracking server with HTTP basic auth (`mlflow server --app-name basic-auth`) (issue 8).

Credentials come from MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD. Refused
credentials → exit 2 before any query, a message that names the server and never the
password, and nothing logged.
"""

from __future__ import annotations

import uuid

import pytest
from typer.testing import CliRunner

from tests import servers
from tests.servers import ADMIN_PASSWORD, ADMIN_USER
from tests.test_server import experiment_name, run_cli, run_json

runner = CliRunner()


@pytest.fixture(scope="session")
def auth_server():
    return servers.shared_auth_server()
WRONG_PASSWORD = "not-the-Password-93c1d7"


@pytest.fixture
def as_admin(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN_USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)


def admin_runs(server, monkeypatch, experiment: str) -> list | None:
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN_USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)
    client = server.client()
    exp = client.get_experiment_by_name(experiment)
    return None if exp is None else client.search_runs([exp.experiment_id])


def test_right_credentials_log_the_run(auth_server, as_admin):
    exp = experiment_name()
    reply = run_json(run_cli(auth_server.url, exp))
    run = auth_server.client().get_run(reply["run_id"])
    assert run.info.status == "FINISHED"


@pytest.mark.parametrize("username, password", [
    (ADMIN_USER, WRONG_PASSWORD),
    ("nobody", WRONG_PASSWORD),
    (None, None),  # no credentials at all
])
def test_refused_credentials_exit_2_name_the_server_not_the_password(
        auth_server, monkeypatch, username, password):
    for var, value in (("MLFLOW_TRACKING_USERNAME", username),
                       ("MLFLOW_TRACKING_PASSWORD", password)):
        if value is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, value)
    exp = experiment_name()
    result = run_cli(auth_server.url, exp)
    assert result.exit_code == 2, result.output
    assert auth_server.url in result.output
    assert "refused the credentials" in result.output
    assert WRONG_PASSWORD not in result.output and ADMIN_PASSWORD not in result.output
    assert "Traceback" not in result.output
    assert "queries" not in result.output  # stopped before the query loop
    assert admin_runs(auth_server, monkeypatch, exp) is None  # nothing logged, not even the exp


def test_password_in_the_uri_is_never_printed(auth_server, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    host = auth_server.url.removeprefix("http://")
    result = run_cli(f"http://{ADMIN_USER}:{WRONG_PASSWORD}@{host}", experiment_name())
    assert result.exit_code == 2, result.output
    assert WRONG_PASSWORD not in result.output
    assert auth_server.url in result.output


def test_a_read_only_user_gets_exit_2_and_no_half_written_run(auth_server, monkeypatch):
    """A user who may read but not write the experiment: refused cleanly, no RUNNING run."""
    import requests

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN_USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)
    reader, reader_password = f"reader{uuid.uuid4().hex[:6]}", "reader-Password-0c5e11"
    created = requests.post(f"{auth_server.url}/api/2.0/mlflow/users/create", timeout=30,
                            json={"username": reader, "password": reader_password},
                            auth=(ADMIN_USER, ADMIN_PASSWORD))
    assert created.status_code == 200, created.text
    exp = experiment_name()
    auth_server.client().create_experiment(exp)  # owned by admin; others have READ
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", reader)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", reader_password)
    result = run_cli(auth_server.url, exp)
    assert result.exit_code == 2, result.output
    assert auth_server.url in result.output and reader_password not in result.output
    assert "Traceback" not in result.output
    assert admin_runs(auth_server, monkeypatch, exp) == []
