"""CLI commands on golden-set files, the ``golden`` group (kebab_mlflow.cli.app's golden_app):
``golden anchor`` (evidence spans from chunk ids), ``golden diff`` (what changed between two
versions; logic in kebab_mlflow/golden_versions/); ``golden merge`` is in cli/judge.py."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_mlflow.cli.app import golden_app

if TYPE_CHECKING:  # loaded by the command itself: --help stays light
    from kebab_mlflow.golden import GoldenQuery


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


class DiffFormat(StrEnum):
    table = "table"
    json = "json"


@golden_app.command("diff")
def diff(
    a: Annotated[Path, typer.Argument(metavar="A", help="the older golden-set YAML")],
    b: Annotated[Path, typer.Argument(metavar="B", help="the newer golden-set YAML")],
    fmt: Annotated[DiffFormat, typer.Option("--format", help="output format")]
    = DiffFormat.table,
) -> None:
    """Queries added, removed and changed from A to B, by aspect (truth, grades, answer,
    type, text, labels); a private set shows ids, never text."""
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.golden_versions.diff import diff_golden

    result = diff_golden(load_golden_set(a), load_golden_set(b))
    if fmt is DiffFormat.json:
        typer.echo(json.dumps(result.as_dict(), ensure_ascii=False, indent=1))
        return
    typer.echo(_diff_text(result))


def _diff_text(result: object) -> str:
    from kebab_mlflow.golden_versions.diff import GoldenDiff

    assert isinstance(result, GoldenDiff)  # noqa: S101 - internal, typed for mypy
    c = result.counts
    head = (f"{result.a.name} sha256 {result.a.digest[:12]} ({len(result.a)} queries) -> "
            f"{result.b.name} sha256 {result.b.digest[:12]} ({len(result.b)} queries)\n"
            f"added {c['added']}, removed {c['removed']}, changed {c['changed']} ("
            + ", ".join(f"{k} {c[k]}" for k in ("truth", "grades", "answer", "type", "text",
                                                 "labels")) + f"), unchanged {c['unchanged']}")
    lines = [head]

    def text(q: GoldenQuery) -> str:
        return "" if result.private else f"  {q.query!r}"

    lines += [f"+ {q.id} ({result.b.path}:{q.line}){text(q)}" for q in result.added]
    lines += [f"- {q.id} ({result.a.path}:{q.line}){text(q)}" for q in result.removed]
    for change in result.changed:
        lines.append(f"~ {change.id} ({result.b.path}:{change.line_b})")
        lines += [f"    {aspect}: {what}" for aspect, what in change.details.items()]
    return "\n".join(lines)
