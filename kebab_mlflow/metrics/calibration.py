"""Abstention outcomes and confidence calibration metrics (ECE, Brier, reliability bins).

Correctness of a response (DESIGN §5): for an unanswerable case, refusing is correct; for an
answerable one, answering with ``contains_all`` = 1 is correct.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.answers import AbstentionOutcome, abstention_outcome
from kebab_mlflow.records import Answer

N_BINS = 10


def _bins(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    bins: np.ndarray = np.minimum((np.asarray(confidence, dtype=float) * n_bins).astype(int),
                                  n_bins - 1)
    return bins


def ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> float:
    """Σ_b |b|/N · |accuracy(b) − mean confidence(b)|, bin = min(int(conf·10), 9)."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, float)
    if confidence.size == 0:
        raise ValueError("ece of no cases")
    bins = _bins(confidence, n_bins)
    n = np.bincount(bins, minlength=n_bins)
    gap = np.abs(np.bincount(bins, correct, n_bins) - np.bincount(bins, confidence, n_bins))
    # Σ |b|/N · |Σcorrect/|b| − Σconf/|b|| = Σ |Σcorrect − Σconf| / N
    return float(gap.sum() / n.sum())


def brier(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Mean squared error of the confidence against the 0/1 outcome."""
    if np.size(confidence) == 0:
        raise ValueError("brier of no cases")
    return float(np.mean((np.asarray(confidence, float) - np.asarray(correct, float)) ** 2))


ReliabilityBin = tuple[float, float | None, float | None, int]


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS
                     ) -> list[ReliabilityBin]:
    """Per bin: (lower edge, mean confidence, accuracy, count); empty bins have None."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, float)
    bins = _bins(confidence, n_bins)
    out: list[ReliabilityBin] = []
    for b in range(n_bins):
        sel = bins == b
        n = int(sel.sum())
        out.append((b / n_bins, float(confidence[sel].mean()) if n else None,
                    float(correct[sel].mean()) if n else None, n))
    return out


def response_correct(query: GoldenQuery, answer: Answer, contains_all: float) -> float:
    if not query.answerable:
        return float(answer.refused)
    return float(not answer.refused and contains_all == 1.0)


def usable_confidence(c: Any) -> bool:
    return (isinstance(c, (int, float)) and not isinstance(c, bool) and not math.isnan(c)
            and 0.0 <= c <= 1.0)


def calibration_pairs(queries: Sequence[GoldenQuery], answers: Sequence[Answer | None],
                      contains_all: np.ndarray,
                      confidence_of: Callable[[Answer], Any] = lambda a: a.confidence
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) arrays over the ask cases whose answer carries a confidence in
    [0, 1]; cases without one (None, NaN, out of range) are left out."""
    conf: list[float] = []
    correct: list[float] = []
    for q, a, ca in zip(queries, answers, contains_all, strict=True):
        if a is None or not q.ask:
            continue
        c = confidence_of(a)
        if usable_confidence(c):
            conf.append(float(c))
            correct.append(response_correct(q, a, ca))
    return np.array(conf, dtype=float), np.array(correct, dtype=float)


def calibration_block(confidence: np.ndarray, correct: np.ndarray
                      ) -> dict[str, float | int] | None:
    """{ece, brier, n}, or None when no case carries a confidence."""
    if confidence.size == 0:
        return None
    return {"ece": ece(confidence, correct), "brier": brier(confidence, correct),
            "n": int(confidence.size)}


# aggregate.json's key order (unchanged since before the enum existed)
ABSTENTION_BUCKET_ORDER = (AbstentionOutcome.CORRECT_REFUSAL, AbstentionOutcome.INCORRECT_ANSWER,
                           AbstentionOutcome.BOUNDARY_PARTIAL)


def abstention_outcomes(queries: Sequence[GoldenQuery],
                        answers: Sequence[Answer | None]) -> dict[str, float | int] | None:
    """Buckets for the ``answerable: false`` ask cases: ``correct_refusal`` (refused, citing
    nothing), ``incorrect_answer`` (answered, citing evidence), ``boundary_partial`` (the rest:
    a refusal that cites, an answer without citations, a pipeline error). Counts and shares;
    None when the set has no such case."""
    buckets = {str(o): 0 for o in ABSTENTION_BUCKET_ORDER}
    n = 0
    for q, a in zip(queries, answers, strict=True):
        outcome = abstention_outcome(q, a)
        if outcome is not None:
            n += 1
            buckets[str(outcome)] += 1
    if n == 0:
        return None
    return {"n": n, **buckets, **{f"{k}_share": v / n for k, v in buckets.items()}}
