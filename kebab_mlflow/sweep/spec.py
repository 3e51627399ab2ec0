"""The sweep file: loading and validating it (every problem at once, with file:line), and the
records of a sweep (rows, outcomes, results).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import ConfigError, Problem, SweepError
from kebab_mlflow.yaml_source import child, location, parse, sequence_items

DEFAULT_FLOORS = ("random_retrieval", "single_chunk")


DEFAULT_GAUGE_CHUNK = ("hit_at_5", "mrr", "ndcg_at_10_doc")


DEFAULT_GAUGE_DOC = ("hit_at_10_doc", "mrr_doc", "ndcg_at_10_doc")


DEFAULT_RESAMPLES = 2000


TOP_LEVEL_KEYS = {"name", "description", "experiment", "golden", "corpus", "k", "set",
                  "primary", "floors", "ceiling", "gauge_metrics", "resamples", "seed", "rows",
                  "cutoffs"}


ROW_KEYS = {"name", "preset", "k", "set", "target", "concurrency", "cutoffs", "ask"}


ROW_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")




@dataclass(frozen=True)
class SweepRow:
    name: str
    preset: str
    overrides: Mapping[str, Any]
    k: int
    role: str  # primary | floor | ceiling | variant
    location: str = ""
    target: str | None = None  # evaluate another system (python:, http://, cmd:) in this row
    concurrency: int = 1
    cutoffs: tuple[int, ...] | None = None  # the row's (or the file's) cutoffs; None: default
    ask: bool | None = None  # answer every query / none; None: each query's own ``ask``

    @property
    def shown_preset(self) -> str:
        """The preset as the row's run records it: ``target`` for a row that runs a target."""
        return "target" if self.target else self.preset


@dataclass(frozen=True)
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

    def row(self, name: str) -> SweepRow:
        return next(r for r in self.rows if r.name == name)


def _is_int(value: Any) -> bool:
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
    return _build(data, node, source, path.parent, hashlib.sha256(raw).hexdigest())


