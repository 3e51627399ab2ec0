"""Where a sweep's rows run: in this process, in forked local processes, or on a Dask cluster.

Every executor hands out ``concurrent.futures.Future`` objects, so one row loop
(:mod:`kebab_mlflow.app.sweep`) drives them all: ``slots`` rows in flight, the next one
submitted the moment one finishes. A row is one call of ``execute_row(options, metrics)``; its
options carry the tracking URI and the parent run id explicitly (MLflow keeps the active run per
thread, and a worker on another machine has no environment of ours), so each task logs its child
run straight to the tracking store.

``local`` (the default): ``--jobs 1`` runs rows here; ``--jobs N`` forks N worker processes once
the store, experiment and parent run exist. Each worker dies with the sweep (Linux
``PR_SET_PDEATHSIG``: SIGTERM, so a row running there still ends KILLED; elsewhere a thread
that watches the parent's pid; :mod:`kebab_mlflow.sweep.workers`).

``dask`` starts a ``distributed.LocalCluster`` of ``--jobs`` worker processes with one thread
each; ``dask:tcp://host:8786`` uses an existing cluster. Dask reschedules a task whose worker
died (up to the scheduler's ``allowed-failures``, default 3) — a row is then *retried* on another
worker, and the child run the dead worker left RUNNING ends FAILED when the sweep ends; past
that limit the row is recorded FAILED. On Ctrl-C/SIGTERM the sweep sets a cluster-wide
:class:`distributed.Event`; a running row sees it within half a second and ends KILLED, a queued
one ends before it starts; the sweep waits for both before it ends its runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, Protocol

EXECUTORS = ("local", "dask")
CANCEL_GRACE_S = 30.0  # how long an interrupted sweep waits for running remote rows to stop


EXECUTOR_RULE = "must be local, dask or dask:ADDRESS"


def is_executor(value: object) -> bool:
    """The one rule for where rows run, for ``--executor`` and a sweep file's ``executor:``:
    ``local``, ``dask`` or ``dask:ADDRESS`` with an address that is not blank."""
    if not isinstance(value, str):
        return False
    return value in EXECUTORS or (value.startswith("dask:")
                                  and bool(value.removeprefix("dask:").strip()))


def check_executor(spec: str) -> str:
    """``spec`` when :func:`is_executor`; else an InputError naming ``--executor``."""
    from kebab_mlflow.errors import InputError

    if is_executor(spec):
        return spec
    raise InputError(f"--executor {EXECUTOR_RULE} (e.g. dask:tcp://scheduler:8786), "
                     f"got {spec!r}")


class RowExecutor(Protocol):
    """Where a sweep's rows run, as the row loop (app/sweep.py) drives it: ``slots`` rows at
    once, each ``submit``-ted as a future; ``cancel`` stops the running ones."""

    name: str
    slots: int

    def start(self, cancel_name: str) -> None: ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


def make_executor(spec: str, jobs: int, rows: int) -> RowExecutor:
    """The executor for ``spec``; nothing is started until :meth:`start`."""
    spec = check_executor(spec)
    if spec == "local":
        return InlineExecutor() if jobs == 1 or rows <= 1 else LocalPoolExecutor(min(jobs, rows))
    address = spec.removeprefix("dask").removeprefix(":") or None
    return DaskExecutor(address, jobs)


class InlineExecutor:
    """Rows one after another in this process (``--jobs 1``)."""

    name = "this process"
    slots = 1

    def start(self, cancel_name: str) -> None:
        pass

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        from kebab_mlflow import progress

        future: Future[Any] = Future()
        try:
            with progress.silenced():  # the sweep's progress is rows done, not queries
                future.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - an interrupt (BaseException) propagates
            future.set_exception(exc)
        return future

    def cancel(self) -> None:
        pass  # the row in progress was interrupted in this very process

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- local processes


class LocalPoolExecutor:
    """N forked worker processes; the forks happen in :meth:`start`, on the main thread, before
    any progress bar or feeder thread exists (a fork while another thread holds a lock leaves
    the child waiting on it forever)."""

    def __init__(self, workers: int):
        self.slots = workers
        self.name = f"{workers} local worker process(es)"
        self.pool: Any = None

    def start(self, cancel_name: str) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from kebab_mlflow.sweep.workers import init_worker, warm_worker

        # Fork: a worker starts with everything this process has imported (a spawned one would
        # import MLflow and matplotlib and parse the corpus again, more than a cheap row costs).
        context: multiprocessing.context.BaseContext
        try:
            context, forked = multiprocessing.get_context("fork"), True
            warm_worker()
        except ValueError:  # no fork on this platform
            context, forked = multiprocessing.get_context("spawn"), False
        self.pool = ProcessPoolExecutor(max_workers=self.slots, mp_context=context,
                                        initializer=init_worker, initargs=(forked, os.getpid()))
        # a fork context starts every worker at the first submit: make it happen now
        wait([self.pool.submit(os.getpid) for _ in range(self.slots)])

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        from kebab_mlflow.sweep.workers import run_in_worker

        future: Future[Any] = self.pool.submit(run_in_worker, fn, *args)
        return future

    def cancel(self) -> None:
        if self.pool is None:
            return
        # workers turn SIGTERM into an interrupt, so their child runs end KILLED
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        for process in processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + CANCEL_GRACE_S
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():  # stuck past the grace period (in a user's target, say)
                process.kill()
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


# --------------------------------------------------------------------------- dask


class DaskExecutor:
    """Rows as Dask tasks: on a LocalCluster this starts (``address`` None) or on the cluster at
    ``address``."""

    def __init__(self, address: str | None, jobs: int):
        self.address, self.jobs = address, jobs
        self.client: Any = None
        self.cluster: Any = None
        self.event: Any = None
        self.futures: list[Future[Any]] = []
        self.slots = jobs
        self.name = f"Dask cluster {address}" if address else f"Dask LocalCluster ({jobs} workers)"

    def start(self, cancel_name: str) -> None:
        from kebab_mlflow.errors import InputError

        try:
            import distributed
        except ImportError:
            raise InputError("--executor dask needs the `dask` extra: pip install "
                             "'kebab-mlflow[dask]'") from None
        if self.address is None:
            self.cluster = _local_cluster(distributed, self.jobs)
            self.client = distributed.Client(self.cluster)
        else:
            try:
                self.client = distributed.Client(self.address, timeout="30s")
            except OSError as exc:
                raise InputError(f"--executor dask:{self.address}: no Dask scheduler answers "
                                 f"there ({exc})") from None
            self.slots = max(1, sum(self.client.nthreads().values()))
        self.event = distributed.Event(cancel_name, client=self.client)
        self.event.clear()  # a resumed sweep reuses the name of the one interrupted before

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """The Dask future, mirrored into a concurrent.futures one for the row loop."""
        remote = self.client.submit(run_cancellable, self.event.name, fn, *args, pure=False)
        local: Future[Any] = Future()

        def mirror(done: Any) -> None:
            try:
                local.set_result(done.result())
            except BaseException as exc:  # noqa: BLE001 - handed to the row loop
                local.set_exception(exc)

        remote.add_done_callback(mirror)
        self.futures.append(remote)
        return local

    def cancel(self) -> None:
        """Set the cancel event: a running row stops within half a second and ends KILLED, a
        queued one ends before it starts; wait for them all (at most CANCEL_GRACE_S)."""
        if self.client is None:
            return
        with contextlib.suppress(Exception):
            import distributed

            self.event.set()
            distributed.wait(self.futures, timeout=CANCEL_GRACE_S)
        self.close()

    def close(self) -> None:
        for thing in (self.client, self.cluster):
            if thing is not None:
                with contextlib.suppress(Exception):
                    thing.close()
        self.client = self.cluster = None


def _local_cluster(distributed: Any, workers: int) -> Any:
    """A LocalCluster of ``workers`` processes, one thread each. Its workers fork from this
    process once it has imported what a row needs, like the local pool's: a spawned worker
    imports MLflow, the pipeline and matplotlib on its first row, ~3.5 s a worker, which on
    eight ~4 s rows took the Dask sweep from 0.60 to 0.71 of ``--jobs 1``
    (bench/bench_sweep.py). Each worker then runs :func:`workers.dask_setup` (Dask's preload
    hook) before any task. Where fork is missing they spawn."""
    import multiprocessing

    import dask

    from kebab_mlflow.sweep.workers import warm_worker

    method = "spawn"
    if "fork" in multiprocessing.get_all_start_methods():
        warm_worker()
        method = "fork"
    with dask.config.set({"distributed.worker.multiprocessing-method": method}):
        # its own chatter is no news here: shutdown ("still alive after 4 s, killing") and a
        # row's failure or interrupt ("Compute Failed" + traceback), which the sweep reports
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=logging.CRITICAL,
                                        preload=["kebab_mlflow.sweep.workers"])


CHECK_EVERY_S = 0.5


def run_cancellable(event_name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """On a Dask worker: run ``fn`` while a watcher thread checks the sweep's cancel event
    twice a second; once it is set, the interrupt is noted (:mod:`kebab_mlflow.interrupts`:
    the row's next checkpoint raises it) and KeyboardInterrupt is raised in this task's thread
    (CPython's ``PyThreadState_SetAsyncExc``: at its next Python instruction, even inside a
    user's target), so the row ends KILLED as it would in a local process. Raised once: an
    interrupt that lands in a gc callback (Dask's own ``distributed/gc.py``) is dropped by the
    interpreter, quietly (the unraisable hook), and the noted flag stops the row at its next
    checkpoint — raising again could cut short the clean-up that ends its run KILLED."""
    import distributed

    from kebab_mlflow import interrupts
    from kebab_mlflow.errors import RunInterrupted

    interrupts.clear_interrupt()  # a worker of a cluster we do not own runs later sweeps too
    interrupts.install_unraisable_hook()
    event = distributed.Event(event_name)
    if event.is_set():  # queued when the sweep was interrupted: never starts
        raise RunInterrupted("the sweep was interrupted before this row started")
    task_thread = threading.get_ident()
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(CHECK_EVERY_S):
            with contextlib.suppress(Exception):
                if event.is_set() and not finished.is_set():
                    interrupts.request_interrupt()
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(task_thread), ctypes.py_object(KeyboardInterrupt))
                    return

    watcher = threading.Thread(target=watch, name="kebab-row-cancel", daemon=True)
    watcher.start()
    try:
        return fn(*args)
    finally:
        finished.set()
        watcher.join()
        # an interrupt injected just as the row returned must not escape into Dask's worker
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task_thread), None)
