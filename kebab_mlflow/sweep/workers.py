"""The sweep's local worker processes: forked after the store exists, warmed before."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

# imported before the workers fork, so each starts with them loaded
WORKER_PRELOAD = ["kebab_mlflow.app.run", "kebab_mlflow.tracking.store",
                  "kebab_mlflow.pipeline.reference", "kebab_mlflow.pipeline.backends.lexical",
                  "kebab_mlflow.pipeline.backends.floors", "kebab_mlflow.evaluation.runner",
                  "kebab_mlflow.evaluation.plots", "kebab_mlflow.app.sweep",
                  "scipy.sparse", "matplotlib.figure", "matplotlib.backends.backend_agg"]


def warm_worker() -> None:
    """Import what every row needs, once, before workers fork (or in a spawned worker)."""
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    from kebab_mlflow.evaluation.plots import _figure

    _figure()  # matplotlib's font cache, read on the first figure


def init_worker(forked: bool, parent_pid: int) -> None:
    """A worker leaves Ctrl-C to the sweep process, which stops it with SIGTERM: a row running
    then ends KILLED (``evaluation.execute`` turns SIGTERM into an interrupt while it runs), an
    idle worker just exits — without a traceback from ``call_queue.get``. It dies with the
    sweep process, and shows no progress of its own (the sweep shows rows done)."""
    from kebab_mlflow import progress

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)
    progress.set_task_factory(None)
    if forked:
        from kebab_mlflow.tracking.store import forget_inherited_connections

        forget_inherited_connections()
    else:
        warm_worker()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in each LocalCluster worker as it starts (the cluster forks
    them from the sweep process): drop the store connections inherited from the sweep, take
    SIGTERM's default back (the sweep turns it into an interrupt; Dask stops its workers with
    it) and show no progress of its own."""
    from kebab_mlflow import progress
    from kebab_mlflow.tracking.store import forget_inherited_connections

    with contextlib.suppress(ValueError):  # not the process's main thread
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    progress.set_task_factory(None)
    forget_inherited_connections()


_row_done = threading.Event()
_row_done.set()
ORPHAN_CLEANUP_S = 30.0  # how long an orphaned worker lets its row end KILLED before it exits


def die_with_parent(parent_pid: int) -> None:
    """Make this worker process end when the sweep process ends, even by SIGKILL. On Linux the
    kernel sends SIGTERM at once (``PR_SET_PDEATHSIG``), so a row running here ends KILLED; a
    thread watching the parent's pid then exits the process once that row has unwound (an
    orphan would otherwise wait on the pool's queue forever). Elsewhere the thread sends the
    SIGTERM itself."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.2)
        if not sys.platform.startswith("linux"):  # Linux sent it already
            os.kill(os.getpid(), signal.SIGTERM)
        _row_done.wait(ORPHAN_CLEANUP_S)
        os._exit(143)

    threading.Thread(target=watch, name="kebab-parent-watch", daemon=True).start()


T = TypeVar("T")


def run_in_worker(fn: Callable[..., T], *args: Any) -> T:
    """A row in a local worker, marked as running for the orphan watch. A row interrupted
    (its run already ended KILLED) ends the worker: the sweep is stopping, and a worker that
    went back to the pool's queue could wait forever on a lock a terminated sibling held."""
    from kebab_mlflow.errors import RunInterrupted

    _row_done.clear()
    try:
        return fn(*args)
    except (RunInterrupted, KeyboardInterrupt):
        os._exit(130)
    finally:
        _row_done.set()
