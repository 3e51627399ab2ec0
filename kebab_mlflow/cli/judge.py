"""CLI commands of the judging queue: ``judge`` (registered on kebab_mlflow.cli.app) and
``golden merge`` (on the ``golden`` group of kebab_mlflow/cli/golden.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import Experiment, TrackingUri, app, golden_app
from kebab_mlflow.names import DEFAULT_K


@app.command()
def judge(
    run_refs: Annotated[list[str], typer.Argument(
        metavar="RUN...", help="runs whose unjudged hits to list (e.g. baseline and candidate)")],
    k: Annotated[int, typer.Option("--k", help="hits considered per query: the top k")] = DEFAULT_K,
    out: Annotated[Path, typer.Option("--out", help="the judging file to write")]
    = Path("to_judge.yaml"),
    golden: Annotated[Path | None, typer.Option(
        help="the golden version to judge against (default: the file the first run "
        "recorded)")] = None,
    no_log: Annotated[bool, typer.Option(
        "--no-log", help="do not copy the file to the runs (artifact judging/)")] = False,
    corpus: Annotated[Path | None, typer.Option(
        help="the corpus to read the passages from (default: the run's corpus param, else "
        "the golden set's corpus)")] = None,
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
) -> None:
    """Write every unjudged hit in the top k of RUN... as a YAML judging queue: one item per
    query and document (deduplicated across chunks and runs), each with an empty grade:."""
    from kebab_mlflow.app.judging import judge_runs
    from kebab_mlflow.errors import ConfigError
    from kebab_mlflow.tracking.store import Tracker

    if k < 1:
        raise ConfigError(f"--k must be >= 1, got {k}")
    outcome = judge_runs(Tracker(tracking_uri), experiment, run_refs, k=k, out=out,
                         golden=golden, log_copy=not no_log, corpus=corpus)
    queue = outcome.queue
    queries = len({item.query_id for item in queue.items})
    typer.echo(f"wrote {len(queue.items)} unjudged hits of {queries} queries (top {k} of "
               f"{len(queue.runs)} run(s)) to {out}"
               + (f"; copied to run(s) {', '.join(outcome.logged_to)} as judging/{out.name}"
                  if outcome.logged_to else ""))
    if not queue.golden.private and queue.items and outcome.corpus is None:
        typer.echo("no passage text: the runs' corpus was not found (pass --corpus DIR)")
    typer.echo(f"grade them, then: kebab-mlflow golden merge {queue.golden.path} {out}")


@golden_app.command("merge")
def merge(
    golden: Annotated[Path, typer.Argument(metavar="GOLDEN", help="the golden-set YAML")],
    judged: Annotated[Path, typer.Argument(metavar="JUDGED", help="a graded judging queue")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="write the merged set here (default: GOLDEN itself, in place)")] = None,
) -> None:
    """Add JUDGED's graded items to GOLDEN's expected_doc_ids (comments and layout kept);
    ungraded items are left out; a grade that contradicts an existing judgment is an error
    naming both lines; nothing is written when anything is wrong."""
    from kebab_mlflow.golden_versions.merge import merge_judgments, write_atomically

    outcome = merge_judgments(golden, judged)
    target = out or golden
    write_atomically(target, outcome.text)
    typer.echo(f"wrote {target}: {outcome.added} judgments added, {outcome.already} already "
               f"there, {outcome.ungraded} ungraded items left out; golden set "
               f"{outcome.golden.name} sha256 {outcome.golden.digest[:12]}")
