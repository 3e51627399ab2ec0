"""The fault matrix of issue 18: signals at every named moment of a run, SIGKILL during the
creation of a brand-new SQLite store, and many concurrent runs against a real ``mlflow
server`` on PostgreSQL with MLflow telemetry left at its default (the variable unset).

    python bench/bench_faults.py                 # everything (minutes on 2 cores)
    python bench/bench_faults.py --server-runs 72 --at-once 24

Goals: zero runs left RUNNING, zero unusable stores, every server run FINISHED. Each process
is signalled when it reached its checkpoint (``KEBAB_FAULT_POINT``) or when a store file
reached a size: events, never guessed delays. The points and their expected outcomes are in
tests/faultpoints.py, shared with tests/test_signals.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, emit

sys.path.insert(0, str(ROOT))
from tests import faultpoints, servers  # noqa: E402

BATCH = 4  # processes signalled at once (a 2-core machine)


def signal_matrix(work: Path) -> list[str]:
    from kebab_mlflow.tracking.store import Tracker

    store = f"sqlite:///{work / 'signals' / 'mlflow.db'}"
    Tracker(store)
    cases = [(p, n, s) for p in faultpoints.RUN_POINTS for n, s in faultpoints.SIGNALS.items()]
    lines = []
    for start in range(0, len(cases), BATCH):
        started = []
        for point, name, signum in cases[start:start + BATCH]:
            folder = work / "signals" / f"{point}-{name}"
            proc, marker = faultpoints.start_run(point, folder, store)
            started.append((point, name, signum, proc, marker, folder))
        for _, _, signum, proc, marker, _ in started:
            faultpoints.wait_for(marker, proc)
            proc.send_signal(signum)
        for point, name, _, proc, _, folder in started:
            got = faultpoints.outcome(proc, folder, store)
            wrong = faultpoints.problems(point, got)
            lines.append(f"{point:<17} {name:<8} exit {got.returncode:<4} runs "
                         f"{','.join(got.statuses) or '-':<9} recovery {len(got.recovery)}  "
                         f"{'OK' if not wrong else 'WRONG: ' + '; '.join(wrong)}")
    return lines


def creation_kills(work: Path) -> list[str]:
    killed = faultpoints.kill_at_sizes(work / "stores", faultpoints.CREATION_POINTS)
    lines = []
    for size, uri in killed:
        why = faultpoints.store_usable(uri)
        lines.append(f"SIGKILL at {size:>7,} bytes: {'usable' if why is None else why}")
    return lines


def server_runs(work: Path, total: int, at_once: int) -> list[str]:
    """``total`` runs of the fixtures against a server on PostgreSQL, ``at_once`` at a time,
    in an environment without MLFLOW_DISABLE_TELEMETRY (nor the CI markers MLflow reads)."""
    postgres = servers.start_postgres()
    server = servers.start_mlflow_server(postgres.uri, root=work / "server")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "CI", "PYTEST_CURRENT_TEST")}
    env.update(PYTHONPATH=str(ROOT), KEBAB_CACHE_DIR=str(work / "server-cache"))
    statuses: list[str] = []
    t0 = time.perf_counter()
    try:
        for start in range(0, total, at_once):
            procs = [subprocess.Popen(
                [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                 str(faultpoints.GOLDEN), "--target", faultpoints.TARGET, "--tracking-uri",
                 server.url, "--experiment", "bench-faults", "--run-name", f"r{i}", "--json"],
                cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for i in range(start, min(start + at_once, total))]
            for proc in procs:
                out, err = proc.communicate(timeout=900)
                statuses.append("exit0" if proc.returncode == 0 else f"exit{proc.returncode}: "
                                f"{err.strip().splitlines()[-1:]}")
        client = server.client()
        exp = client.get_experiment_by_name("bench-faults")
        runs = client.search_runs([exp.experiment_id], max_results=1000)
    finally:
        server.stop()
        postgres.stop()
    by_status: dict[str, int] = {}
    for run in runs:
        by_status[run.info.status] = by_status.get(run.info.status, 0) + 1
    failures = [s for s in statuses if s != "exit0"]
    return [f"{total} runs, {at_once} at a time, {time.perf_counter() - t0:.0f} s: "
            f"statuses {json.dumps(by_status)}; process failures {len(failures)}",
            *failures[:5]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-runs", type=int, default=72)
    parser.add_argument("--at-once", type=int, default=24)
    parser.add_argument("--only", choices=["signals", "creation", "server"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kebab-bench-faults-"))
    sections = []
    if args.only in (None, "signals"):
        sections.append(("SIGINT/SIGTERM at each checkpoint of a run", signal_matrix(work)))
    if args.only in (None, "creation"):
        sections.append(("SIGKILL while a brand-new SQLite store is created",
                         creation_kills(work)))
    if args.only in (None, "server"):
        sections.append(("concurrent runs, mlflow server on PostgreSQL, telemetry at default",
                         server_runs(work, args.server_runs, args.at_once)))
    text = "\n".join(f"## {title}\n" + "\n".join(lines) for title, lines in sections)
    emit("faults" if args.only is None else f"faults-{args.only}", text)


if __name__ == "__main__":
    main()
