"""`make ui-check`: what a person sees in the MLflow UI, checked in a real browser.

Makes a temporary store with two runs (the candidate with ``--traces failures``), a
``compare`` of them and the fixture sweep, starts ``kebab-mlflow ui`` on it, loads the pages in
headless Chromium (scripts/cdp.py) and fails unless the rendered page shows:

- the URL ``kebab-mlflow ui`` printed, opened in a fresh browser profile (no localStorage):
  the runs list (not the GenAI pages) with a column per headline metric of the runs, each
  showing the run's value, those columns before the Models and Dataset ones;
- the experiment opening on its runs (not the GenAI overview);
- on the run page: the headline metrics before any breakdown, the run's model, its dataset
  and, in the dataset's panel, the schema and the profile;
- the run's traces (the failing queries) on its Traces tab;
- the model on the experiment's Models tab;
- on the compare page of the two runs: the headline metrics before any breakdown;
- the sweep's parent run with its gauge.

``--screenshots DIR`` keeps the runs list, the run page, the dataset panel and the traces page as
PNGs (the pictures of docs/mlflow-ui.md).
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
# columns the runs view must have for the fixture set (its summary, README "Metrics")
VIEW_COLUMNS = ("hit_at_1", "hit_at_5", "mrr", "ndcg_at_10_doc", "recall_at_10_doc",
                "contains_all", "error_rate")
ML = "workflowType=machine_learning"  # MLflow 3.17's UI picks GenAI pages unless told
GENAI_NAV = ("Training runs", "Observability", "Overview")  # the GenAI pages' side navigation


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
    # run id → {headline metric: value} of the two eval runs, as the store holds them
    headline: dict[str, dict[str, float]] = field(default_factory=dict)


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
    metrics = {r: client.get_run(r).data.metrics for r in (base["run_id"], cand["run_id"])}
    headline = {r: {n: m[n] for n in summary_metrics(m)} for r, m in metrics.items()}
    return Store(uri, cand["experiment_id"], base["run_id"], cand["run_id"],
                 sweep.get("parent_run_id") or sweep.get("run_id"), model.name,
                 run.inputs.dataset_inputs[0].dataset.name,
                 sorted(t.info.request_preview for t in traces), headline)


def summary_metrics(metrics: dict[str, float]) -> list[str]:
    """The metrics the run's terminal summary shows (kebab's headline selection)."""
    sys.path.insert(0, str(ROOT))
    from kebab_mlflow.evaluation.report import headline

    return headline(metrics)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ui(store: Store, work: Path, port: int) -> tuple[subprocess.Popen, str]:
    """``kebab-mlflow ui`` on the store, once it answers; and the runs URL it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "kebab_mlflow.cli", "ui", "--tracking-uri",
                             store.uri, "--port", str(port)], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(work / "ui.log", "w"),
                            start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                printed = re.search(r"http://\S+/#/\S+", (work / "ui.log").read_text())
                if printed is None:
                    raise SystemExit("kebab-mlflow ui printed no URL of a page:\n"
                                     + (work / "ui.log").read_text()[-2000:])
                return proc, printed.group(0)
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


# The runs table's cells, per run (AG Grid row-id) and column (col-id), with each column's left
# edge: the grid draws only the columns in view, so it is scrolled across, a screen at a time.
GRID_CELLS = """(async () => {
    const bar = document.querySelector('.ag-body-horizontal-scroll-viewport');
    const cells = {}, left = {};
    for (let x = 0; ; x += Math.max(100, bar.clientWidth - 50)) {
        bar.scrollLeft = x;
        await new Promise(done => setTimeout(done, 500));
        for (const row of document.querySelectorAll('.ag-row[row-id]')) {
            for (const cell of row.querySelectorAll('[col-id]')) {
                const col = cell.getAttribute('col-id');
                (cells[row.getAttribute('row-id')] ||= {})[col] = cell.innerText.trim();
                if (cell.style.left) left[col] = parseFloat(cell.style.left);
            }
        }
        if (x >= bar.scrollWidth - bar.clientWidth) break;
    }
    bar.scrollLeft = 0;
    return JSON.stringify({cells, left, hash: location.hash});
})()"""


def runs_view_problem(store: Store, grid: dict) -> str | None:
    """None when every headline metric of both runs is a column showing the run's value, the
    metric columns before Models and Dataset; else what is wrong."""
    columns = {n: f"metrics.`{n}`" for values in store.headline.values() for n in values}
    problems = [f"{n} of {run[:8]}: {grid['cells'].get(run, {}).get(col)!r}, not {value}"
                for run, values in store.headline.items() for n, value in values.items()
                for col in [columns[n]]
                if not _same_number(grid["cells"].get(run, {}).get(col), value)]
    missing = [n for n in VIEW_COLUMNS if n not in columns]
    if missing:
        problems.append(f"no column for {missing}")
    left = grid["left"]
    attributes = [left[c] for c in ("attributes.`Models`", "attributes.`Dataset`") if c in left]
    late = [n for n, col in columns.items() if attributes and left.get(col, 0) > min(attributes)]
    if late or not attributes:
        problems.append(f"metric columns after Models/Dataset: {late}" if late
                        else "no Models/Dataset column")
    return "; ".join(problems[:6]) or None


def _same_number(shown: str | None, value: float) -> bool:
    try:
        return shown is not None and abs(float(shown) - value) <= 1e-9 * max(1.0, abs(value))
    except ValueError:
        return False


async def check_printed_url(store: Store, url: str, shots: Path | None, checks: Checks) -> None:
    """The URL ``kebab-mlflow ui`` printed, in a browser that never saw MLflow before."""
    route = f"#/experiments/{store.experiment_id}/runs"
    async with Browser(1600, 1000) as fresh:
        await fresh.open(url)
        text = await fresh.wait_text(lambda t: "candidate" in t and "baseline" in t
                                     and "hit_at_1" in t)
        grid = json.loads(await fresh.evaluate(GRID_CELLS, await_promise=True))
        # the GenAI pages show the same runs table as "Training runs", next to their Overview
        genai = [w for w in GENAI_NAV if w in text]
        on_runs = grid["hash"].startswith(route) and not genai
        checks.record("printed URL, fresh browser: the runs list, not the GenAI pages",
                      None if on_runs else f"{url} showed {grid['hash']}, GenAI nav {genai}",
                      text)
        checks.record("printed URL, fresh browser: a column per headline metric with its "
                      "value, before Models and Dataset", runs_view_problem(store, grid), text)
        if shots:
            await fresh.click_label("Close")  # the MLflow Assistant panel
            await asyncio.sleep(2)
            await fresh.screenshot(shots / "ui-runs.png", 1200)


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
        ui, url = start_ui(store, work, port)
        print(f"… kebab-mlflow ui printed {url}", flush=True)
        checks = Checks()
        try:
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
            asyncio.run(check_printed_url(store, url, args.screenshots, checks))
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
