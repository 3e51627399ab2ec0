"""The fault matrix of issue 18: SIGINT/SIGTERM at every named moment of a run and of a sweep,
SIGKILL during the creation of a brand-new SQLite store, and 72 runs started at once against a
real ``mlflow server`` on PostgreSQL with MLflow telemetry left at the tool's default (every
telemetry switch and CI marker unset) and, to show the race that default avoids, explicitly on.

    python bench/bench_faults.py                    # everything (~20 min on 2 cores)
    python bench/bench_faults.py --only signals     # runs and sweeps (~7 min)
    python bench/bench_faults.py --only server --telemetry default
    python bench/bench_faults.py --only publish [--backend postgres]   # ~10 min a backend

``--only publish`` is the publish-failure matrix of issue 28 (bench/bench_publish.py): SIGTERM,
SIGKILL, an artifact disk filled at each publishing step and one too small from the start,
then `upload` of what the run left, on SQLite and against ``mlflow server`` on PostgreSQL.

Goals: zero runs left RUNNING, zero unusable stores, every server run FINISHED. Each process
is signalled when it reached its checkpoint (``KEBAB_FAULT_POINT``) or when a store file
reached a size: events, never guessed delays. The points and their expected outcomes are in
tests/faultpoints.py, shared with tests/test_signals.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_publish
from common import ROOT, emit, load_line

sys.path.insert(0, str(ROOT))
from tests import faultpoints, servers  # noqa: E402

BATCH = 4  # processes signalled at once (a 2-core machine)


def _signalled(points, start, reached_by, report) -> list[str]:
    """SIGINT and SIGTERM at each point, BATCH processes at a time: ``start(point, name)`` ->
    (process, marker, folder); each is signalled once ``reached_by(point)`` processes reached
    its marker; ``report(point, name, process, marker, folder)`` is its line."""
    cases = [(p, n, s) for p in points for n, s in faultpoints.SIGNALS.items()]
    lines = []
    for first in range(0, len(cases), BATCH):
        started = [(point, name, signum, *start(point, name))
                   for point, name, signum in cases[first:first + BATCH]]
        for point, _, signum, proc, marker, _ in started:
            faultpoints.wait_for(marker, proc, count=reached_by(point))
            proc.send_signal(signum)
        lines += [report(point, name, proc, marker, folder)
                  for point, name, _, proc, marker, folder in started]
    return lines


def _verdict(wrong: list[str]) -> str:
    return "OK" if not wrong else "WRONG: " + "; ".join(wrong)


def signal_matrix(work: Path) -> list[str]:
    from kebab_mlflow.tracking.store import Tracker

    store = f"sqlite:///{work / 'signals' / 'mlflow.db'}"
    Tracker(store)

    def start(point, name):
        folder = work / "signals" / f"{point}-{name}"
        return (*faultpoints.start_run(point, folder, store), folder)

    def report(point, name, proc, marker, folder):
        got = faultpoints.outcome(proc, folder, store)
        return (f"{point:<17} {name:<8} exit {got.returncode:<4} runs "
                f"{','.join(got.statuses) or '-':<9} recovery {len(got.recovery)}  "
                f"{_verdict(faultpoints.problems(point, got))}")

    return _signalled(faultpoints.RUN_POINTS, start, lambda point: 1, report)


def sweep_matrix(work: Path) -> list[str]:
    """SIGINT and SIGTERM at each point of :data:`faultpoints.SWEEP_POINTS`: before the parent
    exists, while it is created, in a row (one, or two with --jobs 2), between rows, while the
    gauge and the outputs are made and the parent gets its last update, after it FINISHED."""
    from kebab_mlflow.tracking.store import Tracker

    store = f"sqlite:///{work / 'sweeps' / 'mlflow.db'}"
    Tracker(store)

    def start(point, name):
        folder = work / "sweeps" / f"{point.name.replace('/', '-')}-{name}"
        return (*faultpoints.start_sweep(point, folder, store), folder)

    def report(point, name, proc, marker, folder):
        got = faultpoints.sweep_outcome(proc, folder, store, marker)
        return (f"{point.name:<19} {name:<8} exit {got.returncode:<4} parent "
                f"{','.join(got.parent) or '-':<9} children "
                f"{','.join(got.children) or '-':<26} recovery {len(got.recovery)}  "
                f"{_verdict(faultpoints.sweep_problems(point, got))}")

    return _signalled(faultpoints.SWEEP_POINTS, start, lambda point: point.reached_by, report)


def creation_kills(work: Path) -> list[str]:
    lines = []
    for at, uri, code in faultpoints.kill_during_creation(work / "stores"):
        why = faultpoints.store_usable(uri)
        lines.append(f"SIGKILL before SQL statement {at:>4} (exit {code}): "
                     f"{'usable' if why is None else why}")
    return lines


# MLflow turns telemetry off by itself in CI and under pytest (mlflow/telemetry/utils.py
# ``_is_ci_env_or_testing``): the server runs are made in an environment without any of these,
# as a user's shell would be, so what is measured is the tool's own default.
TELEMETRY_VARS = ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "PYTEST_CURRENT_TEST", "CI",
                  "GITHUB_ACTIONS", "CIRCLECI", "GITLAB_CI", "JENKINS_URL", "TRAVIS", "TF_BUILD",
                  "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "BUILDKITE",
                  "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION", "RUNBOT_HOST_URL",
                  "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID", "_MLFLOW_TESTING_TELEMETRY")
PROBE = ("import json, os; before = os.environ.get('MLFLOW_DISABLE_TELEMETRY'); "
         "import kebab_mlflow.tracking.store; "
         "from mlflow.telemetry import get_telemetry_client; "
         "print(json.dumps({'set_before': before, "
         "'after': os.environ.get('MLFLOW_DISABLE_TELEMETRY'), "
         "'client': get_telemetry_client() is not None}))")


def run_env(work: Path, telemetry: str) -> dict[str, str]:
    """The environment of the server runs: no telemetry switch nor CI marker (``default``), or
    the user's explicit ``MLFLOW_DISABLE_TELEMETRY=false`` (``on``)."""
    env = {k: v for k, v in os.environ.items() if k not in TELEMETRY_VARS}
    env.update(PYTHONPATH=str(ROOT), KEBAB_CACHE_DIR=str(work / "server-cache"))
    if telemetry == "on":
        env["MLFLOW_DISABLE_TELEMETRY"] = "false"
    return env


