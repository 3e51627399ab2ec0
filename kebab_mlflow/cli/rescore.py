"""CLI command: rescore (registered on kebab_mlflow.cli.app) — a stored run scored against
another golden version without calling its pipeline (kebab_mlflow/app/rescore.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app


@app.command()
def rescore(
    run_ref: Annotated[str, typer.Argument(
        metavar="RUN", help="run id (any experiment), run name, @baseline or @latest")],
    golden: Annotated[Path, typer.Option(help="the golden version to score the run against")],
    intersect: Annotated[bool, typer.Option(
        help="score only the queries both the run and the golden set have (default: a "
        "golden query the run never saw is an error)")] = False,
    run_name: Annotated[str | None, typer.Option(help="name of the derived run")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Score RUN's recorded hits and answers against GOLDEN and log a derived run (tag
    kebab.kind = rescore, kebab.rescored_from = RUN) in RUN's experiment."""
    from kebab_mlflow.app.rescore import rescore_run
    from kebab_mlflow.cli.console import err, metrics_table, print_ui_hint, status
    from kebab_mlflow.evaluation.report import headline, ordered
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.tracking.store import Tracker

    status(f"reading the golden set {golden}")
    golden_set = load_golden_set(golden)
    tracker = Tracker(tracking_uri)
    logged = rescore_run(tracker, experiment, run_ref, golden_set, intersect=intersect,
                         run_name=run_name, on_status=status)
    rescored, result = logged.rescored, logged.rescored.result
    if as_json:
        typer.echo(json.dumps({"run_id": logged.run_id, "rescored_from": rescored.source_run_id,
                               "golden_sha256": golden_set.digest,
                               "n_queries": len(result.golden),
                               "unseen_queries": len(rescored.dropped_new),
                               "removed_queries": len(rescored.dropped_old),
                               "metrics": ordered(result.metrics, result.aggregate.overall)}))
        return
    for count, what in ((len(rescored.dropped_new), "golden queries the run never saw were "
                         "left out (--intersect)"),
                        (len(rescored.dropped_old), "queries of the run are not in the golden "
                         "set and were left out")):
        if count:
            err.print(f"[yellow]note:[/] {count} {what}", highlight=False)
    overall = result.aggregate.overall
    err.print(metrics_table("summary", {n: overall[n] for n in headline(overall)}))
    err.print(f"run [bold]{logged.run_id}[/] FINISHED in experiment {logged.experiment}: "
              f"{rescored.source_run_id} rescored on {golden_set.name} "
              f"sha256 {golden_set.digest[:12]} ({len(result.golden)} queries)")
    print_ui_hint("this run's store", tracker.ui_command(
        tracker.experiment_id(logged.experiment, create=False)))
