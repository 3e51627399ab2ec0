"""Metrics: pure functions returning per-query numpy arrays (NaN = not applicable).

Aggregation (:mod:`kebab_mlflow.metrics.aggregate`) is a separate layer; nothing is rounded.
The registry maps every metric name to its definition and one-line description.
"""

from kebab_mlflow.metrics.registry import METRICS, MetricDef, get_metric, metric_names

__all__ = ["METRICS", "MetricDef", "get_metric", "metric_names"]
