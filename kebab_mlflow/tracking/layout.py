"""What a run shows in the MLflow UI, decided here (no mlflow import: the store does the calls).

- **Metrics.** The UI groups a run's metrics by the prefix before the first ``/``, sorts the
  groups alphabetically and puts names without a prefix *last*; 600 breakdown metrics buried
  the 40 headline ones. So by default only the overall block is logged as metrics: the
  headline metrics that apply to this golden set (a metric without ground truth here is null
  and left out), in display order (the summary's headline metrics first, cut-offs
  ascending). Every breakdown value stays in
  ``aggregate.json`` and in the table artifact ``breakdowns.json`` (one row per value, the
  run page shows it as a table); ``run --log-breakdowns`` also logs them as metrics, under
  the same names as before.
- **Dataset.** The golden set's fields as the schema and its counts as the profile.
- **Model.** One LoggedModel per version snapshot (see :func:`pipeline_model`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from kebab_mlflow import names
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.evaluation.report import headline, ordered
from kebab_mlflow.golden import GoldenSet
from kebab_mlflow.metrics.aggregate import BREAKDOWNS, SCALAR_BLOCKS, Aggregate
from kebab_mlflow.names import metric_key
from kebab_mlflow.records import UNKNOWN

BREAKDOWN_TABLE = "breakdowns.json"


def headline_metrics(aggregate: Aggregate) -> dict[str, float]:
    """The overall block's non-null values in display order (the summary's headline metrics
    first, cut-offs ascending), with ECE and Brier (``ece``, ``brier`` and, after a
    calibrator, their ``_uncalibrated`` pair) right after the summary's headline metrics: the
    product's contract logs them on every run with confidences."""
    values = {metric_key(name): float(value)
              for name, value in aggregate.overall.items() if value is not None}
    first = [metric_key(n) for n in headline(aggregate.overall)]
    rest = ordered(values, aggregate.overall)
    return {**{n: values[n] for n in first}, **aggregate.calibration_headline(), **rest}


def logged_metrics(aggregate: Aggregate, log_breakdowns: bool) -> dict[str, float]:
    """The metrics a run logs, headline first: only those (and, for run --repeat, the
    ``repeats/...`` block: flaky_queries, topk_churn; then the bounds for unjudged hits:
    ``<metric>_upper`` of the summary's headline metrics and every
    ``unjudged_hits_at_<k>_doc``), or every breakdown value after. The bounds' names parse as
    no metric (metrics.registry.parse_metric): no headline or primary-metric lookup finds
    them."""
    logged = headline_metrics(aggregate)
    logged |= {metric_key("repeats", k): float(v) for k, v in (aggregate.repeats or {}).items()}
    logged |= aggregate.bound_metrics(headline(aggregate.overall))
    if not log_breakdowns:
        return logged
    rest = {k: v for k, v in aggregate.flat_metrics().items() if k not in logged}
    return {**logged, **ordered(rest)}


def breakdown_table(aggregate: Aggregate) -> dict[str, list[Any]]:
    """Every breakdown value, nulls included, as columns ``block, group, metric, value,
    mlflow_metric`` (the last is the metric name ``--log-breakdowns`` logs it under)."""
    rows: list[tuple[str, str, str, float | None, str]] = []
    for block in BREAKDOWNS:
        for group, metrics in getattr(aggregate, block).items():
            rows += [(block, group, name, value, metric_key(block, group, name))
                     for name, value in metrics.items()]
    for block in SCALAR_BLOCKS:
        for name, value in (getattr(aggregate, block) or {}).items():
            if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                rows.append((block, "", name, value, metric_key(block, name)))
    columns = ("block", "group", "metric", "value", "mlflow_metric")
    return {c: [r[i] for r in rows] for i, c in enumerate(columns)}


