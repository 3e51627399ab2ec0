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
    """Average items per second since the start (steadier than rich's windowed speed)."""

    def __init__(self, unit: str) -> None:
        super().__init__("")
        self.unit = unit

    def render(self, task):  # noqa: D401 - rich API
        from rich.text import Text

        elapsed = task.finished_time if task.finished else task.elapsed
        speed = task.completed / elapsed if elapsed and task.completed else None
        return Text(f"{speed:,.1f} {self.unit}/s" if speed else f"… {self.unit}/s", style="cyan")


class ProgressBar:
    """A rich bar on stderr with the rate and ETA; the runner and the embedder call
    ``start(total)``, ``advance(task, n)``, ``stop()``."""

    def __init__(self, label: str = "queries", unit: str = "q", enabled: bool = True):
        self.progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                 RateColumn(unit), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=err, disable=not enabled,
                                 transient=False)

    def start(self, total: int):
        self.progress.start()
        return self.progress.add_task("work", total=total)

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
