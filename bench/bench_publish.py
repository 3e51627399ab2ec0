"""The publish-failure matrix (issue 28): a `run` of the fixtures stopped at each step of
publishing, then `kebab-mlflow upload` of the folder it left. Each case must end as exactly
one FINISHED run with the artifacts, tags, dataset and model links of an uninterrupted run,
one point per metric and metrics equal to its metrics to 12 significant digits; the
``per_query.jsonl`` the store holds must match the run's ``kebab.per_query_sha256`` tag.

The faults, at each step's checkpoint:

- ``sigterm``, ``sigkill``: the signal once the process reached the checkpoint
  (``KEBAB_FAULT_POINT``: it waits there).
- ``disk-full``: the artifact folder is on a 16 MiB tmpfs; the process waits at the
  checkpoint (a bench wrapper around ``kebab_mlflow.app.run.checkpoint``: it touches a marker
  and waits for a go file); once every case is there the tmpfs is filled to the last byte,
  the cases go on, and whatever they write next meets ENOSPC. Space is then freed and the
  folder uploaded. A case whose later steps write no artifact just finishes.
- ``disk-small``: the artifact folder on a 96 KiB tmpfs from the start (publishing runs out
  part-way through a file); grown to 64 MiB, then uploaded.

Two backends: ``sqlite`` (each case its own store; the tmpfs holds the store's artifacts) and
``postgres`` (one ``mlflow server --serve-artifacts`` on a throwaway PostgreSQL cluster, each
case its own experiment; the disk cases talk to a second server whose artifact destination is
the tmpfs, on its own database of the same cluster). tmpfs needs Linux and root. All cases of a
fault start at once. A SIGKILL leaves the work folder in the cache (no clean-up runs): that is
the folder uploaded.

    .venv/bin/python bench/bench_publish.py [--backend sqlite|postgres]
        [--only sigterm,sigkill,disk-full,disk-small]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, WORK, emit, load_line  # noqa: E402
from tests import faultpoints, servers  # noqa: E402

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # the bench's downloads
STEPS = ("dataset-logged", "model-linked", "metrics-logged", "artifacts-logged",
         "table-logged", "traces-logged", "view-set")
KINDS = ("sigterm", "sigkill", "disk-full", "disk-small")
BACKENDS = ("sqlite", "postgres")
# `python -c PAUSE STEP MARKER GO run ...`: the CLI, waiting at checkpoint STEP (after the
# product's own checkpoint) until the file GO exists; MARKER says it got there.
PAUSE = """\
import os, sys, time
from pathlib import Path
import kebab_mlflow.app.run as run
step, marker, go = sys.argv[1:4]
del sys.argv[1:4]
real = run.checkpoint
def paused(name):
    real(name)
    if name == step:
        Path(marker).write_text(f"{os.getpid()}\\n")
        deadline = time.monotonic() + 1800
        while not Path(go).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
