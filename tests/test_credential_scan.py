"""No credential in any output (issue 28): a scan of everything the credential cases produce.

The cases, against a real ``mlflow server --app-name basic-auth`` addressed as
``http://admin:PASSWORD@host`` (the password in the URI, none in the environment):
``run`` (an HTTP target with ``alice:PASSWORD@`` and ``?api_key=`` in its spec, a reply that
echoes the credentials back, a secret environment variable), ``runs``, ``show``, ``compare``,
a server lost while publishing (the "lost the tracking store" error and its recovery folder),
``upload`` of that folder, and a store that cannot be reached. Every stdout, stderr, the
server's store (params, tags, metrics, inputs), every artifact and the recovery folder are
searched for each secret, as it is and encoded: 0 hits.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kebab_mlflow.records import VERSION_KEYS
from tests.conftest import ROOT, write
from tests.faultpoints import sigint_at_default
from tests.servers import ADMIN_PASSWORD, ADMIN_USER, closed_port_url, start_mlflow_server
from tests.test_faults import GOLDEN_SET, TARGET, wait_for

KEBAB = str(Path(sys.executable).with_name("kebab-mlflow"))
TARGET_PASSWORD = "target-Pw-7e31a0c4"
API_KEY = "api-Key-2b9d55e1"
ENV_TOKEN = "env-Token-c0ffee42"
SECRETS = (ADMIN_PASSWORD, TARGET_PASSWORD, API_KEY, ENV_TOKEN)


def encodings(secret: str) -> set[str]:
    """The forms a secret could leak in: as it is, percent-encoded, in a basic-auth header."""
    forms = {secret, urllib.parse.quote(secret, safe="")}
    for user in (ADMIN_USER, "alice"):
        forms.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return forms


class _EchoingSearch(BaseHTTPRequestHandler):
    """A search service: query 1 fails with a 500 whose body echoes every credential it got."""

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, code: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(200, {k: "v1" for k in VERSION_KEYS})

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"]
        if query.endswith(" 1"):
            self._reply(500, {"error": f"denied {self.headers.get('Authorization')} for "
                              f"{self.path} token={ENV_TOKEN}"})
            return
        self._reply(200, {"hits": [{"chunk_id": "d0#0", "doc_id": "d0", "score": 1.0}]})


@pytest.fixture
def search_service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingSearch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def kebab(args: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    full_env = {**clean, "PYTHONPATH": str(ROOT), "SERVICE_API_TOKEN": ENV_TOKEN, **env}
    return subprocess.Popen([KEBAB, *args], cwd=cwd, env=full_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=sigint_at_default)


def finished(args: list[str], cwd: Path, outputs: list[str], **env: str) -> tuple[int, str]:
    proc = kebab(args, cwd, **env)
    out, err = proc.communicate(timeout=300)
    outputs.extend([out, err])
    return proc.returncode, out + err


def hits_in(blob: bytes, where: str) -> list[str]:
    return [f"{where}: {form!r}" for secret in SECRETS for form in encodings(secret)
            if form.encode() in blob]


def test_no_secret_in_any_output_of_the_credential_cases(tmp_path, search_service):
    server = start_mlflow_server(auth=True, root=tmp_path / "server")
    try:
        outputs: list[str] = []
        recovery_files = _run_every_case(tmp_path, server, search_service, outputs)
    finally:
        server.stop()
    found = [hit for i, text in enumerate(outputs) for hit in hits_in(text.encode(), f"out{i}")]
    found += [hit for name, blob in recovery_files.items() for hit in hits_in(blob, name)]
    stored = [p for p in (tmp_path / "server").rglob("*")
              if p.is_file() and p.name not in ("server.log", "basic_auth.db")]
    assert any(p.name == "per_query.jsonl" for p in stored)  # the scan saw the artifacts
    found += [hit for p in stored for hit in hits_in(p.read_bytes(), str(p))]
    assert found == []


def _run_every_case(tmp_path: Path, server, service: str, outputs: list[str]
                    ) -> dict[str, bytes]:
    host = server.url.removeprefix("http://")
    uri = f"http://{ADMIN_USER}:{ADMIN_PASSWORD}@{host}"
    golden = write(tmp_path / "g.yaml", GOLDEN_SET)
    spec = f"http://alice:{TARGET_PASSWORD}@{service}/search?api_key={API_KEY}&retries=0"
    run = ["run", "--golden", str(golden), "--target", spec, "--tracking-uri", uri,
           "--experiment", "scan"]
    for name in ("baseline", "candidate"):
        code, text = finished([*run, "--run-name", name], tmp_path, outputs)
        assert code == 0, text
    for args in (["runs"], ["show", "candidate"],
                 ["compare", "baseline", "candidate"]):
        code, text = finished([*args, "--tracking-uri", uri, "--experiment", "scan"],
                              tmp_path, outputs)
        assert code in (0, 1), text
    recovery = _lose_the_server_while_publishing(tmp_path, server, uri, outputs)
    kept = {str(p): p.read_bytes() for p in recovery.rglob("*") if p.is_file()}
    code, text = finished(["upload", str(recovery), "--tracking-uri", uri], tmp_path, outputs)
    assert code == 0 and "published run" in text, text
    unreachable = f"http://{ADMIN_USER}:{ADMIN_PASSWORD}@{closed_port_url().split('//')[1]}"
    code, text = finished([*run[:-4], "--tracking-uri", unreachable], tmp_path, outputs)
    assert code == 2 and "cannot reach the MLflow tracking store" in text, text
    return kept


def _lose_the_server_while_publishing(tmp_path: Path, server, uri: str,
                                      outputs: list[str]) -> Path:
    target, golden, gate = write(tmp_path / "gated.py", TARGET), tmp_path / "g.yaml", \
        tmp_path / "gate"
    proc = kebab(["run", "--golden", str(golden), "--target", f"python:{target}:search",
                  "--tracking-uri", uri, "--experiment", "scan"], tmp_path,
                 KEBAB_TEST_GATE=str(gate))
    wait_for(Path(str(gate) + ".started"), proc)  # the run exists, its first query waits
    server.kill()
    gate.touch()
    out, err = proc.communicate(timeout=300)
    outputs.extend([out, err])
    assert proc.returncode == 2 and "lost the tracking store while publishing" in err, err
    found = re.search(r"kebab-mlflow upload (\S+)` once", err.replace("\n", ""))
    assert found, err
    server.start()
    return Path(found.group(1))
