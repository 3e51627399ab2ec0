"""The metric registry: name → definition. Names are MLflow-legal (``hit_at_5``, not ``hit@5``).

Families with a cut-off are registered once per k in :data:`CUTOFFS` (and any k asked for at
run time through :func:`ensure_cutoff`). Levels: ``chunk`` (over queries with expected chunk
ids), ``doc`` (over queries with expected doc ids), ``answer`` (queries with ``ask``), ``run``
(every query).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

CUTOFFS = (1, 3, 5, 10)
MRR_CUTOFF = 10


@dataclass(frozen=True)
class MetricDef:
    name: str
    level: str  # chunk | doc | answer | run
    description: str
    family: str
    k: int | None = None  # the cut-off; the retrieval depth must reach it
    higher_is_better: bool = True


METRICS: dict[str, MetricDef] = {}


def register(metric: MetricDef) -> MetricDef:
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} registered twice")
    METRICS[metric.name] = metric
    return metric


def get_metric(name: str) -> MetricDef:
    try:
        return METRICS[name]
    except KeyError:
        from kebab_mlflow.errors import ConfigError

        raise ConfigError(f"unknown metric {name!r}; valid metrics: "
                          f"{', '.join(sorted(METRICS))}") from None


def metric_names(level: str | None = None) -> list[str]:
    return [n for n, m in METRICS.items() if level is None or m.level == level]


def retrieval_name(family: str, level: str, k: int | None) -> str:
    """hit/mrr keep their original chunk-level names; everything else names its level."""
    base = family if k is None else f"{family}_at_{k}"
    if level == "chunk" and family in ("hit", "mrr"):
        return base
    return f"{base}_{level}"


_DESCRIPTIONS = {
    "hit": "1 if any relevant {unit} is ranked <= {k}",
    "mrr": "1 / rank of the first relevant {unit} if that rank <= 10, else 0",
    "precision": "relevant {unit}s in the top {k} / {k} (denominator k even for short lists)",
    "recall": "relevant {unit}s in the top {k} / all relevant {unit}s",
    "ndcg": "nDCG@{k}, linear gain = graded relevance, log2 discount (trec_eval ndcg_cut)",
    "map": "average precision over the retrieved depth (--k): mean of P@r over the ranks r of "
           "relevant {unit}s, / all relevant {unit}s (trec_eval map)",
    "r_precision": "relevant {unit}s in the top R / R, R = the query's relevant {unit}s "
                   "(trec_eval Rprec)",
    "judged": "share of the top {k} {unit}s that have a judgment of any grade, / {k} "
              "(sparse labels show as a low value)",
}

JUDGED_LEVELS = ("doc",)  # chunk judgments are all positive: judged = precision there


def ensure_cutoff(k: int) -> None:
    """Register the cut-off families for k (e.g. 100 for benchmarks) if not there yet."""
    for level, unit in (("chunk", "chunk"), ("doc", "document")):
        for family in ("hit", "precision", "recall", "ndcg"):
            name = retrieval_name(family, level, k)
            if name not in METRICS:
                register(MetricDef(name, level, _DESCRIPTIONS[family].format(unit=unit, k=k),
                                   family, k))
    for level in JUDGED_LEVELS:
        name = retrieval_name("judged", level, k)
        if name not in METRICS:
            register(MetricDef(name, level, _DESCRIPTIONS["judged"].format(unit="document",
                                                                           k=k), "judged", k))


for _level, _unit in (("chunk", "chunk"), ("doc", "document")):
    register(MetricDef(retrieval_name("mrr", _level, None), _level,
                       _DESCRIPTIONS["mrr"].format(unit=_unit), "mrr", MRR_CUTOFF))
    for _family in ("map", "r_precision"):
        register(MetricDef(retrieval_name(_family, _level, None), _level,
                           _DESCRIPTIONS[_family].format(unit=_unit), _family))
for _k in CUTOFFS:
    ensure_cutoff(_k)

for _name, _desc, _better in (
    ("no_hit_rate", "share of queries that returned zero hits", False),
    ("error_rate", "share of queries whose pipeline call raised", False),
):
    register(MetricDef(_name, "run", _desc, _name, None, _better))

for _name, _desc, _better in (
    ("contains_all", "answer holds every must_contain string and no forbidden one; an "
     "answerable question refused scores 0, an unanswerable one answered scores 0; a refused "
     "unanswerable one is not counted", True),
    ("refusal_rate", "share of ask queries the pipeline refused (queries that raised are "
     "counted in error_rate instead)", False),
    ("ask_grounded_rate", "share of ask queries answered (not refused) with >= 1 citation", True),
    ("citation_validity", "answered with citations: every cited chunk was among the hits", True),
):
    register(MetricDef(_name, "answer", _desc, _name, None, _better))


# ------------------------------------------------------------------ calibration headline

# ECE and Brier of the answers' confidences: run-level numbers (no per-query score, so not in
# METRICS: they cannot be a primary metric or be gated), shown and logged with the headline
# metrics whenever a run has confidences; the uncalibrated pair when a calibrator changed them.
CALIBRATION_METRICS: dict[str, str] = {
    "ece": "expected calibration error of the answers' confidences (10 equal-width bins)",
    "brier": "Brier score: mean squared error of confidence vs correctness",
    "ece_uncalibrated": "ECE of the confidences before the calibrator",
    "brier_uncalibrated": "Brier score of the confidences before the calibrator",
}

# --------------------------------------------------------------------------- display order

_LEVEL_ORDER = ("chunk", "doc", "answer", "run")
_CUTOFF_NAME = re.compile(r"^[a-z]+_at_([1-9][0-9]{0,6})(?:_chunk|_doc)?$")
_FAMILY_ORDER = ("hit", "mrr", "map", "r_precision", "ndcg", "precision", "recall", "judged")


def display_key(name: str) -> tuple[bool, str, int, int, int, str]:
    """Sort key that shows metrics the way people read them: overall metrics before breakdown
    blocks (``by_query_type/...``), then by level (chunk, doc, answer, run), family, and the
    cut-off *as a number* (hit_at_10 before hit_at_100); unknown names last, by name."""
    block, _, metric = name.rpartition("/")
    m = METRICS.get(metric)
    cutoff = _CUTOFF_NAME.match(metric)
    if m is None and cutoff:  # a cut-off this process has not registered (read from a store)
        ensure_cutoff(int(cutoff.group(1)))
        m = METRICS.get(metric)
    if m is None and metric in CALIBRATION_METRICS:  # after the answer metrics
        return (bool(block), block, _LEVEL_ORDER.index("answer"),
                len(_FAMILY_ORDER) + len(METRICS) + list(CALIBRATION_METRICS).index(metric),
                0, metric)
    if m is None:
        return (bool(block), block, len(_LEVEL_ORDER), 0, 0, metric)
    family = (_FAMILY_ORDER.index(m.family) if m.family in _FAMILY_ORDER
              else len(_FAMILY_ORDER) + list(METRICS).index(metric))  # answer/run: as listed
    k = 0 if m.family == "mrr" or m.k is None else m.k
    return (bool(block), block, _LEVEL_ORDER.index(m.level), family, k, metric)


def display_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=display_key)
