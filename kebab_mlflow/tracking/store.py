"""The one module that imports mlflow. Everything else stays testable without it.

Store selection: ``--tracking-uri`` > ``$MLFLOW_TRACKING_URI`` > the embedded default
``sqlite:///<cwd>/mlruns/mlflow.db`` with artifacts in ``<cwd>/mlruns/artifacts``. A brand-new
SQLite store is created (and the experiment too) under a file lock, because several processes
migrating a fresh database at once corrupt it for good.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kebab_mlflow.errors import RunNotFoundError, TrackingError
from kebab_mlflow.progress import warn
from kebab_mlflow.records import RunRecord

DEFAULT_EXPERIMENT = "kebab-eval"
BASELINE_TAG = "kebab.baseline_run_id"
# MLflow's default HTTP retry policy waits minutes on a dead server; fail fast instead.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
# `run --json` / `sweep --json` stdout must stay one JSON object: no "View run" links there
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# our own progress bars go to stderr; MLflow's download bars would interleave with them
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def default_store_dir() -> Path:
    return Path.cwd() / "mlruns"


def resolve_uri(tracking_uri: str | None) -> str:
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    return uri or f"sqlite:///{default_store_dir() / 'mlflow.db'}"


def describe_uri(uri: str) -> str:
    """The URI without any credentials embedded in it."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password or parts.username:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.parent / ".kebab-store.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _ensure_sqlite_store(db: Path) -> None:
    """Under the store lock: a brand-new SQLite store is built aside and renamed into place,
    so a process killed while MLflow creates its ~40 tables (seconds) leaves a stray file, never
    a half-migrated store that every later command refuses ("table datasets already exists").
    A store that cannot be opened and holds no run (half-created by an older version) is set
    aside as ``<name>.broken-<time>`` and rebuilt, with a warning."""
    for stray in db.parent.glob(f".{db.name}.creating-*"):  # of killed creators: we hold the lock
        stray.unlink(missing_ok=True)
    if db.is_file() and db.stat().st_size > 0:
        if _opens(db):
            return
        if _holds_runs(db):
            return  # let MLflow's own error say what is wrong with it
        aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        db.rename(aside)
        warn(f"the store {db} was half-created (no run in it) and is rebuilt; "
             f"the old file is {aside}")
    building = db.with_name(f".{db.name}.creating-{os.getpid()}")
    uri = f"sqlite:///{building}"
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # creates every table
    finally:
        _forget_engine(uri)
    os.replace(building, db)


def _opens(db: Path) -> bool:
    uri = f"sqlite:///{db}"
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        return True
    except Exception:  # noqa: BLE001 - any failure to open means "not usable as it is"
        _forget_engine(uri)
        return False


def _holds_runs(db: Path) -> bool:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
    except sqlite3.Error:  # no runs table: nothing was recorded in it
        return False


