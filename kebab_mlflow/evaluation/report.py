"""Markdown rendering of a run's aggregate (report.md and the MLflow run description)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kebab_mlflow.formatting import number
from kebab_mlflow.metrics.aggregate import BREAKDOWNS, SCALAR_BLOCKS, Aggregate
from kebab_mlflow.metrics.registry import display_order, parse_metric

# the column beside a metric's value: its bound with the unjudged hits counted relevant
UPPER_COLUMN = "unjudged counted relevant"


def summary_table(overall: Mapping[str, float | None], names: list[str] | None = None,
                  upper: Mapping[str, float | None] | None = None) -> str:
    """``| metric | value |`` rows; with ``upper`` (metric → its bound, :func:`upper_values`)
    holding a value, a third column :data:`UPPER_COLUMN` (blank for a metric without one)."""
    names = names or headline(overall) or list(overall)[:12]
    shown = [n for n in names if n in overall]
    if not any((upper or {}).get(n) is not None for n in shown):
        rows = ["| metric | value |", "|---|---|"]
        rows += [f"| {n} | {number(overall.get(n))} |" for n in shown]
        return "\n".join(rows)
    bound = upper or {}
    rows = [f"| metric | value | {UPPER_COLUMN} |", "|---|---|---|"]
    rows += [f"| {n} | {number(overall.get(n))} | "
             + (number(bound[n]) if bound.get(n) is not None else "") + " |" for n in shown]
    return "\n".join(rows)


def upper_values(aggregate: Aggregate, names: Iterable[str]) -> dict[str, float | None]:
    """Each of ``names``' bound with the unjudged hits in its cut-off counted relevant (None
    for a metric without unjudged hits there, or without a bound)."""
    return {n: aggregate.upper(n) for n in names}


def unjudged_line(aggregate: Aggregate) -> str | None:
    """``unjudged hits per query (doc ranking): top 1 0.0, top 10 2.77`` — None without
    bounds."""
    hits = (aggregate.unjudged_bounds or {}).get("unjudged_hits") or {}
    if not hits:
        return None
    return "unjudged hits per query (doc ranking): " + ", ".join(
        f"top {name.removeprefix('unjudged_hits_at_').removesuffix('_doc')} {number(v)}"
        for name, v in hits.items())


HEADLINE = ["hit_at_1", "hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_doc",
            "ndcg_at_10_doc", "mrr_doc", "contains_all", "refusal_rate", "ask_grounded_rate",
            "no_hit_rate", "error_rate"]
# The breakdown tables' columns (those with a value in some group), kept to a readable width
BREAKDOWN_COLUMNS = {*HEADLINE, "map_doc", "recall_at_100_doc"}
# What the summary shows per retrieval level, when the run has it: these families (any
# cut-off for recall, so recall_at_100_doc of a --k 100 run is there), and judged_at_10_doc.
_HEADLINE_FAMILIES = {"hit": (1, 5), "mrr": (), "map": (), "ndcg": (10,),
                      "precision": (5,), "recall": None, "judged": (10,),
                      "evidence_precision": (5,), "evidence_recall": (5,)}


def _description(name: str) -> str:
    metric = parse_metric(name)
    return "" if metric is None else metric.description


def _is_headline(name: str) -> bool:
    m = parse_metric(name)
    if m is None:
        return False
    if m.level in ("answer", "run"):
        return name in HEADLINE or m.level == "answer"
    if m.family not in _HEADLINE_FAMILIES:
        return False
    ks = _HEADLINE_FAMILIES[m.family]
    return (m.family == "mrr" or m.k is None or ks is None and m.k >= 10
            or ks is not None and m.k in ks)


def headline(overall: Mapping[str, float | None]) -> list[str]:
    """The summary's metrics of an overall block: headline ones that have a value — a level
    without ground truth in this golden set has none, so it is not shown as rows of dashes —
    in display order."""
    return display_order(n for n, v in overall.items() if v is not None and _is_headline(n))


def headline_values(aggregate: Aggregate) -> dict[str, float | None]:
    """What a run's summary shows, in display order: the overall block's headline metrics
    (:func:`headline`), then ECE and Brier when the run has confidences
    (:meth:`Aggregate.calibration_headline`)."""
    overall = aggregate.overall
    return {**{n: overall[n] for n in headline(overall)}, **aggregate.calibration_headline()}


def ordered(metrics: Mapping[str, float], overall: Mapping[str, float | None] | None = None
            ) -> dict[str, float]:
    """``metrics`` (MLflow names → values) in display order: the headline ones first (those
    with ground truth in this golden set), then every other overall metric, then the
    breakdown blocks; cut-offs in numeric order."""
    first = headline(overall) if overall is not None else []
    rest = display_order(n for n in metrics if n not in first)
    return {n: metrics[n] for n in [*first, *rest] if n in metrics}


def run_report(title: str, params: Mapping[str, Any], aggregate: Aggregate) -> str:
    overall = aggregate.overall
    summary = headline_values(aggregate)
    lines = [f"# {title}", "", "## Summary", "",
             summary_table(summary, list(summary), upper_values(aggregate, summary)),
             *_unjudged_summary(aggregate), "", "## Configuration", "", "| param | value |",
             "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in params.items() if not k.startswith("config.")]
    lines += ["", "## All metrics", "", "| metric | value | definition |", "|---|---|---|"]
    valued = display_order(n for n, v in overall.items() if v is not None)
    lines += [f"| {n} | {number(overall[n])} | {_description(n)} |" for n in valued]
    unvalued = display_order(n for n, v in overall.items() if v is None)
    if unvalued:
        lines += ["", f"No value (no ground truth or no case in this golden set): "
                  f"{', '.join(unvalued)}."]
    lines += ["", "## Counts", ""] + [f"- {k}: {v}" for k, v in aggregate.counts.items()]
    for block in BREAKDOWNS:
        groups = getattr(aggregate, block)
        if not groups:
            continue
        shown = [n for n in headline(overall) if n in BREAKDOWN_COLUMNS
                 and any(g.get(n) is not None for g in groups.values())]
        lines += ["", f"## {block}", "", "| group | " + " | ".join(shown) + " |",
                  "|---|" + "---|" * len(shown)]
        lines += [f"| {key} | " + " | ".join(number(g.get(n)) for n in shown) + " |"
                  for key, g in groups.items()]
    for block in SCALAR_BLOCKS:
        value = getattr(aggregate, block)
        lines += ["", f"## {block}", ""]
        lines += ([f"- {k}: {number(v)}" for k, v in value.items()] if value
                  else ["null (no case for this block)"])
    return "\n".join([*lines, *_bounds_section(aggregate)]) + "\n"


def _unjudged_summary(aggregate: Aggregate) -> list[str]:
    line = unjudged_line(aggregate)
    if line is None:
        return []
    return ["", f"{line}; the column {UPPER_COLUMN!r} counts them relevant (grade 1): "
            "`kebab-mlflow judge RUN` lists them to judge."]


def _bounds_section(aggregate: Aggregate) -> list[str]:
    """Every metric with unjudged hits in its cut-off: its value and its bound."""
    upper = (aggregate.unjudged_bounds or {}).get("upper") or {}
    if not upper:
        return []
    names = display_order(upper)
    return ["", "## unjudged_bounds", "",
            "Each metric with unjudged documents in its cut-off, with them counted relevant "
            "(grade 1); the usual value counts them non-relevant.", "",
            summary_table(aggregate.overall, names, upper_values(aggregate, names)), "",
            *(f"- {k}: {number(v)}" for k, v in
              ((aggregate.unjudged_bounds or {}).get("unjudged_hits") or {}).items())]
