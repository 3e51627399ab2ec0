"""Aggregation: per-query arrays → metric blocks, and :class:`Aggregate`, the record of a run's
blocks (``aggregate.json``). Empty denominators give None (JSON null)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.registry import UPPER_SUFFIX
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


BREAKDOWNS = ("by_query_type", "by_hardcase_category", "by_metadata_field")
# blocks of named numbers (counts, shares, ECE/Brier, latency) that are MLflow metrics too
SCALAR_BLOCKS = ("abstention_outcomes", "abstention_calibration", "abstention_calibration_raw",
                 "latency", "repeats")
MetricBlock = Mapping[str, float | None]
ReliabilityBin = tuple[float, float | None, float | None, int]  # lower edge, confidence, acc., n


@dataclass(frozen=True, kw_only=True)
class Aggregate:
    """A run's aggregate, one field per block of ``aggregate.json`` (in the file's order).

    Blocks keyed by names that vary with the run — metric names, breakdown groups, count and
    outcome names — are mappings; a block that does not apply is None (JSON null).
    ``reliability_bins`` exists only when some answer carried a confidence (the file has no
    key otherwise)."""

    overall: MetricBlock
    counts: Mapping[str, int] = field(default_factory=dict)
    by_query_type: Mapping[str, MetricBlock] = field(default_factory=dict)
    by_hardcase_category: Mapping[str, MetricBlock] = field(default_factory=dict)
    by_metadata_field: Mapping[str, MetricBlock] = field(default_factory=dict)
    abstention_outcomes: Mapping[str, float] | None = None
    abstention_calibration: Mapping[str, float] | None = None
    abstention_calibration_raw: Mapping[str, float] | None = None
    latency: Mapping[str, float] | None = None
    # run --repeat N (evaluation/repeats.py): n, flaky_queries, flaky_share, topk_churn
    repeats: Mapping[str, float] | None = None
    reliability_bins: tuple[ReliabilityBin, ...] | None = None
    # bounds for unjudged hits (metrics/unjudged.py): "upper" (metric -> value with the
    # unjudged documents in its cut-off counted relevant) and "unjudged_hits" (the mean per
    # query at each cut-off); None (no key) when no query has doc-level truth
    unjudged_bounds: Mapping[str, Mapping[str, float]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``aggregate.json`` object."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for optional in ("repeats", "reliability_bins", "unjudged_bounds"):  # only runs with them
            if out[optional] is None:
                del out[optional]
        return out

    def to_json(self) -> str:
        """``aggregate.json`` text: nulls kept, NaN refused (an aggregate holds None, never
        NaN)."""
        return json.dumps(self.as_dict(), indent=1, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Aggregate:
        """Read ``aggregate.json`` back. One written by an older version, before some metric
        or block existed, loads as it is: a missing metric reads as absent (None, see
        :meth:`metric`), a missing block as empty or None, not as an error."""
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        if not isinstance(data, dict) or not isinstance(data.get("overall"), dict):
            raise ValueError("not an aggregate: expected a JSON object with an 'overall' block")
        for f in fields(cls):
            if not isinstance(data.get(f.name), (dict, list, type(None))):
                raise ValueError(f"not an aggregate: block {f.name!r} is not an object")
        blocks = {f.name: data[f.name] for f in fields(cls) if data.get(f.name) is not None}
        if "reliability_bins" in blocks:
            blocks["reliability_bins"] = tuple(tuple(b) for b in blocks["reliability_bins"])
        return cls(**blocks)

    def metric(self, name: str, block: str = "overall", group: str | None = None
               ) -> float | None:
        """A metric of the overall block, or of a breakdown group (``"by_query_type",
        "comparison"``); None when the group or the metric is absent or the value is null."""
        values = getattr(self, block) or {}
        if group is not None:
            values = values.get(group) or {}
        value = values.get(name)
        return None if value is None else float(value)

    def calibration_headline(self) -> dict[str, float]:
        """``ece`` and ``brier`` of the answers' confidences, plus ``ece_uncalibrated`` and
        ``brier_uncalibrated`` when a calibrator changed them (the raw block differs from the
        calibrated one: without a calibrator the two are the same numbers); empty when no
        answer carried a confidence."""
        calibrated = self.abstention_calibration or {}
        raw = self.abstention_calibration_raw or {}
        out = {name: float(calibrated[name]) for name in ("ece", "brier")
               if calibrated.get(name) is not None}
        if out and any(raw.get(name) != calibrated.get(name) for name in ("ece", "brier")):
            out |= {f"{name}_uncalibrated": float(raw[name]) for name in ("ece", "brier")
                    if raw.get(name) is not None}
        return out

    def upper(self, name: str) -> float | None:
        """``name``'s value with the unjudged hits in its cut-off counted relevant; None when
        it has none there (or the run has no bounds)."""
        value = ((self.unjudged_bounds or {}).get("upper") or {}).get(name)
        return None if value is None else float(value)

    def bound_metrics(self, names: Iterable[str] | None = None) -> dict[str, float]:
        """The bounds as MLflow metrics: ``<metric>_upper`` (of ``names`` only, when given)
        and every ``unjudged_hits_at_<k>_doc``."""
        block = self.unjudged_bounds or {}
        upper = block.get("upper") or {}
        wanted = upper if names is None else [n for n in names if n in upper]
        return {**{f"{n}{UPPER_SUFFIX}": float(upper[n]) for n in wanted},
                **{n: float(v) for n, v in (block.get("unjudged_hits") or {}).items()}}

    def flat_metrics(self) -> dict[str, float]:
        """Every non-null number as MLflow metrics (breakdowns under a prefix; ECE and Brier
        also as the headline ``ece``, ``brier``, see :meth:`calibration_headline`; the bounds
        for unjudged hits, :meth:`bound_metrics`)."""
        out = {metric_key(name): value for name, value in self.overall.items()
               if value is not None}
        out.update(self.calibration_headline())
        out.update(self.bound_metrics())
        for block in BREAKDOWNS:
            for key, metrics in getattr(self, block).items():
                out.update({metric_key(block, key, name): value
                            for name, value in metrics.items() if value is not None})
        for block in SCALAR_BLOCKS:
            for name, value in (getattr(self, block) or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[metric_key(block, name)] = float(value)
        return out


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid in an aggregate (use null)")
