"""CLI command for TREC collections: import-trec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import app


@app.command("import-trec")
def import_trec_cmd(
    qrels: Annotated[Path, typer.Argument(help="TREC qrels: qid iteration docno relevance")],
    topics: Annotated[Path, typer.Argument(
        help="TREC topics (<top>/<num>/<title> SGML, <topic number=…> XML) or qid<TAB>text")],
    out: Annotated[Path, typer.Option("--out", help="golden-set YAML to write")],
    field: Annotated[str, typer.Option(help="query text: title or desc")] = "title",
    name: Annotated[str | None, typer.Option(help="golden-set name")] = None,
) -> None:
    """Turn TREC qrels and topics into a golden set (doc-level, graded)."""
    from kebab_mlflow.importers.trec import import_trec

    s = import_trec(qrels, topics, out, name, field)
    typer.echo(f"wrote {s.written} queries to {s.out} ({s.topics_format} topics); "
               f"{s.topics_without_judgments} topics without a positive judgment left out; "
               f"{s.judged_topics_not_in_topics} judged topics not in the topics file")
