"""The command line: parse, call the library, render, map errors to exit codes.

Exit codes: 0 success, 1 a result that should fail CI (Regressed, a failed query under
--fail-fast), 2 bad input or usage, 130 interrupted. Heavy imports (mlflow, sklearn, torch)
happen inside the commands that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import functools
import gc
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kebab_mlflow.errors import KebabError


def _report(exc: KebabError) -> None:
    from kebab_mlflow.console import err

    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)


class _App(typer.Typer):
    """A Typer whose commands turn a KebabError into its message and exit code (no traceback),
    however they are invoked (console script, ``python -m``, CliRunner in tests)."""

    def command(self, *args, **kwargs):
        register = super().command(*args, **kwargs)

        def wrap(fn):
            @functools.wraps(fn)
            def guarded(*a, **kw):
                try:
                    return fn(*a, **kw)
                except KebabError as exc:
                    _report(exc)
                    raise typer.Exit(exc.exit_code) from None

            return register(guarded)

        return wrap


app = _App(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
           help="Evaluate retrieval/RAG pipelines on golden sets; MLflow is the record.")
baseline_app = _App(help="Mark or show the experiment's baseline run.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")

TrackingUri = Annotated[str | None, typer.Option(
    "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or the embedded "
    "sqlite store in ./mlruns)")]
Experiment = Annotated[str, typer.Option("--experiment", help="MLflow experiment name")]


def main() -> None:
    try:
        app()  # click maps usage errors to exit 2 itself; always ends in SystemExit
    finally:
        # A command leaves ~350k objects behind (MLflow, pandas, the corpus) and the
        # interpreter's collections at exit walk them all: ~0.7 s after the work is done.
        # Frozen objects are skipped; reference counting still frees them, atexit handlers
        # still run, and the memory goes back to the OS either way.
        gc.freeze()


@app.command()
def validate(golden: Annotated[Path, typer.Argument(help="golden-set YAML file")]) -> None:
    """Check a golden-set file; exit 2 listing every problem with file:line and query id."""
    from kebab_mlflow.golden import load_golden_set

    g = load_golden_set(golden)
    typer.echo(f"{golden}: OK — {len(g)} queries, golden set {g.name!r}"
               + (" (private)" if g.private else ""))


@app.command()
def metrics() -> None:
    """List every metric with its level and definition."""
    from kebab_mlflow.console import out, table
    from kebab_mlflow.metrics import METRICS

    out.print(table("metrics", ["name", "level", "definition"],
                    [(m.name, m.level, m.description) for m in METRICS.values()]))


@app.command()
def presets() -> None:
    """List the pipeline presets and the configuration keys --set accepts."""
    from kebab_mlflow.config import DEFAULTS, PRESETS, flatten
    from kebab_mlflow.console import out, table

    out.print(table("presets", ["preset", "what", "overrides"],
                    [(n, d, ", ".join(f"{k}={v}" for k, v in o.items()) or "—")
                     for n, (d, o) in PRESETS.items()]))
    out.print(table("config keys (--set KEY=VALUE)", ["key", "default"],
                    [(k, repr(v)) for k, v in flatten(DEFAULTS).items()]))


@app.command()
def run(
    golden: Annotated[Path, typer.Option(help="golden-set YAML")] = Path(
        "fixtures/golden_queries.yaml"),
    corpus: Annotated[Path, typer.Option(help="folder of .md/.txt or BEIR corpus.jsonl[.gz]")]
    = Path("fixtures/kb"),
    preset: Annotated[str, typer.Option(help="pipeline preset (see `presets`)")]
    = "naive_baseline",
    k: Annotated[int, typer.Option("--k", help="retrieval depth; metrics at cut-offs <= k")] = 10,
    set_: Annotated[list[str] | None, typer.Option("--set", help="config override KEY=VALUE")]
    = None,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    run_name: Annotated[str | None, typer.Option(help="MLflow run name")] = None,
    seed: Annotated[int, typer.Option(help="seed recorded with the run")] = 0,
    fail_fast: Annotated[bool, typer.Option(help="stop at the first query that raises")] = False,
    target: Annotated[str | None, typer.Option(
        help="evaluate another system: python:mod:attr, http://..., cmd:TEMPLATE")] = None,
    concurrency: Annotated[int, typer.Option(help="parallel queries for I/O-bound targets")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
) -> None:
    """Run the golden set through a pipeline and record the eval as one MLflow run."""
    from kebab_mlflow.config import parse_overrides
    from kebab_mlflow.console import ProgressBar, err, metrics_table
    from kebab_mlflow.evaluation import RunOptions, execute
    from kebab_mlflow.report import HEADLINE

    options = RunOptions(str(golden), str(corpus), preset, k, parse_overrides(set_ or []),
                         experiment, tracking_uri, run_name, seed, fail_fast, target,
                         concurrency)
    result = execute(options, progress=ProgressBar(), on_status=lambda s: err.print(f"… {s}"))
    if as_json:
        typer.echo(json.dumps({"run_id": result.run_id, "experiment_id": result.experiment_id,
                               "status": result.status, "metrics": result.metrics,
                               "timings": result.timings}))
        return
    overall = result.aggregate["overall"]
    err.print(metrics_table("summary", {n: overall.get(n) for n in HEADLINE if n in overall}))
    err.print(f"run [bold]{result.run_id}[/] {result.status} in experiment {experiment}")
    err.print(f"open the MLflow UI: [cyan]{result.ui_command}[/]  (or `kebab-mlflow ui`)")


@app.command()
def runs(
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    limit: Annotated[int, typer.Option(help="how many runs")] = 20,
) -> None:
    """List recent runs with their status, preset and key metrics."""
    from kebab_mlflow.console import out, table
    from kebab_mlflow.tracking import BASELINE_TAG, Tracker

    tracker = Tracker(tracking_uri)
    exp = tracker.experiment_id(experiment, create=False)
    baseline = tracker.experiment_tag(exp, BASELINE_TAG)
    rows = []
    for r in tracker.search_runs([exp], max_results=limit):
        m = r.data.metrics
        rows.append((("* " if r.info.run_id == baseline else "") + (r.info.run_name or ""),
                     r.info.run_id, r.info.status, r.data.tags.get("kebab.kind", ""),
                     r.data.params.get("preset", ""), m.get("hit_at_5"), m.get("mrr"),
                     m.get("ndcg_at_10_doc"), m.get("contains_all"),
                     r.data.tags.get("kebab.verdict", "")))
    out.print(table(f"runs in {experiment} (* = baseline)",
                    ["name", "run id", "status", "kind", "preset", "hit_at_5", "mrr",
                     "ndcg_at_10_doc", "contains_all", "verdict"], rows))


@app.command()
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, name, @baseline, @latest")],
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Show one run: versions, params, metrics and tags."""
    from kebab_mlflow.console import out, table
    from kebab_mlflow.runs import resolve_run
    from kebab_mlflow.tracking import Tracker

    tracker = Tracker(tracking_uri)
    r = resolve_run(tracker, experiment, run_ref)
    out.print(f"[bold]{r.info.run_name}[/] {r.info.run_id} — {r.info.status}")
    out.print(table("params", ["param", "value"], sorted(r.data.params.items())))
    out.print(table("metrics", ["metric", "value"], sorted(r.data.metrics.items())))
    out.print(table("tags", ["tag", "value"], sorted(
        (k, v) for k, v in r.data.tags.items() if not k.startswith("mlflow.note"))))


