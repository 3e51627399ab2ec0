"""`make ui-check`: what a person sees in the MLflow UI, checked in a real browser.

Makes a temporary store with two fixture runs (the candidate with ``--traces failures``), a
``compare`` of them (twice: the verdict line must not stack), a SciFact run when the dataset
is there (``../shared/datasets/scifact`` or ``--scifact DIR``) and the fixture sweep, starts
``kebab-mlflow ui`` on it, loads the pages in headless Chromium (scripts/cdp.py) and fails
unless the rendered page shows what docs/mlflow-ui.md says it shows:

- the URL ``kebab-mlflow ui`` printed, opened in a fresh browser profile (no localStorage):
  the runs list (not the GenAI pages) whose columns are, left to right after the run name and
  date, the verdict, the baseline compared to, the golden version, each golden set's primary
  metric (mrr, ndcg_at_10_doc), the other headline metrics, then Models and Dataset; every
  cell showing the run's value;
- one click on a run name from there: the run page with the GenAI navigation (the UI's switch
  falls back to the browser's memory, GenAI in a new browser: nothing kebab can set keeps it);
  switching to GenAI and back to Model training once keeps the navigation on later clicks;
- the experiment opening on its runs (not the GenAI overview);
- on the compared run's page: its description starting with the verdict line, once; the
  headline metrics before any breakdown, the run's model, its dataset and, in the dataset's
  panel, the schema and the profile;
- the run's traces (the failing queries) on its Traces tab; one trace: spans with their own
  times and the retrieved documents marked relevant / not relevant;
- the models on the experiment's Models tab, named backend-settings-digest;
- on the compare page of the two runs: the headline metrics before any breakdown;
- the sweep's parent run with its gauge.

``--screenshots DIR`` takes the pictures of docs/mlflow-ui.md there, in fresh profiles at
1280×800 and 1600×1000, as a user sees the pages (the MLflow Assistant panel open): the printed
URL, the compared run's page, the Models table and one trace.
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
# the view's leading tag columns, in this order (tracking/ui_view.py)
LEADING = ("tags.`kebab.verdict`", "tags.`kebab.baseline_name`", "tags.`kebab.golden_version`")
ML = "workflowType=machine_learning"  # MLflow 3.17's UI picks GenAI pages unless told
# the GenAI pages' side navigation (not "Overview": a run page has a tab of that name)
GENAI_NAV = ("Training runs", "Observability", "Judges")
SIZES = ((1280, 800), (1600, 1000))  # the docs' screenshots, each in a fresh profile
SHOT_COLORS = 64  # PNG palette of the docs' screenshots (docs/img stays ~0.5 MB)


def scifact_dir(given: Path | None) -> Path | None:
    """BEIR SciFact: ``--scifact``, else ``../shared/datasets/scifact`` of the checkout (or of
    the folder holding the git worktrees); None when absent (the check runs without it)."""
    candidates = [given] if given else [p / "shared" / "datasets" / "scifact"
                                        for p in (ROOT.parent, ROOT.parent.parent)]
    return next((p for p in candidates if p and (p / "queries.jsonl").is_file()), None)


@dataclass
class Store:
    uri: str
    experiment_id: str
    baseline: str
    candidate: str
    sweep_parent: str
    model_name: str
    dataset: str
    verdict: str  # compare's verdict on the candidate
    traced: list[str] = field(default_factory=list)  # the traced queries' text
    # run id → {headline metric: value} of the eval runs, as the store holds them
    headline: dict[str, dict[str, float]] = field(default_factory=dict)
    golden: dict[str, str] = field(default_factory=dict)  # run id → kebab.golden_version
    models: list[str] = field(default_factory=list)  # every LoggedModel's name
    scifact: str | None = None  # the SciFact run's id, when the dataset is there
    # a traced query with an answer (three spans) and relevant and not relevant documents
    asked_query: str = ""


def kebab(args: list[str], work: Path) -> str:
    env = {**os.environ, "KEBAB_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "kebab_mlflow.cli", *args], cwd=work, env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1) or (out.returncode == 1 and args[0] != "compare"):
        raise SystemExit(f"kebab-mlflow {' '.join(args)} failed ({out.returncode}):\n"
                         f"{out.stderr[-2000:]}")
    return out.stdout


def _scifact_run(work: Path, uri: str, scifact: Path) -> str:
    golden = work / "scifact-test.yaml"
    kebab(["import-beir", str(scifact), "--split", "test", "--out", str(golden)], work)
    run = json.loads(kebab(["run", "--golden", str(golden), "--set", "chunker.mode=document",
                            "--k", "100", "--run-name", "scifact-bm25", "--traces", "failures",
                            "--tracking-uri", uri, "--json"], work))
    return str(run["run_id"])


def make_store(work: Path, scifact: Path | None) -> Store:
    uri = f"sqlite:///{work / 'store' / 'mlflow.db'}"
    common = ["--golden", str(FIXTURES / "golden_queries.yaml"), "--corpus",
              str(FIXTURES / "kb"), "--tracking-uri", uri, "--json"]
    base = json.loads(kebab(["run", *common, "--run-name", "baseline"], work))
    cand = json.loads(kebab(["run", *common, "--run-name", "candidate", "--set", "bm25.k1=1.5",
                             "--traces", "failures"], work))
    for _ in range(2):  # a second compare replaces the verdict line, never stacks it
        kebab(["compare", "baseline", "candidate", "--tracking-uri", uri], work)
    scifact_id = _scifact_run(work, uri, scifact) if scifact else None
    sweep = json.loads(kebab(["sweep", str(FIXTURES / "sweep.yaml"), "--tracking-uri", uri,
                              "--json"], work))
    return read_store(uri, base["run_id"], cand["run_id"],
                      sweep.get("parent_run_id") or sweep.get("run_id"), scifact_id)


def read_store(uri: str, baseline: str, candidate: str, sweep_parent: str,
               scifact: str | None) -> Store:
    """What the checks expect of the store's runs, read back from it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(candidate)
    experiment_id = run.info.experiment_id
    model = client.get_logged_model(run.outputs.model_outputs[0].model_id)
    traces = client.search_traces(locations=[experiment_id], run_id=candidate)
    asked = next((t.info.request_preview for t in traces if _shows_every_kind(t)),
                 traces[0].info.request_preview)  # none such: the check then says so
    runs = {r: client.get_run(r).data for r in [baseline, candidate, *filter(None, [scifact])]}
    return Store(uri, experiment_id, baseline, candidate, sweep_parent, model.name,
                 run.inputs.dataset_inputs[0].dataset.name, run.data.tags["kebab.verdict"],
                 sorted(t.info.request_preview for t in traces),
                 {r: {n: d.metrics[n] for n in summary_metrics(d.metrics)}
                  for r, d in runs.items()},
                 {r: d.tags["kebab.golden_version"] for r, d in runs.items()},
                 [m.name for m in client.search_logged_models([experiment_id])],
                 scifact, asked)


