"""HTTP targets (issue 28): credentials stay with their origin, a POST never becomes a GET,
the deadline covers the whole response (headers too), ids are bounded. Loopback fake servers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kebab_mlflow.records import VERSION_KEYS
from kebab_mlflow.targets.http import load_http
from kebab_mlflow.targets.reply import MAX_ID_CHARS

VERSIONS = "&".join(f"{k}=v1" for k in VERSION_KEYS)
HIT = {"chunk_id": "d0#0", "doc_id": "d0", "score": 1.0}
TRICKLE_FOR_S = 60.0  # far past the test's ?timeout=: the reply would succeed if waited out


@dataclass
class Seen:
    method: str
    path: str
    authorization: str | None
    body: bytes


@dataclass
class FakeServer:
    """A loopback server answering with ``respond(handler)``; every request it saw."""

    respond: Callable[[BaseHTTPRequestHandler], None]
    seen: list[Seen] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def reply_json(handler: BaseHTTPRequestHandler, payload: object, code: int = 200) -> None:
    body = json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def redirect(handler: BaseHTTPRequestHandler, code: int, location: str) -> None:
    handler.send_response(code)
    handler.send_header("Location", location)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], FakeServer]]:
    started: list[tuple[ThreadingHTTPServer, FakeServer]] = []

    def start(respond: Callable[[BaseHTTPRequestHandler], None]) -> FakeServer:
        fake = FakeServer(respond)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.seen.append(Seen(self.command, self.path, self.headers.get("Authorization"),
                                      self.rfile.read(length)))
                fake.respond(self)

            do_GET = do_POST = _handle

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        fake.url = f"http://127.0.0.1:{server.server_address[1]}"
        started.append((server, fake))
        return fake

    yield start
    for server, fake in started:
        fake.stopped.set()
        server.shutdown()
        server.server_close()


def target_of(url: str, options: str = "") -> object:
    user_url = url.replace("http://", "http://alice:alice-Pw-123@")
    return load_http(f"{user_url}/search?{VERSIONS}&retries=0{options}", 1)


def test_a_post_answered_302_is_an_error_and_never_a_get(serve):
    other = serve(lambda h: reply_json(h, {"hits": [HIT]}))
    first = serve(lambda h: redirect(h, 302, other.url + "/search"))
    hits, _, error, _ = target_of(first.url).run_one("q", False, 5)
    assert hits == () and "answered 302" in error and "not re-sent as a GET" in error
    assert other.seen == []  # nothing reached the other host
    assert "alice-Pw-123" not in error


@pytest.mark.parametrize("code", [307, 308])
def test_a_cross_origin_307_re_posts_the_body_without_credentials(serve, code):
    other = serve(lambda h: reply_json(h, {"hits": [HIT]}))
    first = serve(lambda h: redirect(h, code, other.url + "/elsewhere"))
    hits, _, error, _ = target_of(first.url).run_one("the query", False, 5)
    assert error is None and [h.chunk_id for h in hits] == ["d0#0"]
    assert first.seen[0].authorization and first.seen[0].authorization.startswith("Basic ")
    (moved,) = other.seen
    assert (moved.method, moved.path, moved.authorization) == ("POST", "/elsewhere", None)
    assert json.loads(moved.body)["query"] == "the query"


def test_a_same_origin_307_keeps_the_credentials(serve):
    def respond(h: BaseHTTPRequestHandler) -> None:
        if h.path.startswith("/search"):
            redirect(h, 307, "/v2/search")
        else:
            reply_json(h, {"hits": [HIT]})

    server = serve(respond)
    _, _, error, _ = target_of(server.url).run_one("q", False, 5)
    assert error is None
    assert [s.path for s in server.seen] == ["/search", "/v2/search"]
    assert server.seen[1].authorization == server.seen[0].authorization is not None


def test_the_versions_get_follows_a_cross_origin_redirect_without_credentials(serve):
    other = serve(lambda h: reply_json(h, {k: "v9" for k in VERSION_KEYS}))
    first = serve(lambda h: redirect(h, 302, other.url + "/versions"))
    spec = first.url.replace("http://", "http://alice:alice-Pw-123@") + "/search?retries=0"
    target = load_http(spec, 1)
    assert target.versions.index_version == "v9"
    assert first.seen[0].authorization is not None and other.seen[0].authorization is None


def test_a_redirect_to_another_scheme_is_refused(serve):
    first = serve(lambda h: redirect(h, 307, "ftp://127.0.0.1/x"))
    _, _, error, _ = target_of(first.url).run_one("q", False, 5)
    assert "only http(s) is followed" in error


def test_headers_trickling_one_byte_at_a_time_time_out_at_the_deadline(serve):
    def trickle(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        end = time.monotonic() + TRICKLE_FOR_S
        try:
            while time.monotonic() < end and not fake.stopped.is_set():
                h.wfile.write(b"a")
                h.wfile.flush()
                fake.stopped.wait(0.2)  # each byte well within the timeout: only the sum is not
            h.wfile.write(b"\r\nContent-Length: 25\r\n\r\n" + json.dumps({"hits": []}).encode())
        except OSError:  # the client gave up: what the deadline is for
            pass

    fake = serve(trickle)
    hits, _, error, _ = target_of(fake.url, "&timeout=1").run_one("q", False, 5)
    assert hits == () and error is not None and error.startswith("timed out after 1 s"), error


@pytest.mark.parametrize("key", ["chunk_id", "doc_id"])
def test_an_id_past_the_limit_is_that_querys_error(serve, key):
    huge = "x" * (5 * 2**20)
    fake = serve(lambda h: reply_json(h, {"hits": [{**HIT, key: huge}]}))
    hits, _, error, _ = target_of(fake.url).run_one("q", False, 5)
    assert hits == () and f"'{key}' is {len(huge):,} characters, over the limit of " \
        f"{MAX_ID_CHARS:,}" in error
    assert len(error) < 1000


def test_an_id_at_the_limit_is_accepted(serve):
    fake = serve(lambda h: reply_json(h, {"hits": [{**HIT, "chunk_id": "c" * MAX_ID_CHARS}]}))
    hits, _, error, _ = target_of(fake.url).run_one("q", False, 5)
    assert error is None and len(hits[0].chunk_id) == MAX_ID_CHARS
