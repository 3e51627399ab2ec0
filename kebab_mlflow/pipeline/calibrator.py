"""Abstention outcomes and confidence calibration (ECE, Brier), and the answer calibrator.

Correctness of a response (DESIGN §5): for an unanswerable case, refusing is correct; for an
answerable one, answering with ``contains_all`` = 1 is correct.

The calibrator maps the answerer's raw confidence to P(response correct) with two monotone maps,
one for answers (P rises with the raw evidence) and one for refusals (P falls with it): either
scikit-learn's isotonic regression or Platt scaling (a logistic curve fitted by Newton's method
on Platt's smoothed targets, pure numpy). When the answers carry a query–answer similarity
(``answer.similarity``), Platt's curve takes it as a second input. ``kebab-mlflow calibrate``
fits one on a golden set and stores it with the index as ``calibrator-<key>.json``; ``key`` is a
digest of the pipeline's version snapshot with the ``-calibrated`` suffix removed, because the
mapping is only valid for the retrieval backend and answerer settings it was fitted with (see
:func:`calibrator_key`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import CalibrationError, Problem
from kebab_mlflow.pipeline.answerer import GateFeatures, GateModel
from kebab_mlflow.records import VersionSnapshot

METHODS = ("isotonic", "platt")
FORMAT = "kebab-calibrator/1"
CALIBRATED_SUFFIX = "-calibrated"




# --- metrics ----------------------------------------------------------------------------------



















# --- the calibrator ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ConfidenceMap:
    """raw → P(correct). ``kind``: ``isotonic`` (piecewise linear through ``x``/``y``),
    ``platt`` (sigmoid(slope·raw + similarity_slope·similarity + intercept); the similarity
    term only when it was fitted with one), ``constant`` (``y[0]``: too little data or one
    outcome only) or ``none`` (no data: the caller falls back to the raw confidence)."""

    kind: str
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    slope: float = 0.0
    intercept: float = 0.0
    similarity_slope: float | None = None  # None: fitted on the raw confidence alone

    def __call__(self, raw: float, similarity: float | None = None) -> float:
        if self.kind == "isotonic":
            return float(np.interp(raw, self.x, self.y))
        if self.kind == "platt":
            z = self.slope * raw + self.intercept
            if self.similarity_slope is not None:
                if similarity is None:
                    raise ValueError("this calibrator was fitted with the answers' similarity "
                                     "(answer.similarity=true) and an answer has none")
                z += self.similarity_slope * similarity
            return _sigmoid(z)
        if self.kind == "constant":
            return self.y[0]
        raise ValueError("a 'none' map has no value")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "x": list(self.x), "y": list(self.y), "slope": self.slope,
                "intercept": self.intercept, "similarity_slope": self.similarity_slope}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConfidenceMap:
        kind = data["kind"]
        sim = data.get("similarity_slope")  # absent from calibrators written before it existed
        m = cls(kind=kind, x=tuple(map(float, data.get("x", ()))),
                y=tuple(map(float, data.get("y", ()))),
                slope=float(data.get("slope", 0.0)), intercept=float(data.get("intercept", 0.0)),
                similarity_slope=None if sim is None else float(sim))
        ok = {"isotonic": len(m.x) == len(m.y) >= 1, "platt": True,
              "constant": len(m.y) == 1, "none": True}.get(kind)
        if not ok or not all(0.0 <= v <= 1.0 for v in m.y):
            raise ValueError(f"malformed {kind!r} map")
        return m


def _sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + math.exp(-z))) if z >= 0 else float(math.exp(z) / (1 + math.exp(z)))


def fit_map(raw: np.ndarray, correct: np.ndarray, increasing: bool, method: str,
            similarity: np.ndarray | None = None) -> ConfidenceMap:
    """``similarity`` (one per case, or None): a second input of the Platt map; isotonic
    regression is one-dimensional and uses the raw confidence alone."""
    raw, correct = np.asarray(raw, float), np.asarray(correct, float)
    if raw.size == 0:
        return ConfidenceMap(kind="none")
    if len(set(correct.tolist())) < 2 or len(set(raw.tolist())) < 2:
        # one outcome or one raw value: the Laplace-smoothed rate (never a certain 0 or 1)
        return ConfidenceMap(kind="constant", y=((correct.sum() + 1.0) / (correct.size + 2.0),))
    if method == "platt":
        inputs = raw if similarity is None else np.column_stack([raw, similarity])
        *slopes, intercept = platt_fit(inputs, correct)
        return ConfidenceMap(kind="platt", slope=slopes[0], intercept=intercept,
                             similarity_slope=slopes[1] if similarity is not None else None)
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=increasing,
                             out_of_bounds="clip").fit(raw, correct)
    return ConfidenceMap(kind="isotonic", x=tuple(map(float, iso.X_thresholds_)),
                         y=tuple(map(float, iso.y_thresholds_)))


def platt_fit(x: np.ndarray, y: np.ndarray, max_iter: int = 100) -> tuple[float, ...]:
    """Platt scaling: (a, b) minimising the log loss of sigmoid(a·x + b) against Platt's smoothed
    targets ((N₊+1)/(N₊+2) for positives, 1/(N₋+2) for negatives), by Newton's method with step
    halving. ``x`` with d columns gives (a₁, …, a_d, b): the same logistic fit over d inputs.
    Deterministic; no iteration-limit warnings."""
    x = np.asarray(x, float).reshape(len(y), -1)
    n_pos = float(y.sum())
    n_neg = float(y.size - n_pos)
    t = np.where(y > 0.5, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    X = np.column_stack([x, np.ones(len(y))])
    w = np.zeros(X.shape[1])
    w[-1] = math.log((n_pos + 1.0) / (n_neg + 1.0))

    def loss(w: np.ndarray) -> float:
        z = X @ w
        return float(np.sum(np.logaddexp(0.0, z) - t * z))

    current = loss(w)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (p - t)
        hess = (X * (p * (1.0 - p))[:, None]).T @ X + 1e-12 * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while scale > 1e-8:
            candidate = w - scale * step
            new = loss(candidate)
            if new <= current:
                break
            scale /= 2.0
        else:
            break
        w, previous, current = candidate, current, new
        if previous - current < 1e-12 * max(1.0, abs(current)):
            break
    return tuple(float(v) for v in w)


@dataclass(frozen=True, kw_only=True)
class Calibrator:
    """Two maps raw confidence → P(response correct): one for answers, one for refusals
    (a refusal's correctness falls as the raw evidence rises; an answer's rises). ``info``
    records what it was fitted on (golden set, versions, before/after ECE and Brier)."""

    method: str
    answered: ConfidenceMap
    refused: ConfidenceMap
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __call__(self, raw: float, is_refusal: bool, similarity: float | None = None) -> float:
        m = self.refused if is_refusal else self.answered
        if m.kind == "none":
            return 1.0 - raw if is_refusal else raw
        return m(raw, similarity)

    @classmethod
    def fit(cls, raw: np.ndarray, refused: np.ndarray, correct: np.ndarray,
            method: str = "platt", info: Mapping[str, Any] | None = None,
            similarity: np.ndarray | None = None) -> Calibrator:
        if method not in METHODS:
            raise CalibrationError(f"unknown calibration method {method!r}; valid: "
                                   f"{', '.join(METHODS)}")
        raw, correct = np.asarray(raw, float), np.asarray(correct, float)
        refused = np.asarray(refused, bool)
        sim = None if similarity is None else np.asarray(similarity, float)
        return cls(method=method,
                   answered=fit_map(raw[~refused], correct[~refused], True, method,
                           None if sim is None else sim[~refused]),
                   refused=fit_map(raw[refused], correct[refused], False, method,
                           None if sim is None else sim[refused]), info=dict(info or {}))

    def apply(self, raw: np.ndarray, refused: np.ndarray,
              similarity: np.ndarray | None = None) -> np.ndarray:
        sims = [None] * len(raw) if similarity is None else [float(v) for v in similarity]
        return np.array([self(float(r), bool(f), s)
                         for r, f, s in zip(raw, refused, sims, strict=True)], dtype=float)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "method": self.method, "answered": self.answered.to_json(),
                "refused": self.refused.to_json(), "info": dict(self.info)}

    def digest(self) -> str:
        """sha256 of what the calibrator maps (method, both maps) and of the golden set it was
        fitted on, so a run's ``prompt_template_version`` changes when ``calibrate`` fits
        another one (not with the folder the corpus was read from)."""
        data = self.to_json()
        content = [data["method"], data["answered"], data["refused"],
                   data["info"].get("golden_sha256")]
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, allow_nan=False))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Calibrator:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError(f"format is {data.get('format')!r}, expected {FORMAT!r}")
            return cls(method=data["method"], answered=ConfidenceMap.from_json(data["answered"]),
                       refused=ConfidenceMap.from_json(data["refused"]),
                       info=data.get("info") or {})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CalibrationError("unreadable calibrator", [Problem(
                f"{type(exc).__name__}: {exc} — delete it or run `kebab-mlflow calibrate` "
                "again", str(path))]) from None


def base_versions(versions: VersionSnapshot | Mapping[str, str]) -> dict[str, str]:
    """The version snapshot a calibrator belongs to: the run's, minus the ``-calibrated``
    suffix of ``prompt_template_version`` (a calibrated run uses the calibrator fitted with
    calibration off)."""
    v = dict(versions.as_dict() if isinstance(versions, VersionSnapshot) else versions)
    # "-calibrated" from the config, or "-calibrated-<digest>" once a calibrator is loaded
    v["prompt_template_version"] = re.sub(rf"{CALIBRATED_SUFFIX}(-[0-9a-f]+)?$", "",
                                          v.get("prompt_template_version", ""))
    return v


def calibrator_key(versions: VersionSnapshot | Mapping[str, str]) -> str:
    """16 hex digits of sha256 over the base versions (all five, sorted JSON)."""
    blob = json.dumps(base_versions(versions), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def calibrator_path(index_folder: Path, versions: VersionSnapshot | Mapping[str, str]) -> Path:
    return index_folder / f"calibrator-{calibrator_key(versions)}.json"


# --- fitting on a golden set ------------------------------------------------------------------





# --- the answerability gate -------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GateFit:
    """An answerability gate fitted on a golden set's ask cases (:func:`fit_gate`)."""

    model: GateModel
    refuse_below: float
    answerable_refused: float  # on the fitting set, with the gate
    abstention_refused: float  # on the fitting set (NaN without abstention cases)


