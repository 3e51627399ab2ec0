"""Markdown rendering of a run's aggregate (report.md and the MLflow run description)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kebab_mlflow.formatting import number
from kebab_mlflow.metrics.registry import METRICS


def summary_table(overall: Mapping[str, float | None], names: list[str] | None = None) -> str:
    names = names or [n for n in HEADLINE if n in overall] or list(overall)[:12]
    rows = ["| metric | value |", "|---|---|"]
    rows += [f"| {n} | {number(overall.get(n))} |" for n in names if n in overall]
    return "\n".join(rows)


HEADLINE = ["hit_at_1", "hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_doc",
            "ndcg_at_10_doc", "mrr_doc", "contains_all", "refusal_rate", "ask_grounded_rate",
            "no_hit_rate", "error_rate"]


def run_report(title: str, params: Mapping[str, Any], aggregate: Mapping[str, Any]) -> str:
    overall = aggregate["overall"]
    lines = [f"# {title}", "", "## Summary", "", summary_table(overall), "",
             "## Configuration", "", "| param | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in params.items() if not k.startswith("config.")]
    lines += ["", "## All metrics", "", "| metric | value | definition |", "|---|---|---|"]
    lines += [f"| {n} | {number(v)} | {METRICS[n].description if n in METRICS else ''} |"
              for n, v in overall.items()]
    lines += ["", "## Counts", ""] + [f"- {k}: {v}" for k, v in aggregate["counts"].items()]
    for block in ("by_query_type", "by_hardcase_category", "by_metadata_field"):
        groups = aggregate.get(block) or {}
        if not groups:
            continue
        shown = [n for n in HEADLINE if any(g.get(n) is not None for g in groups.values())]
        lines += ["", f"## {block}", "", "| group | " + " | ".join(shown) + " |",
                  "|---|" + "---|" * len(shown)]
        lines += [f"| {key} | " + " | ".join(number(g.get(n)) for n in shown) + " |"
                  for key, g in groups.items()]
    for block in ("abstention_outcomes", "abstention_calibration", "abstention_calibration_raw",
                  "latency"):
        value = aggregate.get(block)
        lines += ["", f"## {block}", ""]
        lines += ([f"- {k}: {number(v)}" for k, v in value.items()] if value
                  else ["null (no case for this block)"])
    return "\n".join(lines) + "\n"
