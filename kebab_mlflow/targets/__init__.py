"""Evaluate any system that can answer a query: ``--target python:…``, ``http://…``, ``cmd:…``,
or its precomputed output: ``run:PATH`` (a TREC or JSON run file).

:func:`load_target` turns a spec into a :class:`~kebab_mlflow.targets.base.Target`;
:func:`check_target` validates one without starting it. See :mod:`.base` for the contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kebab_mlflow.errors import TargetError
from kebab_mlflow.redaction import redacted
from kebab_mlflow.targets.base import Target
from kebab_mlflow.targets.cmd import load_cmd
from kebab_mlflow.targets.http import load_http, parse_http
from kebab_mlflow.targets.python import load_python, parse_python
from kebab_mlflow.targets.run import load_run, parse_run_spec


def load_target(spec: str, *, concurrency: int = 1) -> Target:
    """Parse and check a target spec; raise TargetError (exit 2) for anything unusable. Its
    message names the spec with credentials redacted (:func:`~.spec.redacted`)."""
    with _redacted_errors():
        return _load(spec, concurrency)


@contextlib.contextmanager
def _redacted_errors() -> Iterator[None]:
    try:
        yield
    except TargetError as exc:
        exc.args = (redacted(str(exc)),)
        raise


def _load(spec: str, concurrency: int) -> Target:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise TargetError(f"--concurrency must be an integer >= 1, got {concurrency!r}")
    spec = spec.strip()
    if spec.startswith("python:"):
        return load_python(spec, concurrency)
    if spec.startswith(("http://", "https://")):
        return load_http(spec, concurrency)
    if spec.startswith("cmd:"):
        return load_cmd(spec, concurrency)
    if spec.startswith("run:"):
        return load_run(spec)
    scheme = spec.split(":", 1)[0] + ":" if ":" in spec else repr(spec)
    raise TargetError(f"unknown target kind {scheme} in --target {spec!r}; expected "
                      "python:MODULE:ATTR, http(s)://URL, cmd:TEMPLATE or run:PATH")


def check_target(spec: str) -> None:
    """What can be checked of a spec without running the target (a sweep's up-front check): its
    kind, syntax and options, a ``python:`` file, ``cmd:`` program or ``run:`` file that exists.
    Importing the module, probing the server, reading the run file and the versions are left to
    :func:`load_target` at row time."""
    spec = spec.strip()
    with _redacted_errors():
        _check(spec)


def _check(spec: str) -> None:
    if spec.startswith("python:"):
        parse_python(spec)
    elif spec.startswith(("http://", "https://")):
        parse_http(spec)
    elif spec.startswith("cmd:"):
        load_cmd(spec, 1)  # runs nothing: checks the template and that the program exists
    elif spec.startswith("run:"):
        parse_run_spec(spec)  # the file exists; reading it waits for the row
    else:
        load_target(spec)  # the unknown-kind error


