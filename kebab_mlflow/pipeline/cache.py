"""The index cache: where it lives, one builder per cached file (a flock beside it), and
folders written aside then renamed into place.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar


def cache_root() -> Path:
    return Path(os.environ.get("KEBAB_CACHE_DIR", ".kebab-cache"))


T = TypeVar("T")


def cached_number(kind: str, key: str, compute: Callable[[], float]) -> float:
    """A number derived from content addressed by ``key`` (e.g. a corpus digest), computed once
    and kept in ``<cache>/<kind>/<key>`` (:func:`cached_text`)."""
    return float(cached_text(kind, key, lambda: repr(compute()), valid=_is_number))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def cached_text(kind: str, key: str, compute: Callable[[], str],
                valid: Callable[[str], bool] = bool,
                keep: Callable[[], bool] = lambda: True) -> str:
    """A text derived from what ``key`` addresses, computed once and kept in
    ``<cache>/<kind>/<key>``; written aside and renamed, so a reader never sees half a file.
    An entry unreadable or not ``valid`` is computed again; one computed when ``keep()`` is
    false (what it derives from may still be changing) is not kept."""
    path = cache_root() / kind / key
    try:
        found = path.read_text()
        if valid(found):
            return found
    except OSError:
        pass
    value = compute()
    if not keep():
        return value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the next run the computation again
    return value


def load_or_build_once(folder: Path, name: str, load: Callable[[], T | None],
                       build: Callable[[], T]) -> T:
    """``load()`` a cached file (None when it is missing), else ``build()`` it — one process at
    a time, under an exclusive lock on ``folder/.<name>.lock``: parallel sweep workers that need
    the same index wait for the one building it and then load it, instead of each building it
    again (N times the CPU and the memory). Without fcntl (not POSIX) there is no lock: the
    builds then only repeat work (see atomic_folder)."""
    found = load()
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "a") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        found = load()  # built by the process that held the lock before us?
        return found if found is not None else build()


class atomic_folder:  # noqa: N801 - used as a context manager
    """Write files into a temp folder, then move each into ``folder`` atomically, so a cache
    is never seen half-written (parallel sweep workers may build the same index)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __enter__(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(dir=self.folder, prefix=".tmp-"))
        return self.tmp

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc_type is None:
                for f in self.tmp.iterdir():
                    os.replace(f, self.folder / f.name)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