@baseline_app.command("set")
def baseline_set(
    run_ref: Annotated[str, typer.Argument(metavar="RUN")],
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Mark RUN as the experiment's baseline (what @baseline resolves to)."""
    from kebab_mlflow.runs import set_baseline
    from kebab_mlflow.tracking import Tracker

    r = set_baseline(Tracker(tracking_uri), experiment, run_ref)
    typer.echo(f"baseline of {experiment} is now {r.info.run_id} ({r.info.run_name})")


@baseline_app.command("show")
def baseline_show(experiment: Experiment = "kebab-eval", tracking_uri: TrackingUri = None) -> None:
    """Print the baseline run id."""
    from kebab_mlflow.runs import resolve_run
    from kebab_mlflow.tracking import Tracker

    r = resolve_run(Tracker(tracking_uri), experiment, "@baseline")
    typer.echo(f"{r.info.run_id} {r.info.run_name}")


@app.command()
def ui(
    tracking_uri: TrackingUri = None,
    port: Annotated[int, typer.Option(help="port")] = 5000,
    host: Annotated[str, typer.Option(help="interface")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured store."""
    import os
    import subprocess

    from kebab_mlflow.tracking import resolve_uri

    uri = resolve_uri(tracking_uri)
    if not uri.startswith(("sqlite:", "postgresql", "mysql", "file:")):
        typer.echo(f"{uri} is a server: open it in a browser.")
        return
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--port", str(port),
           "--host", host, "--workers", "1"]
    typer.echo(f"MLflow UI on http://{host}:{port} (Ctrl-C to stop)", err=True)
    raise typer.Exit(subprocess.call(cmd, env=env))


@app.command("import-beir")
def import_beir_cmd(
    folder: Annotated[Path, typer.Argument(help="BEIR folder: corpus, queries.jsonl, qrels/")],
    out: Annotated[Path, typer.Option("--out", help="golden-set YAML to write")],
    split: Annotated[str, typer.Option(help="qrels split")] = "test",
    name: Annotated[str | None, typer.Option(help="golden-set name")] = None,
) -> None:
    """Turn a BEIR collection into a golden set with graded expected_doc_ids."""
    from kebab_mlflow.importers import import_beir

    s = import_beir(folder, split, out, name)
    typer.echo(f"wrote {s.written} queries to {s.out}; {s.skipped_without_judgments} queries "
               f"without judgments in split {split!r} left out")


@app.command()
def upload(
    recovery_dir: Annotated[Path, typer.Argument(help="folder printed when a run lost its store")],
    tracking_uri: TrackingUri = None,
) -> None:
    """Publish a recovery folder to MLflow as the run it belongs to."""
    import shutil

    from kebab_mlflow.errors import InputError
    from kebab_mlflow.evaluation import MANIFEST, publish
    from kebab_mlflow.tracking import Tracker

    manifest = recovery_dir / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{recovery_dir} is not a recovery folder (no {MANIFEST})")
    data = json.loads(manifest.read_text())
    publish(Tracker(tracking_uri or data["tracking_uri"]), recovery_dir)
    shutil.rmtree(recovery_dir)
    typer.echo(f"published run {data['run_id']}")


# Commands that live in their own modules register themselves on `app` when imported.
from kebab_mlflow import cli_answers, cli_compare, cli_sweep  # noqa: E402, F401

if __name__ == "__main__":
    # `python -m kebab_mlflow.cli` runs this file as __main__, a second copy of the module; the
    # cli_* modules registered their commands on the imported copy's app, so call that one.
    from kebab_mlflow.cli import main as _main

    _main()
