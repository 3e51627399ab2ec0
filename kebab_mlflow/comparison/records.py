"""The records of a comparison: each side, the options, per-metric and per-query results."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypedDict, TypeVar

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import Problem
from kebab_mlflow.evaluation.per_query import (
    PerQueryRow,
    QueryRow,
    read_lines_at,
    read_rows_at,
)
from kebab_mlflow.golden import SliceKey
from kebab_mlflow.records import VERSION_KEYS
from kebab_mlflow.stats.alternative import Alternative

# The primary metric when neither --primary nor the golden set's primary_metric names one, by
# the ground truth the compared queries have (see verdict.default_primary).
DEFAULT_PRIMARY = {"chunk": "mrr", "doc": "ndcg_at_10_doc", "answer": "contains_all"}
SMALL_SET = 30
# --resamples beyond this is refused up front: 10^6 resamples of 10^4 queries already take
# minutes; 1e9 would run for days or exhaust memory.
MAX_RESAMPLES = 1_000_000

T = TypeVar("T")


class Verdict(enum.StrEnum):
    """compare's answer; Regressed and Inconclusive exit 1."""

    BETTER = "Better"
    SAME = "Same"
    REGRESSED = "Regressed"
    INCONCLUSIVE = "Inconclusive"
    # the verdict flips between the bounds for unjudged hits (compare --unjudged gate)
    INCONCLUSIVE_UNJUDGED = "Inconclusive (unjudged)"


class QueryKind(enum.StrEnum):
    """How one query changed: Regression (hit → miss, on a query with ground truth), Loss
    (ranked worse), Win (ranked better), Draw (the same)."""

    REGRESSION = "Regression"
    LOSS = "Loss"
    WIN = "Win"
    DRAW = "Draw"


KINDS = tuple(QueryKind)  # the order every count and table shows them in


class SideSummary(TypedDict):
    """One side of a comparison as its report shows it (``baseline`` / ``candidate``)."""

    run_id: str
    name: str
    status: str
    preset: str | None
    backend: str | None
    golden_set: str | None
    golden_sha256: str | None
    git_commit: str | None
    git_dirty: str | None
    experiment: str | None
    versions: dict[str, str]
    n_queries: int


@dataclass(frozen=True)
class RowSource:
    """The ``per_query.jsonl`` a side's compact rows were read from (``shown_as`` in errors);
    ``keep`` holds what removes its temporary folder once the side is gone."""

    path: Path
    shown_as: str
    keep: object = None


