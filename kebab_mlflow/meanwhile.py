"""Work done on a second thread while this one goes on: a run file read while the golden set
is parsed (app/run.py), a ``per_query.jsonl`` hashed while it is parsed (comparison/loading.py).
Worth it only where the work leaves the GIL (pyarrow's CSV parse, hashlib on large blocks)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Meanwhile(Generic[T]):
    """``call()`` started on a daemon thread (Ctrl-C does not wait for it: the reason this is
    not a ``concurrent.futures`` Future, whose workers the interpreter joins at exit);
    :meth:`result` joins it and gives its value, or raises its error on the caller's thread."""

    def __init__(self, call: Callable[[], T], name: str):
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # raised again on the caller's thread
            self._error = exc

    def join(self) -> None:
        """Wait for the call, its error left unraised."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error was raised
