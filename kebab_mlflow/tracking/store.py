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
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import KebabError, RunNotFoundError, TrackingError
from kebab_mlflow.interrupts import checkpoint, raise_if_interrupted
from kebab_mlflow.progress import warn
from kebab_mlflow.records import RunRecord
from kebab_mlflow.redaction import install_log_redaction, redacted, register_url_credentials
from kebab_mlflow.tracking import ui_view
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # only the record's type: the store needs none of the traces module
    from kebab_mlflow.tracking.traces import TracePayload

# A new store's "Creating initial MLflow database tables..." / "Updating database tables" and
# alembic's migration lines are MLflow's INFO, noise on a kebab terminal; warnings still show.
for _chatty in ("mlflow.store.db.utils", "alembic"):
    logging.getLogger(_chatty).setLevel(logging.WARNING)


def _not_a_reraised_db_error(record: logging.LogRecord) -> bool:
    """MLflow logs every SQLAlchemy OperationalError ("database is locked" while a Dask worker
    still writes) with its traceback, then raises it as an MlflowException: we handle or report
    that exception ourselves, so the logged copy is only a traceback on the user's stderr."""
    return not str(record.msg).startswith("SQLAlchemy database error")


logging.getLogger("mlflow.store.db.utils").addFilter(_not_a_reraised_db_error)

T = TypeVar("T")
DEFAULT_EXPERIMENT = "kebab-eval"
BASELINE_TAG = vocab.BASELINE_RUN_ID
# MLflow 3's record of what an experiment is for (values from the 3.17 UI's ExperimentKind);
# the 3.17 UI itself picks GenAI or model-training pages from the URL (tracking/ui_view.py).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
LOCAL_UI = "http://127.0.0.1:5000"  # where `kebab-mlflow ui` serves by default
MODEL_DIGEST_TAG = vocab.VERSIONS_SHA256
# MLflow's default HTTP retry policy waits minutes on a dead server; fail fast instead.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
# `run --json` / `sweep --json` stdout must stay one JSON object: no "View run" links there
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# our own progress bars go to stderr; MLflow's download bars would interleave with them
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# MLflow logs request URLs (with user:password@) and exception text: every record is redacted
install_log_redaction()


def default_store_dir() -> Path:
    return Path.cwd() / "mlruns"


def resolve_uri(tracking_uri: str | None) -> str:
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    return uri or f"sqlite:///{default_store_dir() / 'mlflow.db'}"


def preload(tracking_uri: str | None) -> None:
    """Import what opening this store will need — for a database URI, MLflow's SQLAlchemy
    store module (~0.7 s, most of "opening the store") — without opening anything: a run
    calls it on a second thread while it reads the golden set and the index, and a bad input
    must still leave no store or experiment behind."""
    if resolve_uri(tracking_uri).split(":", 1)[0].split("+", 1)[0] in _DATABASE_SCHEMES:
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401