run.checkpoint = paused
from kebab_mlflow.cli import main
main()
"""


class Sqlite:
    """Each case a SQLite store of its own in its folder."""

    name = "sqlite"

    def __init__(self, base: Path) -> None:
        self.base = base

    def uri(self, folder: Path) -> str:
        return f"sqlite:///{folder / 'store' / 'mlflow.db'}"

    def experiment(self, folder: Path) -> str:
        return "matrix"

    def artifacts_on(self, folder: Path, kind: str, mount: Path) -> None:
        (folder / "store").mkdir(parents=True)
        (mount / folder.name).mkdir()
        (folder / "store" / "artifacts").symlink_to(mount / folder.name)

    def close(self) -> None:
        pass


class Postgres:
    """One PostgreSQL cluster; a server for the signal cases, one per disk kind (its own
    database, its artifact destination the kind's tmpfs); each case its own experiment."""

    name = "postgres"

    def __init__(self, base: Path) -> None:
        self.base = base
        self.pg = servers.start_postgres()
        self.servers: dict[str, servers.MlflowServer] = {}
        self.server_of: dict[Path, servers.MlflowServer] = {}
        try:
            self.servers["main"] = servers.start_mlflow_server(self.pg.uri,
                                                               root=base / "server-main")
        except BaseException:
            self.close()
            raise

    def uri(self, folder: Path) -> str:
        return self.server_of.get(folder, self.servers["main"]).url

    def experiment(self, folder: Path) -> str:
        return folder.name

    def artifacts_on(self, folder: Path, kind: str, mount: Path) -> None:
        if kind not in self.servers:
            root = self.base / f"server-{kind}"
            root.mkdir(parents=True)
            (root / "artifacts").symlink_to(mount)
            db = self.pg.create_database(kind.replace("-", "_"))
            self.servers[kind] = servers.start_mlflow_server(db, root=root)
        self.server_of[folder] = self.servers[kind]

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.pg.stop()
        shutil.rmtree(self.pg.dir, ignore_errors=True)


def _env(folder: Path, point: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache")}
    if point:
        env["KEBAB_FAULT_POINT"] = f"{point}={folder / 'reached'}"
    return env


def _run(backend, folder: Path, point: str | None = None,
         pause: str | None = None) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    head = [sys.executable, "-m", "kebab_mlflow.cli"] if pause is None else \
        [sys.executable, "-c", PAUSE, pause, str(folder / "paused"), str(folder / "go")]
    args = [*head, "run", "--golden", str(faultpoints.GOLDEN),
            "--corpus", str(ROOT / "fixtures" / "kb"), "--tracking-uri", backend.uri(folder),
            "--experiment", backend.experiment(folder), "--run-name", "matrix",
            "--traces", "failures"]
    proc = subprocess.Popen(args, cwd=folder, env=_env(folder, point), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=faultpoints.sigint_at_default)
    _STARTED.append(proc)
    return proc


_STARTED: list[subprocess.Popen] = []  # killed at the end if still there (a failed bench)


def _kill_survivors() -> None:
    for proc in _STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


def _left_folder(folder: Path) -> Path | None:
    for where in (folder / "kebab-recovery", folder / "cache" / "work"):
        found = sorted(p for p in where.glob("*") if (p / "manifest.json").is_file()) \
            if where.is_dir() else []
        if found:
            return found[0]
    return None


def _upload(backend, folder: Path, left: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", "upload", str(left),
                           "--tracking-uri", backend.uri(folder)], cwd=folder,
                          env=_env(folder, None), capture_output=True, text=True, timeout=1800)


def _state(backend, folder: Path) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=backend.uri(folder))
    exp = client.get_experiment_by_name(backend.experiment(folder))
    runs = client.search_runs([exp.experiment_id]) if exp else []
    if len(runs) != 1:
        return {"runs": [r.info.status for r in runs]}
    run = runs[0]
    rid = run.info.run_id
    with tempfile.TemporaryDirectory() as tmp:
        stored = Path(client.download_artifacts(rid, "per_query.jsonl", tmp)).read_bytes()
    tags = run.data.tags
    return {"runs": [run.info.status], "metrics": run.data.metrics,
            "history": {len(client.get_metric_history(rid, k)) for k in run.data.metrics},
            "artifacts": sorted(a.path for a in client.list_artifacts(rid)),
            "datasets": len(run.inputs.dataset_inputs),
            "models": len(run.outputs.model_outputs) if run.outputs else 0,
            # the digest differs run to run (per_query.jsonl holds each query's latency)
            "tags": {k: v for k, v in tags.items()
                     if k.startswith("kebab.") and k != "kebab.per_query_sha256"},
            "per_query": (stored.count(b"\n"), hashlib.sha256(stored).hexdigest()
                          == tags.get("kebab.per_query_sha256"))}


def _verdict(got: dict, want: dict) -> str:
    if got["runs"] != ["FINISHED"]:
        return f"FAIL runs {got['runs']}"
    wrong = [k for k, v in got["metrics"].items()
             if k not in want["metrics"] or not math.isclose(v, want["metrics"][k],
                                                              rel_tol=1e-12)]
    problems = []
    if set(got["metrics"]) != set(want["metrics"]) or wrong:
        problems.append(f"metrics differ: {wrong[:3]}")
    if got["artifacts"] != want["artifacts"]:
        problems.append(f"artifacts {got['artifacts']}")
    if got["history"] != {1}:
        problems.append(f"metric history lengths {got['history']}")
    if (got["datasets"], got["models"]) != (1, 1):
        problems.append(f"dataset links {got['datasets']}, model links {got['models']}")
    if got["tags"] != want["tags"]:
        problems.append(f"tags differ: {set(got['tags'].items()) ^ set(want['tags'].items())}")
    if got["per_query"] != (want["per_query"][0], True):
        problems.append(f"per_query.jsonl (lines, digest matches) {got['per_query']}")
    return "ok" if not problems else "FAIL " + "; ".join(problems)


def _signal_cases(backend, base: Path, kind: str) -> list[tuple[str, Path, str]]:
    cases = []
    for step in STEPS:
        folder = base / f"{kind}-{step}"
        cases.append((step, folder, _run(backend, folder, step)))
    signum = signal.SIGTERM if kind == "sigterm" else signal.SIGKILL
    for _, folder, proc in cases:
        faultpoints.wait_for(folder / "reached", proc, timeout_s=1800)
        proc.send_signal(signum)
    return [(step, folder, _ended(proc)) for step, folder, proc in cases]