@dataclass(frozen=True, kw_only=True)
class RunSide:
    """What compare needs of one run (built from MLflow, or by hand in tests). ``rows``:
    whole rows (in memory) or compact ones read from ``source`` (comparison/loading.py), which
    :meth:`full_rows` reads again where hits or answers are needed."""

    run_id: str
    name: str
    status: str
    params: Mapping[str, str]
    tags: Mapping[str, str]
    rows: tuple[QueryRow, ...] = ()
    per_query_sha256: str | None = None  # digest of the bytes actually read
    experiment: str | None = None  # the experiment's name, when read from a store
    source: RowSource | None = None

    def full_rows(self, ids: Sequence[str] | None = None) -> Iterator[PerQueryRow]:
        """The whole rows of ``ids`` in that order (ids the side lacks skipped), else all."""
        chosen = (list(self.rows) if ids is None else
                  [r for i in ids if (r := self.by_id.get(i)) is not None])
        whole = [r for r in chosen if isinstance(r, PerQueryRow)]
        if len(whole) == len(chosen):
            yield from whole
            return
        if self.source is None:
            raise ValueError(f"run {self.run_id}: compact rows without their source file")
        offsets = [r.offset for r in chosen if not isinstance(r, PerQueryRow)]
        yield from read_rows_at(self.source.path, offsets, self.source.shown_as)

    def line_records(self, ids: Sequence[str], keep: Callable[[bytes], T]) -> list[T] | None:
        """``keep`` of the bytes of each line of ``ids`` (ids the side lacks skipped), which
        the compact read checked. None when rows are held whole (no source)."""
        chosen = [r for i in ids if (r := self.by_id.get(i)) is not None]
        offsets = [r.offset for r in chosen if not isinstance(r, PerQueryRow)]
        if self.source is None or len(offsets) < len(chosen):
            return None
        return [keep(raw) for raw in read_lines_at(self.source.path, offsets)]

    @cached_property
    def by_id(self) -> dict[str, QueryRow]:
        """The rows by query id (built once)."""
        return {r.id: r for r in self.rows}

    @property
    def versions(self) -> dict[str, str]:
        return {k: self.params.get(k, "unknown") for k in VERSION_KEYS}

    @property
    def private(self) -> bool:
        return self.tags.get(vocab.PRIVATE, "false") == "true"

    def summary(self) -> SideSummary:
        return {"run_id": self.run_id, "name": self.name, "status": self.status,
                "preset": self.params.get(vocab.PRESET),
                "backend": self.params.get(vocab.BACKEND),
                "golden_set": self.params.get(vocab.GOLDEN_SET),
                "golden_sha256": self.tags.get(vocab.GOLDEN_SHA256),
                "git_commit": self.tags.get(vocab.GIT_COMMIT),
                "git_dirty": self.tags.get(vocab.GIT_DIRTY),
                "experiment": self.experiment,
                "versions": self.versions, "n_queries": len(self.rows)}


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    """``primary``: the metric that decides (None: the golden set's ``primary_metric``, else
    :data:`DEFAULT_PRIMARY` by ground truth); ``gates``: further gated metrics, sharing Holm's
    correction with the primary; ``margin``: non-inferiority margin (Same needs every gated
    CI's worse bound within it, else Inconclusive); ``max_regressions``: more Regression
    queries than this is Regressed."""

    gates: tuple[str, ...] = ()
    primary: str | None = None
    alpha: float = 0.05
    confidence: float = 0.95
    resamples: int = 10_000
    seed: int = 0
    strict: bool = False
    allow_golden_mismatch: bool = False
    small_set: int = SMALL_SET
    margin: float | None = None
    max_regressions: int | None = None
    # gate abstention_accuracy too when both runs carry abstention cases (unanswerable ask
    # queries): their correct refusals are NaN for contains_all, so nothing else sees them
    abstention_gate: bool = True
    alternative: Alternative = Alternative.TWO_SIDED
    # flaky queries (flip rate > 0 on either side, run --repeat) count in --max-regressions
    # and the small-set rule only with this (--count-flaky)
    count_flaky: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.alpha < 1:
            problems.append(Problem(f"--alpha must be in (0, 1), got {self.alpha}", "--alpha"))
        if not 0 < self.confidence < 1:
            problems.append(Problem(f"confidence must be in (0, 1), got {self.confidence}"))
        if not 1 <= self.resamples <= MAX_RESAMPLES:
            problems.append(Problem(f"--resamples must be in [1, {MAX_RESAMPLES:,}], got "
                                    f"{self.resamples:,}", "--resamples"))
        if self.margin is not None and not (self.margin >= 0 and self.margin < float("inf")):
            problems.append(Problem(f"--margin must be >= 0, got {self.margin}", "--margin"))
        if self.max_regressions is not None and self.max_regressions < 0:
            problems.append(Problem(f"--max-regressions must be >= 0, got "
                                    f"{self.max_regressions}", "--max-regressions"))
        if problems:
            from kebab_mlflow.errors import InputError

            raise InputError("bad compare options", problems)


