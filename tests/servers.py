"""Real services for the integration tests: an ``mlflow server`` on a free loopback port and a
throwaway PostgreSQL cluster (``scripts/postgres.sh``).

A server takes ~10 s to answer ``/health`` on 2 cores, so the shared ones are started once per
test session: the session-scoped fixtures below memoise them in this module (a fixture imported
into several test modules is still one process) and stop them when the interpreter exits.
Every server runs with one worker and ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false`` in a
temporary working directory (basic auth writes ``basic_auth.db`` there). Child processes get
``PR_SET_PDEATHSIG`` so a killed pytest leaves no server behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_SH = ROOT / "scripts" / "postgres.sh"
STARTUP_TIMEOUT_S = 120.0
ADMIN_USER = "admin"
# Basic auth needs >= 12 characters; distinctive so a test can grep output for it.
ADMIN_PASSWORD = "kebab-admin-Pw-5f1c2e9a"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


@contextlib.contextmanager
def refusing_server() -> Iterator[tuple[str, list[int]]]:
    """An http URL on loopback whose every connection is reset at once, and the list that
    counts them: how many attempts a client made is then an event to check, not a time."""
    import struct
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)  # so the thread sees the block end
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # a timeout: look at the stop flag again
                continue
            accepted.append(1)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # linger 0: a reset, the client sees the connection refused mid-way

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()
        listener.close()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class MlflowServer:
    backend_uri: str
    artifacts_dir: Path
    workdir: Path
    port: int
    auth: bool = False
    proc: subprocess.Popen | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MLFLOW_TRACKING_", "KEBAB_"))}
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
        if self.auth:
            env["MLFLOW_FLASK_SERVER_SECRET_KEY"] = "kebab-test-secret-key"
            env["MLFLOW_AUTH_ADMIN_USERNAME"] = ADMIN_USER
            env["MLFLOW_AUTH_ADMIN_PASSWORD"] = ADMIN_PASSWORD
        return env

    def start(self) -> MlflowServer:
        cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
               "--port", str(self.port), "--workers", "1",
               "--backend-store-uri", self.backend_uri,
               "--artifacts-destination", str(self.artifacts_dir), "--serve-artifacts"]
        if self.auth:
            cmd += ["--app-name", "basic-auth"]
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=self.env(), stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}:\n"
                                   + self.log_tail())
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"mlflow server not healthy after {STARTUP_TIMEOUT_S} s:\n"
                           + self.log_tail())

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group: the server is gone, as after a crash."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def client(self):
        """An MlflowClient on this server (credentials come from MLFLOW_TRACKING_USERNAME /
        MLFLOW_TRACKING_PASSWORD, read per request)."""
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.url)


def start_mlflow_server(backend_uri: str | None = None, *, auth: bool = False,
                        root: Path | None = None, port: int | None = None) -> MlflowServer:
    root = Path(root or tempfile.mkdtemp(prefix="kebab-mlflow-server-"))
    root.mkdir(parents=True, exist_ok=True)
    backend_uri = backend_uri or f"sqlite:///{root / 'mlflow.db'}"
    server = MlflowServer(backend_uri, root / "artifacts", root, port or free_port(), auth)
    return server.start()


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class Postgres:
    dir: Path
    port: int
    uri: str = ""

    def start(self) -> Postgres:
        done = subprocess.run(["bash", str(POSTGRES_SH), "start", str(self.dir), str(self.port)],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise PostgresUnavailable(done.stderr.strip() or done.stdout.strip())
        self.uri = done.stdout.strip().splitlines()[-1]
        return self

    def stop(self) -> None:
        subprocess.run(["bash", str(POSTGRES_SH), "stop", str(self.dir)], capture_output=True,
                       timeout=60)

    def create_database(self, name: str) -> str:
        """A new database ``name`` (an identifier) in this cluster; its SQLAlchemy URI."""
        con = self.connect()
        try:
            con.autocommit = True
            with con.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            con.close()
        return self.uri.rsplit("/", 1)[0] + f"/{name}"

    def connect(self):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres",
                                dbname="postgres")


class PostgresUnavailable(RuntimeError):
    pass


def start_postgres() -> Postgres:
    # Not under pytest's tmp dir: its parents are mode 700 and the cluster runs as `postgres`.
    base = Path(tempfile.mkdtemp(prefix="kebab-pg-"))
    return Postgres(base, free_port()).start()


# --------------------------------------------------------------------------- shared, per session

_SHARED: dict[str, object] = {}


def _stop_all() -> None:
    for thing in reversed(list(_SHARED.values())):
        if isinstance(thing, MlflowServer | Postgres):
            with contextlib.suppress(Exception):
                thing.stop()
            shutil.rmtree(thing.workdir if isinstance(thing, MlflowServer) else thing.dir,
                          ignore_errors=True)


atexit.register(_stop_all)


def _once(key: str, make):
    if key not in _SHARED:
        _SHARED[key] = make()
    return _SHARED[key]


def shared_postgres() -> Postgres:
    if "pg-failed" in _SHARED:
        pytest.skip(str(_SHARED["pg-failed"]))
    try:
        return _once("pg", start_postgres)
    except PostgresUnavailable as exc:
        reason = ("SKIPPED LOUDLY: PostgreSQL could not be installed or started "
                  f"(scripts/postgres.sh): {exc}")
        _SHARED["pg-failed"] = reason
        print(f"\n*** {reason} ***", file=sys.stderr)
        pytest.skip(reason)


# Test modules wrap these in their own session-scoped fixtures (a thin ``@pytest.fixture``
# that returns ``shared_...()``); the memo makes it one process per test session.


def shared_mlflow_server() -> MlflowServer:
    """A tracking server backed by SQLite, artifacts served by the server."""
    return _once("server-sqlite", start_mlflow_server)


def shared_pg_server() -> MlflowServer:
    """A tracking server backed by the throwaway PostgreSQL cluster."""
    postgres = shared_postgres()
    return _once("server-pg", lambda: start_mlflow_server(postgres.uri))


def shared_auth_server() -> MlflowServer:
    """A tracking server with HTTP basic auth (admin: ADMIN_USER / ADMIN_PASSWORD)."""
    return _once("server-auth", lambda: start_mlflow_server(auth=True))
