"""CLI commands that read the store: runs, show, baseline, ui."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app, baseline_app


@app.command()
def runs(
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    limit: Annotated[int, typer.Option(help="how many runs")] = 20,
) -> None:
    """List recent runs with their status, preset and key metrics."""
    from kebab_mlflow.cli.console import out, table
    from kebab_mlflow.tracking.store import BASELINE_TAG, Tracker

    tracker = Tracker(tracking_uri)
    exp = tracker.experiment_id(experiment, create=False)
    baseline = tracker.experiment_tag(exp, BASELINE_TAG)
    rows = []
    for r in tracker.find_runs([exp], max_results=limit):
        m = r.metrics
        rows.append((("* " if r.run_id == baseline else "") + (r.run_name or ""),
                     r.run_id, r.status, r.tags.get("kebab.kind", ""),
                     r.params.get("preset", ""), m.get("hit_at_5"), m.get("mrr"),
                     m.get("ndcg_at_10_doc"), m.get("contains_all"),
                     r.tags.get("kebab.verdict", "")))
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
    from kebab_mlflow.cli.console import out, table
    from kebab_mlflow.tracking.references import resolve_run
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(tracking_uri)
    r = resolve_run(tracker, experiment, run_ref)
    out.print(f"[bold]{r.run_name}[/] {r.run_id} — {r.status}")
    out.print(table("params", ["param", "value"], sorted(r.params.items())))
    out.print(table("metrics", ["metric", "value"], sorted(r.metrics.items())))
    out.print(table("tags", ["tag", "value"], sorted(
        (k, v) for k, v in r.tags.items() if not k.startswith("mlflow.note"))))


@baseline_app.command("set")
def baseline_set(
    run_ref: Annotated[str, typer.Argument(metavar="RUN")],
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Mark RUN as the experiment's baseline (what @baseline resolves to)."""
    from kebab_mlflow.tracking.references import set_baseline
    from kebab_mlflow.tracking.store import Tracker

    r = set_baseline(Tracker(tracking_uri), experiment, run_ref)
    typer.echo(f"baseline of {experiment} is now {r.run_id} ({r.run_name})")


@baseline_app.command("show")
def baseline_show(experiment: Experiment = "kebab-eval", tracking_uri: TrackingUri = None) -> None:
    """Print the baseline run id."""
    from kebab_mlflow.tracking.references import resolve_run
    from kebab_mlflow.tracking.store import Tracker

    r = resolve_run(Tracker(tracking_uri), experiment, "@baseline")
    typer.echo(f"{r.run_id} {r.run_name}")


@app.command()
def ui(
    tracking_uri: TrackingUri = None,
    port: Annotated[int, typer.Option(help="port")] = 5000,
    host: Annotated[str, typer.Option(help="interface")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured store."""
    import os
    import subprocess

    from kebab_mlflow.tracking.store import resolve_uri

    uri = resolve_uri(tracking_uri)
    if not uri.startswith(("sqlite:", "postgresql", "mysql", "file:")):
        typer.echo(f"{uri} is a server: open it in a browser.")
        return
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--port", str(port),
           "--host", host, "--workers", "1"]
    typer.echo(f"MLflow UI on http://{host}:{port} (Ctrl-C to stop)", err=True)
    raise typer.Exit(subprocess.call(cmd, env=env))