_DATABASE_SCHEMES = {"sqlite", "postgresql", "mysql", "mssql"}


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
    A store that cannot be opened is set aside as ``<name>.broken-<time>`` and rebuilt, with a
    warning, only when it provably holds no run (checked under SQLite's exclusive lock). A
    store another process keeps locked is waited for (:func:`while_locked`), never taken for
    an empty one."""
    for stray in db.parent.glob(f".{db.name}.creating-*"):  # of killed creators: we hold the lock
        stray.unlink(missing_ok=True)
    if db.is_file() and db.stat().st_size > 0:
        if while_locked(db, lambda: _opens(db)):
            return
        if not while_locked(db, lambda: _set_aside_if_empty(db)):
            return  # it may hold runs: let MLflow's own error say what is wrong with it
    building = db.with_name(f".{db.name}.creating-{os.getpid()}")
    uri = f"sqlite:///{building}"
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # creates every table
    finally:
        _forget_engine(uri)
    os.replace(building, db)


def _opens(db: Path) -> bool:
    """Whether MLflow opens the store as it is; a lock held elsewhere is raised, not False."""
    uri = f"sqlite:///{db}"
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        return True
    except Exception as exc:  # noqa: BLE001 - any other failure means "not usable as it is"
        _forget_engine(uri)
        if _is_locked(exc):
            raise
        return False


def _set_aside_if_empty(db: Path) -> bool:
    """Rename a store that holds no run to ``<name>.broken-<time>``, holding SQLite's
    exclusive lock from the count to the rename (no process writes a run in between); False
    (nothing done) unless the store provably holds none: a ``runs`` table with rows, or a file
    SQLite cannot read, is left as it is."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db, timeout=1.0, isolation_level=None)) as con:
        con.execute("BEGIN EXCLUSIVE")  # "database is locked": while_locked waits
        try:
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            runs = 0  # migrations never reached the runs table: nothing recorded
        except sqlite3.DatabaseError:  # not a database at all: it is not ours to move
            return False
        if runs:
            return False
        aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        db.rename(aside)
        con.execute("ROLLBACK")
    warn(f"the store {db} was half-created (no run in it) and is rebuilt; "
         f"the old file is {aside}")
    return True


LOCK_WAIT_ENV = "KEBAB_STORE_LOCK_WAIT_S"
DEFAULT_LOCK_WAIT_S = 120.0
LOCK_PROGRESS_S = 15.0  # how often a wait for a locked store says so


def _is_locked(exc: BaseException) -> bool:
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


# Ending a run on the way out may meet "database is locked" while a worker's last write
# commits: try again for up to ~5 s (no interrupt check: this *is* the interrupt's cleanup).
QUIET_END_ATTEMPTS = 20
QUIET_END_PAUSE_S = 0.25


def lock_wait_s() -> float:
    """``$KEBAB_STORE_LOCK_WAIT_S`` (seconds, >= 0), default 120."""
    from kebab_mlflow.errors import InputError

    raw = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_LOCK_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise InputError(f"{LOCK_WAIT_ENV} must be a number of seconds >= 0, got {raw!r}")
    return value


def while_locked(db: Path, attempt: Callable[[], T]) -> T:
    """``attempt()``, again while it fails because another process holds the SQLite store
    locked (a long write, a backup, ``BEGIN EXCLUSIVE``): up to :func:`lock_wait_s`, saying
    so every LOCK_PROGRESS_S; then StoreLockedError (exit 2) naming the lock. Nothing is
    changed while waiting."""
    from kebab_mlflow.errors import StoreLockedError

    wait_s = lock_wait_s()
    start = time.monotonic()
    next_note = start + LOCK_PROGRESS_S
    while True:
        try:
            return attempt()
        except Exception as exc:
            if not _is_locked(exc):
                raise
        now = time.monotonic()
        if now - start >= wait_s:
            raise StoreLockedError(
                f"the store {db} is locked by another process (a long write, a backup, a "
                f"`BEGIN EXCLUSIVE`): still locked after {wait_s:g} s ({LOCK_WAIT_ENV}); "
                "nothing was changed — try again once that process is done")
        if now >= next_note:
            warn(f"the store {db} is locked by another process; waiting "
                 f"({now - start:.0f} s of {wait_s:g} s, {LOCK_WAIT_ENV})")
            next_note += LOCK_PROGRESS_S
        raise_if_interrupted()  # Ctrl-C while waiting: nothing was touched
        time.sleep(min(0.25, max(0.0, wait_s - (now - start))))


def _forget_engine(uri: str) -> None:
    """Close and drop MLflow's cached engine and store for ``uri`` (a file about to move)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

    engine = SqlAlchemyStore._engine_map.pop(uri, None)
    if engine is not None:
        engine.dispose()
    TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()


def _tracking_error(uri: str, exc: Exception) -> TrackingError:
    text = redacted(str(exc))  # MLflow's text names the request URL, user:password@ included
    # status codes as whole words: a URL's port (":40389") must not read as a 403
    if re.search(r"\b401\b", text) or "Unauthorized" in text:
        return TrackingError(f"the tracking server {describe_uri(uri)} refused the credentials "
                             "(MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD)")
    if re.search(r"\b403\b", text) or "Permission" in text:
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
        register_url_credentials(self.uri)
        self.local = self.uri.startswith("sqlite:///")
        try:
            with _store_lock(self.uri):
                if self.local:
                    db = Path(self.uri.removeprefix("sqlite:///"))
                    _ensure_sqlite_store(db)
                self.client = MlflowClient(tracking_uri=self.uri)
                if self.local:  # a store locked since: wait for it too
                    while_locked(db, lambda: self.client.search_experiments(max_results=1))
                else:
                    self.client.search_experiments(max_results=1)  # opens/migrates, reach
        except KebabError:
            raise
        except MlflowException as exc:
            raise _tracking_error(self.uri, exc) from None
        except Exception as exc:  # noqa: BLE001 - connection errors come in many types
            raise _tracking_error(self.uri, exc) from None

    def experiment_id(self, name: str, create: bool = True) -> str:
        try:
            exp = self.client.get_experiment_by_name(name)
            if exp is not None:
                if EXPERIMENT_KIND_TAG not in exp.tags:  # made by an older version or by hand
                    self._set_kind(exp.experiment_id)
                return cast(str, exp.experiment_id)
            if not create:
                raise RunNotFoundError(f"no experiment named {name!r} in {describe_uri(self.uri)}")
            with _store_lock(self.uri):
                exp = self.client.get_experiment_by_name(name)
                if exp is not None:
                    return cast(str, exp.experiment_id)
                location = None
                if self.local:
                    db = Path(self.uri.removeprefix("sqlite:///"))
                    # one folder per experiment, named so a person can find it
                    # no "." / ".." (the artifact root itself, or the store above it)
                    folder = re.sub(r"[^\w.-]", "_", name).strip(".")[:100] or "experiment"
                    location = (db.parent / "artifacts" / folder).resolve().as_uri()
                try:
                    return cast(str, self.client.create_experiment(
                        name, artifact_location=location,
                        tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}))
                except MlflowException:  # created by a racing process
                    exp = self.client.get_experiment_by_name(name)
                    if exp is None:
                        raise
                    return cast(str, exp.experiment_id)
        except MlflowException as exc:
            raise _tracking_error(self.uri, exc) from None

    def _set_kind(self, experiment_id: str) -> None:
        with contextlib.suppress(MlflowException):  # a read-only user: the UI still works
            self.client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)

    def start_run(self, experiment_id: str, run_name: str | None, tags: Mapping[str, str],
                  parent_run_id: str | None = None, description: str | None = None) -> str:
        all_tags = dict(tags)
        parent_run_id = parent_run_id or self.enclosing_run(experiment_id)
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
        # the run exists but its caller does not know its id yet: a signal here must be held
        # (interrupts.signals_deferred) or the run stays RUNNING for good
        checkpoint("run-created")
        return cast(str, run.info.run_id)

    def enclosing_run(self, experiment_id: str) -> str | None:
        """Under ``mlflow run`` (MLproject): the project's run, ``$MLFLOW_RUN_ID``, when it is a
        RUNNING run of this store. A run kebab-mlflow starts without a parent of its own (an
        eval, a sweep's or tune's parent) nests under it, so the project run is the umbrella
        of what its entry point made (docs/cli.md, "Running through `mlflow run`")."""
        run_id = os.environ.get("MLFLOW_RUN_ID")
        if not run_id:
            return None
        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            return None
        if run.info.status != RunStatus.RUNNING:
            return None
        if run.info.experiment_id != experiment_id:
            from kebab_mlflow import progress

            progress.warn(f"the enclosing run {run_id} (mlflow run) is in another experiment "
                          f"(id {run.info.experiment_id}, this run's: {experiment_id}); the "
                          "MLflow UI does not show runs nested across experiments: pass the "
                          "same experiment to `mlflow run --experiment-name` and `-P "
                          "experiment=`")
        return run_id

    def log_batch(self, run_id: str, params: Mapping[str, Any] | None = None,
                  metrics: Mapping[str, float] | None = None,
                  tags: Mapping[str, str] | None = None, *, model_id: str | None = None,
                  dataset: tuple[str, str] | None = None) -> None:
        """One request per ≤1000 metrics / ≤100 params / ≤100 tags (the store's limits), in
        the order given. ``model_id`` / ``dataset`` (name, digest) link the metrics to a
        LoggedModel and the dataset they were measured on (the Models tab shows them)."""
        now = int(time.time() * 1000)
        name, digest = dataset or (None, None)
        p = [Param(k, redacted(str(v))[:6000]) for k, v in (params or {}).items()]
        m = [Metric(k, float(v), now, 0, model_id=model_id, dataset_name=name,
                    dataset_digest=digest) for k, v in (metrics or {}).items()]
        t = [RunTag(k, redacted(str(v))[:8000]) for k, v in (tags or {}).items()]
        while p or m or t:
            self.client.log_batch(run_id, metrics=m[:1000], params=p[:100], tags=t[:100])
            p, m, t = p[100:], m[1000:], t[100:]

    def log_new_metrics(self, run_id: str, metrics: Mapping[str, float], *,
                        tags: Mapping[str, str] | None = None, model_id: str | None = None,
                        dataset: tuple[str, str] | None = None) -> None:
        """:meth:`log_batch` of the metrics the run does not hold yet with that value: a
        republish (``upload``) after a failure mid-way logs each metric once, so its history
        has one point, as an uninterrupted run's has. Tags are set (again) either way."""
        present = self.client.get_run(run_id).data.metrics
        missing = {k: v for k, v in metrics.items()
                   if k not in present or present[k] != float(v)}
        self.log_batch(run_id, metrics=missing, tags=tags, model_id=model_id, dataset=dataset)

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None,
                     owned: bool = False) -> None:
        """``owned``: a file of the caller's that nothing writes again (a run's recovery
        folder): hard-linked into a local artifact folder instead of copied (a 1M-query
        ``per_query.jsonl`` is 8.3 GB to copy); copied where linking fails (another file
        system) and on any other artifact store."""
        if owned and self._link_artifact(run_id, path, artifact_path):
            return
        self.client.log_artifact(run_id, str(path), artifact_path)

    def _link_artifact(self, run_id: str, path: Path, artifact_path: str | None) -> bool:
        root = self._local_root(run_id)
        if root is None:
            return False
        folder = (root / (artifact_path or "")).resolve()
        dest = folder / path.name
        if not folder.is_relative_to(root):
            return False
        folder.mkdir(parents=True, exist_ok=True)
        if dest.is_file() and os.path.samefile(path, dest):  # published again (upload)
            return True
        aside = folder / f".{path.name}.{os.getpid()}.link"
        try:
            os.link(path, aside)
        except OSError:
            return False
        os.replace(aside, dest)  # the file replaced whole, as MLflow's copy replaces it
        return True

    def log_golden_dataset(self, run_id: str, name: str, digest: str, source_tags: dict[str, str],
                           schema: Mapping[str, str] | None = None,
                           profile: Mapping[str, Any] | None = None) -> None:
        """Link the golden set to the run as an MLflow dataset: its digest (the file's), its
        fields as the schema (field -> "string" | "boolean" | "integer" | "list") and a
        profile (counts), which the UI's dataset panel shows."""
        from mlflow.data.code_dataset_source import CodeDatasetSource
        from mlflow.data.meta_dataset import MetaDataset

        # mlflow is not followed (pyproject.toml [tool.mypy]): its MetaDataset is Any here
        class GoldenDataset(MetaDataset):  # type: ignore[misc]
            def to_dict(self) -> dict[str, str]:
                return {**super().to_dict(), **({"profile": json.dumps(dict(profile))}
                                                if profile else {})}

        dataset = GoldenDataset(CodeDatasetSource(tags=source_tags), name=name,
                                digest=digest[:36], schema=_schema(schema) if schema else None)
        entity = DatasetInput(dataset._to_mlflow_entity(),
                              tags=[InputTag("mlflow.data.context", "eval")])
        # Two runs logging the same new dataset at once race on the store's unique key; the
        # loser's retry finds the row and links to it. A run that has the link already (a
        # republish: `upload`) is left as it is: a second link is a unique-key error.
        for attempt in range(4):
            if self._has_dataset(run_id, dataset.name, dataset.digest):
                return
            try:
                self.client.log_inputs(run_id, [entity])
                return
            except MlflowException:
                if attempt == 3:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def _has_dataset(self, run_id: str, name: str, digest: str) -> bool:
        inputs = self.client.get_run(run_id).inputs
        return any(d.dataset.name == name and d.dataset.digest == digest
                   for d in (inputs.dataset_inputs if inputs else []))

    def log_table(self, run_id: str, columns: Mapping[str, list[Any]], artifact_file: str) -> None:
        """A table artifact the run page shows as a table (``mlflow.log_table``). MLflow
        appends to an existing file of that name; publishing again (``upload``) must not
        duplicate the rows, so an existing table is left as it is."""
        folder = str(Path(artifact_file).parent)
        present = {a.path for a in self.client.list_artifacts(
            run_id, None if folder == "." else folder)}
        if artifact_file not in present:
            self.client.log_table(run_id, dict(columns), artifact_file)

    def pipeline_model(self, experiment_id: str, name: str, digest: str,
                       params: Mapping[str, str], source_run_id: str,
                       tags: Mapping[str, str] | None = None) -> str:
        """The id of the LoggedModel standing for one pipeline version snapshot (an MLflow 3
        external model): found by its digest tag, created READY by the first run that needs
        it, reused by every later one."""
        found = self._model_with_digest(experiment_id, digest)
        if found:
            return found
        from mlflow.utils.mlflow_tags import MLFLOW_MODEL_IS_EXTERNAL

        with _store_lock(self.uri):  # parallel sweep rows: one model, not one each
            found = self._model_with_digest(experiment_id, digest)
            if found:
                return found
            model = self.client._create_logged_model(
                experiment_id, name, source_run_id,
                tags={**dict(tags or {}), MODEL_DIGEST_TAG: digest,
                      MLFLOW_MODEL_IS_EXTERNAL: "true"},
                params=dict(params), model_type="pipeline", flavor="external")
            self._finish_external_model(model.model_id)
        return cast(str, model.model_id)

    def _model_with_digest(self, experiment_id: str, digest: str) -> str | None:
        found = self.client.search_logged_models(
            [experiment_id], f"tags.`{MODEL_DIGEST_TAG}` = {_quoted(digest)}",
            order_by=[{"field_name": "creation_time", "ascending": True}], max_results=1)
        return cast(str, found[0].model_id) if found else None

    def _finish_external_model(self, model_id: str) -> None:
        """What ``mlflow.create_external_model`` does after creating one: an MLmodel file
        (so the model can be registered) and status READY."""
        import tempfile

        from mlflow.entities import LoggedModelStatus
        from mlflow.models.model import MLMODEL_FILE_NAME
        from mlflow.models.utils import get_external_mlflow_model_spec

        model = self.client.get_logged_model(model_id)
        with tempfile.TemporaryDirectory() as tmp:
            get_external_mlflow_model_spec(model).save(str(Path(tmp) / MLMODEL_FILE_NAME))
            self.client.log_model_artifacts(model_id, tmp)
        self.client.finalize_logged_model(model_id, LoggedModelStatus.READY)

    def log_model_output(self, run_id: str, model_id: str) -> None:
        """Mark the model as the run's output (the run page's "Logged models")."""
        from mlflow.entities import LoggedModelOutput

        outputs = self.client.get_run(run_id).outputs
        if any(o.model_id == model_id for o in (outputs.model_outputs if outputs else [])):
            return  # a republish (`upload`): linked once, a second link is a unique-key error
        self.client.log_outputs(run_id, [LoggedModelOutput(model_id, 0)])

    def log_traces(self, experiment_id: str, run_id: str, payloads: Iterable[TracePayload],
                   model_id: str | None = None) -> int:
        """Log one trace per query payload (:class:`kebab_mlflow.tracking.traces.TracePayload`)
        linked to the run and the model, its scores as assessments. Not through the tracing
        SDK (one trace at a time, ~100 ms each, plus ~25 ms per assessment): each trace's info
        goes in with its assessments in one request, the spans of up to 100 traces in one
        ``log_spans`` request. Trace ids derive from run and query ids, so publishing again
        (``upload``) finds the traces already there instead of duplicating them."""
        store = self.client._tracing_client.store
        start = time.time_ns()
        count = 0
        for chunk in _batches(payloads, 100):
            spans, trace_ids = [], []
            built = []
            for p in chunk:
                trace_id, trace_spans, end = _trace_spans(run_id, p, start)
                built.append((trace_id, p, (start, end)))
                spans += trace_spans
                trace_ids.append(trace_id)
                start = end + 1_000_000
            present = _present_traces(store, trace_ids)  # a republish: assessments once
            for trace_id, p, times in built:
                if trace_id not in present:
                    store.start_trace(_trace_info(experiment_id, run_id, model_id, trace_id,
                                                  p, times))
            store.log_spans(experiment_id, spans)
            self.client.link_traces_to_run(trace_ids, run_id)
            count += len(trace_ids)
        return count

    def end_run(self, run_id: str, status: str = RunStatus.FINISHED) -> None:
        if status == RunStatus.FINISHED:  # a signal a callback swallowed still ends it KILLED
            raise_if_interrupted()
        self.client.set_terminated(run_id, status)

    def run_status(self, run_id: str) -> str:
        return str(self.client.get_run(run_id).info.status)

    def end_run_quietly(self, run_id: str, status: str) -> bool:
        """End a run on the way out of a failure; the store may be the thing that failed.
        False when the run had already FINISHED (a signal just after it did): that stays."""
        for _ in range(QUIET_END_ATTEMPTS):
            try:
                if self.client.get_run(run_id).info.status == RunStatus.FINISHED:
                    return False
                self.end_run(run_id, status)
                return True
            except Exception as exc:  # noqa: BLE001
                if not _is_locked(exc):  # a worker still writing holds the lock a moment
                    return True
            time.sleep(QUIET_END_PAUSE_S)
        return True

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.log_batch(run_id, tags=tags)

    def get_run(self, run_id: str) -> RunRecord:
        try:
            return _record(self.client.get_run(run_id))
        except MlflowException:
            raise RunNotFoundError(f"no run with id {run_id!r}") from None

    def find_run(self, run_id: str) -> RunRecord | None:
        """The run with this id in any experiment of the store, or None."""
        try:
            return _record(self.client.get_run(run_id))
        except MlflowException:
            return None

    def experiment_name(self, experiment_id: str) -> str | None:
        try:
            return cast(str, self.client.get_experiment(experiment_id).name)
        except MlflowException:
            return None

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

    def artifact_file(self, run_id: str, path: str, dst: Path) -> Path:
        """A file artifact to read: in place when the run's artifacts are a local folder (a
        finished run's artifacts do not change; two 1M-query ``per_query.jsonl`` are 17 GB
        not to copy), else downloaded into ``dst`` (:meth:`download_artifact`)."""
        local = self._local_artifact(run_id, path)
        return local if local is not None else self.download_artifact(run_id, path, dst)

    def _local_artifact(self, run_id: str, path: str) -> Path | None:
        root = self._local_root(run_id)
        if root is None:
            return None
        found = (root / path).resolve()
        return found if found.is_relative_to(root) and found.is_file() else None

    def _local_root(self, run_id: str) -> Path | None:
        """The run's artifact folder when it is a local one, else None (a server's proxied
        or a remote artifact store)."""
        from urllib.parse import unquote, urlparse

        try:
            uri = self.client.get_run(run_id).info.artifact_uri
        except MlflowException:
            return None
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file") or parsed.netloc not in ("", "localhost"):
            return None
        return Path(unquote(parsed.path)).resolve()

    def download_artifact(self, run_id: str, path: str, dst: Path) -> Path:
        dst.mkdir(parents=True, exist_ok=True)
        try:
            return Path(self.client.download_artifacts(run_id, path, str(dst)))
        except (MlflowException, OSError) as exc:
            raise RunNotFoundError(f"run {run_id} has no artifact {path!r} ({exc})") from None

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self.client.set_experiment_tag(experiment_id, key, value)

    def experiment_tag(self, experiment_id: str, key: str) -> str | None:
        return cast("str | None", self.client.get_experiment(experiment_id).tags.get(key))

    def set_runs_view(self, experiment_id: str, metrics: Iterable[str],
                      primary: str | None = None) -> None:
        """Add a run's headline metrics (MLflow names) and its ``primary`` metric (None: the
        default for its ground truth) to the columns of kebab's saved runs view, the page
        every printed UI URL opens (tracking/ui_view.py says why). Written only when it
        changes; a user who may not write experiment tags keeps the view as it is."""
        with _store_lock(self.uri):  # parallel sweep rows: one read-modify-write at a time
            try:
                tags = self.client.get_experiment(experiment_id).tags
                value = ui_view.view_tag_value(metrics, tags.get(ui_view.VIEW_TAG),
                                               int(time.time() * 1000), primary)
                if value is not None:
                    self.client.set_experiment_tag(experiment_id, ui_view.VIEW_TAG, value)
            except MlflowException:
                pass

    def runs_view_metrics(self, experiment_id: str) -> list[str] | None:
        """The metric columns of kebab's saved runs view; None when the experiment has none
        (made by an older kebab-mlflow)."""
        value = self.experiment_tag(experiment_id, ui_view.VIEW_TAG)
        return None if value is None else ui_view.view_metrics(value)

    def ui_command(self, experiment_id: str | None = None) -> str:
        """How to open the experiment's runs in the UI, without activating the venv: for a
        local store the running kebab-mlflow by its absolute path with this store's URI (and
        the experiment unless it is the default), then the URL it serves; for a server, its
        URL. Several lines."""
        if self.local:
            import shlex

            command = f"{cli_executable()} ui --tracking-uri {shlex.quote(self.uri)}"
            name = self.experiment_name(experiment_id) if experiment_id else None
            if name and name != DEFAULT_EXPERIMENT:
                command += f" --experiment {shlex.quote(name)}"
            return f"{command}\nthen open {ui_view.runs_url(LOCAL_UI, experiment_id)}"
        if self.uri.startswith(("http://", "https://")):
            return f"open {ui_view.runs_url(describe_uri(self.uri), experiment_id)}"
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


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _span_id(*parts: str) -> int:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16], 16) or 1


