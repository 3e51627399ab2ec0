"""Write docs/cli.md's "Every command and option" section from the CLI itself: each command's
``--help`` at 80 columns, in the app's own order, groups' subcommands after their group.
``tests/test_docs.py`` fails when the page differs from what this prints, so a new option
cannot leave the page behind.

    python scripts/cli_reference.py          # rewrite the section in place
    python scripts/cli_reference.py --check  # exit 1 when the page is out of date
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "cli.md"
HEADING = "## Every command and option"
INTRO = ("What each command's `--help` prints (`kebab-mlflow COMMAND --help`, at 80 columns), "
         "so every\noption and its default is on this page. "
         "`python scripts/cli_reference.py` writes this section.\n")
WIDTH = 80


def _commands(group: Any, ctx: Any, prefix: str) -> Iterator[tuple[str, Any, Any]]:
    """(command path, command, its context) of every visible leaf command. Typer carries its
    own copy of click, so its objects are used through their methods, not click's types."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}".strip()
        sub = command.context_class(command, info_name=name, parent=ctx,
                                    terminal_width=WIDTH, max_content_width=WIDTH)
        if hasattr(command, "list_commands"):
            yield from _commands(command, sub, path)
        else:
            yield path, command, sub


def section() -> str:
    os.environ["COLUMNS"] = str(WIDTH)
    from kebab_mlflow.cli.app import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="kebab-mlflow", terminal_width=WIDTH,
                             max_content_width=WIDTH)
    parts = [f"{HEADING}\n\n{INTRO}"]
    for path, command, sub in _commands(root, ctx, ""):
        parts.append(f"\n### `{path}`\n\n```text\n{command.get_help(sub).rstrip()}\n```\n")
    return "".join(parts)


def page_with_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    head = text.split(HEADING, 1)[0]
    return head + section()


def main() -> int:
    wanted = page_with_section()
    if "--check" in sys.argv[1:]:
        if PAGE.read_text(encoding="utf-8") != wanted:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/cli_reference.py")
            return 1
        return 0
    PAGE.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
