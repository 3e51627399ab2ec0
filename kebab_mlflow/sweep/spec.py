"""The sweep file: loading and validating it (every problem at once, with file:line), and the
records of a sweep (rows, outcomes, results).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from kebab_mlflow import names
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import ConfigError, Problem, SweepError, TargetError
from kebab_mlflow.reading import Field, Messages, Reader, table
from kebab_mlflow.stats.gauge import GaugeMetric
from kebab_mlflow.sweep.executors import EXECUTOR_RULE, is_executor
from kebab_mlflow.vocabulary import RunStatus
from kebab_mlflow.yaml_source import child, location, parse, sequence_items

if TYPE_CHECKING:  # loaded by check_golden, once the file's own checks are done
    from kebab_mlflow.golden import GoldenSet

DEFAULT_FLOORS = ("random_retrieval", "single_chunk")


DEFAULT_GAUGE_CHUNK = ("hit_at_5", "mrr", "ndcg_at_10_doc")


DEFAULT_GAUGE_DOC = ("hit_at_10_doc", "mrr_doc", "ndcg_at_10_doc")


DEFAULT_RESAMPLES = 2000
# the gauge's work grows with queries × resamples per row and metric; the 95% CI's fourth
# digit settles long before 100,000 resamples
MAX_RESAMPLES = 100_000


def _path(name: str, help: str) -> Field:
    return Field(name=name, what="a path", types=(str,), required=True, nonblank=True,
                 message=(path := "missing or empty '{name}' (a path, relative to the sweep "
                          "file)"), missing=path, help=help)


def _names(name: str, what: str, help: str, **more: Any) -> Field:
    """A list of names (rows, metrics)."""
    return Field(name=name, what=what, types=(list,), items=(str,), nonblank=True, help=help,
                 **more)


# The sweep file's top level ('{name}' must be {what}, got {value}, at the key's line); rows,
# cutoffs and executor are read by their own checks below.
SWEEP_FIELDS = table((
    Field(name="name", what="a string", types=(str,), nonblank=True,
          help="the parent run's name (default: the file's stem)"),
    Field(name="description", what="a string", types=(str,), default="",
          help="the parent run's description"),
    Field(name="experiment", what="a string", types=(str,), nonblank=True,
          help="the MLflow experiment (default: --experiment's)"),
    _path("golden", "the golden set"),
    _path("corpus", "the corpus folder"),
    Field(name="k", what="an integer >= 1", types=(int,), low=1, default=names.DEFAULT_K,
          help="every row's retrieval depth unless the row sets its own"),
    Field(name="set", what="a mapping of config keys", types=(dict,), default={},
          help="config overrides of every row"),
    Field(name="primary", what="a row name", types=(str,), nonblank=True,
          help="the row the gauge is about (default: the first)"),
    _names("floors", "a list of row names", "rows (or presets) the primary must beat",
           default=DEFAULT_FLOORS),
    Field(name="ceiling", what="a row name or null", types=(str,), nonblank=True, null=True,
          help="the row (or preset) of the best achievable"),
    _names("gauge_metrics", "a non-empty list of metric names", "the gauge's metrics "
           "(default: by the golden set's truth)", nonempty=True),
    Field(name="resamples", what="an integer >= 100", types=(int,), low=100,
          default=DEFAULT_RESAMPLES, help="bootstrap resamples of the gauge"),
    Field(name="seed", what="an integer >= 0", types=(int,), low=0, default=0,
          help="the gauge's seed"),
    Field(name="rows", what="a non-empty list of rows", help="the rows"),
    Field(name="cutoffs", what="cut-offs", help="metric cut-offs of every row"),
    Field(name="executor", what="local, dask or dask:ADDRESS", default="local",
          help="where the rows run"),
))
TOP_LEVEL_KEYS = set(SWEEP_FIELDS)

# A row's settings: each problem at the row's line, "row <name>: " before it.
ROW_MESSAGES = Messages(bad="'{name}' must be {what}, got {value}")
ROW_FIELDS = table((
    Field(name="name", what="1-100 characters of letters, digits, '_', '.', '-'",
          help="the row's name (an MLflow key part)"),
    Field(name="preset", what="a string", types=(str,), default="naive_baseline",
          message="'preset' must be a string", help="the row's preset"),
    Field(name="k", what="an integer >= 1", types=(int,), low=1, help="the row's depth"),
    Field(name="set", what="a mapping of config keys", types=(dict,), default={},
          message="'set' must be a mapping of config keys", help="the row's config overrides"),
    Field(name="target", what="a target spec string (python:..., http://..., cmd:...)",
          types=(str,), nonblank=True, null=True, message="'target' must be {what}",
          help="evaluate another system in this row"),
    Field(name="concurrency", what="an integer >= 1", types=(int,), low=1, default=1,
          message="'concurrency' must be {what}", help="parallel queries of a target"),
    Field(name="cutoffs", what="cut-offs", help="the row's metric cut-offs"),
    Field(name="ask", what="true or false", types=(bool,), null=True,
          help="answer every query / none (default: each query's own ask)"),
    Field(name="grid", what="a mapping of config key -> list of values",
          help="expand into one row per combination (sweep/grid.py)"),
))
ROW_KEYS = set(ROW_FIELDS)


ROW_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")




class RowRole(enum.StrEnum):
    """A sweep row's part in the gauge (the ``kebab.sweep_role`` tag)."""

    PRIMARY = "primary"
    FLOOR = "floor"
    CEILING = "ceiling"
    VARIANT = "variant"


