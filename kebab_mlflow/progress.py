"""Progress and warnings from library code, rendered by whoever drives it.

Library code never prints (the console layer does): long work reports through
:func:`task` and notable conditions through :func:`warn`. By default a task does nothing and a
warning goes to the ``kebab_mlflow`` logger; the CLI installs a rich progress bar factory and a
stderr handler (:mod:`kebab_mlflow.cli.console`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Protocol

logger = logging.getLogger("kebab_mlflow")


class Task(Protocol):
    def advance(self, n: int = 1) -> None: ...


class _Silent:
    def advance(self, n: int = 1) -> None:
        pass


#: (description, total, unit) -> a context manager yielding a Task
TaskFactory = Callable[[str, int | None, str], contextlib.AbstractContextManager[Task]]


@contextlib.contextmanager
def _silent(description: str, total: int | None, unit: str) -> Iterator[Task]:
    yield _Silent()


_factory: TaskFactory = _silent


def set_task_factory(factory: TaskFactory | None) -> None:
    """Install how tasks are shown (None: silent again)."""
    global _factory
    _factory = factory or _silent


def task(description: str, total: int | None = None,
         unit: str = "items") -> contextlib.AbstractContextManager[Task]:
    """``with task("embedding chunks", n, "chunks") as t: ... t.advance(k)``."""
    return _factory(description, total, unit)


def warn(message: str) -> None:
    logger.warning(message)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No progress shown inside (a sweep row, whose progress is the sweep's own)."""
    global _factory
    saved, _factory = _factory, _silent
    try:
        yield
    finally:
        _factory = saved