def _ended(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=1800)
    said = err[err.rfind("error:"):] if "error:" in err else ""
    said = " ".join(said.split())  # the message, unwrapped
    return f"run exit {proc.returncode}" + (f" ({said[:400]})" if said else "")


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                   check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(mount: Path) -> int:
    """Write zeros into ``mount`` until ENOSPC; the bytes written."""
    written = 0
    with (mount / "filler").open("wb", buffering=0) as f:
        block = b"\0" * 65536
        while True:
            try:
                written += f.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                block = block[:len(block) // 2]
                if not block:
                    return written


def _disk_full_cases(backend, base: Path, mount: Path) -> list[tuple[str, Path, str]]:
    """Every case paused at its step; the tmpfs filled; all go on; space freed once they
    ended (before `upload`)."""
    cases = []
    for step in STEPS:
        folder = base / f"disk-full-{step}"
        folder.mkdir(parents=True)
        backend.artifacts_on(folder, "disk-full", mount)
        cases.append((step, folder, _run(backend, folder, pause=step)))
    for _, folder, proc in cases:
        faultpoints.wait_for(folder / "paused", proc, timeout_s=1800)
    filled = _fill(mount)
    for _, folder, _ in cases:
        (folder / "go").touch()
    ended = [(step, folder, _ended(proc) + f", {filled:,} B filled") for step, folder, proc
             in cases]
    (mount / "filler").unlink()
    return ended


def _disk_small_case(backend, base: Path, mount: Path) -> list[tuple[str, Path, str]]:
    """The artifact folder on a 96 KiB tmpfs: publishing runs out of space part-way; the
    tmpfs is then grown (space freed) and the folder uploaded."""
    folder = base / "disk-small"
    folder.mkdir(parents=True)
    backend.artifacts_on(folder, "disk-small", mount)
    ended = _ended(_run(backend, folder))
    subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
    return [("from the start", folder, ended)]


def _cases(backend, base: Path, kind: str, mounts: contextlib.ExitStack
           ) -> list[tuple[str, Path, str]]:
    """The cases of one fault, ended; a disk kind's tmpfs stays mounted in ``mounts`` (the
    uploads write into it)."""
    if kind == "disk-full":
        return _disk_full_cases(backend, base,
                                mounts.enter_context(_tmpfs(base / "tmpfs-full", "16m")))
    if kind == "disk-small":
        return _disk_small_case(backend, base,
                                mounts.enter_context(_tmpfs(base / "tmpfs-small", "96k")))
    return _signal_cases(backend, base, kind)


def _checked(backend, kind: str, step: str, folder: Path, ended: str, want: dict) -> str:
    left = _left_folder(folder)
    if left is None:
        verdict = _verdict(_state(backend, folder), want)
        return f"{kind:10} {step:16} {ended}; nothing left to upload: {verdict}"
    done = _upload(backend, folder, left)
    verdict = _verdict(_state(backend, folder), want) if done.returncode == 0 else \
        f"FAIL upload exit {done.returncode}: {done.stderr.strip()[-600:]}"
    return (f"{kind:10} {step:16} {ended}; {left.parent.name} left; upload exit "
            f"{done.returncode}: {verdict}")


def matrix(backend_name: str, kinds: list[str], base: Path) -> list[str]:
    """The matrix on one backend: a line per case (fault, step, how the run ended, what it
    left, the upload, the verdict)."""
    backend = (Sqlite if backend_name == "sqlite" else Postgres)(base)
    try:
        reference = base / "uninterrupted"
        proc = _run(backend, reference)
        _, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, err[-2000:]
        want = _state(backend, reference)
        lines = [f"{backend_name}: uninterrupted: {want['runs']}, {len(want['metrics'])} "
                 f"metrics, per_query.jsonl {want['per_query'][0]} lines (digest matches the "
                 f"tag: {want['per_query'][1]}), artifacts {want['artifacts']}"]
        for kind in kinds:
            with contextlib.ExitStack() as mounts:
                lines += [_checked(backend, kind, step, folder, ended, want)
                          for step, folder, ended in _cases(backend, base, kind, mounts)]
        return lines
    finally:
        _kill_survivors()
        backend.close()


def main() -> None:
    global STEPS
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite")
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--steps", default=",".join(STEPS), help="a subset (a quick check)")
    args = parser.parse_args()
    STEPS = tuple(args.steps.split(","))
    start_load = os.getloadavg()[0]
    base = WORK / f"publish-{args.backend}-{int(time.time())}"
    t0 = time.perf_counter()
    try:
        lines = matrix(args.backend, args.only.split(","), base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    lines += [f"{time.perf_counter() - t0:.0f} s in all", load_line(start_load)]
    emit("bench_publish" if args.backend == "sqlite" else f"bench_publish_{args.backend}",
         "\n".join(lines))


if __name__ == "__main__":
    main()