def _shows_every_kind(trace) -> bool:  # noqa: ANN001 - an MLflow Trace
    """An asked query's trace whose documents are both relevant and not relevant."""
    spans = {s.name: s for s in trace.data.spans}
    marks = {d["metadata"].get("judgment") for d in (spans["retrieve"].outputs or [])}
    return "answer" in spans and {"relevant", "not relevant"} <= marks


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
    answered: float | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                answered = answered or time.monotonic()
            # ui prints the URL once the server answers (a moment after /health does)
            printed = re.search(r"http://\S+/#/\S+", (work / "ui.log").read_text())
            if printed is not None:
                return proc, printed.group(0)
            if time.monotonic() - answered > 30:
                raise SystemExit("kebab-mlflow ui printed no URL of a page:\n"
                                 + (work / "ui.log").read_text()[-2000:])
            time.sleep(0.5)
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
    """None when every headline metric of every eval run is a column showing the run's value
    and the leading columns show its verdict, compared-to and golden version; else what is
    wrong."""
    columns = {n: f"metrics.`{n}`" for values in store.headline.values() for n in values}
    cells = grid["cells"]
    problems = [f"{n} of {run[:8]}: {cells.get(run, {}).get(col)!r}, not {value}"
                for run, values in store.headline.items() for n, value in values.items()
                for col in [columns[n]]
                if not _same_number(cells.get(run, {}).get(col), value)]
    missing = [n for n in VIEW_COLUMNS if n not in columns]
    if missing:
        problems.append(f"no column for {missing}")
    shown = {"verdict": cells.get(store.candidate, {}).get(LEADING[0]),
             "compared-to": cells.get(store.candidate, {}).get(LEADING[1])}
    if shown != {"verdict": store.verdict, "compared-to": "baseline"}:
        problems.append(f"candidate's leading cells {shown}, not {store.verdict!r}, 'baseline'")
    problems += [f"golden version of {run[:8]}: {cells.get(run, {}).get(LEADING[2])!r}"
                 for run, golden in store.golden.items()
                 if cells.get(run, {}).get(LEADING[2]) != golden]
    return "; ".join(problems[:6]) or None


