"""``--target http://…``: POST each query to a search service; versions from ``GET ./versions``."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

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
    read: a server trickling one byte a second times out too. A reply over ``max_bytes`` is
    that query's error (it is never read to its end). ``http://user:password@host/…`` sends
    HTTP basic auth; the credentials are never part of a message, a param or an artifact."""

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
            deadline = time.monotonic() + o.timeout_s
            try:
                with urllib.request.urlopen(req, timeout=o.timeout_s) as resp:  # noqa: S310
                    return _read_within(resp, deadline, o.max_bytes, shown)
            except urllib.error.HTTPError as exc:
                detail = snippet(exc.read(ERROR_READ) or b"")
                failure = f"HTTP {exc.code} {exc.reason} from {shown}: {detail}"
                if exc.code < 500:  # the request itself is wrong: retrying will not help
                    raise ReplyError(failure) from None
            except TimeoutError:
                raise ReplyError(f"timed out after {o.timeout_s:g} s waiting for {shown}"
                                 ) from None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise ReplyError(f"timed out after {o.timeout_s:g} s connecting to "
                                     f"{shown}") from None
                failure = f"cannot connect to {shown}: {exc.reason}"
            except (ConnectionError, http.client.HTTPException) as exc:
                failure = f"connection to {shown} failed: {type(exc).__name__}: {exc}"
            if attempt + 1 < attempts:
                time.sleep(self.backoff(attempt, key))
        raise ReplyError(f"{failure} (after {attempts} attempt{'s' * (attempts > 1)})")

    def backoff(self, attempt: int, key: str) -> float:
        """``backoff_s * 2**attempt`` (capped), plus seeded jitter: the same seed, query and
        attempt always wait the same time, whichever thread runs it."""
        o = self.options
        wait = min(o.backoff_s * 2 ** attempt, MAX_BACKOFF_S)
        if o.jitter:
            digest = hashlib.sha256(f"{o.seed}\0{key}\0{attempt}".encode()).digest()
            wait += wait * o.jitter * random.Random(digest).random()
        return wait




def _read_within(resp: http.client.HTTPResponse, deadline: float, max_bytes: int,
                 shown: str) -> bytes:
    """The body, read one receive at a time, each bounded by what is left of the deadline."""
    declared = resp.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ReplyError(f"the reply from {shown} is {int(declared):,} bytes, over the "
                         f"limit of {max_bytes:,} (?max_bytes=N)")
    sock = getattr(getattr(resp.fp, "raw", None), "_sock", None)
    parts, size = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if sock is not None:
            sock.settimeout(left)
        part = resp.read1(READ_SIZE)
        if not part:
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
