"""Shared fixtures. Every test that touches MLflow gets a temporary store — never ./mlruns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = FIXTURES / "golden_queries.yaml"
KB = FIXTURES / "kb"
SHARED = ROOT.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Each test: its own cwd, index cache and tracking URI unset (so the default store, if a
    test uses it, is the temporary cwd's mlruns/)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KEBAB_CACHE_DIR", str(tmp_path / ".kebab-cache"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from kebab_mlflow import interrupts

    interrupts.clear_interrupt()  # no test inherits a signal an earlier in-process one noted
    yield
    assert not interrupts.interrupt_pending(), "the test left a noted interrupt behind"


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """An index cache shared across tests that only read fixtures (saves rebuilds)."""
    return tmp_path_factory.mktemp("kebab-cache")


@pytest.fixture
def store_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def mlflow_client(uri: str):
    """A test's own MlflowClient, to check what a command stored (mlflow imported lazily)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_in(uri: str, experiment: str = "kebab-eval") -> list:
    """Every run of the experiment, or [] when it does not exist."""
    client = mlflow_client(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster, shared by the tests of this session."""
    from tests import servers

    return servers.shared_postgres()


@pytest.fixture(scope="session")
def pg_server():
    """An MLflow server whose backend store is that PostgreSQL cluster."""
    from tests import servers

    return servers.shared_pg_server()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