def fit_gate(features: np.ndarray, answerable: np.ndarray, always_refused: int = 0,
             max_refused: float = 0.2, step: float = 0.01) -> GateFit:
    """A logistic fit (:func:`platt_fit`) of answerable (1) against abstention (0) over the
    rows of :class:`~kebab_mlflow.pipeline.answerer.GateFeatures`, and the highest gate (a
    multiple of ``step``) that refuses at most ``max_refused`` of the answerable questions —
    counting ``always_refused``, the answerable ones with no quotable sentence, refused whatever
    the gate. Deterministic."""
    x, y = np.asarray(features, float), np.asarray(answerable, bool)
    if y.all() or not y.any():
        raise CalibrationError("fitting a gate needs answerable and abstention cases")
    w_evidence, w_bigrams, w_margin, intercept = platt_fit(x, y.astype(float))  # 3 features
    model = GateModel((round(w_evidence, 4), round(w_bigrams, 4), round(w_margin, 4)),
                      round(intercept, 4))
    score = np.array([model(GateFeatures(*row)) for row in x])
    n_answerable = int(y.sum()) + always_refused

    def answerable_refused(gate: float) -> float:
        return (int((score[y] < gate).sum()) + always_refused) / n_answerable

    steps = [round(i * step, 10) for i in range(1, int(round(1 / step)))]
    fitting = [g for g in steps if answerable_refused(g) <= max_refused]
    gate = max(fitting) if fitting else steps[0]
    return GateFit(model=model, refuse_below=gate, answerable_refused=answerable_refused(gate),
                   abstention_refused=float((score[~y] < gate).mean()))
