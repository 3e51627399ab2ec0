"""The one redaction every message passes through before it leaves kebab-mlflow.

What is hidden (each replaced by ``***``):

- the ``user:password@`` of every URL (a tracking URI, a target spec, a database URL), also
  inside MLflow's own exception text ("API request to http://user:pw@host/… failed");
- the value of every secret-looking query parameter (``?api_key=…``, ``token``, ``sig`` …);
- the value of an ``Authorization:`` header and of a ``Bearer …`` credential;
- the value of every environment variable whose name looks secret
  (``MLFLOW_TRACKING_PASSWORD``, ``MLFLOW_TRACKING_TOKEN``, ``*_API_KEY``, ``*_SECRET`` …),
  wherever it appears, as it is or percent-encoded;
- every value given to :func:`register_secret` (the password of a tracking URI or of an HTTP
  target, and the basic-auth header made from it), so a library that prints it decoded, or in
  a form no pattern knows, is covered too.

Where it is applied: the CLI's error and warning lines (:mod:`kebab_mlflow.cli.app`,
:mod:`kebab_mlflow.cli.console`), every log record of every logger once
:func:`install_log_redaction` ran (MLflow's included), Python warnings, per-query errors
(:mod:`kebab_mlflow.targets.base`), the store's error messages
(:mod:`kebab_mlflow.tracking.store`) and what a run records. It sits at the bottom of the
layers so every module may call it.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
import urllib.parse
import warnings
from collections.abc import Callable
from typing import Any

MASK = "***"
#: a secret shorter than this is not masked by value (it would mask ordinary words and numbers)
MIN_SECRET_LENGTH = 4

# Query parameters whose value is shown as *** (api_key, token, password, client_secret, sig…)
_SECRET_NAME = re.compile(r"key|token|pass|secret|auth|sig|credential|session", re.IGNORECASE)
# Environment variables whose value is a secret (MLFLOW_TRACKING_PASSWORD, GITHUB_TOKEN …)
_SECRET_ENV = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY|ACCESS_KEY|CREDENTIAL",
                         re.IGNORECASE)
# scheme://userinfo@ — greedy to the last "@" before the path, so a password holding "@" goes
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s?#'\"<>]*@")
_QUERY_PAIR = re.compile(r"([?&;])([^=&;?#\s'\"]+)=([^&;#\s'\"]*)")
_AUTH_HEADER = re.compile(r"(\bAuthorization['\"]?\s*[:=]\s*['\"]?)[^'\"\r\n,}]+", re.IGNORECASE)
_AUTH_SCHEME = re.compile(r"\b(Bearer)\s+[A-Za-z0-9+/=._~-]{8,}")

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Mask ``value`` (and its percent-encoded form) in every later message."""
    if not value or len(value) < MIN_SECRET_LENGTH:
        return
    with _lock:
        _registered.update({value, urllib.parse.quote(value, safe=""),
                            urllib.parse.unquote(value)})


def register_url_credentials(url: str) -> None:
    """Register the password of ``scheme://user:password@host`` and its basic-auth header."""
    try:
        parts = urllib.parse.urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:  # a malformed port or netloc: the pattern still hides the userinfo
        return
    if password:
        register_secret(password)
        pair = f"{urllib.parse.unquote(username or '')}:{urllib.parse.unquote(password)}"
        register_secret(base64.b64encode(pair.encode("utf-8")).decode("ascii"))


def _secret_values() -> list[str]:
    from_env = [v for k, v in os.environ.items()
                if _SECRET_ENV.search(k) and len(v) >= MIN_SECRET_LENGTH]
    encoded = [urllib.parse.quote(v, safe="") for v in from_env]
    with _lock:
        known = [*_registered, *from_env, *encoded]
    return sorted(set(known), key=len, reverse=True)  # longest first: no partial leftovers


def redacted(text: str) -> str:
    """``text`` as it may be printed, logged or stored, with every credential masked."""
    if not text:
        return text
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY_PAIR.sub(lambda m: f"{m[1]}{m[2]}={MASK}" if _SECRET_NAME.search(m[2])
                           else m[0], text)
    text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    text = _AUTH_SCHEME.sub(rf"\1 {MASK}", text)
    for secret in _secret_values():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redacted_exception(exc: BaseException) -> BaseException:
    """``exc`` with its string arguments redacted in place (for a traceback that is shown)."""
    if any(isinstance(a, str) for a in exc.args):
        exc.args = tuple(redacted(a) if isinstance(a, str) else a for a in exc.args)
    return exc


def _redacting_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: logging reports it itself
            return record
        clean = redacted(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redacted(logging.Formatter().formatException(record.exc_info))
        return record

    factory._kebab_redacting = True  # type: ignore[attr-defined]
    return factory


def install_log_redaction() -> None:
    """Redact every log record of every logger (MLflow's, urllib3's, ours) when it is made,
    and every Python warning when it is shown. Idempotent."""
    current = logging.getLogRecordFactory()
    if not getattr(current, "_kebab_redacting", False):
        logging.setLogRecordFactory(_redacting_factory(current))
    format_warning = warnings.formatwarning
    if not getattr(format_warning, "_kebab_redacting", False):
        def formatted(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, line: str | None = None) -> str:
            return redacted(format_warning(message, category, filename, lineno, line))

        formatted._kebab_redacting = True  # type: ignore[attr-defined]
        warnings.formatwarning = formatted
