"""CLI command: tune (registered on kebab_mlflow.cli.app).

Exit codes: 0 the best configuration is Better or Same than the baseline on the test set,
1 Regressed or Inconclusive (as compare), 2 bad input (or optuna missing), 130 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import TrackingUri, app


@app.command()
def tune(
    file: Annotated[Path, typer.Argument(help="tune file (YAML)")] = Path("fixtures/tune.yaml"),
    trials: Annotated[int | None, typer.Option(
        "--trials", min=1, help="number of trials (default: the file's)")] = None,
    experiment: Annotated[str | None, typer.Option(
        "--experiment", help="MLflow experiment (default: the file's, else kebab-eval)")] = None,
    tracking_uri: TrackingUri = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
    = False,
) -> None:
    """Search config ranges with a seeded TPE sampler on the TRAIN golden set (each trial a
    child run), then judge the best configuration once on the TEST set against the baseline.
    Exit 1 when it is Regressed (or Inconclusive) there."""
    from kebab_mlflow.app.tune import require_optuna, run_tune
    from kebab_mlflow.cli.compare_table import render_table
    from kebab_mlflow.cli.console import err, out, print_ui_hint, status, table
    from kebab_mlflow.formatting import number
    from kebab_mlflow.sweep.grid import labels
    from kebab_mlflow.sweep.tune_spec import load_tune

    require_optuna()  # before anything else: without the extra, exit 2 with the hint
    spec = load_tune(file).with_trials(trials)
    result = run_tune(spec, experiment=experiment, tracking_uri=tracking_uri,
                      on_event=status)
    if as_json:
        typer.echo(json.dumps(result.as_json(), allow_nan=False))
    else:
        ranked = sorted(result.trials, key=lambda t: -t.value)[:10]
        keys = [p.key for p in spec.space]
        short = labels(keys)  # k1, b: the names grid rows use, so the table fits 80 columns
        out.print(table(f"best trials on train ({spec.objective})",
                        ["trial", *(short[k] for k in keys), spec.objective],
                        [(str(t.number), *(number(t.params[k]) if isinstance(t.params[k], float)
                                           else str(t.params[k]) for k in keys),
                          number(t.value)) for t in ranked]))
        out.print(f"best: trial {result.best.number}, {spec.objective} "
                  f"{number(result.best.value)} on train (baseline "
                  f"{number(result.train_baseline)}); on the held-out test set "
                  f"({spec.n_test} queries) against the baseline:", highlight=False)
        terminal = out.is_terminal
        typer.echo(render_table(result.comparison, width=out.width if terminal else None,
                                wide=not terminal, color=terminal), nl=False)
        err.print(f"tune [bold]{result.parent_run_id}[/] in {result.wall_s:.1f} s")
        print_ui_hint("the tuning's store", result.ui_command)
    if result.comparison.exit_code:
        raise typer.Exit(result.comparison.exit_code)
