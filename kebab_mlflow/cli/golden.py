"""CLI commands on golden-set files: ``golden anchor``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import golden_app


@golden_app.command("anchor")
def anchor(
    golden: Annotated[Path, typer.Argument(help="golden-set YAML file")],
    corpus: Annotated[str | None, typer.Option(
        help="corpus folder or BEIR corpus.jsonl[.gz] (default: the set's corpus:)")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="where to write the anchored set (default: GOLDEN, in place)")] = None,
    preset: Annotated[str, typer.Option(help="preset whose chunker made the chunk ids")] =
        "naive_baseline",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="config override KEY=VALUE of that chunking, e.g. "
        "chunker.max_chars=400 (repeatable)")] = None,
) -> None:
    """Turn each query's expected_chunk_ids into evidence spans (quotes of the chunks' text).

    Every other field and the comments are kept; a query that already has evidence is left
    as it is. Prints what could not be anchored (a chunk id this chunking does not have, or a
    chunk whose text is all in its neighbours). The result is checked before it is written:
    its evidence resolves to the same chunks under this chunking.
    """
    from kebab_mlflow.config import parse_overrides
    from kebab_mlflow.evaluation.anchoring import anchor_golden_set

    report = anchor_golden_set(golden, corpus, out=out, preset=preset,
                               overrides=parse_overrides(set_ or []))
    typer.echo(f"anchored {report.chunks_anchored} chunk(s) of {report.queries_anchored} "
               f"queries into {report.out}"
               + (f"; {report.left_alone} queries already had evidence (left as they were)"
                  if report.left_alone else ""))
    if report.not_anchored:
        typer.echo(f"could not anchor {len(report.not_anchored)} chunk id(s):", err=True)
        for problem in report.not_anchored:
            typer.echo(f"  - {problem}", err=True)
