"""Evaluate any system that can answer a query: ``--target python:…``, ``http://…``, ``cmd:…``.

:func:`load_target` turns a target spec into an object the runner drives through
``run_many([(query, ask), ...], k) -> [(hits, answer | None, error | None, seconds)]``, in
input order. Queries of one call run on up to ``concurrency`` threads (targets are I/O-bound:
a service, a subprocess); results keep golden-set order.

Spec forms (options after ``?``, see :data:`OPTIONS`)::

    python:package.module:attr          attr = a Pipeline object, a class or factory returning
    python:path/to/file.py:attr         one, or a plain function f(query, k) -> hits
    http://host:port/search?timeout=10  POST {"query", "k", "ask"} -> reply; GET ./versions
    cmd:mytool search --json --k {k} {query}

Reply (HTTP body, command stdout, or what a plain function returns)::

    {"hits": [{"chunk_id": str, "doc_id": str, "score": number}, ...],
     "answer": {"text": str, "citations": [str], "refusal_reason": str | null,
                "confidence": number in [0, 1] | null} | null}

Ranks are the reply order, 1-based. A reply that breaks this shape (malformed JSON, a missing
or mistyped field, a duplicate chunk id) becomes that query's error — a string saying what was
wrong — and the run goes on. A spec that cannot be loaded at all raises
:class:`~kebab_mlflow.errors.TargetError` (exit 2) before any MLflow run exists.

Versions: a Python target's ``versions``; ``GET <url>/../versions`` for HTTP (``urljoin(url,
"versions")``); spec options (``?index_version=v3``) for any kind. Whatever is not reported is
recorded as ``unknown`` with a warning on stderr; compare treats ``unknown`` as a mismatch.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib
import importlib.util
import inspect
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import Problem, TargetError
from kebab_mlflow.pipeline import UNKNOWN, VERSION_KEYS, Answer, Hit, VersionSnapshot

#: Reply of one query: (hits, answer | None, error | None, seconds).
Reply = tuple[tuple[Hit, ...], Answer | None, str | None, float]

#: Spec options per kind (``?key=value&...``); the five version keys are accepted by all.
OPTIONS = {
    "python": (),
    "http": ("timeout", "retries", "backoff", "jitter", "seed", "versions_url"),
    "cmd": ("timeout",),
}
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.25
MAX_BACKOFF_S = 10.0
PLACEHOLDER = re.compile(r"\{(query|k|ask)\}")
ERROR_SNIPPET = 200


class TargetOptionsError(TargetError):
    """Bad ``?key=value`` options of a target spec; ``problems`` lists every one."""

    def __init__(self, summary: str, problems: Sequence[Problem]):
        self.summary = summary
        self.problems = tuple(problems)
        super().__init__("\n".join([f"{summary} ({len(self.problems)} problem(s)):",
                                     *(f"  - {p}" for p in self.problems)]))


class ReplyError(Exception):
    """A target's reply to one query is unusable; the message says why (a per-query error)."""


@dataclass(frozen=True)
class TargetOptions:
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES  # extra attempts after the first, HTTP only
    backoff_s: float = DEFAULT_BACKOFF_S  # first retry waits backoff_s, then x2 each time
    jitter: float = 0.0  # fraction of each wait added at random (seeded), 0 = none
    seed: int = 0
    versions_url: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)  # from the spec


# --------------------------------------------------------------------------- replies


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_hits(items: Any) -> tuple[Hit, ...]:
    """Hits (``Hit`` objects or ``{chunk_id, doc_id, score[, text]}`` dicts) in rank order.

    Every problem of the list is reported at once (up to 10) in one :class:`ReplyError`.
    """
    if not isinstance(items, list | tuple):
        raise ReplyError(f"'hits' is a {_type_name(items)}, not a list")
    hits: list[Hit] = []
    problems: list[str] = []
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        rank = i + 1
        if isinstance(item, Hit):
            hit = item if item.rank == rank else replace(item, rank=rank)
        elif isinstance(item, Mapping):
            bad = _hit_problems(item)
            if bad:
                problems += [f"hit {i}: {p}" for p in bad]
                continue
            hit = Hit(item["chunk_id"], item["doc_id"], float(item["score"]), rank,
                      item.get("text") or "")
        else:
            problems.append(f"hit {i} is a {_type_name(item)}, not an object")
            continue
        if hit.chunk_id in first_seen:
            problems.append(f"duplicate chunk id {hit.chunk_id!r} at hits "
                            f"{first_seen[hit.chunk_id]} and {i}")
        first_seen.setdefault(hit.chunk_id, i)
        hits.append(hit)
    if problems:
        more = f" (+{len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ReplyError("bad hits: " + "; ".join(problems[:10]) + more)
    return tuple(hits)