@dataclass(frozen=True, kw_only=True)
class MetricResult:
    name: str  # the metric compared (its _doc variant in doc-level fallback)
    gate: str  # as requested
    role: str  # primary | gate
    higher_is_better: bool
    n: int
    baseline: float | None  # means over the n paired queries
    candidate: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_exact: bool  # p by enumerating the sign flips, not by resampling
    p_holm: float | None  # None: not tested, or unchanged on every query (left out of Holm)
    significant: str | None  # "better" | "worse" | None
    unchanged: bool  # every paired delta is 0 (zero variance): reported, not corrected for
    sd: float | None  # of the paired deltas
    # minimum detectable effect at 80% power, this n and sd, for a loss of whole queries at
    # random (conservative: the hardest shape, bench/bench_mde_shapes.py)
    mde: float | None
    mde_alpha: float | None  # the level the MDE is computed at (alpha / gates in the correction)
    within_margin: bool | None = None  # with --margin: the CI's worse bound within it
    # the per-query change size the MDE models a loss with: Σd²/Σ|d| of the paired deltas
    loss_size: float | None = None
    mde_whole: float | None = None  # the MDE if the loss falls on whole queries (= mde)
    mde_spread: float | None = None  # the MDE for a loss made of changes of size loss_size


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryDiff:
    id: str
    query: str | None
    has_truth: bool
    level: str  # the level of its ground truth: chunk | doc | none
    baseline_rank: int | None  # first-hit rank, None = miss
    candidate_rank: int | None
    kind: QueryKind
    contains_all: str | None = None  # "gained" | "lost" when it flipped
    refusal: str | None = None  # "started" | "stopped" when it flipped
    top_score_delta: float | None = None
    # an unanswerable query's outcome change, "correct_refusal → incorrect_answer"
    abstention: str | None = None
    flaky: bool = False  # its repeats disagreed on either side (flip rate > 0)


class SliceVerdict(enum.StrEnum):
    REGRESSED = "Regressed"
    BETTER = "Better"
    SAME = "Same"
    TOO_SMALL = "too small"  # fewer judged queries than the small-set threshold


@dataclass(frozen=True, kw_only=True)
class SliceResult:
    """The paired comparison of one slice: its gated metrics (Holm across every slice)."""

    label: str
    n: int  # compared queries in the slice
    n_judged: int  # of them with per-query evidence (ground truth or an abstention case)
    regressions: int  # its Regression queries
    metrics: tuple[MetricResult, ...]
    verdict: SliceVerdict


@dataclass(frozen=True, kw_only=True)
class SliceReport:
    by: SliceKey
    golden: str  # where the labels came from: the golden set's name and digest
    slices: tuple[SliceResult, ...]
    unlabelled: int  # compared queries without a label (in no slice)
    tests: int  # (slice, metric) tests in Holm's correction
    small_set: int
    overall: Verdict  # the verdict over all queries, before the slices

    @property
    def regressed(self) -> tuple[SliceResult, ...]:
        return tuple(s for s in self.slices if s.verdict is SliceVerdict.REGRESSED)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    verdict: Verdict
    reasons: tuple[str, ...]
    rule: str
    level: str  # chunk | doc | chunk+doc (queries with truth at each) | none
    baseline: SideSummary
    candidate: SideSummary
    versions: tuple[tuple[str, str, str, bool], ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    options: CompareOptions
    n_queries: int
    n_with_truth: int
    dropped: dict[str, int]
    metrics: tuple[MetricResult, ...]
    queries: tuple[QueryDiff, ...]
    private: bool
    counts: Mapping[QueryKind, int] = field(default_factory=dict)
    primary_source: str = "default"  # --primary | golden set primary_metric | default
    flaky_regressions: int = 0  # Regression queries flaky on either side (run --repeat)
    slices: SliceReport | None = None  # compare --by (comparison/slices.py)

    @property
    def exit_code(self) -> int:
        """0 Better or Same; 1 Regressed or Inconclusive (a CI step should fail on both)."""
        return 1 if self.verdict in (Verdict.REGRESSED, Verdict.INCONCLUSIVE,
                                     Verdict.INCONCLUSIVE_UNJUDGED) else 0

    @property
    def primary(self) -> MetricResult:
        return self.metrics[0]