def _build(data: dict, node: Any, source: str, base: Path, sha256: str) -> SweepSpec:
    from kebab_mlflow.config import PRESETS, build_config

    problems: list[Problem] = []

    def where(key: str) -> str:
        return location(source, child(node, key) or node)

    def typed(key: str, check: Callable[[Any], bool], what: str, default: Any) -> Any:
        value = data.get(key, default)
        if key in data and not check(value):
            problems.append(Problem(f"'{key}' must be {what}, got {value!r}", where(key)))
            return default
        return value

    for key in sorted(set(map(str, data)) - TOP_LEVEL_KEYS):
        problems.append(Problem(f"unknown top-level key {key!r} (known: "
                                f"{', '.join(sorted(TOP_LEVEL_KEYS))})", where(key)))
    is_str = lambda v: isinstance(v, str) and v.strip() != ""  # noqa: E731
    is_str_list = lambda v: isinstance(v, list) and all(is_str(x) for x in v)  # noqa: E731
    name = typed("name", is_str, "a string", Path(source).stem)
    description = typed("description", lambda v: isinstance(v, str), "a string", "")
    experiment = typed("experiment", is_str, "a string", None)
    k = typed("k", lambda v: _is_int(v) and v >= 1, "an integer >= 1", 10)
    shared = typed("set", lambda v: isinstance(v, dict), "a mapping of config keys", {})
    resamples = typed("resamples", lambda v: _is_int(v) and v >= 100,
                      "an integer >= 100", DEFAULT_RESAMPLES)
    seed = typed("seed", lambda v: _is_int(v) and v >= 0, "an integer >= 0", 0)
    floors = typed("floors", is_str_list, "a list of row names", list(DEFAULT_FLOORS))
    ceiling = typed("ceiling", lambda v: v is None or is_str(v), "a row name or null", None)
    primary = typed("primary", is_str, "a row name", None)
    gauge = typed("gauge_metrics", lambda v: is_str_list(v) and v, "a non-empty list of "
                  "metric names", None)
    golden = corpus = None
    for key in ("golden", "corpus"):
        value = data.get(key)
        if not is_str(value):
            problems.append(Problem(f"missing or empty '{key}' (a path, relative to the sweep "
                                    "file)", where(key)))
        elif key == "golden":
            golden = _resolve(base, value)
        else:
            corpus = _resolve(base, value)
    if isinstance(floors, list) and not floors:
        problems.append(Problem("'floors' must name at least one row: a gauge without a floor "
                                "measures nothing", where("floors")))

    rows = _rows(data.get("rows"), child(node, "rows"), source, shared, k, problems,
                 where("rows"))
    names = [r.name for r in rows]
    # floors/ceiling that name a preset but no row get an implicit row of that preset
    for ref, key in [(f, "floors") for f in floors] + [(ceiling, "ceiling")]:
        if ref is None or ref in names:
            continue
        if ref in PRESETS:
            try:
                build_config(ref, dict(shared), source=f"{where(key)} implicit row {ref}")
            except ConfigError as exc:
                problems.extend(exc.problems or [Problem(exc.summary, where(key))])
            rows.append(SweepRow(ref, ref, dict(shared), k, "variant", where(key)))
            names.append(ref)
        else:
            problems.append(Problem(f"'{key}' names {ref!r}, which is neither a row "
                                    f"(rows: {', '.join(names) or 'none'}) nor a preset",
                                    where(key)))
    if primary is None and names:
        primary = names[0]
    if primary is not None and primary not in names:
        problems.append(Problem(f"'primary' names {primary!r}, which is not a row (rows: "
                                f"{', '.join(names) or 'none'})", where("primary")))
    if primary in floors or (primary is not None and primary == ceiling):
        problems.append(Problem(f"the primary row {primary!r} cannot also be a floor or the "
                                "ceiling", where("primary")))
    if ceiling is not None and ceiling in floors:
        problems.append(Problem(f"row {ceiling!r} cannot be both a floor and the ceiling",
                                where("ceiling")))
    if len(set(floors)) != len(floors):
        problems.append(Problem("'floors' lists a row twice", where("floors")))
    roles = {primary: "primary", ceiling: "ceiling", **{f: "floor" for f in floors}}
    rows = [dataclasses.replace(r, role=roles.get(r.name, "variant")) for r in rows]
    rows = _with_cutoffs(rows, data.get("cutoffs"), where("cutoffs"), problems)

    golden_set = corpus_digest = None
    if golden is not None:
        golden_set, corpus_digest = _check_golden(golden, corpus, problems, where("golden"),
                                                  where("corpus"))
    gauge_metrics = _check_metrics(gauge, golden_set, rows, problems, where("gauge_metrics"))
    if problems:
        raise SweepError(f"invalid sweep file {source}", problems)
    return SweepSpec(source, sha256, name, description, experiment, str(golden), str(corpus),
                     tuple(rows), primary, tuple(floors), ceiling, gauge_metrics, resamples,
                     seed, golden_set.name, golden_set.digest,
                     tuple(q.id for q in golden_set.queries), corpus_digest or "")


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _rows(items: Any, node: Any, source: str, shared: Mapping[str, Any], default_k: int,
          problems: list[Problem], where_rows: str) -> list[SweepRow]:
    from kebab_mlflow.config import build_config

    if not isinstance(items, list) or not items:
        problems.append(Problem("'rows' must be a non-empty list of rows", where_rows))
        return []
    item_nodes = sequence_items(node)
    rows: list[SweepRow] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        item_node = item_nodes[i] if i < len(item_nodes) else None
        loc = location(source, item_node)
        if not isinstance(item, dict):
            problems.append(Problem(f"row #{i + 1} must be a mapping", loc))
            continue
        name = item.get("name")
        if not isinstance(name, str) or not ROW_NAME.match(name):
            problems.append(Problem(f"row #{i + 1}: 'name' must be 1-100 characters of letters, "
                                    f"digits, '_', '.', '-' (an MLflow key part), got {name!r}",
                                    loc))
            continue
        duplicate = name in seen  # still checked below: every problem is listed at once
        if duplicate:
            problems.append(Problem(f"duplicate row name {name!r} (first at {seen[name]})", loc))
        else:
            seen[name] = loc
        preset = item.get("preset", "naive_baseline")
        k = item.get("k", default_k)
        if not _is_int(k) or k < 1:
            problems.append(Problem(f"row {name}: 'k' must be an integer >= 1, got {k!r}", loc))
            k = default_k
        row_set = item.get("set", {})
        if not isinstance(row_set, dict):
            problems.append(Problem(f"row {name}: 'set' must be a mapping of config keys", loc))
            row_set = {}
        inline = {key: v for key, v in item.items() if key not in ROW_KEYS}
        overrides = {**shared, **row_set, **inline}
        if not isinstance(preset, str):
            problems.append(Problem(f"row {name}: 'preset' must be a string", loc))
            continue
        try:
            build_config(preset, overrides, source=f"{loc} row {name}")
        except ConfigError as exc:
            problems.extend(exc.problems or [Problem(f"row {name}: {exc.summary}", loc)])
            continue
        target, concurrency = item.get("target"), item.get("concurrency", 1)
        if target is not None and not (isinstance(target, str) and target.strip()):
            problems.append(Problem(f"row {name}: 'target' must be a target spec string "
                                    "(python:..., http://..., cmd:...)", loc))
        elif target is not None:
            from kebab_mlflow.targets import TargetError, check_target

            try:
                check_target(target)
            except TargetError as exc:
                problems.append(Problem(f"row {name}: {exc}", loc))
        if not _is_int(concurrency) or concurrency < 1:
            problems.append(Problem(f"row {name}: 'concurrency' must be an integer >= 1", loc))
            concurrency = 1
        if not duplicate:
            rows.append(SweepRow(name, preset, overrides, k, "variant", loc, target,
                                 concurrency, item.get("cutoffs"),
                                 _row_ask(item, name, loc, problems)))
    return rows


