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
from typing import TYPE_CHECKING, Any

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.formatting import number
from kebab_mlflow.interrupts import checkpoint
from kebab_mlflow.stats.gauge import (
    GaugeMetric,
    RowStat,
    SignalState,
    combine_states,
    gauge_metric,
)
from kebab_mlflow.stats.ranking import RowRank, rank_rows
from kebab_mlflow.sweep.spec import (
    FLOOR_KEYS,
    ROW_STAT_KEYS,
    RowOutcome,
    RowRole,
    SweepResult,
    SweepSpec,
    describe_row,
)
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker


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


def gauge_rows(gauge: Mapping[str, GaugeMetric]) -> list[tuple[str, ...]]:
    """One table row per (metric, floor): metric, floor, primary [CI], floor [CI], gap,
    normalized, state — rendered strings. The two CIs are what the state's rule compares
    (alive: the primary's lower bound above the floor's upper bound); the paired gap CI, a
    different and narrower interval, stays in distinguishing_power.json: shown beside
    ``uncertain`` it read as a contradiction."""
    return [(metric, floor, _ci(block.primary), _ci(fb.stat), number(fb.gap),
             number(fb.normalized), fb.signal_state)
            for metric, block in gauge.items() for floor, fb in block.floors.items()]


GAUGE_COLUMNS = ("metric", "floor", "primary [95% CI]", "floor [95% CI]", "gap", "normalized",
                 "state")
# the terminal's narrow form, one table per metric (the primary's mean and CI in its title)
NARROW_GAUGE_COLUMNS = ("floor", "floor [95% CI]", "gap", "norm.", "state")
GAUGE_RULE = ("alive = the primary's CI lower bound is above every floor's CI upper bound; "
              "uncertain = positive gap, overlapping or missing CIs; dead = the primary is at "
              "or below a floor; n/a = a floor is missing or failed. normalized = gap / "
              "(ceiling − floor). The paired gap CIs are in distinguishing_power.json.")


def gauge_rows_narrow(block: GaugeMetric) -> list[tuple[str, ...]]:
    """One table row per floor of one gauged metric, for an 80-column terminal."""
    return [(floor, _ci(fb.stat), number(fb.gap), number(fb.normalized), fb.signal_state)
            for floor, fb in block.floors.items()]


def primary_interval(block: GaugeMetric) -> str:
    """The primary row's mean and CI, as the narrow tables' titles show it."""
    return _ci(block.primary)


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
    lines += ["", GAUGE_RULE]
    return "\n".join(lines) + "\n"


def leaderboard_ranks(spec: SweepSpec, result: SweepResult) -> dict[str, RowRank]:
    """Every row's place on the first gauge metric: point rank, bootstrap rank interval and
    the tie group of the best contender (primary and variants; floors and the ceiling are
    ranked and tested too, never the best) — :mod:`kebab_mlflow.stats.ranking`."""
    first = spec.gauge_metrics[0]
    scores = {n: (r.scores.get(first) if r.status == RunStatus.FINISHED else None)
              for n, r in result.rows.items()}
    references = (RowRole.FLOOR, RowRole.CEILING)
    contenders = [n for n, r in result.rows.items() if r.role not in references]
    return rank_rows(scores, contenders=contenders, resamples=spec.resamples, seed=spec.seed)


def leaderboard_order(ranks: Mapping[str, RowRank]) -> list[str]:
    """Best first by the mean; rows without one last (stable)."""
    def key(name: str) -> float:
        mean = ranks[name].mean
        return math.inf if mean is None else -mean

    return sorted(ranks, key=key)


def tie_group(rank: RowRank, best_mean: float | None) -> str:
    """``best``, ``tied`` (not shown different from the best), ``worse``, ``above`` (a
    ceiling or floor shown better than the best contender) or ``—`` (no value)."""
    if rank.best:
        return "best"
    if rank.mean is None or best_mean is None:
        return "—"
    if rank.tied_with_best:
        return "tied"
    return "above" if rank.mean > best_mean else "worse"


def rank_interval(rank: RowRank) -> str:
    if rank.rank_low is None:
        return "—"
    return str(rank.rank_low) if rank.rank_low == rank.rank_high else (
        f"{rank.rank_low}–{rank.rank_high}")


def role_label(role: str) -> str:
    """Floors and the ceiling are marked as such: reference rows, not candidates."""
    return f"{role} (reference)" if role in (RowRole.FLOOR, RowRole.CEILING) else str(role)


def leaderboard(spec: SweepSpec, result: SweepResult) -> tuple[str, str]:
    """(markdown, csv) of every row, best first on the first gauge metric, with the tie group
    and the rank interval (see :func:`leaderboard_ranks`)."""
    ranks = leaderboard_ranks(spec, result)
    best = next((r.mean for r in ranks.values() if r.best), None)
    extra = headline_metrics(spec, result.rows)[len(spec.gauge_metrics):]
    md = [_leaderboard_intro(spec),
          "| rank | rank 95% | vs best | row | role | config | status | "
          + " | ".join(spec.gauge_metrics) + " | " + " | ".join(extra) + " | run id |",
          "|" + "---|" * (8 + len(spec.gauge_metrics) + len(extra))]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "row", "role", "preset", "k", "overrides", "status", "run_id",
                     *[f"{m}{s}" for m in spec.gauge_metrics for s in ("", "_ci_low", "_ci_high",
                                                                       "_n")], *extra, "error",
                     "rank_ci_low", "rank_ci_high", "tie_group", "p_vs_best", "p_holm_vs_best"])
    for rank, name in enumerate(leaderboard_order(ranks), 1):
        r, row, place = result.rows[name], spec.row(name), ranks[name]
        stats = [result.gauge[m].rows.get(name) for m in spec.gauge_metrics]
        md.append(f"| {rank} | {rank_interval(place)} | {tie_group(place, best)} | {name} | "
                  f"{role_label(r.role)} | {describe_row(row)} | {r.status} | "
                  + " | ".join(_ci(s) for s in stats) + " | "
                  + " | ".join(number(r.overall.get(h)) for h in extra)
                  + f" | {r.run_id or '—'} |")
        writer.writerow([rank, name, r.role, row.shown_preset, row.k,
                         " ".join(f"{k}={v}" for k, v in row.overrides.items()), r.status,
                         r.run_id or "",
                         *[_csv(None if s is None else getattr(s, f))
                           for s in stats for f in ("mean", "ci_low", "ci_high", "n")],
                         *[_csv(r.overall.get(h)) for h in extra], r.error or "",
                         _csv(place.rank_low), _csv(place.rank_high), tie_group(place, best),
                         _csv(place.p_vs_best), _csv(place.p_holm)])
    return f"# Leaderboard — {spec.name}\n\n" + "\n".join(md) + "\n", buf.getvalue()


def _leaderboard_intro(spec: SweepSpec) -> str:
    return (f"Ranked on **{spec.gauge_metrics[0]}** over {len(spec.query_ids)} queries. "
            "*vs best*: `tied` = not significantly different from the best contender (paired "
            "sign-flip test against it, Holm across the rows, α 0.05), which is not the same "
            "as equal; *rank 95%*: the rank's interval over "
            f"{spec.resamples} query resamples (seed {spec.seed}). Floors and the ceiling are "
            "reference rows, never the best.\n")


def _csv(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def publish_sweep(tracker: Tracker, spec: SweepSpec, result: SweepResult) -> None:
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
