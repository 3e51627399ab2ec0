"""`make ui-check`: what a person sees in the MLflow UI, checked in a real browser.

Makes a temporary store with two runs (the candidate with ``--traces failures``), a
``compare`` of them and the fixture sweep, starts ``kebab-mlflow ui`` on it, loads the pages in
headless Chromium (scripts/cdp.py) and fails unless the rendered page shows:

- the experiment opening on its runs (not the GenAI overview);
- on the run page: the headline metrics before any breakdown, the run's model, its dataset
  and, in the dataset's panel, the schema and the profile;
- the run's traces (the failing queries) on its Traces tab;
- the model on the experiment's Models tab;
- on the compare page of the two runs: the headline metrics before any breakdown;
- the sweep's parent run with its gauge.

``--screenshots DIR`` keeps the run page and the traces page as PNGs (the README's pictures).
Exit 0 when every check passed, 1 otherwise (each failure says what the page showed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import Browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HEADLINE = ("mrr", "hit_at_1", "hit_at_5", "hit_at_10", "ndcg_at_10_doc", "contains_all")
BREAKDOWN = re.compile(r"\b(by_query_type|by_hardcase_category|by_metadata_field|"
                       r"abstention_outcomes|abstention_calibration|latency)/")
ML = "workflowType=machine_learning"  # MLflow 3.17's UI picks GenAI pages unless told


@dataclass
class Store:
    uri: str
    experiment_id: str
    baseline: str
    candidate: str
    sweep_parent: str
    model_name: str
    dataset: str
    traced: list[str] = field(default_factory=list)  # the traced queries' text


def kebab(args: list[str], work: Path) -> str:
    env = {**os.environ, "KEBAB_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", *args], cwd=work, env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"kebab-mlflow {' '.join(args)} failed ({out.returncode}):\n"
                         f"{out.stderr[-2000:]}")
    return out.stdout


def make_store(work: Path) -> Store:
    uri = f"sqlite:///{work / 'store' / 'mlflow.db'}"
    common = ["--golden", str(FIXTURES / "golden_queries.yaml"), "--corpus",
              str(FIXTURES / "kb"), "--tracking-uri", uri, "--json"]
    base = json.loads(kebab(["run", *common, "--run-name", "baseline"], work))
    cand = json.loads(kebab(["run", *common, "--run-name", "candidate", "--set", "bm25.k1=1.5",
                             "--traces", "failures"], work))
    kebab(["compare", "baseline", "candidate", "--tracking-uri", uri], work)
    sweep = json.loads(kebab(["sweep", str(FIXTURES / "sweep.yaml"), "--tracking-uri", uri,
                              "--json"], work))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(cand["run_id"])
    model = client.get_logged_model(run.outputs.model_outputs[0].model_id)
    traces = client.search_traces(locations=[cand["experiment_id"]], run_id=cand["run_id"])
    return Store(uri, cand["experiment_id"], base["run_id"], cand["run_id"],
                 sweep.get("parent_run_id") or sweep.get("run_id"), model.name,
                 run.inputs.dataset_inputs[0].dataset.name,
                 sorted(t.info.request_preview for t in traces))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ui(store: Store, work: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "kebab_mlflow.cli", "ui", "--tracking-uri",
                             store.uri, "--port", str(port)], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(work / "ui.log", "w"),
                            start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                log = (work / "ui.log").read_text()
                raise SystemExit(f"kebab-mlflow ui exited: {log}") from None
            time.sleep(0.5)
    raise SystemExit("kebab-mlflow ui did not answer /health within 180 s")


def headline_first(text: str) -> str | None:
    """None when a headline metric shows and no breakdown name comes before it; else why."""
    first = min((m.start() for name in HEADLINE
                 for m in [re.search(rf"(?<![\w/]){name}(?![\w/])", text)] if m), default=None)
    if first is None:
        return "no headline metric on the page"
    breakdown = BREAKDOWN.search(text)
    if breakdown and breakdown.start() < first:
        return f"breakdown {text[breakdown.start():breakdown.start() + 40]!r} before the headline"
    return None


class Checks:
    def __init__(self) -> None:
        self.results: list[tuple[str, str | None]] = []

    def record(self, name: str, problem: str | None, text: str = "") -> None:
        if problem and text:
            problem += f"\n      page text: {' '.join(text.split())[:600]}"
        self.results.append((name, problem))
        print(f"{'ok  ' if problem is None else 'FAIL'} {name}"
              + ("" if problem is None else f": {problem}"), flush=True)

    def expect(self, name: str, text: str, *needles: str) -> None:
        missing = [n for n in needles if n not in text]
        self.record(name, f"missing {missing}" if missing else None, text)


async def check_pages(store: Store, base: str, shots: Path | None, checks: Checks) -> None:
    exp = f"{base}/#/experiments/{store.experiment_id}"
    run_page = f"{exp}/runs/{store.candidate}"
    async with Browser(1600, 1000) as b:
        await b.open(f"{exp}?{ML}")
        text = await b.wait_text(lambda t: "candidate" in t and "baseline" in t)
        checks.expect("experiment opens on its runs", text, "candidate", "baseline",
                      "fixtures-sweep")

        await b.open(f"{run_page}?{ML}")
        text = await b.wait_text(lambda t: "Metrics (" in t and store.model_name in t
                                 and store.dataset in t)
        section = text[text.find("Metrics ("):]
        checks.record("run page: headline metrics before any breakdown",
                      headline_first(section), section)
        checks.expect("run page: the run's model and dataset", text, store.model_name,
                      store.dataset)
        if shots:
            await b.click_label("Close")  # the MLflow Assistant panel
            await asyncio.sleep(2)  # the page lays itself out again without the panel
            await b.scroll_to_text("Metrics (")
            await b.screenshot(shots / "ui-run.png", 1200)

        clicked = await b.click_starting("[role=button]", f"{store.dataset} (")
        text = await b.wait_text(lambda t: "expected_chunk_ids" in t, 60)
        checks.record("dataset panel opens", None if clicked else "no dataset button", text)
        panel = text[text.find("Data details for"):]
        checks.expect("dataset panel: schema and profile", panel, "expected_chunk_ids\narray",
                      "queries: 43", "ground truth levels", "with chunk truth")
        if shots:
            await asyncio.sleep(2)  # the panel slides in
            await b.screenshot(shots / "ui-dataset.png", 1200)

        await b.open(f"{run_page}/model-metrics?{ML}")
        text = await b.wait_text(lambda t: any(n in t for n in HEADLINE))
        checks.record("model metrics tab: headline metrics before any breakdown",
                      headline_first(text), text)

        await b.open(f"{run_page}/traces?{ML}")
        n = len(store.traced)
        text = await b.wait_text(lambda t: f"{n} of {n}" in t and store.traced[0] in t)
        checks.expect("traces tab: the failing queries", text, f"{n} of {n}",
                      *store.traced[:3], "hit_at_5")
        if shots:
            await b.screenshot(shots / "ui-traces.png", 1200)

        await b.open(f"{exp}/models?{ML}")
        text = await b.wait_text(lambda t: store.model_name in t)
        checks.expect("models tab: the pipeline version", text, store.model_name)

        runs = json.dumps([store.baseline, store.candidate])
        await b.open(f"{base}/#/compare-runs?runs={runs}&experiments="
                     f"{json.dumps([store.experiment_id])}&{ML}")
        text = await b.wait_text(lambda t: "Metrics" in t and "mrr" in t)
        section = text[text.rfind("Metrics"):]
        checks.record("compare page: headline metrics before any breakdown",
                      headline_first(section), section)

        await b.open(f"{exp}/runs/{store.sweep_parent}?{ML}")
        text = await b.wait_text(lambda t: "gauge" in t)
        checks.expect("sweep parent run: its gauge", text, "gauge/", "fixtures-sweep")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshots", type=Path, help="folder for ui-run.png, ui-traces.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kebab-ui-check-") as tmp:
        work = Path(tmp)
        print("… making a run, a compare and a sweep in a temporary store", flush=True)
        store = make_store(work)
        port = free_port()
        print(f"… starting kebab-mlflow ui on port {port}", flush=True)
        ui = start_ui(store, work, port)
        checks = Checks()
        try:
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
            asyncio.run(check_pages(store, f"http://127.0.0.1:{port}", args.screenshots,
                                    checks))
        finally:
            os.killpg(ui.pid, 15)
            ui.wait(30)
    failed = [name for name, problem in checks.results if problem]
    print(f"{len(checks.results) - len(failed)}/{len(checks.results)} UI checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