def _trace_spans(run_id: str, p: TracePayload, start_ns: int) -> tuple[str, list[Any], int]:
    """(trace id, [root CHAIN, RETRIEVER, answer span], end time) for one query; each span
    lasts its own measured time (tracking/traces.py: span_times)."""
    from mlflow.entities import Document, SpanType
    from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id

    from kebab_mlflow.tracking.traces import document_metadata, span_times

    otel_trace = int(hashlib.sha256(f"{run_id}\x00{p.query_id}".encode()).hexdigest()[:32], 16)
    trace_id = generate_mlflow_trace_id_from_otel_trace_id(otel_trace)
    times = span_times(p, start_ns)
    documents = [Document(page_content=h["text"], id=h["chunk_id"],
                          metadata=document_metadata(h)).to_dict() for h in p.hits]
    root = _span(otel_trace, trace_id, _span_id(trace_id, "root"), None, f"query {p.query_id}",
                 SpanType.CHAIN, times["root"], {"query": p.query},
                 _root_outputs(p), p.error)
    retrieve = _span(otel_trace, trace_id, _span_id(trace_id, "retrieve"), root, "retrieve",
                     SpanType.RETRIEVER, times["retrieve"], {"query": p.query}, documents,
                     p.error if not p.hits else None)
    spans = [root, retrieve]
    if p.answer is not None:
        spans.append(_span(otel_trace, trace_id, _span_id(trace_id, "answer"), root, "answer",
                           SpanType.CHAIN, times["answer"],
                           {"query": p.query, "context": [h["chunk_id"] for h in p.hits]},
                           p.answer, None))
    return trace_id, spans, times["root"][1]


