"""The tune file of ``kebab-mlflow tune``: loading and validating it (every problem at once,
with file:line), and its records.

::

    name: bm25-tune                 # parent run name (default: the file's stem)
    train: tune/train.yaml          # the golden set the search is scored on
    test: tune/test.yaml            # the held-out golden set the verdict is judged on
    corpus: kb                      # paths are relative to this file
    preset: naive_baseline
    k: 10
    set: {}                         # fixed config overrides of every trial (and the baseline)
    objective: mrr                  # maximized on train (a higher-is-better metric)
    trials: 20
    startup_trials: 10              # random trials before TPE models the results
    seed: 0                         # the TPE sampler's and the compare's seed
    baseline: {preset: naive_baseline, set: {}}   # default: preset + set
    gates: [mrr, hit_at_5]          # optional: the compare's gated metrics
    space:
      bm25.k1: [0.3, 2.0]           # a numeric key: a range [low, high] of the key's type
      answer.context_k: [1, 5]      #   (float: uniform; int: every integer, both ends)
      bm25.b: {low: 0.05, high: 1.0, log: true}    # a range sampled on a log scale
      chunker.mode: [structure, document]          # a text or true/false key: the choices
      top_k: {choice: [1, 3, 10]}                  # choices for any key

A range's type comes from the config key (``kebab-mlflow presets`` lists each with its
default), so ``bm25.k1: [1, 2]`` is the floats from 1 to 2, not the integers 1 and 2. Train and
test must not share a query id or a query text: the verdict is judged on queries the search
never saw.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kebab_mlflow import names
from kebab_mlflow.errors import ConfigError, Problem, TuneError
from kebab_mlflow.reading import Field, Reader, table
from kebab_mlflow.sweep.spec import (
    RowRole,
    SweepRow,
    check_golden,
    check_metrics,
    is_int,
    is_str,
    resolve_path,
)
from kebab_mlflow.yaml_source import child, location, parse


def _path(name: str, help: str) -> Field:
    return Field(name=name, what="a path", types=(str,), required=True, nonblank=True,
                 message=(path := "missing or empty '{name}' (a path, relative to the tune "
                          "file)"), missing=path, help=help)


def _positive(name: str, default: int, help: str) -> Field:
    return Field(name=name, what="an integer >= 1", types=(int,), low=1, default=default,
                 help=help)


# The tune file's top level ('{name}' must be {what}, got {value}, at the key's line); space
# and baseline are read by their own checks below.
TUNE_FIELDS = table((
    Field(name="name", what="a string", types=(str,), nonblank=True,
          help="the parent run's name (default: the file's stem)"),
    Field(name="description", what="a string", types=(str,), default="",
          help="the parent run's description"),
    Field(name="experiment", what="a string", types=(str,), nonblank=True,
          help="the MLflow experiment"),
    _path("train", "the golden set the search is scored on"),
    _path("test", "the held-out golden set the verdict is judged on"),
    _path("corpus", "the corpus folder"),
    Field(name="preset", what="a preset name", types=(str,), nonblank=True,
          default="naive_baseline", help="the preset every trial starts from"),
    _positive("k", names.DEFAULT_K, "the retrieval depth"),
    Field(name="set", what="a mapping of config keys", types=(dict,), default={},
          help="fixed config overrides of every trial (and the baseline)"),
    Field(name="objective", what="a metric name", types=(str,), nonblank=True,
          help="the metric maximized on train (default: mrr, or mrr_doc)"),
    _positive("trials", 20, "trials of the search"),
    _positive("startup_trials", 10, "random trials before TPE models the results (at most "
              "trials)"),
    Field(name="seed", what="an integer >= 0", types=(int,), low=0, default=0,
          help="the sampler's and the compare's seed"),
    Field(name="baseline", what="a mapping with 'preset' and/or 'set'",
          help="what the best configuration is compared with on test (default: preset + set)"),
    Field(name="gates", what="a non-empty list of metric names", types=(list,), items=(str,),
          nonblank=True, nonempty=True, help="the compare's gated metrics"),
    Field(name="space", what="a non-empty mapping of config key -> range or choices",
          help="the searched keys"),
))
TOP_LEVEL_KEYS = set(TUNE_FIELDS)


@dataclass(frozen=True, kw_only=True)
class SpaceParam:
    """One searched config key: a float or int range (``log``: sampled on a log scale) or a
    list of choices."""

    key: str
    kind: str  # float | int | choice
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    def describe(self) -> str:
        if self.kind == "choice":
            return "{" + ", ".join(map(str, self.choices)) + "}"
        return f"{self.kind} [{self.low}, {self.high}]" + (" log" if self.log else "")


@dataclass(frozen=True, kw_only=True)
class TuneSpec:
    path: str
    sha256: str
    name: str
    description: str
    experiment: str | None
    train: str
    test: str
    corpus: str
    preset: str
    k: int
    overrides: Mapping[str, Any]
    objective: str
    trials: int
    startup_trials: int
    seed: int
    space: tuple[SpaceParam, ...]
    baseline_preset: str
    baseline_overrides: Mapping[str, Any]
    gates: tuple[str, ...] | None = None
    train_sha256: str = ""
    test_sha256: str = ""
    n_train: int = 0
    n_test: int = 0
    corpus_sha256: str = ""

    def with_trials(self, trials: int | None) -> TuneSpec:
        """This search with another number of trials (``--trials``); None: unchanged."""
        if trials is None:
            return self
        return dataclasses.replace(self, trials=trials,
                                   startup_trials=min(self.startup_trials, trials))


def load_tune(path: str | Path) -> TuneSpec:
    """Read and validate a tune file and everything it points at; one TuneError lists every
    problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TuneError(f"cannot read tune file {path}: {exc.strerror}") from None
    source = str(path)
    data, node = parse(raw, source, TuneError, "tune file")
    if not isinstance(data, dict):
        raise TuneError(f"invalid tune file {source}", [Problem(
            "top level must be a mapping with 'space'", location(source, node))])
    return _build(Reader(data, node, source), path.parent, hashlib.sha256(raw).hexdigest())


