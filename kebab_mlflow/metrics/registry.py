"""Metric definitions, each parsed from its name and carrying its computation (like
ir_measures' measures). Names are MLflow-legal (``hit_at_5``, not ``hit@5``).

A retrieval metric's name says what it is: ``ndcg_at_10_doc`` is family ``ndcg``, cut-off 10,
level ``doc`` (``hit_at_k`` and ``mrr`` keep their original chunk-level names, without the
suffix). :func:`parse_metric` turns a name into its :class:`MetricDef` and the definition's
``name`` turns it back, so a run may ask for any cut-off (``recall_at_100_doc`` for a
benchmark) without registering anything. :data:`METRICS` holds the standard cut-offs
:data:`CUTOFFS` and the answer and run metrics; it is read-only after import (no run-time
mutation: two runs in one process with different cut-offs see the same registry).

Levels: ``chunk`` (over queries with expected chunk ids), ``evidence`` (queries with evidence
spans, at character level: kebab_mlflow/evidence/resolve.py), ``doc`` (over queries with
expected doc ids), ``answer`` (queries with ``ask``), ``run`` (every query).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from kebab_mlflow.metrics.retrieval import (
    CUTOFFS,
    FAMILY_FUNCTIONS,
    MRR_CUTOFF,
    RANK_FUNCTIONS,
    RelevanceTable,
    judged_at_k,
    mrr,
)

__all__ = ["CALIBRATION_METRICS", "CUTOFFS", "JUDGED_LEVELS", "METRICS", "MRR_CUTOFF", "Level",
           "MetricDef",
           "display_key", "display_order", "get_metric", "metric_names", "parse_metric",
           "retrieval_metrics", "retrieval_name", "run_metric_names"]

Score = Callable[[RelevanceTable], np.ndarray]


class Level(enum.StrEnum):
    """What a metric is computed over (see the module docstring)."""

    CHUNK = "chunk"
    EVIDENCE = "evidence"
    DOC = "doc"
    ANSWER = "answer"
    RUN = "run"


@dataclass(frozen=True, kw_only=True)
class MetricDef:
    """One metric. ``compute``: its per-query scores from its level's relevance table (for
    ``judged``, the table of judged documents); None for the answer and run metrics, which
    :mod:`kebab_mlflow.metrics.scoring` and :mod:`kebab_mlflow.metrics.answers` score
    together from the results."""

    name: str
    level: Level
    description: str
    family: str
    k: int | None = None  # the cut-off; the retrieval depth must reach it
    higher_is_better: bool = True
    compute: Score | None = field(default=None, compare=False, repr=False)

    def score(self, table: RelevanceTable) -> np.ndarray:
        if self.compute is None:
            raise TypeError(f"{self.name} is not computed from a relevance table")
        return self.compute(table)


def retrieval_name(family: str, level: str, k: int | None) -> str:
    """hit/mrr keep their original chunk-level names; everything else names its level."""
    base = family if k is None else f"{family}_at_{k}"
    if level == Level.CHUNK and family in ("hit", "mrr"):
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
_UNITS = {Level.CHUNK: "chunk", Level.DOC: "document"}
# the families with a cut-off in their name, in the order a run's scores list them
_CUTOFF_FAMILIES: Mapping[str, Callable[[RelevanceTable, int], np.ndarray]] = FAMILY_FUNCTIONS
_RANK_FAMILIES: Mapping[str, Score] = RANK_FUNCTIONS
JUDGED_LEVELS = (Level.DOC,)  # chunk judgments are all positive: judged = precision there


def _at_cutoff(fn: Callable[[RelevanceTable, int], np.ndarray], k: int) -> Score:
    def at_k(table: RelevanceTable) -> np.ndarray:
        return fn(table, k)

    return at_k


def _retrieval_metric(family: str, level: Level, k: int | None) -> MetricDef:
    """The definition of a retrieval family at a level (and cut-off, for those that take one)."""
    compute: Score
    if family == "mrr":
        compute, k = mrr, MRR_CUTOFF
    elif family in _RANK_FAMILIES:
        compute = _RANK_FAMILIES[family]
    elif k is None:
        raise ValueError(f"{family} needs a cut-off")
    else:
        compute = _at_cutoff(judged_at_k if family == "judged" else _CUTOFF_FAMILIES[family], k)
    return MetricDef(name=retrieval_name(family, level, None if family == "mrr" else k),
                     level=level, family=family, k=k, compute=compute,
                     description=_DESCRIPTIONS[family].format(unit=_UNITS[level], k=k))


def retrieval_metrics(level: Level, cutoffs: Sequence[int], depth: int) -> Iterator[MetricDef]:
    """A level's retrieval metrics for a run of this depth, in the order its scores list them:
    mrr (when the depth reaches its cut-off), map, r_precision, then each cut-off's families."""
    if depth >= MRR_CUTOFF:
        yield _retrieval_metric("mrr", level, None)
    for family in _RANK_FAMILIES:
        yield _retrieval_metric(family, level, None)
    for k in cutoffs:
        for family in _CUTOFF_FAMILIES:
            yield _retrieval_metric(family, level, k)