def _field_kinds(golden: GoldenSet) -> dict[str, str]:
    """The fields the golden set's queries use, with their type (the dataset's schema)."""
    q = golden.queries
    candidates = {
        "id": ("string", True), "query": ("string", True),
        "expected_chunk_ids": ("list", any(x.expected_chunk_ids for x in q)),
        "expected_doc_ids": ("list", any(x.expected_doc_ids for x in q)),
        "must_contain": ("list", any(x.must_contain for x in q)),
        "forbidden": ("list", any(x.forbidden for x in q)),
        "ask": ("boolean", any(x.ask for x in q)),
        "answerable": ("boolean", any(not x.answerable for x in q)),
        "query_type": ("string", any(x.query_type for x in q)),
        "hardcase_categories": ("list", any(x.hardcase_categories for x in q)),
        "metadata_field": ("string", any(x.metadata_field for x in q)),
        "group": ("string", any(x.group for x in q)),
        "difficulty": ("string", any(x.difficulty for x in q)),
        "lang": ("string", any(x.lang for x in q)),
        "evidence": ("list", any(x.evidence for x in q)),  # offsets/quotes: kebab_mlflow/evidence/
    }
    return {name: kind for name, (kind, used) in candidates.items() if used}


def _profile(golden: GoldenSet) -> dict[str, Any]:
    q = golden.queries
    graded = sum(any(g > 1 for g in x.expected_doc_ids.values()) for x in q)
    return {
        "source": "private golden set" if golden.private else golden.path,
        "queries": len(q),
        "ground_truth_levels": [level for level, n in (
            ("chunk", sum(x.has_chunk_truth for x in q)),
            ("doc", sum(x.has_doc_truth for x in q)),
            ("answer", sum(bool(x.must_contain) for x in q))) if n],
        "with_chunk_truth": sum(x.has_chunk_truth for x in q),
        "with_doc_truth": sum(x.has_doc_truth for x in q),
        "with_graded_doc_truth": graded,
        "with_must_contain": sum(bool(x.must_contain) for x in q),
        "ask": sum(x.ask for x in q), "unanswerable": sum(not x.answerable for x in q),
        "fields": list(_field_kinds(golden)),
    }


def golden_dataset(golden: GoldenSet) -> dict[str, Any]:
    """The golden set as the run's MLflow dataset: name, digest of the file, source tags
    (no path for a private set), schema and profile."""
    tags = {"golden_set": golden.name, "queries": str(len(golden))}
    if not golden.private:  # a source tag value is at most 500 characters in MLflow
        tags["path"] = names.fit(golden.path, names.MAX_INPUT_TAG_VALUE)
    return {"name": golden.name, "digest": golden.digest, "tags": tags,
            "schema": _field_kinds(golden), "profile": _profile(golden)}


def versions_digest(versions: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(sorted(versions.items()))).encode()).hexdigest()


_MODEL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_=+-]+")  # MLflow refuses . / : % and quotes
MODEL_NAME_SETTINGS = 60  # characters of the key settings kept in a model's name


def model_name(backend: str, versions: Mapping[str, str], digest: str) -> str:
    """What the Models table shows: the backend, its key settings (the index version, e.g.
    ``bm25-k1=0_9-b=0_4``; a character MLflow refuses in a model name becomes ``_``), then a
    short digest of the whole version snapshot (``lexical-bm25-k1=0_9-b=0_4-c0b14c39``)."""
    settings = _MODEL_NAME_UNSAFE.sub("_", versions.get("index_version", UNKNOWN))
    settings = settings.strip("_-")[:MODEL_NAME_SETTINGS]
    parts = [backend] + ([settings] if settings and settings != UNKNOWN else []) + [digest[:8]]
    return "-".join(parts)


def pipeline_model(result: Any) -> dict[str, Any] | None:
    """The LoggedModel a run's metrics belong to: one per distinct version snapshot, found
    again by the snapshot's digest. A target that reports no version at all gets none: "all
    unknown" would tie unrelated systems together."""
    versions = result.versions.as_dict()
    if all(v == UNKNOWN for v in versions.values()):
        return None
    digest = versions_digest(versions)
    return {"name": model_name(result.source.backend, versions, digest), "digest": digest,
            "params": versions, "tags": {vocab.BACKEND_TAG: result.source.backend}}
