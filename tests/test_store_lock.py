"""Issue 28 item 2: a SQLite store another process holds locked is waited for (bounded by
KEBAB_STORE_LOCK_WAIT_S, with progress) and then refused with exit 2 naming the lock; it is
never taken for a half-created store, renamed or rebuilt. The lock is held by another process
under ``BEGIN EXCLUSIVE`` until the test releases it (an event, not a duration)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kebab_mlflow.errors import StoreLockedError
from kebab_mlflow.tracking import store
from kebab_mlflow.tracking.store import Tracker
from tests.conftest import mlflow_client

HOLD = """\
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()  # held until the test writes a line (or goes away)
con.execute("ROLLBACK")
"""


@contextmanager
def held_exclusive(db: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"  # the event: the lock is held
        yield proc
    finally:
        release(proc)


def release(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=600)
    for pipe in (proc.stdin, proc.stdout):
        if not pipe.closed:
            pipe.close()


@pytest.fixture
def store_with_a_run(store_uri: str) -> tuple[Path, str]:
    tracker = Tracker(store_uri)
    run_id = tracker.start_run(tracker.experiment_id("locked"), "before", {})
    tracker.end_run(run_id)
    store._forget_engine(store_uri)
    return Path(store_uri.removeprefix("sqlite:///")), run_id


def _untouched(db: Path, uri: str, run_id: str) -> None:
    assert not list(db.parent.glob("*.broken-*"))
    assert mlflow_client(uri).get_run(run_id).info.status == "FINISHED"


def test_a_store_locked_past_the_wait_is_refused_naming_the_lock(store_with_a_run, store_uri,
                                                                 monkeypatch):
    db, run_id = store_with_a_run
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "1")
    with held_exclusive(db):
        with pytest.raises(StoreLockedError) as refused:
            Tracker(store_uri)
    assert "is locked by another process" in str(refused.value)
    assert store.LOCK_WAIT_ENV in str(refused.value) and "half-created" not in str(refused.value)
    assert refused.value.exit_code == 2
    _untouched(db, store_uri, run_id)


def test_a_store_locked_for_a_while_is_waited_out_with_progress(store_with_a_run, store_uri,
                                                                monkeypatch):
    """The lock is released once the waiting Tracker said it waits (its first progress line)."""
    db, run_id = store_with_a_run
    monkeypatch.setattr(store, "LOCK_PROGRESS_S", 0.5)
    said: list[str] = []
    with held_exclusive(db) as holder:
        def note(message: str) -> None:
            said.append(message)
            threading.Thread(target=release, args=(holder,)).start()

        monkeypatch.setattr(store, "warn", note)
        tracker = Tracker(store_uri)
    assert said and "is locked by another process; waiting" in said[0]
    assert tracker.get_run(run_id).status == "FINISHED"
    _untouched(db, store_uri, run_id)


def test_a_half_created_store_locked_elsewhere_is_not_renamed(tmp_path, monkeypatch):
    """Even a store MLflow cannot open is set aside only under SQLite's exclusive lock."""
    from tests.faultpoints import build_half_created_store

    db = tmp_path / "half" / "mlflow.db"
    uri = build_half_created_store(db)
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "1")
    with held_exclusive(db):
        with pytest.raises(StoreLockedError):
            Tracker(uri)
    assert not list(db.parent.glob("*.broken-*")) and db.is_file()


def test_a_bad_wait_setting_is_an_input_error(monkeypatch):
    from kebab_mlflow.errors import InputError

    monkeypatch.setenv(store.LOCK_WAIT_ENV, "soon")
    with pytest.raises(InputError, match="KEBAB_STORE_LOCK_WAIT_S must be a number"):
        store.lock_wait_s()


def test_ending_a_run_on_the_way_out_waits_for_a_lock_and_logs_no_traceback(
        store_uri, monkeypatch):
    """A Dask worker's last write can hold the store while the interrupted sweep ends its row
    KILLED: the quiet end tries again (the lock is released at its first locked attempt, an
    event), and MLflow's logged copy of the OperationalError never reaches a handler."""
    import logging

    tracker = Tracker(store_uri)
    run_id = tracker.start_run(tracker.experiment_id("locked"), "running", {})
    db = Path(store_uri.removeprefix("sqlite:///"))
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]  # a list, not a stream
    logging.getLogger("mlflow.store.db.utils").addHandler(handler)
    locked_attempts: list[BaseException] = []
    with held_exclusive(db) as holder:
        def is_locked(exc: BaseException) -> bool:
            locked = "database is locked" in str(exc)
            if locked and not locked_attempts:
                release(holder)
            locked_attempts.append(exc)
            return locked

        monkeypatch.setattr(store, "_is_locked", is_locked)
        try:
            assert tracker.end_run_quietly(run_id, "KILLED") is True
        finally:
            logging.getLogger("mlflow.store.db.utils").removeHandler(handler)
    assert locked_attempts, "the store was never found locked: the test proved nothing"
    assert mlflow_client(store_uri).get_run(run_id).info.status == "KILLED"
    assert not [r for r in seen if str(r.msg).startswith("SQLAlchemy database error")]
