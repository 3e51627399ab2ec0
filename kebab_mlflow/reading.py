"""The one declarative reader of every input format: golden sets, sweep and tune files, the
recovery manifest and the configuration.

A format is a table of :class:`Field` (name, accepted types, range or choices, default,
required, help) applied by a :class:`Reader` to a parsed mapping — a YAML document from
:func:`kebab_mlflow.yaml_source.parse`, or a JSON object with the line tree of
:func:`json_lines` — collecting every problem with its ``file:line`` before one
:class:`~kebab_mlflow.errors.InputError` lists them all. Each format keeps its own wording
(:class:`Messages`), so the messages are those the hand-written readers gave.

Why not pydantic v2 or msgspec: both validate a Python object, so the YAML line numbers the
one-pass composer keeps (``yaml_source``) would have to be mapped back from their error paths,
and importing pydantic costs more than reading the fixture golden set
(``bench/bench_readers.py``, ``bench/results/bench_readers.txt``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.yaml_source import Node, child, location


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """One setting of an input format and what it accepts."""

    name: str
    what: str  # how a message names an accepted value ("an integer >= 1")
    types: tuple[type, ...] = (object,)  # bool is accepted only when listed
    default: Any = None
    required: bool = False
    low: float | None = None  # inclusive bounds of a number
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    items: tuple[type, ...] | None = None  # a list's (or a mapping's values') accepted types
    nonblank: bool = False  # a string (and each string item) must hold more than spaces
    nonempty: bool = False  # a list, mapping or string must not be empty
    null: bool = False  # null is a value (else a problem, or absent: Messages.null_absent)
    check: Callable[[Any], bool] | None = None  # anything further the value must satisfy
    message: str | None = None  # this field's own wording of a bad value (Messages.bad)
    missing: str | None = None  # ... and of its absence (Messages.missing)
    help: str = ""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is of the accepted types and satisfies every constraint (the
        items of a list aside: :meth:`items_ok`)."""
        if value is None:
            return self.null
        if not _of(value, self.types):
            return False
        if self.nonblank and isinstance(value, str) and not value.strip():
            return False
        if self.nonempty and not value:
            return False
        if isinstance(value, int | float) and not isinstance(value, bool) and (
                self.low is not None or self.high is not None):
            if not in_range(value, self.low, self.high):
                return False
        if self.choices is not None and value not in self.choices:
            return False
        return self.check is None or bool(self.check(value))

    def items_ok(self, value: Any) -> bool:
        if self.items is None:
            return True
        values = value.values() if isinstance(value, dict) else value
        return all(_of(x, self.items) and not (self.nonblank and isinstance(x, str)
                                                and not x.strip()) for x in values)


def _fallback(f: Field, default: Any) -> Any:
    """``default`` when given, else the field's (a fresh copy of a list or mapping: a table's
    default is shared)."""
    value = f.default if default is ... else default
    return value.copy() if isinstance(value, list | dict) else value