def _root_outputs(p: TracePayload) -> dict[str, Any]:
    answer = p.answer or {}
    return {"answer": answer.get("text"), "refusal_reason": answer.get("refusal_reason"),
            "failure": list(p.failure), "error": p.error}


def _present_traces(store: Any, trace_ids: list[str]) -> set[str]:
    try:
        return {info.trace_id for info in store.batch_get_trace_infos(trace_ids)}
    except MlflowException:  # a server without the batch endpoint: treat all as new
        return set()


def _response_preview(p: TracePayload) -> str:
    if p.error:
        return f"error: {p.error}"
    answer = p.answer or {}
    if answer.get("refusal_reason"):
        return f"refused: {answer['refusal_reason']}"
    return answer.get("text") or ", ".join(h["chunk_id"] for h in p.hits[:5])


def _trace_info(experiment_id: str, run_id: str, model_id: str | None, trace_id: str,
                p: TracePayload, times: tuple[int, int]) -> Any:
    """The trace's info with its tags, its links (run, model) and its assessments."""
    from mlflow.entities import AssessmentSource, Feedback, TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import TraceMetadataKey

    from kebab_mlflow.tracking.traces import trace_tags

    source = AssessmentSource(source_type="CODE", source_id="kebab-mlflow")
    metadata = {TraceMetadataKey.SOURCE_RUN: run_id, "mlflow.trace_schema.version": "3"}
    if model_id:
        metadata[TraceMetadataKey.MODEL_ID] = model_id
    return TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=times[0] // 1_000_000, execution_duration=(times[1] - times[0]) // 1_000_000,
        state=TraceState.ERROR if p.error else TraceState.OK,
        request_preview=p.query[:1000],
        response_preview=_response_preview(p)[:1000],
        trace_metadata=metadata,
        tags=trace_tags(p),
        assessments=[Feedback(name=name, value=value, source=source, trace_id=trace_id)
                     for name, value in p.scores.items()])


