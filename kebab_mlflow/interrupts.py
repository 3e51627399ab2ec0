"""SIGTERM handled like Ctrl-C, so interrupted runs end KILLED instead of staying RUNNING; the
cleanup that follows is shielded from a second signal; named checkpoints let the fault tests
signal a run at an exact moment.

A signal is first of all a flag (:func:`interrupt_pending`) that every checkpoint acts on. The
handler also raises KeyboardInterrupt at once, so a blocking call (a target's request, a wait on
rows) stops; but Python raises it wherever the main thread is, and inside a garbage-collection
callback or a finalizer (Dask's ``distributed/gc.py`` ``_gc_callback``, say) the interpreter
prints "Exception ignored in ..." and drops it. The flag survives that: the next checkpoint, and
the lifecycle before it ends a run FINISHED, raise it again; the unraisable hook installed here
keeps the dropped interrupt off stderr.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

#: ``NAME=MARKER``: at checkpoint NAME, append this process's pid to MARKER and wait (up to
#: FAULT_WAIT_S, a bound on a test that died, not a guess) for a signal. A test hook
#: (tests/test_signals.py, bench/bench_faults.py): the test waits for the marker (one line per
#: process that reached the point: two rows of ``sweep --jobs 2``), never for a guessed number
#: of seconds. Unset, a checkpoint costs one dict lookup.
FAULT_POINT_ENV = "KEBAB_FAULT_POINT"
FAULT_WAIT_S = 600.0  # a loaded machine can take minutes between the marker and the signal

_deferring: list[signals_deferred] = []  # the blocks holding signals now (innermost last)
_pending: list[int] = []  # signals received that the process has not finished acting on
_guards: list[sigterm_as_interrupt] = []  # the sigterm_as_interrupt blocks now entered


def interrupt_pending() -> bool:
    """True once SIGINT/SIGTERM arrived (or :func:`request_interrupt` was called) in this
    command; it stays true until the command ends: a run ends KILLED, never FINISHED."""
    return bool(_pending)


def request_interrupt(signum: int = signal.SIGINT) -> None:
    """Note an interrupt from outside a signal handler (a Dask row's cancel watcher)."""
    _pending.append(signum)


def clear_interrupt() -> None:
    """Forget noted interrupts: a new command, or a reused worker's next row."""
    _pending.clear()


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt for a noted signal, unless signals are being held."""
    if _pending and not _deferring:
        raise KeyboardInterrupt


def _unraisable(hook: Any) -> Any:
    def quiet(unraisable: Any) -> None:
        # an interrupt raised in a gc callback or finalizer: noted in _pending, acted on at
        # the next checkpoint; anything else goes to the previous hook (the default prints)
        if isinstance(unraisable.exc_value, KeyboardInterrupt) or (
                unraisable.exc_type is not None
                and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            if not _pending:
                _pending.append(signal.SIGINT)
            return
        hook(unraisable)

    quiet.kebab_quiet = True  # type: ignore[attr-defined]
    return quiet


def install_unraisable_hook() -> None:
    """Keep interrupts dropped inside callbacks off stderr (once per process)."""
    if not getattr(sys.unraisablehook, "kebab_quiet", False):
        sys.unraisablehook = _unraisable(sys.unraisablehook)


class sigterm_as_interrupt:  # noqa: N801 - used as a context manager
    """Within the block, SIGTERM (and SIGINT, unless the process inherited it ignored) notes
    the signal and raises KeyboardInterrupt (main thread only; elsewhere a no-op). The
    outermost block starts with no interrupt noted."""

    def __enter__(self) -> sigterm_as_interrupt:
        if not _guards:
            clear_interrupt()
        _guards.append(self)
        install_unraisable_hook()
        self.previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self.previous[signum] = signal.signal(signum, _note_and_raise)
            except ValueError:  # not the main thread
                break
        return self

    def __exit__(self, *exc: object) -> None:
        _guards.remove(self)
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if not _guards:  # the command is over: a noted signal must not stop the next one
            clear_interrupt()  # (an in-process caller's next run, or the next test)


def _note_and_raise(signum: int, frame: FrameType | None) -> None:
    _pending.append(signum)
    raise KeyboardInterrupt


class signals_deferred:  # noqa: N801 - used as a context manager
    """Within the block, SIGINT and SIGTERM are noted in ``caught``, not raised: a Ctrl-C must
    not cut short the creation of a run (its id would be lost) nor the cleanup that ends it
    KILLED. The caller decides what a noted signal means."""

    def __enter__(self) -> signals_deferred:
        self.caught: list[int] = []
        self.previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, self._note)
            except ValueError:  # not the main thread
                break
        _deferring.append(self)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.caught.append(signum)
        _pending.append(signum)  # acted on by the first checkpoint after the block

    def __exit__(self, *exc: object) -> None:
        _deferring.remove(self)
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def checkpoint(name: str) -> None:
    """A named moment of a run; see :data:`FAULT_POINT_ENV`."""
    raise_if_interrupted()  # a signal whose KeyboardInterrupt a callback swallowed
    point, _, marker = os.environ.get(FAULT_POINT_ENV, "").partition("=")
    if point != name:
        return
    with Path(marker).open("a") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + FAULT_WAIT_S
    # a signal held by signals_deferred is the one awaited: stop waiting, let the block end
    while time.monotonic() < deadline and not any(d.caught for d in _deferring):
        time.sleep(0.01)
