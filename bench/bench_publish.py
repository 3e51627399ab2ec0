"""The publish-failure matrix (issue 28): a `run` of the fixtures stopped at each step of
publishing — SIGTERM and SIGKILL at the step's checkpoint (``KEBAB_FAULT_POINT``), and a full
artifact disk (the store's artifact folder on a small tmpfs, Linux and root only) — then
`kebab-mlflow upload` of the folder it left. Each case must end as exactly one FINISHED run
whose artifacts are those of an uninterrupted run and whose metrics equal its metrics to 12
significant digits. SQLite stores; every case in its own folder, all started at once.

    .venv/bin/python bench/bench_publish.py [--only sigterm,sigkill,disk-full]

A SIGKILL leaves the work folder in the cache (no clean-up runs): that is the folder uploaded.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, WORK, emit, load_line  # noqa: E402
from tests import faultpoints  # noqa: E402

STEPS = ("dataset-logged", "model-linked", "metrics-logged", "artifacts-logged",
         "table-logged", "traces-logged", "view-set")
KINDS = ("sigterm", "sigkill", "disk-full")


def _env(folder: Path, point: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KEBAB_CACHE_DIR": str(folder / "cache")}
    if point:
        env["KEBAB_FAULT_POINT"] = f"{point}={folder / 'reached'}"
    return env


def _run(folder: Path, point: str | None = None) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'store' / 'mlflow.db'}"
    args = [sys.executable, "-m", "kebab_mlflow.cli", "run", "--golden",
            str(faultpoints.GOLDEN), "--corpus", str(ROOT / "fixtures" / "kb"),
            "--tracking-uri", uri, "--experiment", "matrix", "--run-name", "matrix",
            "--traces", "failures"]
    return subprocess.Popen(args, cwd=folder, env=_env(folder, point), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=faultpoints.sigint_at_default)


def _left_folder(folder: Path) -> Path | None:
    for where in (folder / "kebab-recovery", folder / "cache" / "work"):
        found = sorted(p for p in where.glob("*") if (p / "manifest.json").is_file()) \
            if where.is_dir() else []
        if found:
            return found[0]
    return None


def _upload(folder: Path, left: Path) -> subprocess.CompletedProcess:
    uri = f"sqlite:///{folder / 'store' / 'mlflow.db'}"
    return subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", "upload", str(left),
                           "--tracking-uri", uri], cwd=folder, env=_env(folder, None),
                          capture_output=True, text=True, timeout=1800)


def _state(folder: Path) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'store' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("matrix")
    runs = client.search_runs([exp.experiment_id]) if exp else []
    if len(runs) != 1:
        return {"runs": [r.info.status for r in runs]}
    run = runs[0]
    rid = run.info.run_id
    return {"runs": [run.info.status], "metrics": run.data.metrics,
            "history": {len(client.get_metric_history(rid, k)) for k in run.data.metrics},
            "artifacts": sorted(a.path for a in client.list_artifacts(rid)),
            "datasets": len(run.inputs.dataset_inputs),
            "models": len(run.outputs.model_outputs) if run.outputs else 0}


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
    return "ok" if not problems else "FAIL " + "; ".join(problems)


def _signal_cases(base: Path, kind: str) -> list[tuple[str, Path, subprocess.Popen]]:
    cases = []
    for step in STEPS:
        folder = base / f"{kind}-{step}"
        cases.append((step, folder, _run(folder, step)))
    signum = signal.SIGTERM if kind == "sigterm" else signal.SIGKILL
    for _, folder, proc in cases:
        faultpoints.wait_for(folder / "reached", proc, timeout_s=1800)
        proc.send_signal(signum)
    for _, _, proc in cases:
        proc.communicate(timeout=1800)
    return cases


def _disk_full_case(base: Path) -> list[tuple[str, Path, subprocess.Popen]]:
    """The artifact folder on a 96 KiB tmpfs: publishing runs out of space part-way; the
    tmpfs is then grown (space freed) and the folder uploaded."""
    folder = base / "disk-full-artifacts"
    (folder / "store").mkdir(parents=True)
    mount = base / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], check=True)
    (folder / "store" / "artifacts").symlink_to(mount)
    proc = _run(folder)
    proc.communicate(timeout=1800)
    subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
    return [(f"ENOSPC (run exit {proc.returncode})", folder, proc)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(KINDS))
    kinds = parser.parse_args().only.split(",")
    start_load = os.getloadavg()[0]
    base = WORK / f"publish-{int(time.time())}"
    t0 = time.perf_counter()
    reference = base / "uninterrupted"
    proc = _run(reference)
    _, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err[-2000:]
    want = _state(reference)
    lines = [f"uninterrupted: {want['runs']}, {len(want['metrics'])} metrics, "
             f"artifacts {want['artifacts']}"]
    for kind in kinds:
        cases = _disk_full_case(base) if kind == "disk-full" else _signal_cases(base, kind)
        for step, folder, _ in cases:
            left = _left_folder(folder)
            if left is None:
                lines.append(f"{kind:9} {step:18} no folder left: {_state(folder)['runs']}")
                continue
            done = _upload(folder, left)
            verdict = _verdict(_state(folder), want) if done.returncode == 0 else \
                f"FAIL upload exit {done.returncode}: {done.stderr.strip()[-300:]}"
            lines.append(f"{kind:9} {step:18} {left.parent.name:15} upload exit "
                         f"{done.returncode}: {verdict}")
    lines += [f"{time.perf_counter() - t0:.0f} s in all", load_line(start_load)]
    emit("bench_publish", "\n".join(lines))


if __name__ == "__main__":
    main()
