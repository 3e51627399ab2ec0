"""``--target http://…``: POST each query to a search service; versions from ``GET ./versions``."""

from __future__ import annotations

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
from kebab_mlflow.targets.base import Target, replace_versions
from kebab_mlflow.targets.reply import ReplyError, decode_json, parse_reply, snippet, type_name
from kebab_mlflow.targets.spec import TargetOptions, http_options, parse_options, snapshot

MAX_BACKOFF_S = 10.0


class HttpTarget(Target):
    """POST JSON to a URL; retries 5xx and connection errors with exponential backoff."""

    kind = "http"

    def __init__(self, spec: str, url: str, options: TargetOptions, versions: VersionSnapshot,
                 concurrency: int):
        super().__init__(spec, versions, concurrency)
        self.url = url
        self.options = options

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        body = json.dumps({"query": text, "k": k, "ask": ask}).encode("utf-8")
        raw = self.request(self.url, body, key=text)
        return parse_reply(decode_json(raw, "the reply"), ask)

    def request(self, url: str, body: bytes | None, key: str = "") -> bytes:
        """The response body of a 2xx reply; ReplyError after the last failed attempt."""
        o = self.options
        attempts = o.retries + 1
        for attempt in range(attempts):
            req = urllib.request.Request(
                url, data=body, method="POST" if body is not None else "GET",
                headers={"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": "kebab-mlflow"})
            try:
                with urllib.request.urlopen(req, timeout=o.timeout_s) as resp:  # noqa: S310
                    return resp.read()
            except urllib.error.HTTPError as exc:
                detail = snippet(exc.read() or b"")
                failure = f"HTTP {exc.code} {exc.reason} from {url}: {detail}"
                if exc.code < 500:  # the request itself is wrong: retrying will not help
                    raise ReplyError(failure) from None
            except TimeoutError:
                raise ReplyError(f"timed out after {o.timeout_s:g} s waiting for {url}") from None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise ReplyError(f"timed out after {o.timeout_s:g} s connecting to "
                                     f"{url}") from None
                failure = f"cannot connect to {url}: {exc.reason}"
            except (ConnectionError, http.client.HTTPException) as exc:
                failure = f"connection to {url} failed: {type(exc).__name__}: {exc}"
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




def parse_http(spec: str) -> tuple[str, TargetOptions]:
    """(the URL to call, the options) of an ``http(s)://`` spec."""
    url, raw = http_options(spec)
    if not urllib.parse.urlsplit(spec).hostname:
        raise TargetError(f"--target {spec!r}: the URL has no host")
    return url, parse_options(raw, spec)


def load_http(spec: str, concurrency: int) -> HttpTarget:
    url, options = parse_http(spec)
    parts = urllib.parse.urlsplit(spec)
    probe = HttpTarget(spec, url, options, VersionSnapshot(), concurrency)
    missing = [k for k in VERSION_KEYS if k not in options.versions]
    if not missing:
        return replace_versions(probe, snapshot({}, options.versions, spec))
    versions_url = options.versions_url or urllib.parse.urljoin(
        urllib.parse.urlunsplit(parts._replace(query="", path=parts.path or "/")), "versions")
    reported, reason = None, ""
    try:
        reported = decode_json(probe.request(versions_url, None), f"GET {versions_url}")
        if not isinstance(reported, Mapping):
            reason = f"GET {versions_url} replied a {type_name(reported)}, not an object"
            reported = None
    except ReplyError as exc:
        message = str(exc)
        if message.startswith(("cannot connect", "connection to", "timed out")):
            raise TargetError(f"--target {spec!r}: the target is not reachable: {message}"
                              ) from None
        reason = message
    return replace_versions(probe, snapshot(reported, options.versions, spec, reason))
