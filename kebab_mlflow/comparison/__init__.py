"""Compare a candidate eval run with a baseline: per-query diff, paired statistics, one verdict.

:func:`~.loading.load_pair` reads both runs through :mod:`kebab_mlflow.tracking`;
:func:`~.verdict.compare_runs` is pure (no MLflow); :mod:`.rendering` turns a Comparison into
JSON, markdown, JUnit XML and table rows; ``kebab_mlflow.app.compare.record`` writes the
verdict back.
"""

from kebab_mlflow.comparison.loading import load_pair
from kebab_mlflow.comparison.records import KINDS, CompareOptions, Comparison, RunSide
from kebab_mlflow.comparison.rendering import (
    dumps,
    headline,
    iter_dumps,
    ordered,
    to_json,
    to_junit,
    to_markdown,
)
from kebab_mlflow.comparison.verdict import compare_runs

__all__ = ["KINDS", "CompareOptions", "Comparison", "RunSide", "compare_runs", "dumps",
           "headline", "iter_dumps", "load_pair", "ordered", "to_json", "to_junit", "to_markdown"]
