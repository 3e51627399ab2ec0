"""The sweep's local worker processes: forked after the store exists, warmed before."""

from __future__ import annotations

import importlib
import signal
from typing import Any

# imported before the workers fork, so each starts with them loaded
WORKER_PRELOAD = ["kebab_mlflow.tracking.log", "kebab_mlflow.tracking.store",
                  "kebab_mlflow.pipeline.reference", "kebab_mlflow.pipeline.backends.lexical",
                  "kebab_mlflow.pipeline.backends.floors", "kebab_mlflow.evaluation.runner",
                  "kebab_mlflow.evaluation.plots", "kebab_mlflow.sweep.execution",
                  "scipy.sparse", "matplotlib.pyplot"]


def _warm_worker() -> None:
    """Import what every row needs, once, before workers fork (or in a spawned worker)."""
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    from kebab_mlflow.evaluation.plots import _pyplot

    _pyplot()


def start_pool(workers: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Fork: a worker starts with everything this process has imported (a spawned process would
    # import MLflow and matplotlib and parse the corpus again, which costs more than a cheap
    # row), so import it all here first. ProcessPoolExecutor forks on the first submit; the
    # worker drops the inherited store connections before its first row.
    try:
        context, forked = multiprocessing.get_context("fork"), True
        _warm_worker()
    except ValueError:  # no fork on this platform
        context, forked = multiprocessing.get_context("spawn"), False
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(forked,))


def _init_worker(forked: bool) -> None:
    """A worker leaves Ctrl-C to the sweep process, which stops it with SIGTERM: a row running
    then ends KILLED (``evaluation.execute`` turns SIGTERM into an interrupt while it runs), an
    idle worker just exits — without a traceback from ``call_queue.get``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if forked:
        from kebab_mlflow.tracking.store import forget_inherited_connections

        forget_inherited_connections()
    else:
        _warm_worker()


def stop_pool(pool: Any, terminate: bool = False) -> None:
    if pool is None:
        return
    if terminate:
        # workers turn SIGTERM into an interrupt, so their child runs end KILLED
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