def _forget_engine(uri: str) -> None:
    """Close and drop MLflow's cached engine and store for ``uri`` (a file about to move)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

    engine = SqlAlchemyStore._engine_map.pop(uri, None)
    if engine is not None:
        engine.dispose()
    TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()


def _tracking_error(uri: str, exc: Exception) -> TrackingError:
    text = str(exc)
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if password:
        text = text.replace(password, "***")
    if "401" in text or "Unauthorized" in text:
        return TrackingError(f"the tracking server {describe_uri(uri)} refused the credentials "
                             "(MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD)")
    if "403" in text or "Permission" in text:
        return TrackingError(f"the tracking server {describe_uri(uri)} denied this user "
                             "permission for the request (ask for write access to the "
                             "experiment)")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return TrackingError(f"cannot reach the MLflow tracking store {describe_uri(uri)}: "
                         f"{first[:300]}")


class Tracker:
    """A thin, batched wrapper around MlflowClient for one tracking URI."""

    def __init__(self, tracking_uri: str | None = None):
        self.uri = resolve_uri(tracking_uri)
        self.local = self.uri.startswith("sqlite:///")
        try:
            with _store_lock(self.uri):
                if self.local:
                    _ensure_sqlite_store(Path(self.uri.removeprefix("sqlite:///")))
                self.client = MlflowClient(tracking_uri=self.uri)
                self.client.search_experiments(max_results=1)  # opens/migrates, checks reach
        except MlflowException as exc:
            raise _tracking_error(self.uri, exc) from None
        except Exception as exc:  # noqa: BLE001 - connection errors come in many types
            raise _tracking_error(self.uri, exc) from None

    def experiment_id(self, name: str, create: bool = True) -> str:
        try:
            exp = self.client.get_experiment_by_name(name)
            if exp is not None:
                return exp.experiment_id
            if not create:
                raise RunNotFoundError(f"no experiment named {name!r} in {describe_uri(self.uri)}")
            with _store_lock(self.uri):
                exp = self.client.get_experiment_by_name(name)
                if exp is not None:
                    return exp.experiment_id
                location = None
                if self.local:
                    db = Path(self.uri.removeprefix("sqlite:///"))
                    # one folder per experiment, named so a person can find it
                    # no "." / ".." (the artifact root itself, or the store above it)
                    folder = re.sub(r"[^\w.-]", "_", name).strip(".")[:100] or "experiment"
                    location = (db.parent / "artifacts" / folder).resolve().as_uri()
                try:
                    return self.client.create_experiment(name, artifact_location=location)
                except MlflowException:  # created by a racing process
                    exp = self.client.get_experiment_by_name(name)
                    if exp is None:
                        raise
                    return exp.experiment_id
        except MlflowException as exc:
            raise _tracking_error(self.uri, exc) from None

    def start_run(self, experiment_id: str, run_name: str | None, tags: Mapping[str, str],
                  parent_run_id: str | None = None, description: str | None = None) -> str:
        all_tags = dict(tags)
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        if description:
            all_tags["mlflow.note.content"] = description
        all_tags.setdefault("mlflow.user", os.environ.get("MLFLOW_TRACKING_USERNAME")
                            or getpass.getuser())
        try:
            run = self.client.create_run(experiment_id, tags=all_tags, run_name=run_name)
        except MlflowException as exc:  # e.g. 403: the user may read but not write
            raise _tracking_error(self.uri, exc) from None
        return run.info.run_id

    def log_batch(self, run_id: str, params: Mapping[str, Any] | None = None,
                  metrics: Mapping[str, float] | None = None,
                  tags: Mapping[str, str] | None = None) -> None:
        """One request per ≤1000 metrics / ≤100 params / ≤100 tags (the store's limits)."""
        now = int(time.time() * 1000)
        p = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        m = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
        t = [RunTag(k, str(v)[:8000]) for k, v in (tags or {}).items()]
        while p or m or t:
            self.client.log_batch(run_id, metrics=m[:1000], params=p[:100], tags=t[:100])
            p, m, t = p[100:], m[1000:], t[100:]

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_golden_dataset(self, run_id: str, name: str, digest: str, source_tags: dict) -> None:
        from mlflow.data.code_dataset_source import CodeDatasetSource
        from mlflow.data.meta_dataset import MetaDataset

        dataset = MetaDataset(CodeDatasetSource(tags=source_tags), name=name, digest=digest[:36])
        entity = DatasetInput(dataset._to_mlflow_entity(),
                              tags=[InputTag("mlflow.data.context", "eval")])
        # Two runs logging the same new dataset at once race on the store's unique key; the
        # loser's retry finds the row and links to it.
        for attempt in range(4):
            try:
                self.client.log_inputs(run_id, [entity])
                return
            except MlflowException:
                if attempt == 3:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status)

    def end_run_quietly(self, run_id: str, status: str) -> bool:
        """End a run on the way out of a failure; the store may be the thing that failed.
        False when the run had already FINISHED (a signal just after it did): that stays."""
        try:
            if self.client.get_run(run_id).info.status == "FINISHED":
                return False
            self.end_run(run_id, status)
        except Exception:  # noqa: BLE001
            pass
        return True

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.log_batch(run_id, tags=tags)

    def get_run(self, run_id: str) -> RunRecord:
        try:
            return _record(self.client.get_run(run_id))
        except MlflowException:
            raise RunNotFoundError(f"no run with id {run_id!r}") from None

    def find_runs(self, experiment_ids: list[str], *, status: str | None = None,
                  run_name: str | None = None, tags: Mapping[str, str] | None = None,
                  max_results: int = 1000) -> list[RunRecord]:
        """Runs matching every given condition, newest first (the filter string is built here,
        the only place that speaks MLflow's search syntax)."""
        conditions = []
        if status:
            conditions.append(f"attributes.status = {_quoted(status)}")
        if run_name is not None:
            conditions.append(f"attributes.run_name = {_quoted(run_name)}")
        conditions += [f"tags.`{key}` = {_quoted(value)}" for key, value in (tags or {}).items()]
        found = self.client.search_runs(experiment_ids, " and ".join(conditions),
                                        max_results=max_results,
                                        order_by=["attributes.start_time DESC"])
        return [_record(r) for r in found]

    def download_artifact(self, run_id: str, path: str, dst: Path) -> Path:
        dst.mkdir(parents=True, exist_ok=True)
        try:
            return Path(self.client.download_artifacts(run_id, path, str(dst)))
        except (MlflowException, OSError) as exc:
            raise RunNotFoundError(f"run {run_id} has no artifact {path!r} ({exc})") from None

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self.client.set_experiment_tag(experiment_id, key, value)

    def experiment_tag(self, experiment_id: str, key: str) -> str | None:
        return self.client.get_experiment(experiment_id).tags.get(key)

    def ui_command(self) -> str:
        """A command that opens this store's UI and works without activating the venv: the
        running kebab-mlflow by its absolute path, with this store's URI."""
        if self.local:
            import shlex

            return f"{cli_executable()} ui --tracking-uri {shlex.quote(self.uri)}"
        return f"open {describe_uri(self.uri)} in a browser"


def cli_executable() -> str:
    """How to call this kebab-mlflow again: the console script that is running, by its
    absolute path, else ``<this python> -m kebab_mlflow.cli``."""
    import shlex
    import sys

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "kebab-mlflow" and script.is_file():
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m kebab_mlflow.cli"


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _record(run: Any) -> RunRecord:
    info, data = run.info, run.data
    return RunRecord(info.run_id, info.run_name or "", info.experiment_id, info.status,
                     info.start_time, dict(data.params), dict(data.metrics), dict(data.tags))


def forget_inherited_connections() -> None:
    """In a process forked from one that already talked to the store: drop the inherited
    SQLAlchemy engines without closing the parent's connections (SQLAlchemy's advice for fork)
    and MLflow's cached stores, so this process opens connections of its own. Relies on
    MLflow 3.17 internals; pinned in pyproject.toml."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

    engines = getattr(SqlAlchemyStore, "_engine_map", {})
    for engine in engines.values():
        engine.dispose(close=False)
    engines.clear()
    TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
