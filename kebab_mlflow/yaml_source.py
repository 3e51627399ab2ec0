"""YAML input files read with their line numbers: one safe parse, node lookup, locations.

The golden-set and sweep loaders both report every problem as ``file:line``; they parse the
text once into data and once into the node tree (which carries the marks) and walk both.
"""

from __future__ import annotations

from typing import Any

import yaml

from kebab_mlflow.errors import InputError, Problem

# libyaml's safe loader when present (several times faster on 1,000s of queries), else PyYAML's
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(raw: bytes, source: str, error: type[InputError], what: str) -> tuple[Any, Any]:
    """(data, node tree) of a UTF-8 YAML document; undecodable bytes or bad YAML raise
    ``error`` with the location."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8",
                    [Problem(f"byte {exc.start}: {exc.reason}", source)]) from None
    try:
        node = yaml.compose(text, Loader=SAFE_LOADER)
        data = yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        msg = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise error(f"{what} is not valid YAML", [Problem(msg, where)]) from None
    duplicates = duplicate_keys(node, source)
    if duplicates:
        raise error(f"{what} has duplicated keys", duplicates)
    return data, node


def duplicate_keys(root: Any, source: str) -> list[Problem]:
    """Every key given twice in one mapping (YAML keeps the last silently), with both lines."""
    problems, stack, visited = [], [root], set()
    while stack:
        node = stack.pop()
        if id(node) in visited:  # an alias shares its anchor's node: walk it once (a
            continue             # "billion laughs" file is a few nodes reached 9^9 ways)
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, Any] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    seen = first.setdefault(key.value, key)
                    if seen is not key:
                        problems.append(Problem(
                            f"duplicated key {key.value!r} (first at line "
                            f"{seen.start_mark.line + 1}; YAML would keep only the last)",
                            location(source, key)))
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(problems, key=lambda p: int(p.location.rsplit(":", 1)[1]))


def child(node: Any, key: str) -> Any:
    """The value node of ``key`` in a mapping node, or None."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return v
    return None


def location(source: str, node: Any) -> str:
    """``source:line`` of a node (just ``source`` without one)."""
    return f"{source}:{node.start_mark.line + 1}" if node is not None else source
