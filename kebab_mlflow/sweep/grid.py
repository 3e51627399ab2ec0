"""Grid rows of a sweep file: ``grid: {bm25.k1: [0.6, 0.9, 1.2], bm25.b: [0.3, 0.5]}`` on a row
expands into one child row per combination of the values.

Naming rule: ``<row name>_<key>-<value>_<key>-<value>…``, keys in the order the file writes
them, where ``<key>`` is the config key's last part (``bm25.k1`` → ``k1``) unless two grid keys
share it (then the whole key, ``chunker.max_chars``), and ``<value>`` is the value as written
(``0.6``, ``1e-05``, ``true``, ``document``). So ``{name: bm25, grid: {bm25.k1: [0.6],
bm25.b: [0.3]}}`` gives ``bm25_k1-0.6_b-0.3``. A ``-``, not an ``=``, joins key and value: a
row's name is part of MLflow metric and param keys (``gauge/<metric>/<row>/mean``,
``row.<name>``), where MLflow refuses ``=``. Children follow the file's key order, the last key
varying fastest. Every value and every combination is checked like any row before anything
runs; the problems carry the file:line of the value (or the grid).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kebab_mlflow.errors import ConfigError, Problem
from kebab_mlflow.yaml_source import child, location, sequence_items

MAX_GRID_CHILDREN = 1000
CHILD_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")


@dataclass(frozen=True)
class GridChild:
    name: str
    values: Mapping[str, Any]  # config key -> the value as written
    location: str


def value_text(value: Any) -> str:
    """A grid value as it appears in a child's name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, float) else str(value)


def labels(keys: Sequence[str]) -> dict[str, str]:
    """Each key's label in a child's name: its last part, unless two keys share that."""
    leaves = [key.rsplit(".", 1)[-1] for key in keys]
    return {key: leaf if leaves.count(leaf) == 1 else key for key, leaf in zip(keys, leaves,
                                                                                strict=True)}


def child_name(row: str, values: Mapping[str, Any]) -> str:
    label = labels(list(values))
    return "_".join([row, *(f"{label[k]}-{value_text(v)}" for k, v in values.items())])


def expand_grid(grid: Any, node: Any, source: str, row: str, preset: str,
                overrides: Mapping[str, Any], explicit: Mapping[str, Any],
                problems: list[Problem]) -> list[GridChild]:
    """The children of grid row ``row`` ([] when it has a problem; problems are appended).
    ``overrides`` are the row's config (shared ``set`` included); ``explicit`` the keys the row
    sets itself, which a grid may not set again."""
    where = location(source, node)
    if not isinstance(grid, dict) or not grid:
        problems.append(Problem(f"row {row}: 'grid' must be a non-empty mapping of config key "
                                "-> list of values", where))
        return []
    count = len(problems)
    for key, values in grid.items():
        _check_key(key, values, _value_nodes(node, key), source, row, preset, overrides,
                   explicit, problems)
    if len(problems) > count:
        return []
    keys = list(grid)
    size = 1
    for key in keys:
        size *= len(grid[key])
    if size > MAX_GRID_CHILDREN:
        problems.append(Problem(f"row {row}: the grid makes {size} rows, more than "
                                f"{MAX_GRID_CHILDREN}; split it or use `kebab-mlflow tune`",
                                where))
        return []
    children = [GridChild(child_name(row, dict(zip(keys, combo, strict=True))),
                          dict(zip(keys, combo, strict=True)), where)
                for combo in itertools.product(*(grid[k] for k in keys))]
    for c in children:
        _check_child(c, preset, overrides, row, problems)
    return children if len(problems) == count else []


def _value_nodes(node: Any, key: str) -> list[Any]:
    """The nodes of a grid key's values (or its one value node when it is not a list)."""
    value = child(node, key)
    return sequence_items(value) or ([value] if value is not None else [])


def _check_key(key: Any, values: Any, nodes: list[Any], source: str, row: str, preset: str,
               overrides: Mapping[str, Any], explicit: Mapping[str, Any],
               problems: list[Problem]) -> None:
    """One grid key: a config key the row does not set itself, with a non-empty list of
    distinct scalar values, each of which is a valid setting."""
    from kebab_mlflow.config import SETTING, build_config, flatten

    where = location(source, nodes[0] if nodes else None)
    if key in explicit:
        problems.append(Problem(f"row {row}: {key!r} is set both on the row and in its grid",
                                where))
        return
    if not isinstance(values, list) or not values or not all(
            v is None or isinstance(v, str | int | float | bool) for v in values):
        problems.append(Problem(f"row {row}: grid {key!r} must be a non-empty list of numbers, "
                                f"strings or booleans, got {values!r}", where))
        return
    seen: dict[Any, Any] = {}
    for i, value in enumerate(values):
        at = location(source, nodes[i]) if i < len(nodes) else where
        try:
            config = build_config(preset, {**overrides, key: value},
                                  source=f"{at} row {row} grid")
        except ConfigError as exc:
            problems.extend(exc.problems or [Problem(f"row {row}: {exc.summary}", at)])
            if key not in SETTING:  # the same unknown key for every value says nothing more
                return
            continue
        typed = flatten(config)[key]
        if typed in seen:
            problems.append(Problem(f"row {row}: grid {key!r} lists {value!r} twice (as "
                                    f"{seen[typed]!r} too): two identical rows", at))
        seen.setdefault(typed, value)


def _check_child(c: GridChild, preset: str, overrides: Mapping[str, Any], row: str,
                 problems: list[Problem]) -> None:
    """A combination: a legal row name, and valid together (``chunker.overlap_chars`` below
    ``chunker.max_chars``, say)."""
    from kebab_mlflow.config import build_config

    if not CHILD_NAME.match(c.name):
        problems.append(Problem(f"row {row}: grid child name {c.name!r} is not a legal row name "
                                "(1-100 letters, digits, '_', '.', '-'; MLflow keys carry it): "
                                "shorten the row's name or use values without other "
                                "characters", c.location))
        return
    try:
        build_config(preset, {**overrides, **c.values}, source=f"{c.location} row {c.name}")
    except ConfigError as exc:
        problems.extend(exc.problems or [Problem(f"row {c.name}: {exc.summary}", c.location)])
