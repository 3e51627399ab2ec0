"""CLI command: power — how many queries detect a drop, and the MDE at the current size."""

from __future__ import annotations

from typing import Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app


@app.command()
def power(
    run: Annotated[str, typer.Argument(
        metavar="RUN", help="run id (any experiment), run name, @baseline or @latest")],
    metric: Annotated[str | None, typer.Option(
        help="metric to size (default: the one compare decides on)")] = None,
    delta: Annotated[list[float] | None, typer.Option(
        "--delta", help="drop to detect, in the metric's units (repeatable; default 0.01, "
        "0.02, 0.05)")] = None,
    alpha: Annotated[float, typer.Option(help="significance level of the test")] = 0.05,
    paired_with: Annotated[str | None, typer.Option(
        help="a second run of the same golden set: use the real paired deltas' sd")] = None,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """How many queries detect a drop of D at 80% power, and the MDE with this run's queries.

    Reads the run's per-query scores (per_query.jsonl). Normal approximation of the sign-flip
    test, with the variance a loss adds: without --paired-with the sd of the paired deltas is
    taken to be the metric's per-query sd (two systems correlated at 0.5) and a loss to be
    whole queries losing their score; with it, the real paired deltas and a loss made of
    changes their size (docs/compare.md, "How many queries do I need?").
    """
    from kebab_mlflow.cli.console import out
    from kebab_mlflow.comparison.loading import load_side
    from kebab_mlflow.comparison.sizing import power_report
    from kebab_mlflow.errors import InputError, Problem
    from kebab_mlflow.formatting import number
    from kebab_mlflow.tracking.store import Tracker

    if not 0 < alpha < 1:
        raise InputError("bad option", [Problem(f"--alpha must be in (0, 1), got {alpha}",
                                                "--alpha")])
    tracker = Tracker(tracking_uri)
    side = load_side(tracker, experiment, run, "run")
    other = load_side(tracker, experiment, paired_with, "--paired-with") if paired_with else None
    r = power_report(side, metric, tuple(delta or ()), alpha, other)
    source = (f"paired deltas vs {other.name}" if other else
              "this run's per-query scores (assumes two systems correlate at 0.5)")
    losses = ("changes the size of those between the two runs" if other else
              "whole queries losing their score")
    lines = [f"{r.metric} on run {side.name} ({side.run_id[:8]}): {r.n} queries, sd "
             f"{number(r.sd)} from {source}",
             f"a loss modelled as {losses}: per-query loss size {number(r.loss_size)}",
             f"MDE at {r.power:.0%} power, alpha {alpha:g}, with these {r.n} queries: "
             f"{number(r.mde)}"]
    lines += [f"to detect a drop of {number(d)}: {n:,} queries" for d, n in r.needed]
    for line in lines:
        out.print(line, highlight=False, soft_wrap=True)
