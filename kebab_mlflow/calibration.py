"""Abstention outcomes and confidence calibration (ECE, Brier), and the answer calibrator.

Correctness of a response (DESIGN §5): for an unanswerable case, refusing is correct; for an
answerable one, answering with ``contains_all`` = 1 is correct.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.pipeline import Answer

N_BINS = 10


def ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> float:
    """Σ_b |b|/N · |accuracy(b) − mean confidence(b)|, bin = min(int(conf·10), 9)."""
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            total += in_bin.mean() * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return float(total)


def brier(confidence: np.ndarray, correct: np.ndarray) -> float:
    return float(np.mean((confidence - correct) ** 2))


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS):
    """Per bin: (lower edge, mean confidence, accuracy, count); empty bins have None."""
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    out = []
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


def calibration_pairs(queries: Sequence[GoldenQuery], answers: Sequence[Answer | None],
                      contains_all: np.ndarray, confidence_of=lambda a: a.confidence):
    conf, correct = [], []
    for q, a, ca in zip(queries, answers, contains_all, strict=True):
        if a is None or not q.ask:
            continue
        c = confidence_of(a)
        if isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1 \
                and not math.isnan(c):
            conf.append(float(c))
            correct.append(response_correct(q, a, ca))
    return np.array(conf), np.array(correct)


def calibration_block(confidence: np.ndarray, correct: np.ndarray) -> dict | None:
    """{ece, brier, n}, or None when no case carries a confidence."""
    if confidence.size == 0:
        return None
    return {"ece": ece(confidence, correct), "brier": brier(confidence, correct),
            "n": int(confidence.size)}


def abstention_outcomes(queries: Sequence[GoldenQuery],
                        answers: Sequence[Answer | None]) -> dict | None:
    """Buckets for ``answerable: false`` cases: correct_refusal (refused, no evidence),
    incorrect_answer (answered with evidence), boundary_partial (the rest)."""
    buckets = {"correct_refusal": 0, "incorrect_answer": 0, "boundary_partial": 0}
    n = 0
    for q, a in zip(queries, answers, strict=True):
        if q.answerable or not q.ask or a is None:
            continue
        n += 1
        if a.refused and not a.citations:
            buckets["correct_refusal"] += 1
        elif not a.refused and a.citations:
            buckets["incorrect_answer"] += 1
        else:
            buckets["boundary_partial"] += 1
    if n == 0:
        return None
    return {"n": n, **buckets, **{f"{k}_share": v / n for k, v in buckets.items()}}


@dataclass(frozen=True)
class Calibrator:
    """Isotonic maps raw confidence → P(response correct), one for answers, one for refusals
    (a refusal's correctness falls as the raw evidence score rises; an answer's rises)."""

    answered: tuple[tuple[float, ...], tuple[float, ...]]  # (x thresholds, y values)
    refused: tuple[tuple[float, ...], tuple[float, ...]]

    def __call__(self, raw: float, is_refusal: bool) -> float:
        xs, ys = self.refused if is_refusal else self.answered
        if not xs:
            return raw if not is_refusal else 1.0 - raw
        return float(np.interp(raw, xs, ys))

    @classmethod
    def fit(cls, raw: np.ndarray, refused: np.ndarray, correct: np.ndarray) -> Calibrator:
        from sklearn.isotonic import IsotonicRegression

        def one(mask: np.ndarray, increasing: bool):
            if mask.sum() < 2 or len(set(raw[mask])) < 2:
                return ((), ())
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=increasing,
                                     out_of_bounds="clip").fit(raw[mask], correct[mask])
            return (tuple(map(float, iso.X_thresholds_)), tuple(map(float, iso.y_thresholds_)))

        return cls(one(~refused, True), one(refused, False))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"answered": self.answered, "refused": self.refused}))

    @classmethod
    def load(cls, path: Path) -> Calibrator:
        data = json.loads(path.read_text())
        return cls(tuple(map(tuple, data["answered"])), tuple(map(tuple, data["refused"])))
