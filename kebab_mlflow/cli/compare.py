"""CLI command: compare (registered on kebab_mlflow.cli.app).

Exit codes: 0 Better or Same, 1 Regressed, 2 bad input or an incomparable pair. Nothing heavy
is imported at module level, so ``kebab-mlflow compare --help`` never imports mlflow.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app
from kebab_mlflow.formatting import number


class Format(StrEnum):
    table = "table"
    md = "md"
    json = "json"


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(
        metavar="BASELINE", help="run id, run name, @baseline or @latest")],
    candidate: Annotated[str, typer.Argument(
        metavar="CANDIDATE", help="run id, run name, @baseline or @latest")],
    gate: Annotated[list[str] | None, typer.Option(
        "--gate", help="gated metric (repeatable; default hit_at_5, mrr, precision_at_5_chunk, "
        "recall_at_10_doc, contains_all)")] = None,
    alpha: Annotated[float, typer.Option(help="significance level after Holm's correction")]
    = 0.05,
    strict: Annotated[bool, typer.Option(
        help="refuse (exit 2) doc-level fallback, commit skew and dirty trees")] = False,
    allow_golden_mismatch: Annotated[bool, typer.Option(
        help="compare the shared query ids of different golden sets")] = False,
    fmt: Annotated[Format, typer.Option("--format", help="output format")] = Format.table,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="write the output to FILE instead of stdout")] = None,
    no_log: Annotated[bool, typer.Option(
        "--no-log", help="do not record the verdict on the candidate run")] = False,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap and randomization test")] = 0,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples and sign flips")] = 10_000,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Compare CANDIDATE with BASELINE: per-query diff, paired statistics and one verdict.

    Exit 0 = Better or Same, 1 = Regressed, 2 = bad input or runs that cannot be compared.
    """
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.cli.console import err
    from kebab_mlflow.tracking.store import Tracker

    options = cmp.CompareOptions(gates=tuple(gate) if gate else None, alpha=alpha,
                                 resamples=resamples, seed=seed, strict=strict,
                                 allow_golden_mismatch=allow_golden_mismatch)
    tracker = Tracker(tracking_uri)
    base_side, cand_side = cmp.load_pair(tracker, experiment, baseline, candidate)
    result = cmp.compare_runs(base_side, cand_side, options)
    if fmt is Format.json:
        text = cmp.dumps(result) + "\n"
    elif fmt is Format.md:
        text = cmp.to_markdown(result)
    else:
        text = _table(result, to_file=out_file is not None)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(text)
    elif text:
        typer.echo(text, nl=False)
    if not no_log:
        cmp.record(tracker, result)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False, markup=True)
    err.print(f"[bold]{result.verdict}[/] (exit {result.exit_code})"
              + ("" if no_log else f"; recorded on run {result.candidate['run_id']}"),
              highlight=False, markup=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _table(result, to_file: bool) -> str:
    """The terminal rendering; printed directly (returns "") unless it goes to a file."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.cli.console import out

    # CI logs and files are not 80 columns wide: a fixed 120 unless this is a real terminal
    buffer = io.StringIO()
    console = (Console(file=buffer, width=120, color_system=None) if to_file
               else out if out.is_terminal else Console(width=120))
    style = {"Better": "green", "Same": "cyan", "Regressed": "bold red"}[result.verdict]
    for note in result.notes:
        console.print(f"[bold yellow]{note}[/]", highlight=False)
    console.print(f"[{style}]{cmp.headline(result)}[/]", highlight=False)
    for reason in result.reasons:
        console.print(f"  - {reason}", highlight=False)
    metrics = Table(title="gated metrics (delta = candidate − baseline)", box=box.SIMPLE_HEAD,
                    pad_edge=False)
    header = ("metric", "n", "base", "cand", "delta", "95% CI", "p", "p Holm", "significant")
    cells = [(m.name, str(m.n), number(m.baseline, 3), number(m.candidate, 3),
              number(m.delta, 3, signed=True),
              f"[{number(m.ci_low, 3, signed=True)}, {number(m.ci_high, 3, signed=True)}]",
              number(m.p_value),
              number(m.p_holm), m.significant or "—") for m in result.metrics]
    for i, col in enumerate(header):
        metrics.add_column(col, no_wrap=True, justify="left" if i in (0, 8) else "right",
                           min_width=max(len(r[i]) for r in [header, *cells]))
    for row in cells:
        metrics.add_row(*row)
    console.print(metrics)
    counts = ", ".join(f"{k}: {result.counts.get(k, 0)}" for k in cmp.KINDS)
    shown = [q for q in cmp.ordered(result.queries)
             if q.kind != "Draw" or q.contains_all or q.refusal]
    if shown:
        queries = Table(title=f"queries ({counts}; first-hit rank at {result.level} level)",
                        box=box.SIMPLE_HEAD, pad_edge=False)
        header = ("kind", "id", "rank", "contains_all", "refusal", "top Δ")
        cells = [(q.kind, q.id, f"{_r(q.baseline_rank)}→{_r(q.candidate_rank)}",
                  q.contains_all or "", q.refusal or "", number(q.top_score_delta, 2, signed=True))
                 for q in shown[:20]]
        for i, col in enumerate(header):
            queries.add_column(col, no_wrap=True,
                               min_width=max(len(r[i]) for r in [header, *cells]))
        queries.add_column("query", no_wrap=True, overflow="ellipsis", max_width=60)
        for q, row in zip(shown, cells, strict=False):
            queries.add_row(*row, "(private)" if result.private else (q.query or ""))
        console.print(queries)
        if len(shown) > 20:
            console.print(f"… and {len(shown) - 20} more (--format md or json lists them)")
    else:
        console.print(f"queries: {counts}")
    console.print(f"rule: {result.rule}", highlight=False)
    if to_file:
        return buffer.getvalue()
    return ""


def _r(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)
