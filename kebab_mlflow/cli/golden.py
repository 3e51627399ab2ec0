"""CLI commands on golden versions: ``golden diff`` and ``golden merge`` (registered on
kebab_mlflow.cli.app as the ``golden`` group); logic in kebab_mlflow/golden_versions/."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import _App, app

golden_app = _App(help="Golden versions: what changed between two, merge judged items back.",
                  no_args_is_help=True)
app.add_typer(golden_app, name="golden")


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

    def text(q: object) -> str:
        return "" if result.private else f"  {q.query!r}"

    lines += [f"+ {q.id} ({result.b.path}:{q.line}){text(q)}" for q in result.added]
    lines += [f"- {q.id} ({result.a.path}:{q.line}){text(q)}" for q in result.removed]
    for change in result.changed:
        lines.append(f"~ {change.id} ({result.b.path}:{change.line_b})")
        lines += [f"    {aspect}: {what}" for aspect, what in change.details.items()]
    return "\n".join(lines)
