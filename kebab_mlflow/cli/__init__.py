"""The command line: parse, call the library, render, map errors to exit codes.

Exit codes: 0 success, 1 a result that should fail CI (Regressed, a failed query under
--fail-fast), 2 bad input or usage, 130 interrupted. Heavy imports (mlflow, sklearn, torch)
happen inside the commands that need them, so ``--help`` is instant. :mod:`.app` holds the
Typer app; each command module registers its commands on it when imported here.
"""

from kebab_mlflow.cli import run, trec, runs, answers, compare, power, sweep, tune, golden, ci  # noqa: F401, I001 - registers commands (app.HELP_ORDER orders --help)
from kebab_mlflow.cli import rescore, judge  # noqa: F401, I001 - golden versions (issue 30)
from kebab_mlflow.cli.app import app, main

__all__ = ["app", "main"]
