"""The command line: parse, call the library, render, map errors to exit codes.

Exit codes: 0 success, 1 a result that should fail CI (Regressed, a failed query under
--fail-fast), 2 bad input or usage, 130 interrupted. Heavy imports (mlflow, sklearn, torch)
happen inside the commands that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from kebab_mlflow.errors import KebabError, RunInterrupted
from kebab_mlflow.interrupts import sigterm_as_interrupt
from kebab_mlflow.redaction import redacted, redacted_exception

Command = Callable[..., Any]


def _report(exc: KebabError) -> None:
    from kebab_mlflow.cli.console import err

    err.print(f"[bold red]error:[/] {escape(redacted(str(exc)))}", highlight=False, soft_wrap=True)


class _App(typer.Typer):
    """A Typer whose commands turn a KebabError into its message and exit code (no traceback),
    however they are invoked (console script, ``python -m``, CliRunner in tests)."""

    def command(  # type: ignore[override]  # forwards every argument to Typer.command
            self, *args: Any, **kwargs: Any) -> Callable[[Command], Command]:
        register = super().command(*args, **kwargs)

        def wrap(fn: Command) -> Command:
            @functools.wraps(fn)
            def guarded(*a: Any, **kw: Any) -> Any:
                from kebab_mlflow.cli.console import install

                install()
                try:
                    with sigterm_as_interrupt():
                        return fn(*a, **kw)
                except KebabError as exc:
                    _report(exc)
                    raise typer.Exit(exc.exit_code) from None
                except KeyboardInterrupt:  # before any run existed (a run's own is KILLED)
                    _report(RunInterrupted("interrupted"))
                    raise typer.Exit(RunInterrupted.exit_code) from None
                except Exception as exc:  # a bug (exit 1): its traceback shows no credential
                    redacted_exception(exc)
                    raise

            return register(guarded)

        return wrap


# The order `--help` lists the commands in: that of the single-module CLI before the package
# layout, each later command beside its kin (import-trec after the run module's commands,
# power after compare, tune after sweep). Registration order depends on the modules' layout,
# so the order is written here; a command missing from it is listed last.
HELP_ORDER = ("validate", "golden", "metrics", "presets", "run", "runs", "show", "ui",
              "import-beir", "upload", "import-trec", "compare", "power", "sweep", "tune",
              "calibrate",
              "import-squad", "baseline", "rescore", "judge", "ci")


class _HelpOrder(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:  # typer's Context or click's
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: HELP_ORDER.index(n) if n in HELP_ORDER
                      else len(HELP_ORDER))


app = _App(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=_HelpOrder,
           help="Evaluate retrieval/RAG pipelines on golden sets; MLflow is the record.")
baseline_app = _App(help="Mark or show the experiment's baseline run.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")
golden_app = _App(help="Work on a golden-set file (anchor its chunk ids as evidence spans).",
                  no_args_is_help=True)
app.add_typer(golden_app, name="golden")

TrackingUri = Annotated[str | None, typer.Option(
    "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or the embedded "
    "sqlite store in ./mlruns)")]
Experiment = Annotated[str, typer.Option("--experiment", help="MLflow experiment name")]


def main() -> None:
    try:
        app()  # click maps usage errors to exit 2 itself; always ends in SystemExit
    finally:
        # A command leaves ~350k objects behind (MLflow, pandas, the corpus) and the
        # interpreter's collections at exit walk them all: ~0.7 s after the work is done.
        # Frozen objects are skipped; reference counting still frees them, atexit handlers
        # still run, and the memory goes back to the OS either way.
        gc.freeze()