def _hit_problems(item: Mapping[str, Any]) -> list[str]:
    problems = []
    for key in ("chunk_id", "doc_id"):
        value = item.get(key)
        if key not in item:
            problems.append(f"missing {key!r}")
        elif not isinstance(value, str):
            problems.append(f"{key!r} is a {_type_name(value)}, not a string")
        elif not value:
            problems.append(f"{key!r} is empty")
    score = item.get("score")
    if "score" not in item:
        problems.append("missing 'score'")
    elif not _is_number(score):
        problems.append(f"'score' is a {_type_name(score)}, not a number")
    elif not math.isfinite(score):
        problems.append(f"'score' is {score}, not a finite number")
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        problems.append(f"'text' is a {_type_name(text)}, not a string")
    return problems


def parse_answer(obj: Any) -> Answer | None:
    """An ``Answer`` (passed through), a reply dict, or None."""
    if obj is None or isinstance(obj, Answer):
        return obj
    if not isinstance(obj, Mapping):
        raise ReplyError(f"'answer' is a {_type_name(obj)}, not an object or null")
    problems = []
    text = obj.get("text")
    if not isinstance(text, str):
        problems.append("missing 'text'" if "text" not in obj
                        else f"'text' is a {_type_name(text)}, not a string")
    citations = obj.get("citations", [])
    if not isinstance(citations, list | tuple) or not all(isinstance(c, str) for c in citations):
        problems.append("'citations' is not a list of strings")
    refusal = obj.get("refusal_reason")
    if refusal is not None and not isinstance(refusal, str):
        problems.append(f"'refusal_reason' is a {_type_name(refusal)}, not a string or null")
    confidence = obj.get("confidence")
    if confidence is not None and not (_is_number(confidence) and 0.0 <= confidence <= 1.0):
        problems.append(f"'confidence' is {confidence!r}, not a number in [0, 1] or null")
    if problems:
        raise ReplyError("bad answer: " + "; ".join(problems))
    return Answer(text, tuple(citations), refusal,
                  None if confidence is None else float(confidence))


def parse_reply(obj: Any, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
    """Validate a decoded reply ``{"hits": [...], "answer": {...} | null}``."""
    if not isinstance(obj, Mapping):
        raise ReplyError(f"the reply is a {_type_name(obj)}, not an object with 'hits'")
    if "hits" not in obj:
        raise ReplyError(f"the reply has no 'hits' (keys: {', '.join(map(str, obj)) or 'none'})")
    hits = parse_hits(obj["hits"])
    answer = parse_answer(obj.get("answer")) if ask else None
    return hits, answer


def decode_json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ReplyError(f"{what} is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ReplyError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}): {_snippet(raw)}") from None


def _snippet(raw: bytes | str) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    return repr(text[:ERROR_SNIPPET] + ("…" if len(text) > ERROR_SNIPPET else ""))


# --------------------------------------------------------------------------- targets


class Target:
    """Common driver: ``run_many`` fans queries out to threads and keeps their order."""

    kind = "target"
    answers = True  # False: a search-only target; ask queries get no answer

    def __init__(self, spec: str, versions: VersionSnapshot, concurrency: int):
        self.spec = spec
        self.versions = versions
        self.concurrency = concurrency

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        raise NotImplementedError

    def run_one(self, text: str, ask: bool, k: int) -> Reply:
        start = time.perf_counter()
        try:
            hits, answer = self.query(text, k, ask)
            return hits, answer, None, time.perf_counter() - start
        except ReplyError as exc:
            return (), None, str(exc), time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001 - a user's code may raise anything
            return (), None, f"{type(exc).__name__}: {exc}", time.perf_counter() - start

    def run_many(self, items: Sequence[tuple[str, bool]], k: int) -> list[Reply]:
        workers = min(self.concurrency, len(items))
        if workers <= 1:
            return [self.run_one(text, ask, k) for text, ask in items]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kebab-target")
        try:
            futures = [pool.submit(self.run_one, text, ask, k) for text, ask in items]
            return [f.result() for f in futures]
        finally:  # on Ctrl-C do not wait for queued queries
            pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, concurrency={self.concurrency})"


