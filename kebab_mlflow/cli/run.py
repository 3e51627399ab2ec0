"""CLI commands that check input and make runs: validate, metrics, presets, run, import-beir,
upload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app
from kebab_mlflow.names import DEFAULT_K


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
    from kebab_mlflow.cli.console import out, table
    from kebab_mlflow.metrics import METRICS

    out.print(table("metrics", ["name", "level", "definition"],
                    [(m.name, m.level, m.description) for m in METRICS.values()]))


@app.command()
def presets() -> None:
    """List the pipeline presets and the configuration keys --set accepts."""
    from kebab_mlflow.cli.console import out, table
    from kebab_mlflow.config import DEFAULTS, PRESETS, flatten

    out.print(table("presets", ["preset", "what", "overrides"],
                    [(n, d, ", ".join(f"{k}={v}" for k, v in o.items()) or "—")
                     for n, (d, o) in PRESETS.items()]))
    out.print(table("config keys (--set KEY=VALUE)", ["key", "default"],
                    [(k, repr(v)) for k, v in flatten(DEFAULTS).items()]))


@app.command()
def run(
    golden: Annotated[Path, typer.Option(help="golden-set YAML")] = Path(
        "fixtures/golden_queries.yaml"),
    corpus: Annotated[Path | None, typer.Option(
        help="folder of .md/.txt or BEIR corpus.jsonl[.gz] (default: the golden set's "
             "corpus, else fixtures/kb)")] = None,
    preset: Annotated[str, typer.Option(help="pipeline preset (see `presets`)")]
    = "naive_baseline",
    k: Annotated[int, typer.Option(
        "--k", help="retrieval depth; metrics at cut-offs <= k")] = DEFAULT_K,
    cutoffs: Annotated[str | None, typer.Option(
        help="metric cut-offs, e.g. 1,5,10,100,1000 (each <= --k; default 1,3,5,10 and k)")]
    = None,
    ask: Annotated[bool | None, typer.Option(
        "--ask/--no-ask", help="answer every query / none (default: each query's `ask`)")]
    = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="config override KEY=VALUE")]
    = None,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    run_name: Annotated[str | None, typer.Option(help="MLflow run name")] = None,
    seed: Annotated[int, typer.Option(help="seed recorded with the run")] = 0,
    fail_fast: Annotated[bool, typer.Option(help="stop at the first query that raises")] = False,
    target: Annotated[str | None, typer.Option(
        help="evaluate another system: python:mod:attr, http://..., cmd:TEMPLATE, "
        "or its run file: run:FILE")] = None,
    concurrency: Annotated[int, typer.Option(help="parallel queries for I/O-bound targets")] = 1,
    repeat: Annotated[int, typer.Option(
        help="run every query N times (nondeterministic pipelines): means, flip rates")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
    log_breakdowns: Annotated[bool, typer.Option(
        help="also log every breakdown value as an MLflow metric (always in aggregate.json "
             "and the breakdowns.json table)")] = False,
    traces: Annotated[str, typer.Option(
        help="per-query MLflow traces: none | failures (error, miss, failed contains_all) "
             "| all; never for a private golden set")] = "none",
) -> None:
    """Run the golden set through a pipeline and record the eval as one MLflow run."""
    from kebab_mlflow.app.run import RunOptions, execute
    from kebab_mlflow.cli.console import status
    from kebab_mlflow.config import parse_overrides
    from kebab_mlflow.metrics.scoring import parse_cutoffs

    options = RunOptions(golden=str(golden), corpus=None if corpus is None else str(corpus),
                         preset=preset, k=k,
                         overrides=parse_overrides(set_ or []), experiment=experiment,
                         tracking_uri=tracking_uri, run_name=run_name, seed=seed,
                         fail_fast=fail_fast, target=target, concurrency=concurrency,
                         cutoffs=None if cutoffs is None else tuple(parse_cutoffs(cutoffs)),
                         ask=ask, log_breakdowns=log_breakdowns, traces=traces, repeat=repeat,
                         plots_aside=True)
    _report(execute(options, on_status=status),
            as_json, experiment)


def _report(result: Any, as_json: bool, experiment: str) -> None:
    """The finished run: one JSON object on stdout, or the summary table on stderr."""
    from kebab_mlflow.cli.console import err, metrics_table, print_ui_hint
    from kebab_mlflow.evaluation.report import (
        UPPER_COLUMN,
        headline_values,
        ordered,
        unjudged_line,
        upper_values,
    )

    if as_json:
        typer.echo(json.dumps({"run_id": result.run_id, "experiment_id": result.experiment_id,
                               "status": result.status,
                               "metrics": ordered(result.metrics, result.aggregate.overall),
                               "timings": result.timings}))
        return
    summary = headline_values(result.aggregate)
    err.print(metrics_table("summary", summary, upper_values(result.aggregate, summary)))
    if (unjudged := unjudged_line(result.aggregate)) is not None:
        err.print(f"{unjudged}; {UPPER_COLUMN!r} counts them relevant; `kebab-mlflow judge "
                  f"{result.run_id}` lists them", highlight=False, soft_wrap=True)
    err.print(f"run [bold]{result.run_id}[/] {result.status} in experiment {experiment}")
    print_ui_hint("this run's store", result.ui_command)


@app.command("import-beir")
def import_beir_cmd(
    folder: Annotated[Path, typer.Argument(help="BEIR folder: corpus, queries.jsonl, qrels/")],
    out: Annotated[Path, typer.Option("--out", help="golden-set YAML to write")],
    split: Annotated[str, typer.Option(help="qrels split")] = "test",
    name: Annotated[str | None, typer.Option(help="golden-set name")] = None,
) -> None:
    """Turn a BEIR collection into a golden set with graded expected_doc_ids."""
    from kebab_mlflow.importers.beir import import_beir

    s = import_beir(folder, split, out, name)
    typer.echo(f"wrote {s.written} queries to {s.out} (golden set {s.name!r}); "
               f"{s.skipped_without_judgments} queries without judgments in split {split!r} "
               "left out")
    if s.corpus is not None:
        typer.echo(f"corpus: {s.corpus} (recorded in the golden set)")
        typer.echo(f"run: kebab-mlflow run --golden {s.out} --set chunker.mode=document "
                   "--k 100")


@app.command()
def upload(
    recovery_dir: Annotated[Path, typer.Argument(help="folder printed when a run lost its store")],
    tracking_uri: TrackingUri = None,
) -> None:
    """Publish a recovery folder to MLflow as the run it belongs to."""
    from kebab_mlflow.app.run import upload as upload_folder

    typer.echo(f"published run {upload_folder(recovery_dir, tracking_uri)}")