def column_order_problem(store: Store, grid: dict) -> str | None:
    """None when the columns run, left to right: verdict, compared-to, golden version, the
    golden sets' primaries (mrr, then ndcg_at_10_doc with a SciFact run), every other
    headline metric, then Models and Dataset."""
    left = grid["left"]
    primaries = ["mrr", *(["ndcg_at_10_doc"] if store.scifact else [])]
    metrics = {n for values in store.headline.values() for n in values} - set(primaries)
    wanted = [*LEADING, *(f"metrics.`{p}`" for p in primaries)]
    absent = [c for c in [*wanted, "attributes.`Models`", "attributes.`Dataset`"]
              if c not in left]
    if absent:
        return f"no column {absent}"
    positions = [left[c] for c in wanted]
    if positions != sorted(positions):
        return f"leading columns out of order: {dict(zip(wanted, positions, strict=True))}"
    rest = {n: left.get(f"metrics.`{n}`") for n in metrics}
    early = [n for n, x in rest.items() if x is not None and x < positions[-1]]
    late = [n for n, x in rest.items() if x is not None
            and x > min(left["attributes.`Models`"], left["attributes.`Dataset`"])]
    if early or late:
        return f"metrics before the primaries {early}, after Models/Dataset {late}"
    return None


def _same_number(shown: str | None, value: float) -> bool:
    try:
        return shown is not None and abs(float(shown) - value) <= 1e-9 * max(1.0, abs(value))
    except ValueError:
        return False


def _genai(text: str) -> list[str]:
    """The GenAI navigation's own entries on the page (it shows the runs as "Training
    runs")."""
    return [w for w in GENAI_NAV if w in text]


async def check_printed_url(store: Store, url: str, checks: Checks) -> None:
    """The URL ``kebab-mlflow ui`` printed, in a browser that never saw MLflow before; then
    one click on a run name from it."""
    route = f"#/experiments/{store.experiment_id}/runs"
    async with Browser(1600, 1000) as fresh:
        await fresh.open(url)
        text = await fresh.wait_text(lambda t: "candidate" in t and "baseline" in t
                                     and "hit_at_1" in t)
        grid = json.loads(await fresh.evaluate(GRID_CELLS, await_promise=True))
        on_runs = grid["hash"].startswith(route) and not _genai(text)
        checks.record("printed URL, fresh browser: the runs list, not the GenAI pages",
                      None if on_runs else f"{url} showed {grid['hash']}, GenAI nav "
                      f"{_genai(text)}", text)
        checks.record("printed URL, fresh browser: a column per headline metric with its "
                      "value, the verdict, compared-to and golden version",
                      runs_view_problem(store, grid), text)
        checks.record("printed URL: verdict, compared-to, golden version, the primaries, the "
                      "other metrics, then Models and Dataset", column_order_problem(store, grid))
        await check_navigation(fresh, url, checks)