class PythonTarget(Target):
    """A Pipeline-protocol object (``search``, optional ``ask``) or a plain search function."""

    kind = "python"

    def __init__(self, spec: str, obj: Any, versions: VersionSnapshot, concurrency: int):
        super().__init__(spec, versions, concurrency)
        self.obj = obj
        self.is_function = not callable(getattr(obj, "search", None))
        # a plain function may still return full replies {"hits", "answer"}
        self.answers = not self.is_function and callable(getattr(obj, "ask", None))

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        if self.is_function:
            result = self.obj(text, k)
            if isinstance(result, Mapping):  # a full reply {"hits", "answer"}
                return parse_reply(result, ask)
            return parse_hits(_as_list(result, "the function")), None
        hits = parse_hits(_as_list(self.obj.search(text, k), "search"))
        if not ask or not self.answers:  # a search-only object
            return hits, None
        answer = self.obj.ask(text, hits)
        if answer is not None and not isinstance(answer, Answer | Mapping):
            raise ReplyError(f"ask returned a {_type_name(answer)}, not an Answer")
        return hits, parse_answer(answer)


def _as_list(result: Any, who: str) -> list[Any]:
    if isinstance(result, list | tuple):
        return list(result)
    if isinstance(result, str | bytes | Mapping) or not hasattr(result, "__iter__"):
        raise ReplyError(f"{who} returned a {_type_name(result)}, not a list of hits")
    return list(result)


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
                detail = _snippet(exc.read() or b"")
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


class CmdTarget(Target):
    """Run a command per query without a shell; JSON reply on stdout."""

    kind = "cmd"

    def __init__(self, spec: str, argv: list[str], options: TargetOptions,
                 versions: VersionSnapshot, concurrency: int):
        super().__init__(spec, versions, concurrency)
        self.argv = argv
        self.options = options
        self.stdin_request = not any("{query}" in a for a in argv)

    def command(self, text: str, k: int, ask: bool) -> list[str]:
        """The template with ``{query}``, ``{k}``, ``{ask}`` replaced inside each argument, in
        one pass: a query stays inside its one argument and is never re-substituted."""
        values = {"query": text, "k": str(k), "ask": "true" if ask else "false"}
        return [PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in self.argv]

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        argv = self.command(text, k, ask)
        stdin = (json.dumps({"query": text, "k": k, "ask": ask}).encode("utf-8")
                 if self.stdin_request else None)
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True,  # noqa: S603
                                  timeout=self.options.timeout_s,
                                  stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ReplyError(f"timed out after {self.options.timeout_s:g} s (command killed)"
                             ) from None
        except OSError as exc:
            raise ReplyError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            raise ReplyError(f"exit status {proc.returncode}; stderr: {_snippet(proc.stderr)}")
        return parse_reply(decode_json(proc.stdout, "stdout"), ask)


# --------------------------------------------------------------------------- loading


def load_target(spec: str, *, concurrency: int = 1) -> Target:
    """Parse and check a target spec; raise TargetError (exit 2) for anything unusable."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise TargetError(f"--concurrency must be an integer >= 1, got {concurrency!r}")
    spec = spec.strip()
    if spec.startswith("python:"):
        return _load_python(spec, concurrency)
    if spec.startswith(("http://", "https://")):
        return _load_http(spec, concurrency)
    if spec.startswith("cmd:"):
        return _load_cmd(spec, concurrency)
    scheme = spec.split(":", 1)[0] + ":" if ":" in spec else repr(spec)
    raise TargetError(f"unknown target kind {scheme} in --target {spec!r}; expected "
                      "python:MODULE:ATTR, http(s)://URL or cmd:TEMPLATE")


def check_target(spec: str) -> None:
    """What can be checked of a spec without running the target (a sweep's up-front check): its
    kind, syntax and options, a ``python:`` file or ``cmd:`` program that exists. Importing the
    module, probing the server and the versions are left to :func:`load_target` at row time."""
    spec = spec.strip()
    if spec.startswith("python:"):
        _parse_python(spec)
    elif spec.startswith(("http://", "https://")):
        _parse_http(spec)
    elif spec.startswith("cmd:"):
        _load_cmd(spec, 1)  # runs nothing: checks the template and that the program exists
    else:
        load_target(spec)  # the unknown-kind error


def logged_options(spec: str) -> dict[str, str]:
    """The target's own options given in ``spec`` (timeout, retries, the jitter seed, …) for the
    run's params; not the version keys (logged as versions) nor the URL's other parameters,
    which may hold credentials."""
    spec = spec.strip()
    kind = "http" if spec.startswith(("http://", "https://")) else spec.split(":", 1)[0]
    if kind not in OPTIONS or "?" not in spec:
        return {}
    if kind == "http":
        options = _http_options(spec)[1]
    else:
        options = split_options(spec, kind, strict=False)[1]
    return {k: (without_credentials(v.split("?")[0]) if k == "versions_url" else v.strip())
            for k, v in options.items() if k in OPTIONS[kind]}


def without_credentials(url: str) -> str:
    """http://user:secret@host/x → http://host/x (for what is logged as a param)."""
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)


