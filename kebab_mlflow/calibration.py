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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.pipeline import Answer, VersionSnapshot

N_BINS = 10
METHODS = ("isotonic", "platt")
FORMAT = "kebab-calibrator/1"
CALIBRATED_SUFFIX = "-calibrated"


class CalibrationError(InputError):
    """A calibrator that cannot be fitted or read."""


# --- metrics ----------------------------------------------------------------------------------

def _bins(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    return np.minimum((np.asarray(confidence, dtype=float) * n_bins).astype(int), n_bins - 1)


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


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS):
    """Per bin: (lower edge, mean confidence, accuracy, count); empty bins have None."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, float)
    bins = _bins(confidence, n_bins)
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


def _usable(c: Any) -> bool:
    return (isinstance(c, (int, float)) and not isinstance(c, bool) and not math.isnan(c)
            and 0.0 <= c <= 1.0)


def calibration_pairs(queries: Sequence[GoldenQuery], answers: Sequence[Answer | None],
                      contains_all: np.ndarray, confidence_of=lambda a: a.confidence):
    """(confidence, correct) arrays over the ask cases whose answer carries a confidence in
    [0, 1]; cases without one (None, NaN, out of range) are left out."""
    conf, correct = [], []
    for q, a, ca in zip(queries, answers, contains_all, strict=True):
        if a is None or not q.ask:
            continue
        c = confidence_of(a)
        if _usable(c):
            conf.append(float(c))
            correct.append(response_correct(q, a, ca))
    return np.array(conf, dtype=float), np.array(correct, dtype=float)


def calibration_block(confidence: np.ndarray, correct: np.ndarray) -> dict | None:
    """{ece, brier, n}, or None when no case carries a confidence."""
    if confidence.size == 0:
        return None
    return {"ece": ece(confidence, correct), "brier": brier(confidence, correct),
            "n": int(confidence.size)}


def abstention_outcomes(queries: Sequence[GoldenQuery],
                        answers: Sequence[Answer | None]) -> dict | None:
    """Buckets for the ``answerable: false`` ask cases: ``correct_refusal`` (refused, citing
    nothing), ``incorrect_answer`` (answered, citing evidence), ``boundary_partial`` (the rest:
    a refusal that cites, an answer without citations, a pipeline error). Counts and shares;
    None when the set has no such case."""
    buckets = {"correct_refusal": 0, "incorrect_answer": 0, "boundary_partial": 0}
    n = 0
    for q, a in zip(queries, answers, strict=True):
        if q.answerable or not q.ask:
            continue
        n += 1
        if a is not None and a.refused and not a.citations:
            buckets["correct_refusal"] += 1
        elif a is not None and not a.refused and a.citations:
            buckets["incorrect_answer"] += 1
        else:
            buckets["boundary_partial"] += 1
    if n == 0:
        return None
    return {"n": n, **buckets, **{f"{k}_share": v / n for k, v in buckets.items()}}


# --- the calibrator ---------------------------------------------------------------------------

@dataclass(frozen=True)
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

    def to_json(self) -> dict:
        return {"kind": self.kind, "x": list(self.x), "y": list(self.y), "slope": self.slope,
                "intercept": self.intercept, "similarity_slope": self.similarity_slope}

    @classmethod
    def from_json(cls, data: Mapping) -> ConfidenceMap:
        kind = data["kind"]
        sim = data.get("similarity_slope")  # absent from calibrators written before it existed
        m = cls(kind, tuple(map(float, data.get("x", ()))), tuple(map(float, data.get("y", ()))),
                float(data.get("slope", 0.0)), float(data.get("intercept", 0.0)),
                None if sim is None else float(sim))
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
        return ConfidenceMap("none")
    if len(set(correct.tolist())) < 2 or len(set(raw.tolist())) < 2:
        # one outcome or one raw value: the Laplace-smoothed rate (never a certain 0 or 1)
        return ConfidenceMap("constant", y=((correct.sum() + 1.0) / (correct.size + 2.0),))
    if method == "platt":
        inputs = raw if similarity is None else np.column_stack([raw, similarity])
        *slopes, intercept = platt_fit(inputs, correct)
        return ConfidenceMap("platt", slope=slopes[0], intercept=intercept,
                             similarity_slope=slopes[1] if similarity is not None else None)
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=increasing,
                             out_of_bounds="clip").fit(raw, correct)
    return ConfidenceMap("isotonic", tuple(map(float, iso.X_thresholds_)),
                         tuple(map(float, iso.y_thresholds_)))


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


@dataclass(frozen=True)
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
        return cls(method,
                   fit_map(raw[~refused], correct[~refused], True, method,
                           None if sim is None else sim[~refused]),
                   fit_map(raw[refused], correct[refused], False, method,
                           None if sim is None else sim[refused]), dict(info or {}))

    def apply(self, raw: np.ndarray, refused: np.ndarray,
              similarity: np.ndarray | None = None) -> np.ndarray:
        sims = [None] * len(raw) if similarity is None else [float(v) for v in similarity]
        return np.array([self(float(r), bool(f), s)
                         for r, f, s in zip(raw, refused, sims, strict=True)], dtype=float)

    def to_json(self) -> dict:
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
            return cls(data["method"], ConfidenceMap.from_json(data["answered"]),
                       ConfidenceMap.from_json(data["refused"]), data.get("info") or {})
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

@dataclass(frozen=True)
class CalibrationFit:
    calibrator: Calibrator
    path: Path  # where it is stored (with the index)
    before: dict | None  # {ece, brier, n} of the raw confidence on the fitting set
    after: dict | None  # the same with the calibrator (in-sample)
    n_answered: int
    n_refused: int


def fit_on_golden_set(golden_path: str | Path, corpus: str | Path,
                      preset: str = "naive_baseline",
                      overrides: Mapping[str, Any] | None = None, k: int = 10,
                      method: str = "platt", save: bool = True) -> CalibrationFit:
    """Run the reference pipeline with calibration off over the golden set (no MLflow), fit a
    calibrator on (raw confidence, refused, correct) of its ask cases and store it with the
    index, keyed by the pipeline's versions."""
    import tempfile

    from kebab_mlflow.backends.floors import oracle_truth
    from kebab_mlflow.config import build_config
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.per_query import read_per_query
    from kebab_mlflow.reference import build_pipeline
    from kebab_mlflow.runner import check_expected_ids, run_queries
    from kebab_mlflow.scoring import cutoffs_for

    if method not in METHODS:
        raise CalibrationError(f"unknown calibration method {method!r}; valid: "
                               f"{', '.join(METHODS)}")
    if k < 1:
        raise CalibrationError(f"--k must be >= 1, got {k}")
    golden = load_golden_set(golden_path)
    config = build_config(preset, {**dict(overrides or {}), "answer.calibrate": False})
    pipeline = build_pipeline(config, corpus, oracle_truth(golden.queries))
    check_expected_ids(golden, pipeline.chunk_ids, pipeline.doc_ids)
    with tempfile.TemporaryDirectory(prefix="kebab-calibrate-") as tmp:
        path = Path(tmp) / "per_query.jsonl"
        outcome = run_queries(pipeline, golden, k, cutoffs_for(k), path)
        rows = [r.answer for r in read_per_query(path)]
    answers = [None if a is None else Answer(a.get("text") or "", tuple(a.get("citations") or ()),
                                             a.get("refusal_reason"), a.get("confidence"),
                                             a.get("raw_confidence"), a.get("similarity"))
               for a in rows]
    contains = outcome.scores.get("contains_all", np.full(len(golden.queries), np.nan))
    raw, refused, correct, uncalibrated, similarity = [], [], [], [], []
    for q, a, ca in zip(golden.queries, answers, contains, strict=True):
        if q.ask and a is not None and _usable(a.raw_confidence) and _usable(a.confidence):
            raw.append(a.raw_confidence)
            refused.append(a.refused)
            correct.append(response_correct(q, a, ca))
            uncalibrated.append(a.confidence)
            similarity.append(a.similarity)
    if not raw:
        raise CalibrationError(f"nothing to calibrate on: golden set {golden.path} has no "
                               "'ask: true' query whose answer carries a raw confidence")
    raw_a, refused_a = np.array(raw), np.array(refused, dtype=bool)
    correct_a = np.array(correct)
    before = calibration_block(np.array(uncalibrated), correct_a)
    info = {"golden_set": golden.name, "golden_sha256": golden.digest, "corpus": str(corpus),
            "preset": preset, "k": k, "versions": base_versions(pipeline.versions),
            "n": len(raw), "n_refused": int(refused_a.sum()), "before": before}
    # the answerer measures similarity for every answer or for none (answer.similarity)
    sim_a = np.array(similarity, float) if all(_usable(v) for v in similarity) else None
    calibrator = Calibrator.fit(raw_a, refused_a, correct_a, method, info, sim_a)
    after = calibration_block(calibrator.apply(raw_a, refused_a, sim_a), correct_a)
    calibrator = Calibrator(calibrator.method, calibrator.answered, calibrator.refused,
                            {**info, "after_in_sample": after})
    target = calibrator_path(pipeline.folder, pipeline.versions)
    if save:
        target.parent.mkdir(parents=True, exist_ok=True)
        calibrator.save(target)
    return CalibrationFit(calibrator, target, before, after, int((~refused_a).sum()),
                          int(refused_a.sum()))
