"""Terminal output: a stderr console, progress bars and tables (rich comes with typer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

err = Console(stderr=True)
out = Console()


class RateColumn(TextColumn):
    def __init__(self) -> None:
        super().__init__("")

    def render(self, task):  # noqa: D401 - rich API
        from rich.text import Text

        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} q/s" if speed else "… q/s", style="cyan")


class QueryProgress:
    """The runner's progress hook: a rich bar on stderr with queries/s and ETA."""

    def __init__(self, label: str = "queries", enabled: bool = True):
        self.progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                 RateColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=err, disable=not enabled,
                                 transient=False)

    def start(self, total: int):
        self.progress.start()
        return self.progress.add_task("run", total=total)

    def advance(self, task, n: int) -> None:
        self.progress.advance(task, n)

    def stop(self) -> None:
        self.progress.stop()


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[("—" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))
                    for v in r])
    return t


def metrics_table(title: str, metrics: Mapping[str, float | None]) -> Table:
    return table(title, ["metric", "value"], list(metrics.items()))