def split_options(spec: str, kind: str, *, strict: bool) -> tuple[str, dict[str, str]]:
    """``'…?timeout=5&index_version=v3'`` → (``'…'``, options). Not strict (cmd): a suffix
    whose keys are not all options is part of the template."""
    if "?" not in spec:
        return spec, {}
    head, tail = spec.rsplit("?", 1)
    try:
        pairs = urllib.parse.parse_qsl(tail, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        pairs = None
    allowed = (*OPTIONS[kind], *VERSION_KEYS)
    if pairs is None or any(key not in allowed for key, _ in pairs):
        if not strict:
            return spec, {}
        raise TargetError(f"bad options {tail!r} in --target {spec!r}; {kind} targets accept "
                          f"{', '.join(allowed)}")
    return head, dict(pairs)


def parse_options(raw: Mapping[str, str], spec: str) -> TargetOptions:
    """Typed options; every bad value reported at once."""
    problems: list[Problem] = []
    values: dict[str, Any] = {}

    def number(key: str, cast: Callable[[str], Any], low: float, name: str) -> None:
        if key not in raw:
            return
        try:
            value = cast(raw[key])
            if not (math.isfinite(value) and value >= low):
                raise ValueError
            values[name] = value
        except ValueError:
            problems.append(Problem(f"{key}={raw[key]!r} is not a {cast.__name__} >= {low:g}",
                                    "--target"))

    number("timeout", float, 0.001, "timeout_s")
    number("retries", int, 0, "retries")
    number("backoff", float, 0.0, "backoff_s")
    number("jitter", float, 0.0, "jitter")
    number("seed", int, 0, "seed")
    if problems:
        raise TargetOptionsError(f"bad options in --target {spec}", problems)
    if "versions_url" in raw:
        values["versions_url"] = raw["versions_url"]
    values["versions"] = {k: v for k, v in raw.items() if k in VERSION_KEYS}
    return TargetOptions(**values)


def snapshot(reported: Mapping[str, Any] | None, configured: Mapping[str, str], spec: str,
             reason: str = "") -> VersionSnapshot:
    """Reported versions overridden by configured ones; what is missing is ``unknown`` and
    warned about on stderr."""
    merged = {k: str(v) for k, v in (reported or {}).items()
              if k in VERSION_KEYS and v is not None and str(v) != ""}
    merged.update(configured)
    missing = [k for k in VERSION_KEYS if k not in merged]
    if missing:
        why = f" ({reason})" if reason else ""
        sys.stderr.write(f"warning: target {spec} reports no {', '.join(missing)}{why}; "
                         f"recorded as '{UNKNOWN}' — compare treats '{UNKNOWN}' as a mismatch. "
                         f"Set them in the spec, e.g. ?{missing[0]}=v1\n")
        sys.stderr.flush()
    return VersionSnapshot(**{k: merged.get(k, UNKNOWN) for k in VERSION_KEYS})


def _parse_python(spec: str) -> tuple[str, str, TargetOptions]:
    """(module or file, attribute, options) of a ``python:`` spec; a file must exist."""
    body, raw = split_options(spec[len("python:"):], "python", strict=True)
    options = parse_options(raw, spec)
    module_name, sep, attr = body.rpartition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"--target {spec!r}: expected python:package.module:attr or "
                          "python:path/to/file.py:attr")
    path = _file_of(module_name)
    if path is not None and not path.is_file():
        raise TargetError(f"--target {spec!r}: no such file {module_name}")
    return module_name, attr, options


def _file_of(module_name: str) -> Path | None:
    """The file a ``python:`` spec names (``dir/x.py``), or None for a module name."""
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        return Path(module_name).resolve()
    return None


def _load_python(spec: str, concurrency: int) -> PythonTarget:
    module_name, attr, options = _parse_python(spec)
    module = _import(module_name, spec)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))
            raise TargetError(f"--target {spec!r}: {module_name} has no attribute {attr!r} "
                              f"(it has: {', '.join(public[:30]) or 'nothing public'})")
        obj = getattr(obj, part)
    obj = _instantiate(obj, spec)
    versions = getattr(obj, "versions", None)
    if callable(versions) and not isinstance(versions, VersionSnapshot):
        try:
            versions = versions()
        except Exception as exc:  # noqa: BLE001 - user code
            raise TargetError(f"--target {spec!r}: versions() raised "
                              f"{type(exc).__name__}: {exc}") from None
    if isinstance(versions, VersionSnapshot):
        reported: Mapping[str, Any] | None = versions.as_dict()
        reported = {k: v for k, v in reported.items() if v != UNKNOWN}
    elif isinstance(versions, Mapping):
        reported = versions
    elif versions is None:
        reported = None
    else:
        raise TargetError(f"--target {spec!r}: versions is a {_type_name(versions)}, not a "
                          "VersionSnapshot or a mapping")
    return PythonTarget(spec, obj, snapshot(reported, options.versions, spec), concurrency)


