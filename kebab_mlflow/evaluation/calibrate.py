"""Fit the answer calibrator on a golden set: run the reference pipeline with calibration off
(no MLflow), then fit on (raw confidence, refused, correct) of its ask cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import CalibrationError
from kebab_mlflow.metrics.calibration import calibration_block, response_correct, usable_confidence
from kebab_mlflow.names import DEFAULT_K
from kebab_mlflow.pipeline.calibrator import (
    METHODS,
    Calibrator,
    base_versions,
    calibrator_path,
)


@dataclass(frozen=True, kw_only=True)
class CalibrationFit:
    calibrator: Calibrator
    path: Path  # where it is stored (with the index)
    before: dict[str, float | int] | None  # {ece, brier, n} of the raw confidence, fitting set
    after: dict[str, float | int] | None  # the same with the calibrator (in-sample)
    n_answered: int
    n_refused: int


def fit_on_golden_set(golden_path: str | Path, corpus: str | Path,
                      preset: str = "naive_baseline",
                      overrides: Mapping[str, Any] | None = None, k: int = DEFAULT_K,
                      method: str = "platt", save: bool = True) -> CalibrationFit:
    """Run the reference pipeline with calibration off over the golden set (no MLflow), fit a
    calibrator on (raw confidence, refused, correct) of its ask cases and store it with the
    index, keyed by the pipeline's versions."""
    from kebab_mlflow.config import build_config
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.backends.floors import oracle_truth
    from kebab_mlflow.pipeline.reference import build_pipeline

    if method not in METHODS:
        raise CalibrationError(f"unknown calibration method {method!r}; valid: "
                               f"{', '.join(METHODS)}")
    if k < 1:
        raise CalibrationError(f"--k must be >= 1, got {k}")
    golden = load_golden_set(golden_path)
    config = build_config(preset, {**dict(overrides or {}), "answer.calibrate": False})
    pipeline = build_pipeline(config, corpus, oracle_truth(golden.queries))
    return fit_with_pipeline(pipeline, golden, {"corpus": str(corpus), "preset": preset}, k,
                             method, save)


def fit_with_pipeline(pipeline: Any, golden: Any, about: Mapping[str, Any], k: int = DEFAULT_K,
                      method: str = "platt", save: bool = True) -> CalibrationFit:
    """:func:`fit_on_golden_set` with a pipeline already built (calibration off); ``about``
    goes into the calibrator's ``info`` (corpus, preset)."""
    from kebab_mlflow.evaluation.evaluate import evaluate

    result = evaluate(pipeline, golden, k=k)
    cases = _cases(golden, result)
    info = {"golden_set": golden.name, "golden_sha256": golden.digest, **about,
            "k": k, "versions": base_versions(pipeline.versions),
            "n": len(cases.raw), "n_refused": int(cases.refused.sum()),
            "before": calibration_block(cases.uncalibrated, cases.correct)}
    calibrator = Calibrator.fit(cases.raw, cases.refused, cases.correct, method, info,
                                cases.similarity)
    after = calibration_block(calibrator.apply(cases.raw, cases.refused, cases.similarity),
                              cases.correct)
    calibrator = Calibrator(method=calibrator.method, answered=calibrator.answered,
                            refused=calibrator.refused,
                            info={**info, "after_in_sample": after})
    target = calibrator_path(pipeline.folder, pipeline.versions)
    if save:
        target.parent.mkdir(parents=True, exist_ok=True)
        calibrator.save(target)
    return CalibrationFit(calibrator=calibrator, path=target, before=info["before"], after=after,
                          n_answered=int((~cases.refused).sum()),
                          n_refused=int(cases.refused.sum()))


@dataclass(frozen=True, kw_only=True)
class _Cases:
    """The ask cases a calibrator is fitted on, as arrays."""

    raw: np.ndarray
    refused: np.ndarray
    correct: np.ndarray
    uncalibrated: np.ndarray
    similarity: np.ndarray | None  # the answerer measures it for every answer or for none


def _cases(golden: Any, result: Any) -> _Cases:
    answers = [row.answer for row in result.rows()]
    contains = result.scores.get("contains_all", np.full(len(golden.queries), np.nan))
    raw, refused, correct, uncalibrated, similarity = [], [], [], [], []
    for q, a, ca in zip(golden.queries, answers, contains, strict=True):
        if q.ask and a is not None and usable_confidence(a.raw_confidence) \
                and usable_confidence(a.confidence):
            raw.append(a.raw_confidence)
            refused.append(a.refused)
            correct.append(response_correct(q, a, ca))
            uncalibrated.append(a.confidence)
            similarity.append(a.similarity)
    if not raw:
        raise CalibrationError(f"nothing to calibrate on: golden set {golden.path} has no "
                               "'ask: true' query whose answer carries a raw confidence")
    sim = np.array(similarity, float) if all(usable_confidence(v) for v in similarity) else None
    return _Cases(raw=np.array(raw), refused=np.array(refused, dtype=bool),
                  correct=np.array(correct),
                  uncalibrated=np.array(uncalibrated), similarity=sim)


def gate_cases(pipeline: Any, golden: Any, k: int = DEFAULT_K
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """The answerability gate's features (:func:`answerer.gate_features`) of each ask query of
    ``golden`` that has a quotable sentence, whether it is answerable, and how many answerable
    ones have none (refused whatever the gate) — what :func:`calibrator.fit_gate` fits on."""
    from kebab_mlflow.pipeline.answerer import gate_features, rank_sentences, term_weights

    queries = [q for q in golden.queries if q.ask]
    rows, answerable, without = [], [], 0
    for q, hits in zip(queries, pipeline.search_batch([q.query for q in queries], k),
                       strict=True):
        weights = term_weights(q.query, pipeline.idf, pipeline.tokenize)
        candidates = rank_sentences(q.query, hits, pipeline.answer_config.context_k,
                                    weights=weights, tokenize=pipeline.tokenize)
        if candidates:
            rows.append(gate_features(q.query, hits, candidates).row())
            answerable.append(q.answerable)
        else:
            without += q.answerable
    return np.array(rows, float).reshape(-1, 3), np.array(answerable, bool), without
