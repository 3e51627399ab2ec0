"""Terminal output: a stderr console, progress bars and tables (rich comes with typer)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

if TYPE_CHECKING:
    from rich.progress import Task
    from rich.text import Text

from kebab_mlflow.formatting import number
from kebab_mlflow.redaction import install_log_redaction, redacted

err = Console(stderr=True)
out = Console()


def status(text: str, terminal_only: bool = False) -> None:
    """One step of a long command, on stderr ("… loading or building the index"); its text
    as it is (paths may hold brackets, which rich would read as markup) and one line however
    long (the terminal wraps it; a path stays whole to copy). ``terminal_only``: not in a log
    (compare's stderr in CI holds its warnings and verdict line, which scripts read)."""
    if not terminal_only or err.is_terminal:
        err.print(f"… {text}", highlight=False, markup=False, soft_wrap=True)


class RateColumn(TextColumn):
    """Average items per second since the start (steadier than rich's windowed speed)."""

    def __init__(self, unit: str) -> None:
        super().__init__("")
        self.unit = unit

    def render(self, task: Task) -> Text:  # noqa: D401 - rich API
        from rich.text import Text

        elapsed = task.finished_time if task.finished else task.elapsed
        speed = task.completed / elapsed if elapsed and task.completed else None
        return Text(f"{speed:,.1f} {self.unit}/s" if speed else f"… {self.unit}/s", style="cyan")


class ProgressBar:
    """A rich bar on stderr with the rate and ETA: ``start(total)``, ``advance(task, n)``,
    ``stop()``."""

    def __init__(self, label: str = "queries", unit: str = "q", enabled: bool = True):
        self.progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                 RateColumn(unit), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=err, disable=not enabled,
                                 transient=False)

    def start(self, total: int | None) -> TaskID:
        self.progress.start()
        return self.progress.add_task("work", total=total)

    def advance(self, task: TaskID, n: int) -> None:
        self.progress.advance(task, n)

    def stop(self) -> None:
        self.progress.stop()


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[number(v)
                    for v in r])
    return t


def metrics_table(title: str, metrics: Mapping[str, float | None],
                  upper: Mapping[str, float | None] | None = None) -> Table:
    """``metric | value``; with ``upper`` holding a value for some metric, a third column:
    its bound with the unjudged hits counted relevant (evaluation/report.UPPER_COLUMN),
    blank for the metrics without one."""
    from kebab_mlflow.evaluation.report import UPPER_COLUMN

    bound = upper or {}
    if not any(bound.get(n) is not None for n in metrics):
        return table(title, ["metric", "value"], list(metrics.items()))
    return table(title, ["metric", "value", UPPER_COLUMN],
                 [(n, v, "" if bound.get(n) is None else bound[n]) for n, v in metrics.items()])


def print_ui_hint(what: str, ui_command: str) -> None:
    """The end-of-run hint: how to open the MLflow UI on the runs (Tracker.ui_command's lines,
    the command, then the URL), indented; long URIs wrap instead of being cut."""
    from rich.text import Text

    err.print(f"open the MLflow UI on {what} (no venv to activate):")
    for line in ui_command.splitlines():  # Text: a "[" in a path is not markup
        err.print(Text(f"  {line}", style="cyan"), soft_wrap=True)


class _BarTask:
    def __init__(self, bar: ProgressBar, task: Any):
        self.bar, self.task = bar, task

    def advance(self, n: int = 1) -> None:
        self.bar.advance(self.task, n)


@contextlib.contextmanager
def bar_task(description: str, total: int | None, unit: str) -> Iterator[_BarTask]:
    """The library's progress tasks (:mod:`kebab_mlflow.progress`) as rich bars on stderr."""
    bar = ProgressBar(description, unit=unit)
    task = bar.start(total)
    try:
        yield _BarTask(bar, task)
    finally:
        bar.stop()


class _StderrWarnings(logging.Handler):
    """The library's warnings as ``warning: ...`` lines on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"warning: {redacted(record.getMessage())}\n")
        sys.stderr.flush()


def install() -> None:
    """Route the library's progress and warnings to this terminal (once per process)."""
    from kebab_mlflow import progress

    install_log_redaction()
    progress.set_task_factory(bar_task)
    if not any(isinstance(h, _StderrWarnings) for h in progress.logger.handlers):
        progress.logger.addHandler(_StderrWarnings())
        progress.logger.propagate = False