async def check_navigation(b: Browser, url: str, checks: Checks) -> None:
    """What docs/mlflow-ui.md says of the navigation after a click: a run name's link drops
    ``workflowType``, so a fresh browser shows the GenAI navigation on the run page; after the
    switch went to GenAI and back to Model training once, the browser remembers it."""
    clicked = await b.click_text("candidate")
    text = await b.wait_text(lambda t: "Model metrics" in t)
    checks.record("one click from the printed URL: the run page with the GenAI navigation "
                  "(nothing kebab can set keeps Model training)",
                  None if clicked and _genai(text) else
                  f"clicked {clicked}, GenAI nav {_genai(text)}", text)
    await b.click_text("GenAI")
    await asyncio.sleep(3)
    await b.click_text("Model training")
    await asyncio.sleep(3)
    await b.open(url)
    await b.wait_text(lambda t: "candidate" in t and "hit_at_1" in t)
    await b.click_text("candidate")
    text = await b.wait_text(lambda t: "Model metrics" in t)
    checks.record("after the switch went GenAI → Model training once, a click keeps Model "
                  "training", f"GenAI nav {_genai(text)}" if _genai(text) else None, text)


async def check_run_page(b: Browser, store: Store, base: str, checks: Checks) -> None:
    run_page = f"{base}/#/experiments/{store.experiment_id}/runs/{store.candidate}"
    await b.open(f"{run_page}?{ML}")
    text = await b.wait_text(lambda t: "Metrics (" in t and store.model_name in t
                             and store.dataset in t and "Compare: " in t)
    description = text[text.find("Description"):].split("\n")
    first = next((line for line in description[1:] if line.strip()), "")
    want = f"Compare: {store.verdict} vs baseline baseline"
    checks.record("compared run page: the description starts with the verdict line, once",
                  None if first.startswith(want) and text.count("Compare: ") == 1 else
                  f"first line {first!r}, {text.count('Compare: ')} verdict line(s)", text)
    section = text[text.find("Metrics ("):]
    checks.record("run page: headline metrics before any breakdown",
                  headline_first(section), section)
    checks.expect("run page: the run's model and dataset", text, store.model_name,
                  store.dataset)
    clicked = await b.click_starting("[role=button]", f"{store.dataset} (")
    text = await b.wait_text(lambda t: "expected_chunk_ids" in t, 60)
    checks.record("dataset panel opens", None if clicked else "no dataset button", text)
    panel = text[text.find("Data details for"):]
    checks.expect("dataset panel: schema and profile", panel, "expected_chunk_ids\narray",
                  "queries: 43", "ground truth levels", "with chunk truth")
    await b.open(f"{run_page}/model-metrics?{ML}")
    text = await b.wait_text(lambda t: any(n in t for n in HEADLINE))
    checks.record("model metrics tab: headline metrics before any breakdown",
                  headline_first(text), text)


# the trace view's span tree: each span's name, (a root's assessment count,) its duration
SPAN_TIMES = re.compile(r"\nquery \S+\n(?:\d+\n)?([\d.]+m?s)\nretrieve\n([\d.]+m?s)\n"
                        r"answer\n([\d.]+m?s)")


async def open_trace(b: Browser, store: Store, base: str) -> str:
    """The candidate's traces tab, then the trace of an asked query with its retrieve span
    selected; the page's text."""
    await b.open(f"{base}/#/experiments/{store.experiment_id}/runs/{store.candidate}/traces?"
                 f"{ML}")
    await b.wait_text(lambda t: store.asked_query in t)
    await b.click_text(store.asked_query)
    await b.wait_text(lambda t: "retrieve" in t and "Spans" in t, 30)
    await asyncio.sleep(1)
    await b.click_text("retrieve")
    return await b.wait_text(lambda t: "judgment" in t, 30)


async def check_traces(b: Browser, store: Store, base: str, checks: Checks) -> None:
    await b.open(f"{base}/#/experiments/{store.experiment_id}/runs/{store.candidate}/traces?"
                 f"{ML}")
    n = len(store.traced)
    text = await b.wait_text(lambda t: f"{n} of {n}" in t and store.traced[0] in t)
    checks.expect("traces tab: the failing queries", text, f"{n} of {n}",
                  *store.traced[:3], "hit_at_5")
    text = await open_trace(b, store, base)
    times = SPAN_TIMES.search(text)
    checks.record("one trace: root, retrieve and answer spans with their own times",
                  None if times and len(set(times.groups())) == 3 else
                  f"span times {times.groups() if times else None}", text)
    checks.expect("one trace: the retrieved documents marked with their judgment", text,
                  "judgment", '"relevant"', '"not relevant"')