def _build(r: Reader, base: Path, sha256: str) -> TuneSpec:
    r.unknown_keys(TOP_LEVEL_KEYS)
    f = TUNE_FIELDS
    paths = {}
    for key in ("train", "test", "corpus"):
        value = r.value(f[key])
        paths[key] = resolve_path(base, value) if value is not None else None
    preset, k, shared = r.value(f["preset"]), r.value(f["k"]), r.value(f["set"])
    trials = r.value(f["trials"])
    startup = r.value(f["startup_trials"], min(f["startup_trials"].default, trials))
    _check_config(r, preset, shared, "set")
    space = _space(r, preset, shared)
    b_preset, b_set = _baseline(r, preset, shared)
    sets = _golden_sets(r, paths)
    gates = r.value(f["gates"])
    objective = _objective(r, sets, preset, k)
    name = r.value(f["name"], Path(r.source).stem)
    description, experiment = r.value(f["description"]), r.value(f["experiment"])
    seed = r.value(f["seed"])
    if r.problems:
        raise TuneError(f"invalid tune file {r.source}", r.problems)
    return TuneSpec(
        path=r.source, sha256=sha256, name=name, description=description, experiment=experiment,
                    train=str(paths["train"]),
        test=str(paths["test"]), corpus=str(paths["corpus"]), preset=preset, k=k,
                    overrides=dict(shared), objective=objective, trials=trials,
        startup_trials=startup, seed=seed, space=space, baseline_preset=b_preset,
                    baseline_overrides=b_set, gates=tuple(gates) if gates else None,
        train_sha256=sets["train"].digest, test_sha256=sets["test"].digest,
                    n_train=len(sets["train"]), n_test=len(sets["test"]),
        corpus_sha256=sets["corpus"] or "")


def _check_config(r: Reader, preset: str, overrides: Mapping[str, Any], key: str,
                  what: str = "") -> bool:
    from kebab_mlflow.config import build_config

    try:
        build_config(preset, dict(overrides), source=f"{r.where(key)}{what}")
    except ConfigError as exc:
        r.problems.extend(exc.problems or [Problem(exc.summary, r.where(key))])
        return False
    return True


def _key_type(key: str) -> type | None:
    from kebab_mlflow.config import DEFAULTS, NULLABLE_TYPES, flatten

    default = flatten(DEFAULTS).get(key, ...)
    if default is ...:
        return None
    return NULLABLE_TYPES.get(key, type(None)) if default is None else type(default)


def _space(r: Reader, preset: str, shared: Mapping[str, Any]) -> tuple[SpaceParam, ...]:
    from kebab_mlflow.config import valid_keys

    space, node = r.data.get("space"), child(r.node, "space")
    if not isinstance(space, dict) or not space:
        r.problem("'space' must be a non-empty mapping of config key -> range or choices "
                  "(e.g. {bm25.k1: [0.3, 2.0]})", "space")
        return ()
    params = []
    for key, value in space.items():
        at = location(r.source, child(node, key) or node)
        kind = _key_type(key) if isinstance(key, str) else None
        if kind is None:
            r.problems.append(Problem(f"space: unknown config key {key!r}; valid keys: "
                                      f"{', '.join(valid_keys())}", at))
            continue
        if key in shared:
            r.problems.append(Problem(f"space: {key!r} is also fixed in 'set'", at))
            continue
        param = _param(key, kind, value, at, r.problems)
        if param is not None and _values_valid(r, preset, shared, param, at):
            params.append(param)
    return tuple(params)


