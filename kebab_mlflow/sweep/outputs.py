"""A sweep's outputs: the distinguishing-power gauge, the leaderboard, and their publication on
the parent run.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Mapping
from typing import Any

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.formatting import number
from kebab_mlflow.interrupts import checkpoint
from kebab_mlflow.stats.gauge import (
    FloorGap,
    GaugeMetric,
    RowStat,
    SignalState,
    combine_states,
    gauge_metric,
)
from kebab_mlflow.sweep.spec import (
    FLOOR_KEYS,
    ROW_STAT_KEYS,
    RowOutcome,
    SweepResult,
    SweepSpec,
    describe_row,
)
from kebab_mlflow.vocabulary import RunStatus


def compute_gauge(spec: SweepSpec, rows: Mapping[str, RowOutcome]) -> dict[str, GaugeMetric]:
    out = {}
    for metric in spec.gauge_metrics:
        scores = {n: (r.scores.get(metric) if r.status == RunStatus.FINISHED else None)
                  for n, r in rows.items()}
        out[metric] = gauge_metric(scores, spec.primary, spec.floors, spec.ceiling,
                                   spec.resamples, spec.seed)
    return out


def overall_state(gauge: Mapping[str, GaugeMetric]) -> str:
    return combine_states([g.signal_state for g in gauge.values()])


def gauge_metrics_flat(gauge: Mapping[str, GaugeMetric]) -> dict[str, float]:
    """MLflow metrics of the gauge: non-null values only."""
    flat: dict[str, float] = {}
    for metric, block in gauge.items():
        for row, stat in block.rows.items():
            for key in ROW_STAT_KEYS:
                if getattr(stat, key) is not None:
                    flat[f"gauge/{metric}/{row}/{key}"] = getattr(stat, key)
        for floor, fb in block.floors.items():
            for key in FLOOR_KEYS:
                if getattr(fb, key) is not None:
                    flat[f"gauge/{metric}/{floor}/{key}"] = getattr(fb, key)
        flat[f"gauge/{metric}/alive"] = float(block.signal_state == SignalState.ALIVE)
    return flat


def distinguishing_power(spec: SweepSpec, result: SweepResult) -> dict[str, Any]:
    from kebab_mlflow import __version__
    from kebab_mlflow.tracking.provenance import git_state

    commit, dirty = git_state()
    return {
        "sweep": spec.name, "parent_run_id": result.parent_run_id,
        "primary": spec.primary, "floors": list(spec.floors), "ceiling": spec.ceiling,
        "signal_state": result.signal_state,
        "gauge": {m: g.as_dict() for m, g in result.gauge.items()},
        "failed_rows": result.failed_rows,
        "rows": {n: {"run_id": r.run_id, "role": r.role, "status": r.status,
                     "reused": r.reused} for n, r in result.rows.items()},
        "provenance": {"git_commit": commit, "git_dirty": dirty, "sweep_file": spec.path,
                       "sweep_sha256": spec.sha256, "golden_set": spec.golden_name,
                       "golden_sha256": spec.golden_sha256, "n_queries": len(spec.query_ids),
                       "tool_version": __version__, "bootstrap_resamples": spec.resamples,
                       "bootstrap_seed": spec.seed, "confidence": 0.95},
    }


def _ci(stat: RowStat | None) -> str:
    if stat is None or stat.mean is None:
        return "—"
    if stat.ci_low is None:
        return number(stat.mean)
    return f"{number(stat.mean)} [{number(stat.ci_low)}, {number(stat.ci_high)}]"


def _gap(fb: FloorGap) -> str:
    gap = number(fb.gap)
    if fb.gap_ci_low is not None:
        gap += f" [{number(fb.gap_ci_low)}, {number(fb.gap_ci_high)}]"
    return gap


def gauge_rows(gauge: Mapping[str, GaugeMetric]) -> list[tuple[str, ...]]:
    """One table row per (metric, floor): metric, floor, primary, floor, gap, normalized,
    state — rendered strings."""
    return [(metric, floor, _ci(block.primary), _ci(fb.stat), _gap(fb), number(fb.normalized),
             fb.signal_state)
            for metric, block in gauge.items() for floor, fb in block.floors.items()]


GAUGE_COLUMNS = ("metric", "floor", "primary [95% CI]", "floor [95% CI]",
                 "gap [paired 95% CI]", "normalized", "state")
# the terminal's narrow form, one table per metric: the primary's and the floor's means (their
# CIs are in --wide, the JSON and the parent's artifacts) and the paired gap CI
NARROW_GAUGE_COLUMNS = ("floor", "primary", "mean", "gap [95% CI]", "norm.", "state")


def gauge_rows_narrow(block: GaugeMetric) -> list[tuple[str, ...]]:
    """One table row per floor of one gauged metric, for an 80-column terminal."""
    return [(floor, number(block.primary.mean), number(fb.stat.mean), _gap(fb),
             number(fb.normalized), fb.signal_state) for floor, fb in block.floors.items()]


def headline_metrics(spec: SweepSpec, rows: Mapping[str, RowOutcome]) -> list[str]:
    """The metrics a sweep's tables show per row: the gauged ones, then the run headline
    metrics that have ground truth in this golden set (a value in some row: doc-level ones on a
    BEIR set, whose chunk-level metrics are null)."""
    from kebab_mlflow.evaluation.report import HEADLINE

    return list(spec.gauge_metrics) + [
        h for h in HEADLINE if h not in spec.gauge_metrics
        and any(r.overall.get(h) is not None for r in rows.values())]


def gauge_markdown(spec: SweepSpec, result: SweepResult) -> str:
    lines = [f"# Distinguishing power — {spec.name}", "",
             *([spec.description, ""] if spec.description else []),
             f"Primary row **{spec.primary}**, floors {', '.join(spec.floors)}, ceiling "
             f"{spec.ceiling or 'none (1.0)'}; {len(spec.query_ids)} queries of golden set "
             f"{spec.golden_name!r}; bootstrap {spec.resamples} resamples, seed {spec.seed}.",
             "", f"Overall signal state: **{result.signal_state}**", "",
             "| metric | state |", "|---|---|"]
    lines += [f"| {m} | {b.signal_state} |" for m, b in result.gauge.items()]
    lines += ["", "| " + " | ".join(GAUGE_COLUMNS) + " |", "|" + "---|" * len(GAUGE_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in gauge_rows(result.gauge)]
    if result.failed_rows:
        lines += ["", "## Failed rows", ""]
        lines += [f"- {n}: {e}" for n, e in result.failed_rows.items()]
    lines += ["", "alive = the primary's CI lower bound is above every floor's CI upper bound; "
              "uncertain = positive gap, overlapping or missing CIs; dead = the primary is at "
              "or below a floor; n/a = a floor is missing or failed. normalized = gap / "
              "(ceiling − floor)."]
    return "\n".join(lines) + "\n"


def leaderboard(spec: SweepSpec, result: SweepResult) -> tuple[str, str]:
    """(markdown, csv) of every row, best first on the first gauge metric."""
    first = spec.gauge_metrics[0]

    def key(name: str) -> float:
        stat = result.gauge[first].rows.get(name)
        return -stat.mean if stat is not None and stat.mean is not None else math.inf

    names = sorted(result.rows, key=key)
    extra = headline_metrics(spec, result.rows)[len(spec.gauge_metrics):]
    md = ["| rank | row | role | config | status | " + " | ".join(spec.gauge_metrics) + " | "
          + " | ".join(extra) + " | run id |",
          "|" + "---|" * (6 + len(spec.gauge_metrics) + len(extra))]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "row", "role", "preset", "k", "overrides", "status", "run_id",
                     *[f"{m}{s}" for m in spec.gauge_metrics for s in ("", "_ci_low", "_ci_high",
                                                                       "_n")], *extra, "error"])
    for rank, name in enumerate(names, 1):
        r, row = result.rows[name], spec.row(name)
        stats = [result.gauge[m].rows.get(name) for m in spec.gauge_metrics]
        md.append(f"| {rank} | {name} | {r.role} | {describe_row(row)} | {r.status} | "
                  + " | ".join(_ci(s) for s in stats) + " | "
                  + " | ".join(number(r.overall.get(h)) for h in extra)
                  + f" | {r.run_id or '—'} |")
        writer.writerow([rank, name, r.role, row.shown_preset, row.k,
                         " ".join(f"{k}={v}" for k, v in row.overrides.items()), r.status,
                         r.run_id or "",
                         *[_csv(None if s is None else getattr(s, f))
                           for s in stats for f in ("mean", "ci_low", "ci_high", "n")],
                         *[_csv(r.overall.get(h)) for h in extra], r.error or ""])
    return f"# Leaderboard — {spec.name}\n\n" + "\n".join(md) + "\n", buf.getvalue()


def _csv(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def publish_sweep(tracker: Any, spec: SweepSpec, result: SweepResult) -> None:
    from kebab_mlflow.evaluation import plots
    from kebab_mlflow.pipeline.cache import cache_root

    parent = result.parent_run_id
    workdir = cache_root() / "work" / f"sweep-{parent}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        report = gauge_markdown(spec, result)
        (workdir / "distinguishing_power.json").write_text(
            json.dumps(distinguishing_power(spec, result), indent=1, allow_nan=False))
        (workdir / "distinguishing_power.md").write_text(report)
        md, table = leaderboard(spec, result)
        (workdir / "leaderboard.md").write_text(md)
        (workdir / "leaderboard.csv").write_text(table)
        shutil.copyfile(spec.path, workdir / "sweep.yaml")
        for metric, block in result.gauge.items():
            bars = [(n, s.mean, s.ci_low, s.ci_high) for n, s in block.rows.items()]
            plots.bar_with_ci(bars, workdir / f"gauge_{metric}.png",
                              f"{metric} per row ({block.signal_state})", f"{metric} (mean)")
        checkpoint("sweep-outputs-written")
        tags = {vocab.SIGNAL_STATE: result.signal_state,
                vocab.FAILED_ROWS: ",".join(result.failed_rows),
                "mlflow.note.content": report,
                **{f"gauge/{m}/signal_state": b.signal_state
                   for m, b in result.gauge.items()}}
        metrics = {**gauge_metrics_flat(result.gauge),
                   "sweep/rows_finished": float(sum(r.status == RunStatus.FINISHED
                                                    for r in result.rows.values())),
                   "sweep/rows_failed": float(len(result.failed_rows)),
                   "sweep/wall_s": result.wall_s}
        tracker.log_batch(parent, metrics=metrics, tags=tags)
        for f in sorted(workdir.iterdir()):
            tracker.log_artifact(parent, f)
        checkpoint("sweep-artifacts-logged")
        tracker.end_run(parent, result.status)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
