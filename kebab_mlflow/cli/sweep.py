"""CLI commands: sweep (registered on kebab_mlflow.cli.app)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_mlflow.cli.app import TrackingUri, app

if TYPE_CHECKING:  # the command imports them: --help stays light
    from rich.box import Box
    from rich.table import Table

    from kebab_mlflow.sweep.spec import SweepResult, SweepSpec


@app.command()
def sweep(
    file: Annotated[Path, typer.Argument(help="sweep file (YAML)")] = Path("fixtures/sweep.yaml"),
    jobs: Annotated[int, typer.Option("--jobs", help="rows run in N parallel processes")] = 1,
    executor: Annotated[str | None, typer.Option(
        "--executor", metavar="local|dask|dask:ADDRESS",
        help="where rows run: forked local processes (default), a Dask LocalCluster of --jobs "
             "workers, or the Dask scheduler at ADDRESS (the file's executor: otherwise)")]
    = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="PARENT_RUN",
        help="re-run only the rows of this sweep parent run that did not finish")] = None,
    experiment: Annotated[str | None, typer.Option(
        "--experiment", help="MLflow experiment (default: the file's, else kebab-eval)")] = None,
    tracking_uri: TrackingUri = None,
    wide: Annotated[bool, typer.Option("--wide", help="the gauge with every CI (wider than 80 "
                                                      "columns)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
) -> None:
    """Run an ablation sweep: a parent run, one child eval run per row, and the
    distinguishing-power gauge (primary vs floors). Exit 1 when a row failed."""
    from kebab_mlflow.app.sweep import run_sweep
    from kebab_mlflow.cli.console import err, print_ui_hint, status
    from kebab_mlflow.errors import InputError
    from kebab_mlflow.sweep.executors import check_executor
    from kebab_mlflow.sweep.spec import load_sweep

    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    if executor is not None:
        check_executor(executor)
    spec = load_sweep(file)
    result = run_sweep(spec, experiment=experiment, tracking_uri=tracking_uri, jobs=jobs,
                       resume=resume, executor=executor,
                       on_event=status)
    if as_json:
        typer.echo(json.dumps(result.as_json(), allow_nan=False))
    else:
        _print_result(spec, result, wide)
        err.print(f"sweep [bold]{result.parent_run_id}[/] {result.status} in "
                  f"{result.wall_s:.1f} s")
        print_ui_hint("the sweep's store", result.ui_command)
    if result.failed_rows:
        err.print(f"[bold red]failed rows:[/] {', '.join(result.failed_rows)} — re-run them "
                  f"with `kebab-mlflow sweep {file} --resume {result.parent_run_id}`")
        raise typer.Exit(1)


def _print_result(spec: SweepSpec, result: SweepResult, wide: bool) -> None:
    """The gauge (one narrow table per metric at 80 columns, or one --wide table) and the rows
    with their headline metrics; on a pipe or file nothing is cut to a terminal's width."""
    from rich import box
    from rich.console import Console

    from kebab_mlflow.cli.console import out
    from kebab_mlflow.sweep.outputs import (
        GAUGE_COLUMNS,
        NARROW_GAUGE_COLUMNS,
        gauge_rows,
        gauge_rows_narrow,
        primary_interval,
    )

    buffer = io.StringIO()
    console = out if out.is_terminal else Console(file=buffer, width=1000)
    tables = ([_table(f"distinguishing power — {spec.name} (overall: {result.signal_state})",
                      GAUGE_COLUMNS, gauge_rows(result.gauge), box.SIMPLE)] if wide else
              [_table(f"{metric}: {block.signal_state} (primary {spec.primary} "
                      f"{primary_interval(block)})",
                      NARROW_GAUGE_COLUMNS, gauge_rows_narrow(block), box.SIMPLE)
               for metric, block in result.gauge.items()])
    if not wide:
        console.print(f"distinguishing power — {spec.name}: overall [bold]"
                      f"{result.signal_state}[/]")
    for t in tables:
        console.print(t)
        console.print()
    console.print(_leaderboard_table(spec, result, wide, box.SIMPLE))
    console.print()
    for name, error in result.failed_rows.items():
        console.print(f"[red]{name}[/]: {error}", markup=True, highlight=False)
    if console is not out:  # rich pads every line to the table's width
        typer.echo("\n".join(line.rstrip() for line in buffer.getvalue().splitlines()))


def _leaderboard_table(spec: SweepSpec, result: SweepResult, wide: bool, style: Box) -> Table:
    """The rows best first on the first gauge metric: rank, its bootstrap interval, the tie
    group against the best contender, then the gauged metrics (--wide: the run ids and the
    headline metrics too)."""
    from kebab_mlflow.formatting import number
    from kebab_mlflow.sweep.outputs import (
        headline_metrics,
        leaderboard_order,
        leaderboard_ranks,
        rank_interval,
        tie_group,
    )

    ranks = leaderboard_ranks(spec, result)
    best = next((r.mean for r in ranks.values() if r.best), None)
    metrics = headline_metrics(spec, result.rows)
    shown = metrics if wide else metrics[:len(spec.gauge_metrics)]
    rows: list[tuple[str, ...]] = []
    for rank, name in enumerate(leaderboard_order(ranks), 1):
        r, place = result.rows[name], ranks[name]
        run = ("reused " if r.reused else "") + (r.run_id[:8] if r.run_id else "FAILED")
        rows.append((name, str(rank), rank_interval(place), tie_group(place, best), r.role,
                     *([run] if wide else []), *[number(r.overall.get(m)) for m in shown]))
    title = (f"leaderboard on {spec.gauge_metrics[0]} (tied: not significantly different "
             "from the best; rank CI: 95% over query resamples)")
    return _table(title, ["row", "#", "rank CI", "vs best", "role", *(["run"] if wide else []),
                          *shown], rows, style)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]],
           style: Box) -> Table:
    from rich.table import Table

    t = Table(title=title, box=style, pad_edge=False, title_justify="left", show_edge=False,
              collapse_padding=True)
    for i, c in enumerate(columns):  # names may fold; numbers and CIs never break
        t.add_column(c, overflow="fold", no_wrap=i > 0)
    for r in rows:
        t.add_row(*[str(v) for v in r])
    return t