def _of(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (not isinstance(value, bool) or bool in types)


def in_range(value: float, low: float | None, high: float | None) -> bool:
    """A finite number within [low, high] (None: unbounded)."""
    return (not isinstance(value, float) or math.isfinite(value)) and (
        low is None or value >= low) and (high is None or value <= high)


@dataclass(frozen=True, kw_only=True)
class Messages:
    """How a format words its problems: templates over ``{name}``, ``{what}``, ``{value}``
    (the value's repr), ``{type}`` (its type name), ``{key}`` and ``{known}``."""

    bad: str = "'{name}' must be {what}, got {value}"
    bad_items: str | None = None  # None: ``bad``
    missing: str = "missing required key {name!r}"
    empty: str | None = None  # a required blank string; None: ``bad``
    unknown: str = "unknown top-level key {key!r} (known: {known})"
    null_absent: bool = False  # a null value is read as an absent key


class Reader:
    """A mapping read against field tables; ``problems`` collects every one, in order.

    ``prefix`` starts each message (``"row bm25: "``); ``keyed=False`` puts every problem at
    the mapping's own line rather than at its key's; ``problems`` is a list to append to
    (a golden set's, shared by all its queries)."""

    __slots__ = ("data", "node", "source", "messages", "query_id", "prefix", "keyed",
                 "problems")

    def __init__(self, data: Mapping[str, Any], node: Any, source: str,
                 messages: Messages | None = None, *, query_id: str | None = None,
                 prefix: str = "", keyed: bool = True, problems: list[Problem] | None = None):
        self.data, self.node, self.source = data, node, source
        self.messages = messages or Messages()
        self.query_id, self.prefix, self.keyed = query_id, prefix, keyed
        self.problems: list[Problem] = [] if problems is None else problems

    def where(self, key: str | None = None) -> str:
        """``file:line`` of a key's value (of the mapping itself when absent or None)."""
        found = child(self.node, key) if key is not None and self.keyed else None
        return location(self.source, found or self.node)

    def problem(self, message: str, key: str | None = None) -> None:
        self.problems.append(Problem(self.prefix + message, self.where(key), self.query_id))

    def unknown_keys(self, known: Iterable[str]) -> None:
        """One problem per key the format does not know, in sorted order."""
        if isinstance(known, Table):
            known = known.names
        elif not isinstance(known, set | frozenset):
            known = set(known)
        if self.data.keys() <= known:
            return
        listed = ", ".join(sorted(known))
        for key in sorted(set(map(str, self.data)) - known):
            self.problem(self.messages.unknown.format(key=key, known=listed), key)

    def missing(self, fields: Iterable[Field]) -> set[str]:
        """The required fields absent, null or blank: each a problem; their names."""
        out = set()
        for f in fields:
            if not f.required:
                continue
            value = self.data.get(f.name)
            if value is None and not (f.null and f.name in self.data):
                self.problem(self._say(f.missing or self.messages.missing, f, value))
                out.add(f.name)
            elif f.nonblank and isinstance(value, str) and not value.strip():
                wording = f.message or self.messages.empty or self.messages.bad
                self.problem(self._say(wording, f, value), f.name)
                out.add(f.name)
        return out

    def value(self, f: Field, default: Any = ..., *, reported: set[str] | None = None) -> Any:
        """The field's value, or its default (``default`` when given) with a problem when the
        value is not one the field accepts. Absent, or null where null is not a value (a
        required field, or any field of a format whose null means absent): the default, with
        a problem when the field is required (unless ``reported`` by :meth:`missing`)."""
        if f.name in self.data:
            value = self.data[f.name]
            if value is not None or f.null or not (f.required or self.messages.null_absent):
                if reported is not None and f.name in reported:
                    return _fallback(f, default)
                if not f.accepts(value):
                    self.problem(self._say(f.message or self.messages.bad, f, value), f.name)
                    return _fallback(f, default)
                if not f.items_ok(value):
                    wording = f.message or self.messages.bad_items or self.messages.bad
                    self.problem(self._say(wording, f, value), f.name)
                    return _fallback(f, default)
                return value
        if f.required and reported is None:
            self.problem(self._say(f.missing or self.messages.missing, f, None))
        return _fallback(f, default)

    def values(self, fields: Table | Sequence[Field], *, required_first: bool = False
               ) -> dict[str, Any]:
        """Every field's value by name, each checked in turn (``required_first``: the missing
        required ones reported before any other problem)."""
        if isinstance(fields, Table):
            required, fields = fields.required, fields.fields
        else:
            required = tuple(f for f in fields if f.required)
        reported = self.missing(required) if required_first else None
        data, out = self.data, {}
        for f in fields:
            if f.name in data or f.required:
                out[f.name] = self.value(f, reported=reported)
            else:  # absent and optional: its default
                out[f.name] = _fallback(f, ...)
        return out

    def raise_problems(self, error: type[InputError], summary: str) -> None:
        if self.problems:
            raise error(summary, self.problems)

    @staticmethod
    def _say(template: str, f: Field, value: Any) -> str:
        return template.format(name=f.name, what=f.what, value=repr(value),
                               type=type(value).__name__)


class Table(dict[str, Field]):
    """A format's fields by name (its known keys, in the order written), with its required
    fields kept apart: a golden set reads one table per query, thousands of times."""

    def __init__(self, fields: Iterable[Field]):
        super().__init__((f.name, f) for f in fields)
        self.fields = tuple(self.values())
        self.required = tuple(f for f in self.fields if f.required)
        self.names = frozenset(self)


def table(fields: Iterable[Field]) -> Table:
    """A format's :class:`Table`."""
    return Table(fields)


# a JSON string token, or one structural character (newlines counted for the lines)
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\]:\n]')


def json_lines(text: str) -> Node:
    """The line tree of a JSON document's top-level object: each key's line (0-based, as a
    YAML node's), for :class:`Reader` locations. Nested values are not walked."""
    keys: dict[str, Node] = {}
    line = depth = 0
    root = pending = None
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token in "{[":
            if root is None:
                root = line
            depth += 1
        elif token in "}]":
            depth -= 1
        elif token == ":":
            if depth == 1 and pending is not None:
                keys.setdefault(pending, Node(line))
            pending = None
            continue
        elif depth == 1:
            try:
                pending = json.loads(token)
            except ValueError:
                pending = None
            continue
        pending = None
    return Node(root or 0, keys=keys)
