"""CLI commands: sweep (registered on kebab_mlflow.cli.app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import TrackingUri, app


@app.command()
def sweep(
    file: Annotated[Path, typer.Argument(help="sweep file (YAML)")] = Path("fixtures/sweep.yaml"),
    jobs: Annotated[int, typer.Option("--jobs", help="rows run in N parallel processes")] = 1,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="PARENT_RUN",
        help="re-run only the rows of this sweep parent run that did not finish")] = None,
    experiment: Annotated[str | None, typer.Option(
        "--experiment", help="MLflow experiment (default: the file's, else kebab-eval)")] = None,
    tracking_uri: TrackingUri = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
) -> None:
    """Run an ablation sweep: a parent run, one child eval run per row, and the
    distinguishing-power gauge (primary vs floors). Exit 1 when a row failed."""
    from kebab_mlflow.cli.console import err, out, table
    from kebab_mlflow.sweep.execution import run_sweep
    from kebab_mlflow.sweep.outputs import GAUGE_COLUMNS, gauge_rows
    from kebab_mlflow.sweep.spec import load_sweep

    if jobs < 1:
        from kebab_mlflow.errors import InputError

        raise InputError(f"--jobs must be >= 1, got {jobs}")
    spec = load_sweep(file)
    result = run_sweep(spec, experiment=experiment, tracking_uri=tracking_uri, jobs=jobs,
                       resume=resume, on_event=lambda s: err.print(f"… {s}", highlight=False))
    if as_json:
        typer.echo(json.dumps(result.as_json(), allow_nan=False))
    else:
        console = out
        console.print(table(f"distinguishing power — {spec.name} "
                            f"(overall: {result.signal_state})", GAUGE_COLUMNS,
                            gauge_rows(result.gauge)))
        rows = [(n, r.role, r.status, r.run_id or "—", r.error or "")
                for n, r in result.rows.items()]
        console.print(table("rows", ["row", "role", "status", "run id", "error"], rows))
        err.print(f"sweep [bold]{result.parent_run_id}[/] {result.status} in "
                  f"{result.wall_s:.1f} s; open the MLflow UI: [cyan]{result.ui_command}[/]")
    if result.failed_rows:
        err.print(f"[bold red]failed rows:[/] {', '.join(result.failed_rows)} — re-run them "
                  f"with `kebab-mlflow sweep {file} --resume {result.parent_run_id}`")
        raise typer.Exit(1)
