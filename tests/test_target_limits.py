"""HTTP targets bounded and credentials never shown (issue 18 items 4, 9): redaction of specs
and URLs everywhere, basic auth from ``user:password@``, a total deadline per request, a reply
size limit, hits cut to k and noted in per_query.jsonl."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import kebab_mlflow as km
from kebab_mlflow.errors import TargetError
from kebab_mlflow.targets import load_target
from kebab_mlflow.targets.spec import redacted
from tests.conftest import write

VERSIONS = {"parser_version": "p", "chunker_version": "c", "embedding_version": "e",
            "index_version": "i", "prompt_template_version": "t"}


class Service:
    """What the test server saw and how it replies, keyed by the query text."""

    def __init__(self) -> None:
        self.authorization: list[str | None] = []
        self.trickling = threading.Event()

    def handler(self):
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                self.reply(200, json.dumps(VERSIONS).encode())

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.authorization.append(self.headers.get("Authorization"))
                query = body["query"]
                if query == "forbidden":
                    self.reply(403, b"no")
                elif query == "trickle":
                    self.trickle()
                elif query == "huge":
                    self.reply(200, b"[" + b" " * 300_000 + b"]")
                elif query == "huge-chunked":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for _ in range(40):
                        self.wfile.write(b"2710\r\n" + b" " * 10_000 + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    n = int(query.split()[-1])
                    hits = [{"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "score": n - i}
                            for i in range(n)]
                    self.reply(200, json.dumps({"hits": hits}).encode())

            def reply(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def trickle(self) -> None:
                """One byte every 0.05 s for up to a minute, unless the client leaves."""
                self.send_response(200)
                self.send_header("Content-Length", "1200")
                self.end_headers()
                service.trickling.set()
                try:
                    for _ in range(1200):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.05)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        return Handler


@pytest.fixture
def service():
    svc = Service()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), svc.handler())
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    svc.port = srv.server_address[1]
    yield svc
    srv.shutdown()
    srv.server_close()


def test_redacted_hides_userinfo_and_secret_looking_parameters():
    spec = "http://bob:secret@h:1/search?api_key=XYZ&q=cats&token=T&timeout=5&Password=p"
    assert redacted(spec) == ("http://***@h:1/search?api_key=***&q=cats&token=***&timeout=5"
                              "&Password=***")
    assert redacted("error from https://h/x?client_secret=s1; then") == \
        "error from https://h/x?client_secret=***; then"
    assert redacted("cmd:tool --k {k} {query}") == "cmd:tool --k {k} {query}"


def test_basic_auth_from_the_url_and_no_secret_in_errors(service):
    url = f"http://bob:s%3Acret@127.0.0.1:{service.port}/search?api_key=SEKRIT"
    target = load_target(url)
    assert "s%3Acret" not in repr(target) and "SEKRIT" not in repr(target)
    [(hits, _, error, _), (_, _, refused, _)] = target.run_many(
        [("q 3", False), ("forbidden", False)], 5)
    assert error is None and [h.chunk_id for h in hits] == ["d0#0", "d1#0", "d2#0"]
    expected = "Basic " + base64.b64encode(b"bob:s:cret").decode()
    assert service.authorization == [expected, expected]
    assert refused.startswith("HTTP 403") and "api_key=***" in refused
    assert "SEKRIT" not in refused and "s%3Acret" not in refused and "bob" not in refused


def test_an_unusable_spec_is_reported_without_its_secrets(service):
    with pytest.raises(TargetError) as err:
        load_target(f"http://bob:pw123@127.0.0.1:{service.port}/search?api_key=K9&timeout=x")
    assert "pw123" not in str(err.value) and "K9" not in str(err.value)
    assert "timeout='x'" in str(err.value)


def test_the_timeout_bounds_the_whole_request_not_each_read(service):
    target = load_target(f"http://127.0.0.1:{service.port}/search?timeout=0.5&retries=0")
    [(hits, _, error, seconds)] = target.run_many([("trickle", False)], 5)
    assert service.trickling.is_set()
    assert error == f"timed out after 0.5 s waiting for http://127.0.0.1:{service.port}/search"
    assert seconds < 30  # the server trickles for a minute; one read never waits 0.5 s


@pytest.mark.parametrize("query", ["huge", "huge-chunked"])
def test_a_reply_over_max_bytes_is_that_querys_error(service, query):
    target = load_target(f"http://127.0.0.1:{service.port}/search?max_bytes=100000")
    [(hits, _, error, _), (ok, _, fine, _)] = target.run_many([(query, False), ("q 2", False)], 5)
    assert hits == () and "over the limit of 100,000" in error
    assert fine is None and len(ok) == 2


def test_hits_past_k_are_cut_and_noted_in_the_per_query_record(service, tmp_path):
    golden = write(tmp_path / "g.yaml", "name: g\nqueries:\n"
                   "  - {id: many, query: 'q 50', expected_doc_ids: [d3]}\n"
                   "  - {id: few, query: 'q 2', expected_doc_ids: [d1]}\n")
    result = km.evaluate(f"http://127.0.0.1:{service.port}/search", golden, k=5)
    records = [json.loads(line) for line in result.per_query_path.read_text().splitlines()]
    assert [len(r["hits"]) for r in records] == [5, 2]
    assert records[0]["truncated_hits"] == 45 and "truncated_hits" not in records[1]
