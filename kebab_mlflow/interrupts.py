"""SIGTERM handled like Ctrl-C, so interrupted runs end KILLED instead of staying RUNNING; the
cleanup that follows is shielded from a second signal; named checkpoints let the fault tests
signal a run at an exact moment."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: ``NAME=MARKER``: at checkpoint NAME, touch MARKER and wait (up to a minute) for a signal.
#: A test hook (tests/test_signals.py, bench/bench_faults.py): the test waits for the marker,
#: never for a guessed number of seconds. Unset, a checkpoint costs one dict lookup.
FAULT_POINT_ENV = "KEBAB_FAULT_POINT"


class sigterm_as_interrupt:  # noqa: N801 - used as a context manager
    """Within the block, SIGTERM raises KeyboardInterrupt (main thread only; elsewhere a no-op)."""

    def __enter__(self):
        try:
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        except ValueError:  # not the main thread
            self.previous = None
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


class signals_deferred:  # noqa: N801 - used as a context manager
    """Within the block, SIGINT and SIGTERM are noted in ``caught``, not raised: a Ctrl-C must
    not cut short the creation of a run (its id would be lost) nor the cleanup that ends it
    KILLED. The caller decides what a noted signal means."""

    def __enter__(self):
        self.caught: list[int] = []
        self.previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, self._note)
            except ValueError:  # not the main thread
                break
        return self

    def _note(self, signum, frame):
        self.caught.append(signum)

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def checkpoint(name: str) -> None:
    """A named moment of a run; see :data:`FAULT_POINT_ENV`."""
    point, _, marker = os.environ.get(FAULT_POINT_ENV, "").partition("=")
    if point != name:
        return
    Path(marker).touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