def _import(module_name: str, spec: str) -> Any:
    if (path := _file_of(module_name)) is not None:  # checked to exist by _parse_python
        name = "kebab_target_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - report the user's error, not a traceback
            del sys.modules[name]
            raise TargetError(f"--target {spec!r}: importing {module_name} raised "
                              f"{type(exc).__name__}: {exc}") from None
        return module
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:  # like `python -m`: the working folder
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name is not None and (module_name + ".").startswith(exc.name + ".")
        where = "" if missing else f" (while importing it: {exc})"
        raise TargetError(f"--target {spec!r}: cannot import {module_name}{where}; is it "
                          "installed or in the working folder?") from None
    except Exception as exc:  # noqa: BLE001
        raise TargetError(f"--target {spec!r}: importing {module_name} raised "
                          f"{type(exc).__name__}: {exc}") from None


def _instantiate(obj: Any, spec: str) -> Any:
    """A class or a zero-argument factory is called; a pipeline object or a search function
    ``f(query, k)`` is used as it is."""
    if callable(getattr(obj, "search", None)) and not inspect.isclass(obj):
        return obj
    if not callable(obj):
        raise TargetError(f"--target {spec!r}: is a {_type_name(obj)}, not a pipeline, class, "
                          "factory or search function")
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        params = ()
    required = [p for p in params if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.isclass(obj) or not required:
        try:
            made = obj()
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"--target {spec!r}: calling it raised "
                              f"{type(exc).__name__}: {exc}") from None
        if not callable(getattr(made, "search", None)):
            raise TargetError(f"--target {spec!r}: calling it returned a {_type_name(made)} "
                              "with no search(query, k) method")
        return made
    if len(required) == 2:
        return obj
    raise TargetError(f"--target {spec!r}: a function target takes (query, k); this one "
                      f"takes {len(required)} required argument(s)")


def _http_options(spec: str) -> tuple[str, dict[str, str]]:
    """(the URL without kebab-mlflow's own options, those options as given)."""
    parts = urllib.parse.urlsplit(spec)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    allowed = (*OPTIONS["http"], *VERSION_KEYS)
    kept = urllib.parse.urlencode([(k, v) for k, v in pairs if k not in allowed])
    return (urllib.parse.urlunsplit(parts._replace(query=kept)),
            {k: v for k, v in pairs if k in allowed})


def _parse_http(spec: str) -> tuple[str, TargetOptions]:
    """(the URL to call, the options) of an ``http(s)://`` spec."""
    url, raw = _http_options(spec)
    if not urllib.parse.urlsplit(spec).hostname:
        raise TargetError(f"--target {spec!r}: the URL has no host")
    return url, parse_options(raw, spec)


def _load_http(spec: str, concurrency: int) -> HttpTarget:
    url, options = _parse_http(spec)
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
            reason = f"GET {versions_url} replied a {_type_name(reported)}, not an object"
            reported = None
    except ReplyError as exc:
        message = str(exc)
        if message.startswith(("cannot connect", "connection to", "timed out")):
            raise TargetError(f"--target {spec!r}: the target is not reachable: {message}"
                              ) from None
        reason = message
    return replace_versions(probe, snapshot(reported, options.versions, spec, reason))


def replace_versions(target: Target, versions: VersionSnapshot) -> Target:
    target.versions = versions
    return target


def _load_cmd(spec: str, concurrency: int) -> CmdTarget:
    template, raw = split_options(spec[len("cmd:"):], "cmd", strict=False)
    options = parse_options(raw, spec)
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise TargetError(f"--target {spec!r}: cannot split the command template: {exc}"
                          ) from None
    if not argv:
        raise TargetError(f"--target {spec!r}: the command template is empty")
    if PLACEHOLDER.search(argv[0]):
        raise TargetError(f"--target {spec!r}: the program name may not contain a placeholder")
    if shutil.which(argv[0]) is None:
        raise TargetError(f"--target {spec!r}: program {argv[0]!r} not found (not on PATH "
                          "and not an executable file)")
    return CmdTarget(spec, argv, options, snapshot({}, options.versions, spec,
                                                   "command targets report versions through "
                                                   "the spec only"), concurrency)