async def check_pages(store: Store, base: str, checks: Checks) -> None:
    exp = f"{base}/#/experiments/{store.experiment_id}"
    async with Browser(1600, 1000) as b:
        await b.open(f"{exp}?{ML}")
        text = await b.wait_text(lambda t: "candidate" in t and "baseline" in t)
        checks.expect("experiment opens on its runs", text, "candidate", "baseline",
                      "fixtures-sweep")
        await check_run_page(b, store, base, checks)
        await check_traces(b, store, base, checks)

        await b.open(f"{exp}/models?{ML}")
        text = await b.wait_text(lambda t: all(m in t for m in store.models))
        named = [m for m in store.models if not re.fullmatch(r"[a-z_]+-\S+-[0-9a-f]{8}", m)]
        checks.expect("models tab: every pipeline version", text, *store.models)
        checks.record("models named backend-settings-digest", f"{named}" if named else None)

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


async def screenshots(store: Store, base: str, url: str, shots: Path) -> None:
    """The docs' pictures, each size in a fresh profile, the pages as a user sees them (the
    MLflow Assistant panel open, as it opens in a new browser)."""
    run_page = f"{base}/#/experiments/{store.experiment_id}/runs/{store.candidate}?{ML}"
    for width, height in SIZES:
        async with Browser(width, height) as b:
            await b.open(url)
            await b.wait_text(lambda t: "candidate" in t and "hit_at_1" in t)
            await asyncio.sleep(3)
            await b.screenshot(shots / f"ui-runs-{width}.png", colors=SHOT_COLORS)
            await b.open(run_page)
            await b.wait_text(lambda t: "Compare: " in t and "Metrics (" in t)
            await asyncio.sleep(3)
            # the description (the verdict line, then the summary) in view: at 1280 px the page
            # is one column, the description below the run's details and tags
            await b.scroll_to_text("Description", "center")
            await b.screenshot(shots / f"ui-compared-run-{width}.png", colors=SHOT_COLORS)
            await b.open(f"{base}/#/experiments/{store.experiment_id}/models?{ML}")
            await b.wait_text(lambda t: store.model_name in t)
            await asyncio.sleep(2)
            await b.screenshot(shots / f"ui-models-{width}.png", colors=SHOT_COLORS)
            await open_trace(b, store, base)
            await asyncio.sleep(2)
            await b.screenshot(shots / f"ui-trace-{width}.png", colors=SHOT_COLORS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshots", type=Path, help="folder for the docs' pictures")
    parser.add_argument("--scifact", type=Path, help="BEIR SciFact folder (default: "
                        "../shared/datasets/scifact)")
    args = parser.parse_args()
    scifact = scifact_dir(args.scifact)
    with tempfile.TemporaryDirectory(prefix="kebab-ui-check-") as tmp:
        work = Path(tmp)
        print("… making runs, compares and a sweep in a temporary store"
              + ("" if scifact else " (no SciFact: its run and checks are left out)"),
              flush=True)
        store = make_store(work, scifact)
        port = free_port()
        print(f"… starting kebab-mlflow ui on port {port}", flush=True)
        ui, url = start_ui(store, work, port)
        print(f"… kebab-mlflow ui printed {url}", flush=True)
        checks = Checks()
        base = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(check_printed_url(store, url, checks))
            asyncio.run(check_pages(store, base, checks))
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
                asyncio.run(screenshots(store, base, url, args.screenshots))
        finally:
            os.killpg(ui.pid, 15)
            ui.wait(30)
    failed = [name for name, problem in checks.results if problem]
    print(f"{len(checks.results) - len(failed)}/{len(checks.results)} UI checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