@dataclass(frozen=True, kw_only=True)
class SweepRow:
    name: str
    preset: str
    overrides: Mapping[str, Any]
    k: int
    role: RowRole
    location: str = ""
    target: str | None = None  # evaluate another system (python:, http://, cmd:) in this row
    concurrency: int = 1
    cutoffs: tuple[int, ...] | None = None  # the row's (or the file's) cutoffs; None: default
    ask: bool | None = None  # answer every query / none; None: each query's own ``ask``
    grid_row: str | None = None  # the grid row this child was expanded from
    grid_values: Mapping[str, Any] = field(default_factory=dict)  # its grid's config values

    @property
    def grid_tags(self) -> dict[str, str]:
        """Tags of a grid child's run: the grid row it came from (filter the UI on it)."""
        return {vocab.SWEEP_GRID: self.grid_row} if self.grid_row else {}

    @property
    def shown_preset(self) -> str:
        """The preset as the row's run records it: ``target`` for a row that runs a target."""
        return "target" if self.target else self.preset


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    path: str
    sha256: str
    name: str
    description: str
    experiment: str | None
    golden: str
    corpus: str
    rows: tuple[SweepRow, ...]
    primary: str
    floors: tuple[str, ...]
    ceiling: str | None
    gauge_metrics: tuple[str, ...]
    resamples: int
    seed: int
    golden_name: str = ""
    golden_sha256: str = ""
    query_ids: tuple[str, ...] = ()
    corpus_sha256: str = ""
    executor: str = "local"  # local | dask | dask:ADDRESS (where the rows run)

    def row(self, name: str) -> SweepRow:
        return next(r for r in self.rows if r.name == name)


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file and everything it points at; one SweepError lists
    every problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SweepError(f"cannot read sweep file {path}: {exc.strerror}") from None
    source = str(path)
    data, node = parse(raw, source, SweepError, "sweep file")
    if not isinstance(data, dict):
        raise SweepError(f"invalid sweep file {source}", [Problem(
            "top level must be a mapping with 'rows'", location(source, node))])
    spec = _build(data, node, source, path.parent, hashlib.sha256(raw).hexdigest())
    return check_publishable(spec, data, node)


