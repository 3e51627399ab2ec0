"""SIGTERM handled like Ctrl-C, so interrupted runs end KILLED instead of staying RUNNING; the
cleanup that follows is shielded from a second signal; named checkpoints let the fault tests
signal a run at an exact moment."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

# what signal.signal returns: a handler, SIG_DFL / SIG_IGN, or None (set outside Python)
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

#: ``NAME=MARKER``: at checkpoint NAME, append this process's pid to MARKER and wait (up to a
#: minute) for a signal. A test hook (tests/test_signals.py, bench/bench_faults.py): the test
#: waits for the marker (one line per process that reached the point: two rows of
#: ``sweep --jobs 2``), never for a guessed number of seconds. Unset, a checkpoint costs one
#: dict lookup.
FAULT_POINT_ENV = "KEBAB_FAULT_POINT"

_deferring: list[signals_deferred] = []  # the blocks holding signals now (innermost last)


class sigterm_as_interrupt:  # noqa: N801 - used as a context manager
    """Within the block, SIGTERM raises KeyboardInterrupt (main thread only; elsewhere a no-op)."""

    def __enter__(self) -> sigterm_as_interrupt:
        self.previous: Handler | None
        try:
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        except ValueError:  # not the main thread
            self.previous = None
        return self

    @staticmethod
    def _raise(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


class signals_deferred:  # noqa: N801 - used as a context manager
    """Within the block, SIGINT and SIGTERM are noted in ``caught``, not raised: a Ctrl-C must
    not cut short the creation of a run (its id would be lost) nor the cleanup that ends it
    KILLED. The caller decides what a noted signal means."""

    def __enter__(self) -> signals_deferred:
        self.caught: list[int] = []
        self.previous: dict[int, Handler] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, self._note)
            except ValueError:  # not the main thread
                break
        _deferring.append(self)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.caught.append(signum)

    def __exit__(self, *exc: object) -> None:
        _deferring.remove(self)
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def checkpoint(name: str) -> None:
    """A named moment of a run; see :data:`FAULT_POINT_ENV`."""
    point, _, marker = os.environ.get(FAULT_POINT_ENV, "").partition("=")
    if point != name:
        return
    with Path(marker).open("a") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + 60
    # a signal held by signals_deferred is the one awaited: stop waiting, let the block end
    while time.monotonic() < deadline and not any(d.caught for d in _deferring):
        time.sleep(0.01)