def _param(key: str, kind: type, value: Any, at: str, problems: list[Problem]
           ) -> SpaceParam | None:
    """The SpaceParam of one ``space`` entry (None, with a problem, when it is malformed)."""
    numeric = kind in (int, float)
    if isinstance(value, dict) and set(value) == {"choice"}:
        value = value["choice"]
        if isinstance(value, list) and value and len(set(map(repr, value))) == len(value):
            return SpaceParam(key=key, kind="choice", choices=tuple(value))
    elif isinstance(value, list) and not numeric:
        if value and len(set(map(repr, value))) == len(value):
            return SpaceParam(key=key, kind="choice", choices=tuple(value))
    elif numeric and (isinstance(value, list) and len(value) == 2 or isinstance(value, dict)):
        low, high, log = _bounds(value)
        ok = (kind is float and all(isinstance(v, int | float) and not isinstance(v, bool)
                                    for v in (low, high))) or all(is_int(v) for v in (low, high))
        if ok and low < high and isinstance(log, bool) and (not log or low > 0):
            return SpaceParam(key=key, kind=kind.__name__, low=low, high=high, log=log)
        problems.append(Problem(f"space: {key} needs low < high, both {kind.__name__}s"
                                + (" and > 0 with log: true" if log is True else "")
                                + f", got {value!r}", at))
        return None
    shape = "[low, high] or {low: L, high: H, log: true}" if numeric else "[choice, ...]"
    problems.append(Problem(f"space: {key} must be {shape} or {{choice: [distinct values]}}, "
                            f"got {value!r}", at))
    return None


def _bounds(value: Any) -> tuple[Any, Any, Any]:
    if isinstance(value, list):
        return value[0], value[1], False
    if set(value) - {"low", "high", "log"}:
        return None, None, None
    return value.get("low"), value.get("high"), value.get("log", False)


def _values_valid(r: Reader, preset: str, shared: Mapping[str, Any], param: SpaceParam,
                  at: str) -> bool:
    """Every choice, and both ends of a range, is a setting the configuration accepts."""
    from kebab_mlflow.config import build_config

    values = param.choices if param.kind == "choice" else (param.low, param.high)
    count = len(r.problems)
    for value in values:
        try:
            build_config(preset, {**shared, param.key: value}, source=f"{at} space")
        except ConfigError as exc:
            r.problems.extend(exc.problems or [Problem(exc.summary, at)])
    return len(r.problems) == count


def _baseline(r: Reader, preset: str, shared: Mapping[str, Any]
              ) -> tuple[str, dict[str, Any]]:
    """The baseline the best configuration is compared with on test (default: preset + set)."""
    value = r.data.get("baseline", {})
    if not isinstance(value, dict) or set(value) - {"preset", "set"}:
        r.problem("'baseline' must be a mapping with 'preset' and/or 'set'", "baseline")
        return preset, dict(shared)
    b_preset, b_set = value.get("preset", preset), value.get("set", shared)
    if not is_str(b_preset) or not isinstance(b_set, dict):
        r.problem("'baseline': 'preset' must be a preset name and 'set' a mapping", "baseline")
        return preset, dict(shared)
    _check_config(r, b_preset, b_set, "baseline", " baseline")
    return b_preset, dict(b_set)


def _golden_sets(r: Reader, paths: Mapping[str, Path | None]) -> dict[str, Any]:
    """The train and test golden sets (each checked against the corpus) and the corpus digest;
    a query id or text on both sides is a problem."""
    sets: dict[str, Any] = {"train": None, "test": None, "corpus": None}
    for side in ("train", "test"):
        path = paths[side]
        if path is not None:
            sets[side], sets["corpus"] = check_golden(path, paths["corpus"], r.problems,
                                                       r.where(side), r.where("corpus"))
    train, test = sets["train"], sets["test"]
    if train is not None and test is not None:
        train_texts = {q.query for q in train.queries}
        ids = sorted({q.id for q in train.queries} & {q.id for q in test.queries})
        texts = sorted(q.id for q in test.queries if q.query in train_texts)
        shared = [f"{len(found)} {what} ({', '.join(found[:10])})" for found, what in
                  ((ids, "query id(s)"), (texts, "query text(s), test ids")) if found]
        if shared:
            r.problem(f"train and test share {' and '.join(shared)}: the verdict must be judged "
                      "on queries the search never saw; remove them from one side", "test")
    return sets


def _objective(r: Reader, sets: Mapping[str, Any], preset: str, k: int) -> str:
    """The maximized metric: it must have ground truth in train (where it is maximized) and in
    test (where, as compare's primary metric, it decides the verdict)."""
    train = sets.get("train")
    has_chunk = train is not None and any(q.has_chunk_truth for q in train.queries)
    objective: str = r.value(TUNE_FIELDS["objective"],
                             "mrr" if has_chunk or train is None else "mrr_doc")
    found: list[Problem] = []
    for side in ("train", "test"):
        if sets.get(side) is not None or side == "train":
            check_metrics([objective], sets.get(side),
                          [SweepRow(name="tune", preset=preset, overrides={}, k=k,
                                    role=RowRole.PRIMARY)], found,
                          r.where("objective"))
    unique = list(dict.fromkeys(found))
    r.problems += [Problem(p.message.replace("gauge_metrics: ", "objective: ")
                           .replace("the gauge needs", "tune maximizes"), p.location)
                   for p in unique]
    return objective
