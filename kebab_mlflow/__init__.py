"""kebab-mlflow: deterministic regression evaluation of retrieval/RAG pipelines, with MLflow as
the system of record.

The public API is loaded on first use, so ``import kebab_mlflow`` is instant and never imports
mlflow (only :func:`log_run`, comparing stored runs and sweeps do)::

    import kebab_mlflow as km

    golden = km.load_golden_set("fixtures/golden_queries.yaml")
    result = km.evaluate(km.reference_pipeline("naive_baseline", "fixtures/kb"), golden)
    result.overall["mrr"]
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "load_golden_set": "kebab_mlflow.golden",
    "GoldenSet": "kebab_mlflow.golden",
    "GoldenQuery": "kebab_mlflow.golden",
    "reference_pipeline": "kebab_mlflow.evaluation.evaluate",
    "evaluate": "kebab_mlflow.evaluation.evaluate",
    "EvalResult": "kebab_mlflow.evaluation.evaluate",
    "Aggregate": "kebab_mlflow.metrics.aggregate",
    "log_run": "kebab_mlflow.app.run",
    "compare": "kebab_mlflow.api",
    "rescore": "kebab_mlflow.api",
    "run_sweep": "kebab_mlflow.api",
    "tune": "kebab_mlflow.api",
    "CompareOptions": "kebab_mlflow.comparison.records",
    "Comparison": "kebab_mlflow.comparison.records",
    "Hit": "kebab_mlflow.records",
    "Answer": "kebab_mlflow.records",
    "VersionSnapshot": "kebab_mlflow.records",
    "QueryResult": "kebab_mlflow.records",
    "RunRecord": "kebab_mlflow.records",
    "Pipeline": "kebab_mlflow.records",
    "KebabError": "kebab_mlflow.errors",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kebab_mlflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
