"""Aggregation: per-query arrays → metric blocks. Empty denominators give None (JSON null)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.names import metric_key


def mean_or_none(values: np.ndarray) -> float | None:
    counted = values[~np.isnan(values)]
    return float(counted.mean()) if counted.size else None


def aggregate_block(scores: Mapping[str, np.ndarray],
                    mask: np.ndarray | None = None) -> dict[str, float | None]:
    """Mean of each metric over the counted (non-NaN) queries selected by ``mask``."""
    return {name: mean_or_none(values if mask is None else values[mask])
            for name, values in scores.items()}


def breakdowns(queries: Sequence[GoldenQuery], scores: Mapping[str, np.ndarray]
               ) -> dict[str, dict[str, dict[str, float | None]]]:
    """The same metric block per query_type, hardcase category and metadata_field.
    Queries without the key are simply left out of that breakdown."""
    keyers: dict[str, Callable[[GoldenQuery], Sequence[str]]] = {
        "by_query_type": lambda q: [q.query_type] if q.query_type else [],
        "by_hardcase_category": lambda q: list(q.hardcase_categories),
        "by_metadata_field": lambda q: [q.metadata_field] if q.metadata_field else [],
    }
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for block, keys_of in keyers.items():
        members: dict[str, list[int]] = {}
        for i, q in enumerate(queries):
            for key in keys_of(q):
                members.setdefault(key, []).append(i)
        out[block] = {key: aggregate_block(scores, np.array(idx))
                      for key, idx in sorted(members.items())}
    return out


def counts(queries: Sequence[GoldenQuery]) -> dict[str, int]:
    return {
        "queries": len(queries),
        "with_chunk_truth": sum(q.has_chunk_truth for q in queries),
        "with_doc_truth": sum(q.has_doc_truth for q in queries),
        "ask": sum(q.ask for q in queries),
        "unanswerable": sum(not q.answerable for q in queries),
    }


def flat_metrics(aggregate: Mapping) -> dict[str, float]:
    """Every non-null number of an aggregate as MLflow metrics (breakdowns under a prefix)."""
    out: dict[str, float] = {}
    for name, value in aggregate.get("overall", {}).items():
        if value is not None:
            out[metric_key(name)] = value
    for block in ("by_query_type", "by_hardcase_category", "by_metadata_field"):
        for key, metrics in (aggregate.get(block) or {}).items():
            for name, value in metrics.items():
                if value is not None:
                    out[metric_key(block, key, name)] = value
    for block in ("abstention_outcomes", "abstention_calibration", "abstention_calibration_raw",
                  "latency"):
        for name, value in (aggregate.get(block) or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[metric_key(block, name)] = float(value)
    return out


def dump_aggregate(aggregate: Mapping) -> str:
    """``aggregate.json`` text: nulls kept, NaN refused (an aggregate holds None, never NaN)."""
    return json.dumps(aggregate, indent=1, allow_nan=False)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid in an aggregate (use null)")


def load_aggregate(text: str | bytes) -> dict:
    """Read ``aggregate.json`` back. An aggregate written by an older version, before some
    metric existed, loads as it is: ask for that metric with :func:`metric_value`, which reads
    a missing metric as absent (None), not as an error."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("overall"), dict):
        raise ValueError("not an aggregate: expected a JSON object with an 'overall' block")
    return data


def metric_value(aggregate: Mapping, name: str, *block: str) -> float | None:
    """A metric of a block (``"overall"`` by default, or e.g. ``"by_query_type", "comparison"``);
    None when the block or the metric is absent or the value is null."""
    node: Any = aggregate
    for key in block or ("overall",):
        node = node.get(key) if isinstance(node, Mapping) else None
    value = node.get(name) if isinstance(node, Mapping) else None
    return None if value is None else float(value)
