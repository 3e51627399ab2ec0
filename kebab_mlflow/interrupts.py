"""SIGTERM handled like Ctrl-C, so interrupted runs end KILLED instead of staying RUNNING."""

from __future__ import annotations

import signal


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