def judged_metrics(cutoffs: Sequence[int]) -> Iterator[MetricDef]:
    for level in JUDGED_LEVELS:
        for k in cutoffs:
            yield _retrieval_metric("judged", level, k)


# character-level metrics of evidence spans (kebab_mlflow/evidence/resolve.py has the formulas);
# computed from the run's evidence (kebab_mlflow/evaluation/evidence.py), not from a table
EVIDENCE_FAMILIES = {
    "evidence_precision": ("share of the characters of the top {k} chunks that are evidence "
                           "(overlapping chunks counted each time)", True),
    "evidence_recall": ("share of the query's evidence characters that the top {k} chunks "
                        "hold", True),
    "retrieved_chars": ("characters of document text the top {k} chunks hold (what a reader "
                        "is given)", False),
}
_EVIDENCE_NAME = re.compile(r"^(?P<family>evidence_precision|evidence_recall|retrieved_chars)"
                            r"_at_(?P<k>[1-9][0-9]{0,6})$")


def evidence_metrics(cutoffs: Sequence[int]) -> Iterator[MetricDef]:
    """The character-level evidence metrics at each cut-off."""
    for k in cutoffs:
        for family, (description, better) in EVIDENCE_FAMILIES.items():
            yield MetricDef(name=f"{family}_at_{k}", level=Level.EVIDENCE, family=family, k=k,
                            higher_is_better=better, description=description.format(k=k))


_RUN_METRICS = (
    ("no_hit_rate", "share of queries that returned zero hits", False),
    ("error_rate", "share of queries whose pipeline call raised", False),
)
_ANSWER_METRICS = (
    ("contains_all", "answer holds every must_contain string and no forbidden one; an "
     "answerable question refused scores 0, an unanswerable one answered scores 0; a refused "
     "unanswerable one is not counted", True),
    ("refusal_rate", "share of ask queries the pipeline refused (queries that raised are "
     "counted in error_rate instead)", False),
    ("abstention_accuracy", "the refusal decision where it matters: 1 for a refused "
     "unanswerable question, 0 for an answered unanswerable or a refused answerable one (an "
     "answered answerable one is not counted: contains_all judges it)", True),
    ("ask_grounded_rate", "share of ask queries answered (not refused) with >= 1 citation", True),
    ("citation_validity", "answered with citations: every cited chunk was among the hits", True),
)


def _standard_metrics() -> Iterator[MetricDef]:
    """Every standard metric, in the order ``kebab-mlflow metrics`` lists them."""
    for level in (Level.CHUNK, Level.DOC):
        yield _retrieval_metric("mrr", level, None)
        for family in _RANK_FAMILIES:
            yield _retrieval_metric(family, level, None)
    for k in CUTOFFS:
        for level in (Level.CHUNK, Level.DOC):
            for family in _CUTOFF_FAMILIES:
                yield _retrieval_metric(family, level, k)
        yield from judged_metrics([k])
        yield from evidence_metrics([k])
    for level, group in ((Level.RUN, _RUN_METRICS), (Level.ANSWER, _ANSWER_METRICS)):
        for name, description, better in group:
            yield MetricDef(name=name, level=level, description=description, family=name,
                            higher_is_better=better)


def registry(metrics: Iterator[MetricDef]) -> Mapping[str, MetricDef]:
    """A read-only name → definition mapping; a name defined twice is refused."""
    found: dict[str, MetricDef] = {}
    for metric in metrics:
        if metric.name in found:
            raise ValueError(f"metric {metric.name!r} registered twice")
        found[metric.name] = metric
    return MappingProxyType(found)


METRICS: Mapping[str, MetricDef] = registry(_standard_metrics())
_RETRIEVAL_NAME = re.compile(r"^(?P<family>[a-z]+(?:_precision)?)(?:_at_(?P<k>[1-9][0-9]{0,6}))?"
                             r"(?:_(?P<level>chunk|doc))?$")