def _check_golden(golden: Path, corpus: Path | None, problems: list[Problem],
                  where_golden: str = "", where_corpus: str = ""):
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
        known = {d.doc_id for d in loaded.documents}
        missing = sorted({d for q in golden_set.queries for d in q.expected_doc_ids} - known)
        if missing:
            problems.append(Problem(f"{len(missing)} expected doc id(s) of the golden set are "
                                    f"not in the corpus {corpus}: {', '.join(missing[:20])}",
                                    str(golden)))
    return golden_set, loaded.digest


def _check_metrics(names: list[str] | None, golden_set: Any, rows: Sequence[SweepRow],
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


@dataclass(frozen=True)
class RowOutcome:
    name: str
    role: str
    run_id: str | None
    status: str  # FINISHED | FAILED
    error: str | None = None
    scores: Mapping[str, np.ndarray] = field(default_factory=dict)  # gauge metrics, aligned
    overall: Mapping[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0
    reused: bool = False


@dataclass(frozen=True)
class SweepResult:
    parent_run_id: str
    experiment_id: str
    status: str
    rows: Mapping[str, RowOutcome]
    gauge: Mapping[str, dict]
    signal_state: str
    ui_command: str
    wall_s: float

    @property
    def failed_rows(self) -> dict[str, str]:
        return {n: r.error or "failed" for n, r in self.rows.items() if r.status != "FINISHED"}

    def as_json(self) -> dict[str, Any]:
        return {"parent_run_id": self.parent_run_id, "experiment_id": self.experiment_id,
                "status": self.status,
                "rows": {n: r.run_id for n, r in self.rows.items()},
                "failed_rows": self.failed_rows,
                "signal_state": self.signal_state, "gauge": self.gauge,
                "wall_s": self.wall_s}


def describe_row(row: SweepRow) -> str:
    sets = " ".join(f"{k}={v}" for k, v in row.overrides.items())
    return f"{row.shown_preset} k={row.k}" + (f" {sets}" if sets else "")


# --------------------------------------------------------------------------- cutoffs and ask


def _row_ask(item: Mapping[str, Any], name: str, loc: str, problems: list[Problem]
             ) -> bool | None:
    ask = item.get("ask")
    if ask is not None and not isinstance(ask, bool):
        problems.append(Problem(f"row {name}: 'ask' must be true or false, got {ask!r}", loc))
        return None
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
