"""``--target http://…``: POST each query to a search service; versions from ``GET ./versions``."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from kebab_mlflow.errors import TargetError
from kebab_mlflow.records import VERSION_KEYS, Answer, Hit, VersionSnapshot
from kebab_mlflow.redaction import redacted, register_url_credentials
from kebab_mlflow.targets.base import Target, replace_versions
from kebab_mlflow.targets.reply import ReplyError, decode_json, parse_reply, snippet, type_name
from kebab_mlflow.targets.spec import (
    TargetOptions,
    http_options,
    parse_options,
    snapshot,
)

MAX_BACKOFF_S = 10.0
READ_SIZE = 64 * 1024
ERROR_READ = 4096  # of an error reply, enough for the snippet shown


class HttpTarget(Target):
    """POST JSON to a URL; retries 5xx and connection errors with exponential backoff.

    ``timeout`` bounds each attempt as a whole (connecting, the headers, the body), not each
    read: a server trickling one byte a second times out too (:class:`_Deadline`). A reply
    over ``max_bytes`` is that query's error (it is never read to its end).
    ``http://user:password@host/…`` sends HTTP basic auth; the credentials are never part of
    a message, a param or an artifact, and never sent to another origin: a redirect to
    another scheme, host or port is followed without them (:class:`_SameOriginRedirects`). A
    POST answered 301/302/303 is that query's error, never re-sent as a GET."""

    kind = "http"

    def __init__(self, spec: str, url: str, options: TargetOptions, versions: VersionSnapshot,
                 concurrency: int, authorization: str | None = None):
        super().__init__(spec, versions, concurrency)
        self.url = url
        self.options = options
        self._authorization = authorization

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        body = json.dumps({"query": text, "k": k, "ask": ask}).encode("utf-8")
        raw = self.request(self.url, body, key=text)
        return parse_reply(decode_json(raw, "the reply"), ask)

    def request(self, url: str, body: bytes | None, key: str = "") -> bytes:
        """The response body of a 2xx reply; ReplyError after the last failed attempt."""
        o = self.options
        attempts = o.retries + 1
        shown = redacted(url)
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "kebab-mlflow"}
        if self._authorization:
            headers["Authorization"] = self._authorization
        for attempt in range(attempts):
            req = urllib.request.Request(url, data=body, headers=headers,
                                         method="POST" if body is not None else "GET")
            deadline = _Deadline(o.timeout_s)
            try:
                with deadline, _opener(deadline).open(req, timeout=o.timeout_s) as resp:
                    return _read_within(resp, deadline, o.max_bytes, shown)
            except ReplyError:
                raise
            except Exception as exc:
                if deadline.expired:  # the watchdog closed the socket: whatever it raised
                    raise ReplyError(f"timed out after {o.timeout_s:g} s waiting for {shown}"
                                     ) from None
                failure = _failure(exc, shown, o.timeout_s)
            if attempt + 1 < attempts:
                time.sleep(self.backoff(attempt, key))
        raise ReplyError(f"{failure} (after {attempts} attempt{'s' * (attempts > 1)})")

    def backoff(self, attempt: int, key: str) -> float:
        """``backoff_s * 2**attempt`` (capped), plus seeded jitter: the same seed, query and
        attempt always wait the same time, whichever thread runs it."""
        o = self.options
        wait: float = min(o.backoff_s * 2 ** attempt, MAX_BACKOFF_S)  # int ** int is Any
        if o.jitter:
            digest = hashlib.sha256(f"{o.seed}\0{key}\0{attempt}".encode()).digest()
            wait += wait * o.jitter * random.Random(digest).random()
        return wait




def _failure(exc: Exception, shown: str, timeout_s: float) -> str:
    """What a failed attempt says when it may be retried (a 5xx, a lost connection); a
    ReplyError for one that may not (a 4xx, a refused redirect, a timeout)."""
    if isinstance(exc, urllib.error.HTTPError):
        detail = snippet(exc.read(ERROR_READ) or b"")
        failure = f"HTTP {exc.code} {exc.reason} from {shown}: {detail}"
        if exc.code < 500:  # the request itself is wrong: retrying will not help
            raise ReplyError(failure) from None
        return failure
    if isinstance(exc, TimeoutError):
        raise ReplyError(f"timed out after {timeout_s:g} s waiting for {shown}") from None
    if isinstance(exc, urllib.error.URLError):
        if isinstance(exc.reason, TimeoutError):
            raise ReplyError(f"timed out after {timeout_s:g} s connecting to {shown}"
                             ) from None
        return f"cannot connect to {shown}: {exc.reason}"
    if isinstance(exc, ConnectionError | http.client.HTTPException):
        return f"connection to {shown} failed: {type(exc).__name__}: {exc}"
    raise exc