def probe_telemetry(env: dict[str, str]) -> str:
    """What a process started with ``env`` sees: the switch before and after the tool's import,
    and whether MLflow's telemetry client is running."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    return out.stdout.strip().splitlines()[-1]


def server_runs(work: Path, total: int, at_once: int, telemetry: str) -> list[str]:
    """``total`` runs of the fixtures against a server on PostgreSQL, ``at_once`` started
    together (a CI fan-out), each its own process."""
    env = run_env(work, telemetry)
    present = sorted(k for k in TELEMETRY_VARS if k in env)
    probe = probe_telemetry(env)
    postgres = servers.start_postgres()
    server = servers.start_mlflow_server(postgres.uri, root=work / f"server-{telemetry}")
    experiment = f"bench-faults-telemetry-{telemetry}"
    failures: list[str] = []
    t0 = time.perf_counter()
    try:
        for start in range(0, total, at_once):
            procs = [subprocess.Popen(
                [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
                 str(faultpoints.GOLDEN), "--target", faultpoints.TARGET, "--tracking-uri",
                 server.url, "--experiment", experiment, "--run-name", f"r{i}", "--json"],
                cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for i in range(start, min(start + at_once, total))]
            for proc in procs:
                _, err = proc.communicate(timeout=1800)
                if proc.returncode != 0:
                    last = [ln for ln in err.strip().splitlines() if ln.strip()][-3:]
                    failures.append(f"exit {proc.returncode}: {' | '.join(last)}")
        wall = time.perf_counter() - t0
        client = server.client()
        runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id],
                                  max_results=1000)
    finally:
        server.stop()
        postgres.stop()
        shutil.rmtree(postgres.dir, ignore_errors=True)
    by_status: dict[str, int] = {}
    for run in runs:
        by_status[run.info.status] = by_status.get(run.info.status, 0) + 1
    key_errors = sum("_MLFLOW_TELEMETRY_SESSION_ID" in f for f in failures)
    return [f"telemetry {telemetry}: telemetry variables in the runs' environment: "
            f"{', '.join(present) or 'none'}; a process started so sees {probe}",
            f"{total} runs, {at_once} started at once, {wall:.0f} s (load average "
            f"{os.getloadavg()[0]:.1f}): runs {json.dumps(by_status)}; process failures "
            f"{len(failures)}; KeyError '_MLFLOW_TELEMETRY_SESSION_ID' {key_errors}",
            *failures[:5]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-runs", type=int, default=72)
    parser.add_argument("--at-once", type=int, default=72)
    parser.add_argument("--telemetry", choices=["default", "on"], action="append",
                        help="server runs with telemetry at the tool's default (unset) and/or "
                             "explicitly on (MLFLOW_DISABLE_TELEMETRY=false); default: both")
    parser.add_argument("--only", choices=["signals", "creation", "server", "publish"])
    parser.add_argument("--backend", choices=bench_publish.BACKENDS, action="append",
                        help="the publish matrix on this backend (default: both)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kebab-bench-faults-"))
    try:
        sections = measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(f"## {title}\n" + "\n".join(lines) for title, lines in sections)
    name = "faults" if args.only is None else f"faults-{args.only}"
    if args.only == "publish" and args.backend and len(args.backend) == 1:
        name += f"-{args.backend[0]}"
    if args.only == "server" and args.telemetry and len(args.telemetry) == 1:
        name += f"-{args.telemetry[0]}"  # faults-server.txt keeps both passes
    emit(name, text)


def measure(args: argparse.Namespace, work: Path) -> list[tuple[str, list[str]]]:
    sections = []
    if args.only in (None, "signals"):
        sections.append(("SIGINT/SIGTERM at each checkpoint of a run", signal_matrix(work)))
        sections.append(("SIGINT/SIGTERM at each moment of a sweep (3 rows; /j2: --jobs 2)",
                         sweep_matrix(work)))
    if args.only in (None, "creation"):
        sections.append(("SIGKILL while a brand-new SQLite store is created",
                         creation_kills(work)))
    if args.only in (None, "server"):
        for telemetry in args.telemetry or ["default", "on"]:
            sections.append((f"concurrent runs, mlflow server on PostgreSQL, telemetry "
                             f"{telemetry}", server_runs(work, args.server_runs, args.at_once,
                                                         telemetry)))
    if args.only in (None, "publish"):
        for backend in args.backend or bench_publish.BACKENDS:
            t0, load = time.perf_counter(), os.getloadavg()[0]
            lines = bench_publish.matrix(backend, list(bench_publish.KINDS),
                                         work / f"publish-{backend}")
            sections.append((f"publish-failure matrix, {backend}: fault x step -> how the run "
                             "ended, what it left, `upload`, the verdict",
                             [*lines, f"{time.perf_counter() - t0:.0f} s; "
                                      f"{load_line(load)}"]))
    return sections


if __name__ == "__main__":
    main()
