"""Target specs: the ``?key=value`` options of each kind, their parsing, the versions a spec
names (credentials are masked by :mod:`kebab_mlflow.redaction`).
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kebab_mlflow.errors import Problem, TargetError, TargetOptionsError
from kebab_mlflow.progress import warn
from kebab_mlflow.records import UNKNOWN, VERSION_KEYS, VersionSnapshot
from kebab_mlflow.redaction import redacted

#: Spec options per kind (``?key=value&...``); the five version keys are accepted by all.
OPTIONS = {
    "python": (),
    "http": ("timeout", "retries", "backoff", "jitter", "seed", "versions_url", "max_bytes"),
    "cmd": ("timeout",),
    "run": (),
}


DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.25
DEFAULT_MAX_BYTES = 16 * 2**20  # an HTTP reply larger than this is that query's error





@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES  # extra attempts after the first, HTTP only
    backoff_s: float = DEFAULT_BACKOFF_S  # first retry waits backoff_s, then x2 each time
    jitter: float = 0.0  # fraction of each wait added at random (seeded), 0 = none
    seed: int = 0
    versions_url: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)  # from the spec
    max_bytes: int = DEFAULT_MAX_BYTES  # HTTP only


def logged_options(spec: str) -> dict[str, str]:
    """The target's own options given in ``spec`` (timeout, retries, the jitter seed, …) for the
    run's params; not the version keys (logged as versions) nor the URL's other parameters,
    which may hold credentials."""
    spec = spec.strip()
    kind = "http" if spec.startswith(("http://", "https://")) else spec.split(":", 1)[0]
    if kind not in OPTIONS or "?" not in spec:
        return {}
    if kind == "http":
        options = http_options(spec)[1]
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
        raise TargetError(f"bad options {redacted('?' + tail)[1:]!r} in --target "
                          f"{redacted(spec)!r}; {kind} targets accept "
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
    number("max_bytes", int, 1, "max_bytes")
    if problems:
        raise TargetOptionsError(f"bad options in --target {redacted(spec)}", problems)
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
        warn(f"target {redacted(spec)} reports no {', '.join(missing)}{why}; recorded as "
             f"'{UNKNOWN}' — compare treats '{UNKNOWN}' as a mismatch. Set them in the spec, e.g. "
             f"?{missing[0]}=v1")
    return VersionSnapshot(**{k: merged.get(k, UNKNOWN) for k in VERSION_KEYS})






def http_options(spec: str) -> tuple[str, dict[str, str]]:
    """(the URL without kebab-mlflow's own options, those options as given)."""
    parts = urllib.parse.urlsplit(spec)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    allowed = (*OPTIONS["http"], *VERSION_KEYS)
    kept = urllib.parse.urlencode([(k, v) for k, v in pairs if k not in allowed])
    return (urllib.parse.urlunsplit(parts._replace(query=kept)),
            {k: v for k, v in pairs if k in allowed})