class _Deadline:
    """One attempt's deadline over the whole response: a watchdog shuts the attempt's sockets
    down when it passes, so a read blocked in the status line, the headers or the body
    returns at once (a socket timeout bounds each read, not their sum)."""

    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0.001)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError):  # already closed
        pass


def _watched(base: type[http.client.HTTPConnection], deadline: _Deadline
             ) -> type[http.client.HTTPConnection]:
    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            self.timeout = deadline.left()  # connecting (and TLS) within what is left
            super().connect()
            deadline.watch(self.sock)

    return Connection


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self._connection = _watched(http.client.HTTPConnection, deadline)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self._connection = _watched(http.client.HTTPSConnection, deadline)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=getattr(self, "_context", None))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects that never leak credentials nor change a POST: to another origin (scheme,
    host, port) the ``Authorization`` header is dropped; only http(s) targets are followed; a
    POST answered 301/302/303 (which a browser re-sends as a GET without its body) is
    refused, and a 307/308 re-sends the POST with its body."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        shown, target = redacted(req.full_url), redacted(newurl)
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise ReplyError(f"{shown} redirects ({code}) to {target}: only http(s) is followed")
        posted = req.get_method() == "POST"
        if posted and code in (301, 302, 303):
            raise ReplyError(f"{shown} answered {code} {msg} (to {target}) to a POST: it is not "
                             "re-sent as a GET; give the target's final URL")
        if code not in (301, 302, 303, 307, 308):
            return None
        kept = {k: v for k, v in req.headers.items()  # not Host: it names the old origin
                if not (k.lower() == "authorization" and _origin(newurl) != _origin(req.full_url))}
        if not posted:
            kept = {k: v for k, v in kept.items() if k.lower() != "content-type"}
        return urllib.request.Request(newurl, data=req.data if posted else None, headers=kept,
                                      origin_req_host=req.origin_req_host, unverifiable=True,
                                      method=req.get_method())


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_HttpHandler(deadline), _HttpsHandler(deadline),
                                       _SameOriginRedirects())


def _read_within(resp: http.client.HTTPResponse, deadline: _Deadline, max_bytes: int,
                 shown: str) -> bytes:
    """The body, read one receive at a time, each bounded by what is left of the deadline."""
    declared = resp.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ReplyError(f"the reply from {shown} is {int(declared):,} bytes, over the "
                         f"limit of {max_bytes:,} (?max_bytes=N)")
    sock = getattr(getattr(resp.fp, "raw", None), "_sock", None)
    parts: list[bytes] = []
    size = 0
    while True:
        left = deadline.at - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if sock is not None:
            sock.settimeout(left)
        part = resp.read1(READ_SIZE)
        if not part:
            if deadline.expired:  # the watchdog ended the body early: not the whole reply
                raise TimeoutError
            return b"".join(parts)
        size += len(part)
        if size > max_bytes:
            raise ReplyError(f"the reply from {shown} is over the limit of {max_bytes:,} "
                             "bytes (?max_bytes=N)")
        parts.append(part)


def parse_http(spec: str) -> tuple[str, TargetOptions]:
    """(the URL to call, without credentials; the options) of an ``http(s)://`` spec."""
    url, raw = http_options(spec)
    if not urllib.parse.urlsplit(spec).hostname:
        raise TargetError(f"--target {spec!r}: the URL has no host")
    return _without_userinfo(url), parse_options(raw, spec)


def _without_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def basic_auth(spec: str) -> str | None:
    """The ``Authorization`` header of ``http://user:password@…`` (None without userinfo)."""
    parts = urllib.parse.urlsplit(spec)
    register_url_credentials(spec)
    if parts.username is None:
        return None
    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def load_http(spec: str, concurrency: int) -> HttpTarget:
    url, options = parse_http(spec)
    parts = urllib.parse.urlsplit(_without_userinfo(spec))
    probe = HttpTarget(spec, url, options, VersionSnapshot(), concurrency, basic_auth(spec))
    missing = [k for k in VERSION_KEYS if k not in options.versions]
    if not missing:
        return replace_versions(probe, snapshot({}, options.versions, spec))
    versions_url = options.versions_url or urllib.parse.urljoin(
        urllib.parse.urlunsplit(parts._replace(query="", path=parts.path or "/")), "versions")
    reported, reason = None, ""
    try:
        reported = decode_json(probe.request(versions_url, None),
                               f"GET {redacted(versions_url)}")
        if not isinstance(reported, Mapping):
            reason = f"GET {redacted(versions_url)} replied a {type_name(reported)}, not an object"
            reported = None
    except ReplyError as exc:
        message = str(exc)
        if message.startswith(("cannot connect", "connection to", "timed out")):
            raise TargetError(f"--target {spec!r}: the target is not reachable: {message}"
                              ) from None
        reason = message
    return replace_versions(probe, snapshot(reported, options.versions, spec, reason))
