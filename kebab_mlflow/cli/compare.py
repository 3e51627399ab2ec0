"""CLI command: compare (registered on kebab_mlflow.cli.app).

Exit codes: 0 Better or Same, 1 Regressed or Inconclusive (``--margin`` not shown), 2 bad
input, an incomparable pair, or output that cannot be written (a broken pipe, an unwritable
``--out`` or ``$GITHUB_STEP_SUMMARY``: never 1, which a CI step reads as a regression).
Nothing heavy is imported at module level, so ``kebab-mlflow compare --help`` never imports
mlflow.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app
from kebab_mlflow.golden import SliceKey
from kebab_mlflow.stats.alternative import Alternative

if TYPE_CHECKING:
    from kebab_mlflow.comparison.records import CompareOptions, Comparison, RunSide
    from kebab_mlflow.tracking.store import Tracker


class Format(StrEnum):
    table = "table"
    md = "md"
    json = "json"
    junit = "junit"
    pr_comment = "pr-comment"


FORMAT_HELP = "output format (pr-comment: markdown for a pull request; `ci comment` posts it)"
UI_URL_HELP = ("pr-comment: link both runs and their traces in this MLflow UI (default: the "
               "tracking URI when it is a server)")


RescoreOpt = Annotated[bool, typer.Option(
    "--rescore", help="runs of different golden versions: rescore the baseline in memory under "
    "the candidate's golden set (nothing logged for the baseline)")]
GoldenOpt = Annotated[Path | None, typer.Option(
    help="with --rescore or --by: the candidate's golden-set file (default: the path its run "
    "recorded; a private set records none)")]
PrimaryOpt = Annotated[str | None, typer.Option(
    help="the metric that decides (default: the golden set's primary_metric, else "
    "ndcg_at_10_doc for doc-level truth, mrr for chunk-level, contains_all for "
    "answer-only sets)")]
ByOpt = Annotated[SliceKey | None, typer.Option(
    "--by", help="also compare per slice of the queries by this golden-set field (Holm across "
    "the slices; a regressed slice is Regressed, exit 1)")]


class Unjudged(StrEnum):
    gate = "gate"
    report = "report"
    off = "off"


UnjudgedOpt = Annotated[Unjudged, typer.Option(
    "--unjudged",
    help="bounds for unjudged hits (both runs rescored with the unjudged documents in their "
    "top 10 counted relevant): report them (default), gate (Inconclusive (unjudged), exit 1, "
    "when the verdict flips within them) or off")]


def _decided(base_side: RunSide, cand_side: RunSide, options: CompareOptions, rescore: bool,
             golden: Path | None, unjudged: Unjudged, by: SliceKey | None = None
             ) -> Comparison:
    """The comparison: --rescore's baseline (comparison/rescoring.py), then the verdict, the
    bounds for unjudged hits (comparison/unjudged.py), then the slices (comparison/slices.py)."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.cli.console import status
    from kebab_mlflow.comparison.rescoring import (
        candidate_golden,
        candidate_golden_file,
        with_rescored_baseline,
    )
    from kebab_mlflow.comparison.slices import with_slices
    from kebab_mlflow.comparison.unjudged import UnjudgedMode, with_unjudged_bounds
    from kebab_mlflow.errors import InputError

    if rescore:
        status("rescoring the baseline under the candidate's golden set (--rescore)",
               terminal_only=True)
        base_side = with_rescored_baseline(base_side, cand_side, golden)
    result = cmp.compare_runs(base_side, cand_side, options)
    # --by needs the golden set's labels: a run that cannot name its file is refused (exit 2)
    golden_set = candidate_golden(cand_side, golden) if by is not None else None
    if unjudged is not Unjudged.off and result.level in ("doc", "chunk+doc"):
        try:
            # streamed a chunk at a time unless --by loaded it whole; what the bounds cannot
            # read (the golden file gone, changed, or failing as streamed) is a report's note
            bounds_golden = golden_set or candidate_golden_file(cand_side, golden)
            # the longest step of a large compare (100k queries: ~30 s of ~50): say what it is
            status("bounds for unjudged hits: both runs rescored with the documents nobody "
                   "judged counted relevant (--unjudged off skips this)", terminal_only=True)
            result = with_unjudged_bounds(result, base_side, cand_side, bounds_golden, options,
                                          UnjudgedMode(unjudged.value))
        except InputError as exc:
            if unjudged is Unjudged.gate:
                raise
            result = replace(result, notes=(*result.notes, f"no bounds for unjudged hits: {exc}"))
    if by is not None and golden_set is not None:
        result = with_slices(result, base_side, cand_side, golden_set, by)
    return result


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(
        metavar="BASELINE", help="run id (any experiment), run name, @baseline or @latest")],
    candidate: Annotated[str, typer.Argument(
        metavar="CANDIDATE", help="run id (any experiment), run name, @baseline or @latest")],
    primary: PrimaryOpt = None,
    gate: Annotated[list[str] | None, typer.Option(
        "--gate", help="a further gated metric, sharing Holm's correction with the primary "
        "(repeatable)")] = None,
    alpha: Annotated[float, typer.Option(help="significance level after Holm's correction")]
    = 0.05,
    alternative: Annotated[Alternative, typer.Option(
        help="two-sided: p < alpha and a worse mean (one-sided alpha/2); less: one-sided p < "
        "alpha on the worse side, never Better")] = Alternative.TWO_SIDED,
    margin: Annotated[float | None, typer.Option(
        help="non-inferiority margin in the metric's units: Same also needs every gated CI's "
        "worse bound within it, else Inconclusive (exit 1)")] = None,
    max_regressions: Annotated[int | None, typer.Option(
        help="Regressed (exit 1) when more than N judged queries go from a hit to a miss")]
    = None,
    abstention_gate: Annotated[bool, typer.Option(
        help="gate abstention_accuracy (Holm) when both runs have abstention cases")] = True,
    count_flaky: Annotated[bool, typer.Option(help="count flaky queries (run --repeat) in "
                                               "--max-regressions and the small set")] = False,
    strict: Annotated[bool, typer.Option(
        help="refuse (exit 2) doc-level fallback, commit skew and dirty trees")] = False,
    allow_golden_mismatch: Annotated[bool, typer.Option(
        help="compare the shared query ids of different golden sets")] = False,
    rescore: RescoreOpt = False, golden: GoldenOpt = None, unjudged: UnjudgedOpt = Unjudged.report,
    by: ByOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
    ui_url: Annotated[str | None, typer.Option("--ui-url", help=UI_URL_HELP)] = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="write the output to FILE instead of stdout")] = None,
    wide: Annotated[bool, typer.Option(
        help="table: full run ids, every column and every changed query (the default when "
        "stdout is not a terminal)")] = False,
    no_log: Annotated[bool, typer.Option(
        "--no-log", help="do not record the verdict on the candidate run")] = False,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap and randomization test")] = 0,
    resamples: Annotated[int, typer.Option(
        help="bootstrap resamples and sign flips (at most 1,000,000)")] = 10_000,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Compare CANDIDATE with BASELINE: per-query diff, paired statistics and one verdict.

    Exit 0 = Better or Same, 1 = Regressed or Inconclusive, 2 = bad input, runs that cannot be
    compared, or output that cannot be written."""
    from kebab_mlflow import comparison as cmp

    options = cmp.CompareOptions(
        gates=tuple(gate or ()), primary=primary, alpha=alpha, resamples=resamples, seed=seed,
        strict=strict, allow_golden_mismatch=allow_golden_mismatch, margin=margin,
        max_regressions=max_regressions, abstention_gate=abstention_gate,
        alternative=alternative, count_flaky=count_flaky)
    _execute(tracking_uri, experiment, (baseline, candidate), options,
             (fmt, wide, out_file, ui_url), no_log, (rescore, golden, unjudged, by))


def _execute(tracking_uri: str | None, experiment: str, refs: tuple[str, str],
             options: CompareOptions, output: tuple[Format, bool, Path | None, str | None],
             no_log: bool, versions: tuple[bool, Path | None, Unjudged, SliceKey | None]
             ) -> None:
    """``versions``: --rescore, --golden, --unjudged (golden versions, issue 30), --by."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.cli.console import status
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(tracking_uri)

    fmt, wide, out_file, ui_url = output
    status(f"reading runs {refs[0]} and {refs[1]}: their per-query scores", terminal_only=True)
    base_side, cand_side = cmp.load_pair(tracker, experiment, *refs, reads=options)
    result = _decided(base_side, cand_side, options, *versions)
    _emit(_pr_comment(tracker, result, base_side, cand_side, ui_url)
          if fmt is Format.pr_comment
          else _render(result, fmt, wide, to_file=out_file is not None), out_file)
    _step_summary(result)
    if not no_log:
        from kebab_mlflow.app.compare import record

        record(tracker, result)
    _finish(result, no_log)