def is_str(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value.strip() != ""


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(is_str(x) for x in value)


@dataclass(frozen=True, kw_only=True)
class _TopLevel:
    """The top-level settings of a sweep file, each already checked (defaults where bad)."""

    name: str
    description: str
    experiment: str | None
    k: int
    shared: dict[str, Any]
    resamples: int
    seed: int
    floors: list[str]
    ceiling: str | None
    primary: str | None
    gauge: list[str] | None
    golden: Path | None
    corpus: Path | None


def _top_level(r: Reader, base: Path) -> _TopLevel:
    r.unknown_keys(TOP_LEVEL_KEYS)
    f = SWEEP_FIELDS
    paths: dict[str, Path | None] = {}
    for key in ("golden", "corpus"):
        value = r.value(f[key])
        paths[key] = resolve_path(base, value) if value is not None else None
    floors = list(r.value(f["floors"]))
    if not floors:
        r.problem("'floors' must name at least one row: a gauge without a floor measures "
                  "nothing", "floors")
    return _TopLevel(
        name=r.value(f["name"], Path(r.source).stem), description=r.value(f["description"]),
        experiment=r.value(f["experiment"]), k=r.value(f["k"]),
        shared=r.value(f["set"]), resamples=r.value(f["resamples"]), seed=r.value(f["seed"]),
        floors=floors, ceiling=r.value(f["ceiling"]), primary=r.value(f["primary"]),
        gauge=r.value(f["gauge_metrics"]), golden=paths["golden"], corpus=paths["corpus"])


def _build(data: dict[str, Any], node: Any, source: str, base: Path, sha256: str) -> SweepSpec:
    r = Reader(data, node, source)
    top = _top_level(r, base)
    rows = _rows(data.get("rows"), child(node, "rows"), source, top.shared, top.k,
                 r.problems, r.where("rows"))
    rows += _implicit_rows(r, top, [row.name for row in rows])
    primary = _check_roles(r, top, [row.name for row in rows])
    roles: dict[str | None, RowRole] = {primary: RowRole.PRIMARY, top.ceiling: RowRole.CEILING,
                                        **{f: RowRole.FLOOR for f in top.floors}}
    rows = [dataclasses.replace(row, role=roles.get(row.name, RowRole.VARIANT)) for row in rows]
    rows = _with_cutoffs(rows, data.get("cutoffs"), r.where("cutoffs"), r.problems)
    golden_set = corpus_digest = None
    if top.golden is not None:
        golden_set, corpus_digest = check_golden(top.golden, top.corpus, r.problems,
                                                  r.where("golden"), r.where("corpus"))
    gauge_metrics = check_metrics(top.gauge, golden_set, rows, r.problems,
                                   r.where("gauge_metrics"))
    if r.problems:
        raise SweepError(f"invalid sweep file {source}", r.problems)
    # no problem: the golden set was read and the rows name a primary one
    assert golden_set is not None and primary is not None
    return SweepSpec(path=source, sha256=sha256, name=top.name, description=top.description,
                     experiment=top.experiment,
                     golden=str(top.golden), corpus=str(top.corpus), rows=tuple(rows),
                     primary=primary, floors=tuple(top.floors),
                     ceiling=top.ceiling, gauge_metrics=gauge_metrics, resamples=top.resamples,
                     seed=top.seed, golden_name=golden_set.name,
                     golden_sha256=golden_set.digest,
                     query_ids=tuple(q.id for q in golden_set.queries),
                     corpus_sha256=corpus_digest or "")


def _implicit_rows(r: Reader, top: _TopLevel, names: list[str]) -> list[SweepRow]:
    """Floors and a ceiling that name a preset but no row get an implicit row of it."""
    from kebab_mlflow.config import PRESETS, build_config

    rows: list[SweepRow] = []
    for ref, key in [(f, "floors") for f in top.floors] + [(top.ceiling, "ceiling")]:
        if ref is None or ref in names:
            continue
        if ref not in PRESETS:
            r.problem(f"'{key}' names {ref!r}, which is neither a row (rows: "
                      f"{', '.join(names) or 'none'}) nor a preset", key)
            continue
        try:
            build_config(ref, dict(top.shared), source=f"{r.where(key)} implicit row {ref}")
        except ConfigError as exc:
            r.problems.extend(exc.problems or [Problem(exc.summary, r.where(key))])
        rows.append(SweepRow(name=ref, preset=ref, overrides=dict(top.shared), k=top.k,
                             role=RowRole.VARIANT, location=r.where(key)))
        names.append(ref)
    return rows


def _check_roles(r: Reader, top: _TopLevel, names: list[str]) -> str | None:
    """The primary row (the first row by default); problems with the roles are appended."""
    primary = top.primary if top.primary is not None else (names[0] if names else None)
    if primary is not None and primary not in names:
        r.problem(f"'primary' names {primary!r}, which is not a row (rows: "
                  f"{', '.join(names) or 'none'})", "primary")
    if primary in top.floors or (primary is not None and primary == top.ceiling):
        r.problem(f"the primary row {primary!r} cannot also be a floor or the ceiling",
                  "primary")
    if top.ceiling is not None and top.ceiling in top.floors:
        r.problem(f"row {top.ceiling!r} cannot be both a floor and the ceiling", "ceiling")
    if len(set(top.floors)) != len(top.floors):
        r.problem("'floors' lists a row twice", "floors")
    return primary


# the gauge's MLflow metrics: gauge/<metric>/<row>/<key> (sweep.outputs logs them)
ROW_STAT_KEYS = ("mean", "ci_low", "ci_high")
FLOOR_KEYS = ("gap", "gap_ci_low", "gap_ci_high", "normalized")


def gauge_metric_keys(metrics: Sequence[str], row: str) -> list[str]:
    """Every MLflow metric key the gauge may log for a row (validated before a sweep runs)."""
    return [f"gauge/{m}/{row}/{k}" for m in metrics for k in ROW_STAT_KEYS + FLOOR_KEYS]


def check_publishable(spec: SweepSpec, data: Mapping[str, Any], node: Any) -> SweepSpec:
    """What the sweep will log, checked against MLflow's rules before anything runs (a row
    named '.' fails only when the gauge is published, after every row ran), the bounds of
    ``resamples``, and ``executor:``. The spec, with its executor."""
    problems: list[Problem] = []
    source = spec.path

    def where(key: str) -> str:
        return location(source, child(node, key) or node)

    if spec.resamples > MAX_RESAMPLES:
        problems.append(Problem(f"'resamples' must be at most {MAX_RESAMPLES:,}, got "
                                f"{spec.resamples:,}", where("resamples")))
    for row in spec.rows:
        for key in (f"row.{row.name}", *gauge_metric_keys(spec.gauge_metrics, row.name)):
            why = names.key_problem(key)
            if why is not None:
                problems.append(Problem(f"row {row.name!r}: the MLflow key {key!r} it names "
                                        f"is refused by MLflow: {why}",
                                        row.location or where("rows")))
                break
        if len(describe_row(row)) > names.MAX_PARAM_VALUE:
            problems.append(Problem(f"row {row.name}: its description (param row.{row.name}) "
                                    f"is over MLflow's {names.MAX_PARAM_VALUE} characters",
                                    row.location or where("rows")))
    joined = ",".join(r.name for r in spec.rows)
    if len(joined) > names.MAX_PARAM_VALUE:
        problems.append(Problem(f"the row names joined ({len(joined)} characters, param 'rows') "
                                f"are over MLflow's {names.MAX_PARAM_VALUE}", where("rows")))
    executor = data.get("executor", "local")
    if not is_executor(executor):
        problems.append(Problem(f"'executor' {EXECUTOR_RULE}, got {executor!r}",
                                where("executor")))
    if problems:
        raise SweepError(f"invalid sweep file {source}", problems)
    return dataclasses.replace(spec, executor=executor)


def resolve_path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _rows(items: Any, node: Any, source: str, shared: Mapping[str, Any], default_k: int,
          problems: list[Problem], where_rows: str) -> list[SweepRow]:
    """Every row of the file, a grid row expanded into its children; a row with a problem is
    left out (and its problems appended), so the rest are still checked."""
    if not isinstance(items, list) or not items:
        problems.append(Problem("'rows' must be a non-empty list of rows", where_rows))
        return []
    item_nodes = sequence_items(node)
    rows: list[SweepRow] = []
    seen: dict[str, str] = {}

    def claim(name: Any, loc: str) -> bool:
        if not isinstance(name, str):  # not a name: _row reports it
            return True
        if name not in seen:
            seen[name] = loc
            return True
        problems.append(Problem(f"duplicate row name {name!r} (first at {seen[name]})", loc))
        return False

    for i, item in enumerate(items):
        item_node = item_nodes[i] if i < len(item_nodes) else None
        # a plain row's name is claimed before its checks, so a duplicate is listed even when
        # the row has problems of its own (which are listed too); a grid's children after
        plain = isinstance(item, dict) and "grid" not in item
        unique = claim(item.get("name"), location(source, item_node)) if plain else True
        for row in _row(item, item_node, i, source, shared, default_k, problems):
            if unique and (plain or claim(row.name, row.location)):
                rows.append(row)
    return rows


def _row(item: Any, node: Any, i: int, source: str, shared: Mapping[str, Any],
         default_k: int, problems: list[Problem]) -> list[SweepRow]:
    """One row of the file: [] when it has a problem, its grid's children for a grid row."""
    from kebab_mlflow.config import build_config
    from kebab_mlflow.sweep.grid import expand_grid

    loc = location(source, node)
    if not isinstance(item, dict):
        problems.append(Problem(f"row #{i + 1} must be a mapping", loc))
        return []
    name = item.get("name")
    if not isinstance(name, str) or not ROW_NAME.match(name):
        problems.append(Problem(f"row #{i + 1}: 'name' must be 1-100 characters of letters, "
                                f"digits, '_', '.', '-' (an MLflow key part), got {name!r}", loc))
        return []
    count = len(problems)
    preset, k, overrides, target, concurrency = _row_settings(item, name, loc, shared,
                                                              default_k, problems)
    ask = _row_ask(item, name, loc, problems)
    if preset is None:
        return []
    try:
        build_config(preset, overrides, source=f"{loc} row {name}")
    except ConfigError as exc:
        problems.extend(exc.problems or [Problem(f"row {name}: {exc.summary}", loc)])
        return []
    if len(problems) > count:  # every problem of the row is listed; the row is left out
        return []
    cutoffs = item.get("cutoffs")
    if "grid" not in item:
        return [SweepRow(name=name, preset=preset, overrides=overrides, k=k, role=RowRole.VARIANT,
                         location=loc, target=target, concurrency=concurrency,
                         cutoffs=cutoffs, ask=ask)]
    explicit = {**item.get("set", {}), **_inline(item)}
    children = expand_grid(item["grid"], child(node, "grid"), source, name, preset,
                           overrides, explicit, problems)
    return [SweepRow(name=c.name, preset=preset, overrides={**overrides, **c.values}, k=k,
                     role=RowRole.VARIANT, location=c.location,
                     target=target, concurrency=concurrency, cutoffs=cutoffs, ask=ask,
                     grid_row=name, grid_values=c.values)
            for c in children]


def _inline(item: Mapping[str, Any]) -> dict[str, Any]:
    """Config keys written on the row itself (``{name: top3, top_k: 3}``)."""
    return {key: v for key, v in item.items() if key not in ROW_KEYS}


def _row_settings(item: Mapping[str, Any], name: str, loc: str, shared: Mapping[str, Any],
                  default_k: int, problems: list[Problem]) -> tuple[Any, ...]:
    """(preset or None, k, overrides, target, concurrency) of a row; problems appended."""
    r = Reader(item, None, loc, ROW_MESSAGES, prefix=f"row {name}: ", problems=problems)
    f = ROW_FIELDS
    count = len(problems)
    preset = r.value(f["preset"])
    if len(problems) > count:
        preset = None
    k = r.value(f["k"], default_k)
    row_set = r.value(f["set"])
    count = len(problems)
    target = r.value(f["target"])
    if target is not None and len(problems) == count:
        from kebab_mlflow.targets import check_target

        try:
            check_target(target)
        except TargetError as exc:
            r.problem(str(exc))
    concurrency = r.value(f["concurrency"])
    return preset, k, {**shared, **row_set, **_inline(item)}, target, concurrency


def check_golden(golden: Path, corpus: Path | None, problems: list[Problem],
                  where_golden: str = "", where_corpus: str = ""
                  ) -> tuple[GoldenSet | None, str | None]:
    """(the golden set or None, the corpus digest or None); problems are appended."""
    from kebab_mlflow.errors import CorpusError, GoldenSetError
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.corpus import load_corpus

    golden_set = None
    try:
        golden_set = load_golden_set(golden)
    except GoldenSetError as exc:
        # problems inside the golden file point into it; an unreadable one at the sweep line
        problems.extend(exc.problems or [Problem(exc.summary, where_golden or str(golden))])
    if corpus is None:
        return golden_set, None
    try:
        loaded = load_corpus(corpus)
    except CorpusError as exc:
        problems.extend(exc.problems or [Problem(exc.summary, where_corpus or str(corpus))])
        return golden_set, None
    if golden_set is not None:
        from kebab_mlflow.evaluation.runner import check_expected_ids

        try:  # chunk ids depend on each row's chunker: `run` checks them per row
            check_expected_ids(golden_set, None, {d.doc_id for d in loaded.documents})
        except CorpusError as exc:
            problems.extend(exc.problems)
        from kebab_mlflow.evaluation.evidence import locate_all

        try:  # evidence is text of the documents: every quote is checked before any row
            locate_all(golden_set, {d.doc_id: d.text for d in loaded.documents})
        except GoldenSetError as exc:
            problems.extend(exc.problems)
    return golden_set, loaded.digest


def check_metrics(names: list[str] | None, golden_set: GoldenSet | None, rows: Sequence[SweepRow],
                   problems: list[Problem], where: str) -> tuple[str, ...]:
    from kebab_mlflow.metrics.registry import get_metric
    from kebab_mlflow.metrics.scoring import cutoffs_for

    has_chunk = golden_set is not None and any(q.has_chunk_truth for q in golden_set.queries)
    has_doc = golden_set is not None and any(q.has_doc_truth for q in golden_set.queries)
    has_ask = golden_set is not None and any(q.ask for q in golden_set.queries)
    if names is None:
        names = list(DEFAULT_GAUGE_CHUNK if has_chunk else DEFAULT_GAUGE_DOC)
    # registers deeper cut-offs (k = 100) so they validate; the registry is process-wide, so
    # a cut-off some other run registered (k = 7) must still be one these rows report
    reported = set.intersection(*(set(row.cutoffs or cutoffs_for(row.k)) for row in rows)) \
        if rows else set()
    min_k = min((r.k for r in rows), default=10)
    for name in names:
        try:
            metric = get_metric(name)
        except ConfigError as exc:
            problems.append(Problem(f"gauge_metrics: {exc.summary}", where))
            continue
        if not metric.higher_is_better:
            problems.append(Problem(f"gauge_metrics: {name} is lower-is-better; the gauge "
                                    "needs metrics where the primary should beat the floors",
                                    where))
        if metric.k is not None and metric.k > min_k:
            problems.append(Problem(f"gauge_metrics: {name} needs retrieval depth >= {metric.k} "
                                    f"but a row searches only {min_k} deep", where))
        elif metric.family != "mrr" and metric.k is not None and metric.k not in reported:
            problems.append(Problem(f"gauge_metrics: {name} is not reported by every row "
                                    f"(cut-offs: {', '.join(map(str, sorted(reported)))})",
                                    where))
        if golden_set is None:
            continue
        level_ok = {"chunk": has_chunk, "doc": has_doc, "answer": has_ask}.get(metric.level,
                                                                               True)
        if not level_ok:
            hint = f"; use {name}_doc" if metric.level == "chunk" and has_doc else ""
            problems.append(Problem(f"gauge_metrics: {name} is a {metric.level}-level metric "
                                    f"and no query of golden set {golden_set.name!r} counts "
                                    f"for it{hint}", where))
    if len(set(names)) != len(names):
        problems.append(Problem("gauge_metrics lists a metric twice", where))
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class RowOutcome:
    name: str
    role: RowRole
    run_id: str | None
    status: str  # FINISHED | FAILED
    error: str | None = None
    scores: Mapping[str, np.ndarray] = field(default_factory=dict)  # gauge metrics, aligned
    overall: Mapping[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0
    reused: bool = False


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    parent_run_id: str
    experiment_id: str
    status: str
    rows: Mapping[str, RowOutcome]
    gauge: Mapping[str, GaugeMetric]
    signal_state: str
    ui_command: str
    wall_s: float

    @property
    def failed_rows(self) -> dict[str, str]:
        return {n: r.error or "failed" for n, r in self.rows.items()
                if r.status != RunStatus.FINISHED}

    def as_json(self) -> dict[str, Any]:
        return {"parent_run_id": self.parent_run_id, "experiment_id": self.experiment_id,
                "status": self.status,
                "rows": {n: r.run_id for n, r in self.rows.items()},
                "failed_rows": self.failed_rows,
                "row_seconds": {n: r.seconds for n, r in self.rows.items()},
                "signal_state": self.signal_state,
                "gauge": {m: g.as_dict() for m, g in self.gauge.items()},
                "wall_s": self.wall_s}


def describe_row(row: SweepRow) -> str:
    sets = " ".join(f"{k}={v}" for k, v in row.overrides.items())
    return f"{row.shown_preset} k={row.k}" + (f" {sets}" if sets else "")


# --------------------------------------------------------------------------- cutoffs and ask


def _row_ask(item: Mapping[str, Any], name: str, loc: str, problems: list[Problem]
             ) -> bool | None:
    ask: bool | None = Reader(item, None, loc, ROW_MESSAGES, prefix=f"row {name}: ",
                              problems=problems).value(ROW_FIELDS["ask"])
    return ask


def _with_cutoffs(rows: list[SweepRow], shared: Any, where: str,
                  problems: list[Problem]) -> list[SweepRow]:
    """Each row's cut-offs (its own ``cutoffs:``, else the file's), checked against its depth
    as ``run --cutoffs`` checks them; a list or a "1,10,100" string."""
    from kebab_mlflow.metrics.scoring import parse_cutoffs, run_cutoffs

    out = []
    for row in rows:
        raw = row.cutoffs if row.cutoffs is not None else shared
        if raw is None:
            out.append(row)
            continue
        try:
            ks = parse_cutoffs(raw) if isinstance(raw, str) else list(raw)
            ks = run_cutoffs(row.k, ks)
        except (ConfigError, TypeError):
            problems.append(Problem(f"row {row.name}: 'cutoffs' must be cut-offs >= 1 within "
                                    f"its k {row.k}, got {raw!r}", row.location or where))
            out.append(dataclasses.replace(row, cutoffs=None))
            continue
        out.append(dataclasses.replace(row, cutoffs=tuple(ks)))
    return out
