"""Progress and warnings from library code, rendered by whoever drives it.

Library code never prints (the console layer does): long work reports through
:func:`task` and notable conditions through :func:`warn`. By default a task does nothing and a
warning goes to the ``kebab_mlflow`` logger; the CLI installs a rich progress bar factory and a
stderr handler (:mod:`kebab_mlflow.cli.console`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
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


# set by warnings_once(); an environment variable so that worker processes, forked or
# spawned, share the sweep's record of what it has already said
WARNINGS_ONCE_ENV = "KEBAB_WARNINGS_ONCE_DIR"


def warn(message: str) -> None:
    folder = os.environ.get(WARNINGS_ONCE_ENV)
    if folder and not _first_time(Path(folder), message):
        return
    logger.warning(message)


def _first_time(folder: Path, message: str) -> bool:
    """Claim ``message`` in ``folder`` (an exclusive create, atomic across processes)."""
    marker = folder / hashlib.sha256(message.encode()).hexdigest()[:32]
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    except OSError:  # the folder is gone or not writable: better twice than never
        return True
    return True


@contextlib.contextmanager
def warnings_once() -> Iterator[None]:
    """Inside (a sweep, its worker processes included), a warning repeated word for word is
    shown once: every row of a sweep over one golden set would repeat the same one."""
    saved = os.environ.get(WARNINGS_ONCE_ENV)
    with tempfile.TemporaryDirectory(prefix="kebab-warned-") as folder:
        os.environ[WARNINGS_ONCE_ENV] = folder
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(WARNINGS_ONCE_ENV, None)
            else:
                os.environ[WARNINGS_ONCE_ENV] = saved


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No progress shown inside (a sweep row, whose progress is the sweep's own)."""
    global _factory
    saved, _factory = _factory, _silent
    try:
        yield
    finally:
        _factory = saved