def _render(result: Comparison, fmt: Format, wide: bool, to_file: bool) -> str | Iterator[str]:
    """The output as text, or as pieces (json: written as rendered, never whole in memory)."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.cli.compare_table import render_table
    from kebab_mlflow.cli.console import out

    if fmt is Format.json:
        return itertools.chain(cmp.iter_dumps(result), ("\n",))
    if fmt is Format.md:
        return cmp.to_markdown(result)
    if fmt is Format.junit:
        return cmp.to_junit(result)
    terminal = out.is_terminal and not to_file
    # a terminal gets its own width (80 columns readable); files and CI logs are never cut
    return render_table(result, width=out.width if terminal else None,
                        wide=wide or not terminal, color=terminal)


def _pr_comment(tracker: Tracker, result: Comparison, baseline: RunSide, candidate: RunSide,
                ui_url: str | None) -> str:
    """The pull-request comment, with links to both runs when the UI's address is known:
    ``--ui-url``, else a server tracking URI (without credentials)."""
    from kebab_mlflow import vocabulary as vocab
    from kebab_mlflow.comparison.pr_comment import run_link, to_pr_comment
    from kebab_mlflow.tracking.store import describe_uri

    base = ui_url or (describe_uri(tracker.uri)
                      if tracker.uri.startswith(("http://", "https://")) else None)
    links = None
    if base and baseline.experiment and candidate.experiment:  # both read from the store
        b, c = (run_link(base, tracker.experiment_id(name, create=False),
                         side.run_id, bool(side.tags.get(vocab.TRACES)))
                for side, name in ((baseline, baseline.experiment),
                                   (candidate, candidate.experiment)))
        links = (b, c)
    return to_pr_comment(result, baseline, candidate, links=links)


def _emit(text: str | Iterable[str], out_file: Path | None) -> None:
    """Write the result (a text or its pieces); a failure is exit 2 (OutputError), never 1."""
    import sys

    from kebab_mlflow.errors import OutputError

    pieces = (text,) if isinstance(text, str) else text
    if out_file is not None:
        try:
            out_file.parent.mkdir(parents=True, exist_ok=True)
            with out_file.open("w") as f:
                f.writelines(pieces)
        except OSError as exc:
            raise OutputError(f"cannot write --out {out_file}: {exc.strerror or exc}") from None
        return
    try:
        sys.stdout.writelines(pieces)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`| head`): silence the interpreter's final flush too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise OutputError("stdout was closed before the comparison was written "
                          "(broken pipe)") from None


def _step_summary(result: Comparison) -> None:
    """On GitHub Actions, append the markdown report to the job's step summary."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.errors import OutputError

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(cmp.to_markdown(result) + "\n")
    except OSError as exc:
        raise OutputError(f"cannot append to $GITHUB_STEP_SUMMARY {path}: "
                          f"{exc.strerror or exc}") from None


def _finish(result: Comparison, no_log: bool) -> None:
    from kebab_mlflow.cli.console import err

    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False, markup=True)
    err.print(f"[bold]{result.verdict}[/] (exit {result.exit_code})"
              + ("" if no_log else f"; recorded on run {result.candidate['run_id']}"),
              highlight=False, markup=True, soft_wrap=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
