"""The records of a comparison: each side, the options, per-metric and per-query results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kebab_mlflow.errors import Problem
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.records import VERSION_KEYS

DEFAULT_GATES = ("hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_doc", "contains_all")


SMALL_SET = 30


KINDS = ("Regression", "Loss", "Win", "Draw")


@dataclass(frozen=True)
class RunSide:
    """What compare needs of one run (built from MLflow, or by hand in tests)."""

    run_id: str
    name: str
    status: str
    params: Mapping[str, str]
    tags: Mapping[str, str]
    rows: tuple[PerQueryRow, ...] = ()
    per_query_sha256: str | None = None  # digest of the bytes actually read

    @property
    def versions(self) -> dict[str, str]:
        return {k: self.params.get(k, "unknown") for k in VERSION_KEYS}

    @property
    def private(self) -> bool:
        return self.tags.get("kebab.private", "false") == "true"

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "status": self.status,
                "preset": self.params.get("preset"), "backend": self.params.get("backend"),
                "golden_set": self.params.get("golden_set"),
                "golden_sha256": self.tags.get("kebab.golden_sha256"),
                "git_commit": self.tags.get("kebab.git_commit"),
                "git_dirty": self.tags.get("kebab.git_dirty"),
                "versions": self.versions, "n_queries": len(self.rows)}


@dataclass(frozen=True)
class CompareOptions:
    gates: tuple[str, ...] | None = None  # None: the DEFAULT_GATES that both runs scored
    alpha: float = 0.05
    confidence: float = 0.95
    resamples: int = 10_000
    seed: int = 0
    strict: bool = False
    allow_golden_mismatch: bool = False
    small_set: int = SMALL_SET

    def __post_init__(self):
        problems = []
        if not 0 < self.alpha < 1:
            problems.append(Problem(f"--alpha must be in (0, 1), got {self.alpha}", "--alpha"))
        if not 0 < self.confidence < 1:
            problems.append(Problem(f"confidence must be in (0, 1), got {self.confidence}"))
        if self.resamples < 1:
            problems.append(Problem(f"resamples must be >= 1, got {self.resamples}"))
        if self.gates is not None and not self.gates:
            problems.append(Problem("at least one gated metric is needed", "--gate"))
        if problems:
            from kebab_mlflow.errors import InputError

            raise InputError("bad compare options", problems)


@dataclass(frozen=True)
class MetricResult:
    name: str  # the metric compared (its _doc variant in doc-level fallback)
    gate: str  # as requested
    higher_is_better: bool
    n: int
    baseline: float | None  # means over the n paired queries
    candidate: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    significant: str | None  # "better" | "worse" | None


@dataclass(frozen=True)
class QueryDiff:
    id: str
    query: str | None
    has_truth: bool
    baseline_rank: int | None  # first-hit rank, None = miss
    candidate_rank: int | None
    kind: str  # Win | Loss | Draw | Regression
    contains_all: str | None = None  # "gained" | "lost" when it flipped
    refusal: str | None = None  # "started" | "stopped" when it flipped
    top_score_delta: float | None = None


@dataclass(frozen=True)
class Comparison:
    verdict: str
    reasons: tuple[str, ...]
    rule: str
    level: str  # chunk | doc
    baseline: dict[str, Any]
    candidate: dict[str, Any]
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
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "Regressed" else 0
