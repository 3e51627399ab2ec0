"""Byte-identical check: the same fixture commands must record the same runs before and after
a refactor.

    PYTHONPATH=$PWD .venv/bin/python scripts/byte_identical.py record /tmp/bi-before
    PYTHONPATH=$PWD .venv/bin/python scripts/byte_identical.py check /tmp/bi-before

`record` runs `run` (fixtures, --seed 0, twice: naive_baseline and random_retrieval),
`compare` (json), the fixture `sweep`, `metrics` and `presets` against a temporary store and
writes what they recorded (params, tags, metrics, aggregate.json, per_query.jsonl, command
outputs) as normalized JSON: run ids, times, durations, paths and the git commit are masked.
`check` records again into a temporary folder and diffs the two. Outputs stay out of git.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
# Values that differ between two recordings of the same code: masked, not compared.
VOLATILE_KEY = re.compile(
    r"(time|duration|seconds|_ms$|_s$|git|commit|dirty|host|user|mlflow\.source|mlflow\.user"
    r"|mlflow\.log-model|mlflow\.runName|run_id|uri|path|dir|python|platform|version_mlflow"
    r"|throughput|qps|latency|elapsed|memory|rss"
    r"|per_query_sha256)",  # per_query.jsonl holds each query's latency: compared masked
    re.IGNORECASE,
)
ARTIFACTS = ("aggregate.json", "per_query.jsonl")


def cli(args: list[str], cwd: Path, uri: str) -> str:
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, KEBAB_CACHE_DIR=str(cwd / ".kebab-cache"))
    env["PYTHONPATH"] = str(ROOT)
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    done = subprocess.run(
        [sys.executable, "-m", "kebab_mlflow.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )
    return f"exit {done.returncode}\n{done.stdout}\n--- stderr\n{done.stderr}"


def mask(text: str, root: Path) -> str:
    text = text.replace(str(root), "<tmp>").replace(str(ROOT), "<repo>")
    return RUN_ID.sub("<run>", text)


def masked_json(value: Any) -> Any:
    """A parsed JSON output with its volatile keys masked, recursively."""
    if isinstance(value, dict):
        return {k: "<masked>" if VOLATILE_KEY.search(k) else masked_json(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [masked_json(v) for v in value]
    return value


SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")
SHORT_RUN_ID = re.compile(r"\brun [0-9a-f]{8}\b")


def masked_output(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if "━" in line or " INFO " in line:  # progress bars and MLflow's log: timings
            continue
        line = SHORT_RUN_ID.sub("run <id>", SECONDS.sub("<s>", line))
        try:
            lines.append(json.dumps(masked_json(json.loads(line)), sort_keys=True))
        except ValueError:
            lines.append(line)
    return "\n".join(lines)


def masked_mapping(values: dict[str, Any]) -> dict[str, Any]:
    return {k: ("<masked>" if VOLATILE_KEY.search(k) else v) for k, v in sorted(values.items())}


def run_record(client: Any, run: Any, tmp: Path) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": run.info.run_name,
        "status": run.info.status,
        "params": masked_mapping(dict(run.data.params)),
        "tags": masked_mapping(dict(run.data.tags)),
        "metrics": masked_mapping(dict(run.data.metrics)),
    }
    for name in ARTIFACTS:
        try:
            local = client.download_artifacts(run.info.run_id, name, str(tmp / "dl"))
        except Exception:  # noqa: BLE001 - a parent run has no per-query artifact
            continue
        text = mask(Path(local).read_text(), tmp)
        values = ([json.loads(line) for line in text.splitlines() if line]
                  if name.endswith(".jsonl") else json.loads(text))
        record[name] = masked_json(values)
    return json.loads(mask(json.dumps(record, sort_keys=True), tmp))


def store_records(uri: str, tmp: Path) -> list[dict[str, Any]]:
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    records = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            records.append({"experiment": exp.name, **run_record(client, run, tmp)})
    return sorted(records, key=lambda r: (r["experiment"], r["name"] or ""))


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        uri = f"sqlite:///{tmp / 'mlflow.db'}"
        fx = ROOT / "fixtures"
        outputs = {
            "metrics": cli(["metrics"], tmp, uri),
            "presets": cli(["presets"], tmp, uri),
            "run_bm25": cli(["run", "--golden", str(fx / "golden_queries.yaml"), "--seed", "0",
                             "--corpus", str(fx / "kb"), "--run-name", "bm25"], tmp, uri),
            "run_random": cli(["run", "--golden", str(fx / "golden_queries.yaml"), "--seed", "0",
                               "--corpus", str(fx / "kb"), "--preset", "random_retrieval",
                               "--run-name", "random"], tmp, uri),
            "compare": cli(["compare", "bm25", "random", "--format", "json",
                            "--resamples", "2000"], tmp, uri),
            "sweep": cli(["sweep", str(fx / "sweep.yaml"), "--json"], tmp, uri),
        }
        outputs = {k: masked_output(mask(v, tmp)) for k, v in outputs.items()}
        (out / "outputs.json").write_text(json.dumps(outputs, indent=1, sort_keys=True))
        runs = store_records(uri, tmp)
        (out / "runs.json").write_text(json.dumps(runs, indent=1, sort_keys=True))


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Every path where two JSON values differ, with both values shortened."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new))
                for d in differences(old.get(k, "<absent>"), new.get(k, "<absent>"),
                                     f"{where}/{k}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in differences(a, b,
                                                                                 f"{where}[{i}]")]
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str):
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        return [f"{where}:\n" + "\n".join(list(diff)[2:40])]
    return [f"{where}: {json.dumps(old)[:200]} -> {json.dumps(new)[:200]}"]


def remasked(value: Any) -> Any:
    """The masks applied again, so a recording made by an older version of this script
    compares with the current masks."""
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        if "metrics" in value and "sweep" in value:  # outputs.json: command outputs
            return {k: masked_output(v) for k, v in value.items()}
    return masked_json(value)


def check(before: Path) -> int:
    with tempfile.TemporaryDirectory() as name:
        after = Path(name)
        record(after)
        found = []
        for file in ("outputs.json", "runs.json"):
            old = remasked(json.loads((before / file).read_text()))
            new = remasked(json.loads((after / file).read_text()))
            found += differences(old, new, file)
        print("\n".join(found[:100]) if found else "byte-identical: outputs.json and runs.json")
        return 1 if found else 0


if __name__ == "__main__":
    verb, folder = sys.argv[1], Path(sys.argv[2])
    if verb == "record":
        record(folder)
    else:
        sys.exit(check(folder))