def _span(otel_trace: int, trace_id: str, span_id: int, parent: Any, name: str, kind: str,
          times: tuple[int, int], inputs: Any, outputs: Any, error: str | None) -> Any:
    """A finished MLflow span built directly (no tracer, no exporter thread)."""
    from mlflow.entities import Span
    from mlflow.tracing.constant import SpanAttributeKey
    from mlflow.tracing.utils import build_otel_context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Status, StatusCode

    attributes = {SpanAttributeKey.REQUEST_ID: json.dumps(trace_id),
                  SpanAttributeKey.SPAN_TYPE: json.dumps(kind),
                  SpanAttributeKey.INPUTS: json.dumps(inputs, ensure_ascii=False),
                  SpanAttributeKey.OUTPUTS: json.dumps(outputs, ensure_ascii=False)}
    status = Status(StatusCode.ERROR, error) if error else Status(StatusCode.OK)
    otel = ReadableSpan(name=name, context=build_otel_context(otel_trace, span_id),
                        parent=parent._span.context if parent is not None else None,
                        start_time=times[0], end_time=times[1], attributes=attributes,
                        status=status, resource=Resource.get_empty())
    return Span(otel)


def _schema(fields: Mapping[str, str]) -> Any:
    from mlflow.types import ColSpec, DataType, Schema
    from mlflow.types.schema import Array

    def spec(name: str, kind: str) -> ColSpec:
        if kind == "list":
            return ColSpec(Array(DataType.string), name, required=False)
        return ColSpec(DataType[kind], name, required=name in ("id", "query"))

    return Schema([spec(name, kind) for name, kind in fields.items()])


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _record(run: Any) -> RunRecord:
    info, data = run.info, run.data
    return RunRecord(run_id=info.run_id, run_name=info.run_name or "",
                     experiment_id=info.experiment_id, status=info.status,
                     start_time=info.start_time, params=dict(data.params),
                     metrics=dict(data.metrics), tags=dict(data.tags))


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