def parse_metric(name: str) -> MetricDef | None:
    """The definition a name spells (any cut-off), or None when it names no metric. Only the
    canonical spelling parses: ``hit_at_5``, not ``hit_at_5_chunk``."""
    known = METRICS.get(name)
    if known is not None:
        return known
    evidence = _EVIDENCE_NAME.match(name)
    if evidence is not None:
        return next(m for m in evidence_metrics([int(evidence["k"])]) if m.name == name)
    m = _RETRIEVAL_NAME.match(name)
    if m is None or m["family"] not in _CUTOFF_FAMILIES.keys() | {"judged"} or m["k"] is None:
        return None  # the families without a cut-off are all in METRICS already
    level = Level(m["level"] or Level.CHUNK)
    if m["family"] == "judged" and level not in JUDGED_LEVELS:
        return None
    metric = _retrieval_metric(m["family"], level, int(m["k"]))
    return metric if metric.name == name else None


def get_metric(name: str) -> MetricDef:
    metric = parse_metric(name)
    if metric is None:
        from kebab_mlflow.errors import ConfigError

        raise ConfigError(f"unknown metric {name!r}; valid metrics: "
                          f"{', '.join(sorted(METRICS))}")
    return metric


def run_metric_names(cutoffs: Sequence[int]) -> set[str]:
    """Every metric a run with these cut-offs can report: the standard ones and its own."""
    at_cutoffs = [m.name for level in (Level.CHUNK, Level.DOC)
                  for m in retrieval_metrics(level, cutoffs, MRR_CUTOFF)]
    return {*METRICS, *at_cutoffs, *(m.name for m in judged_metrics(cutoffs)),
            *(m.name for m in evidence_metrics(cutoffs))}


def metric_names(level: str | None = None) -> list[str]:
    return [n for n, m in METRICS.items() if level is None or m.level == level]


# ------------------------------------------------------------------ calibration headline

# ECE and Brier of the answers' confidences: run-level numbers (no per-query score, so not in
# METRICS: they cannot be a primary metric or be gated), shown and logged with the headline
# metrics whenever a run has confidences; the uncalibrated pair when a calibrator changed them.
CALIBRATION_METRICS: Mapping[str, str] = MappingProxyType({
    "ece": "expected calibration error of the answers' confidences (10 equal-width bins)",
    "brier": "Brier score: mean squared error of confidence vs correctness",
    "ece_uncalibrated": "ECE of the confidences before the calibrator",
    "brier_uncalibrated": "Brier score of the confidences before the calibrator",
})

# --------------------------------------------------------------------------- display order

_LEVEL_ORDER = tuple(Level)
_FAMILY_ORDER = ("hit", "mrr", "map", "r_precision", "ndcg", "precision", "recall", "judged")


def display_key(name: str) -> tuple[bool, str, int, int, int, str]:
    """Sort key that shows metrics the way people read them: overall metrics before breakdown
    blocks (``by_query_type/...``), then by level (chunk, doc, answer, run), family, and the
    cut-off *as a number* (hit_at_10 before hit_at_100); unknown names last, by name."""
    block, _, metric = name.rpartition("/")
    if metric.endswith(UPPER_SUFFIX) and parse_metric(metric.removesuffix(UPPER_SUFFIX)):
        return (*display_key(name.removesuffix(UPPER_SUFFIX))[:5], metric)  # right after it
    unjudged = _UNJUDGED_NAME.match(metric)
    if unjudged is not None:  # after judged_at_k, by cut-off
        return (bool(block), block, _LEVEL_ORDER.index(Level(unjudged["level"])),
                len(_FAMILY_ORDER), int(unjudged["k"]), metric)
    m = parse_metric(metric)
    if m is None and metric in CALIBRATION_METRICS:  # after the answer metrics
        return (bool(block), block, _LEVEL_ORDER.index(Level.ANSWER),
                len(_FAMILY_ORDER) + len(METRICS) + list(CALIBRATION_METRICS).index(metric),
                0, metric)
    if m is None:
        return (bool(block), block, len(_LEVEL_ORDER), 0, 0, metric)
    family = (_FAMILY_ORDER.index(m.family) if m.family in _FAMILY_ORDER
              else len(_FAMILY_ORDER) + list(METRICS).index(metric))  # answer/run: as listed
    k = 0 if m.family == "mrr" or m.k is None else m.k
    return (bool(block), block, _LEVEL_ORDER.index(m.level), family, k, metric)


# the bounds for unjudged hits (metrics/unjudged.py): not metrics of their own (no per-query
# score in per_query.jsonl, parse_metric does not know them), shown beside the metrics
UPPER_SUFFIX = "_upper"
_UNJUDGED_NAME = re.compile(r"^unjudged_hits_at_(?P<k>[1-9][0-9]{0,6})_(?P<level>doc)$")


def display_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=display_key)
