"""YAML input files read with their line numbers: one safe parse, node lookup, locations.

The golden-set and sweep loaders both report every problem as ``file:line``. :func:`parse`
returns the data (what ``yaml.safe_load`` returns) and a light tree of :class:`Node` (line
numbers only) walked alongside it.

Why not ``yaml.compose`` + ``yaml.load``: on a 200,000-query golden set the two passes took
56 s and 1.6 GB — PyYAML builds a Python node and two mark objects for every scalar, then
constructs the data from them in Python. Here libyaml's C parser streams the events and
:class:`_Composer` builds the data and the line tree from them in one pass (about 7x faster,
a fraction of the memory). It follows the safe loader's own resolver and constructors for
plain scalars, so the data are the same; anything it does not handle itself (anchors and
aliases, explicit tags, merge keys, complex keys) falls back to PyYAML's full safe load, so
the result never differs from ``yaml.safe_load``.

A :class:`Stream` hands each item of one top-level sequence (a golden set's ``queries``) to a
builder as soon as it is parsed, and keeps what the builder returns in its place: a file of a
million queries then never holds all its items parsed (2 GB at 1M) beside their records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kebab_mlflow.errors import InputError, Problem, YamlFallback

# libyaml's safe loader when present (several times faster on 1,000s of queries), else PyYAML's
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR_TAG = "tag:yaml.org,2002:str"
_SCALAR, _SEQUENCE = yaml.ScalarEvent, yaml.SequenceStartEvent
_SEQUENCE_END, _MAPPING_END = yaml.SequenceEndEvent, yaml.MappingEndEvent
_END, _ALIAS = (_SEQUENCE_END, _MAPPING_END), yaml.AliasEvent


class Node:
    """Where a value sits: ``line`` (0-based, as PyYAML's marks) and, for a mapping, ``keys``
    (key text → value node); for a sequence, ``items`` (item nodes)."""

    __slots__ = ("line", "keys", "items")

    def __init__(self, line: int, keys: dict[str, Node] | None = None,
                 items: list[Node] | None = None):
        self.line = line
        self.keys = keys
        self.items = items


@dataclass(frozen=True)
class Stream:
    """The items of the top-level mapping's sequence under ``key``, built as they are parsed:
    ``start`` receives the top-level entries parsed before that key and returns the builder,
    which maps an item's (data, line node) to what the data keep in the item's place. The
    sequence's node then has no items. The fallback path (PyYAML's full load) streams
    nothing, so a caller must accept plain items too."""

    key: str
    start: Callable[[dict[Any, Any]], Callable[[Any, Node], Any]]


def parse(raw: bytes, source: str, error: type[InputError], what: str,
          stream: Stream | None = None) -> tuple[Any, Any]:
    """(data, node tree) of a UTF-8 YAML document; undecodable bytes or bad YAML raise
    ``error`` with the location."""
    try:
        # checked here, parsed from the bytes: the loader would encode a str to UTF-8 again,
        # two more copies of the file beside the records (a 1M-query golden set: 2 x 140 MB)
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8",
                    [Problem(f"byte {exc.start}: {exc.reason}", source)]) from None
    try:
        try:
            composer = _Composer(raw, stream)
            data, node = composer.document()
            duplicates = composer.duplicates
        except YamlFallback:
            yaml_node = yaml.compose(raw, Loader=SAFE_LOADER)
            data = yaml.load(raw, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
            node, duplicates = _from_yaml_node(yaml_node), _yaml_duplicates(yaml_node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        msg = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise error(f"{what} is not valid YAML", [Problem(msg, where)]) from None
    if duplicates:
        raise error(f"{what} has duplicated keys", [
            Problem(f"duplicated key {key!r} (first at line {first + 1}; YAML would keep only "
                    "the last)", f"{source}:{line + 1}") for key, first, line in sorted(
                        duplicates, key=lambda d: d[2])])
    return data, node


def _yaml_duplicates(root: Any) -> list[tuple[str, int, int]]:
    """(key, first line, repeated line) of every key given twice in one mapping of a PyYAML
    node tree; each node is walked once (an alias shares its anchor's node)."""
    found, stack, visited = [], [root], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line
                    if key.value in first:
                        found.append((key.value, first[key.value], line))
                    else:
                        first[key.value] = line
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return found


def child(node: Any, key: str) -> Node | None:
    """The value node of ``key`` in a mapping node, or None."""
    return node.keys.get(key) if node is not None and node.keys is not None else None


def sequence_items(node: Any) -> list[Node]:
    """The item nodes of a sequence node ([] for anything else)."""
    return node.items if node is not None and node.items is not None else []


def location(source: str, node: Any) -> str:
    """``source:line`` of a node (just ``source`` without one)."""
    return f"{source}:{node.line + 1}" if node is not None else source


class _Composer:
    """Data and line tree from libyaml's event stream, in one pass."""

    def __init__(self, raw: bytes, stream: Stream | None = None):
        self.stream = stream
        self.loader = SAFE_LOADER(raw)
        # the loader's own get_event: yaml.parse's generator makes a second call per event
        self.next_event = self.loader.get_event
        # the safe loader's implicit resolvers by a plain scalar's first character, joined
        # once: most plain scalars of a golden set (ids) start with a letter none resolves
        resolvers = yaml.SafeLoader.yaml_implicit_resolvers
        self.any_start = list(resolvers.get(None, []))
        self.resolvers = {first: [*found, *self.any_start]
                          for first, found in resolvers.items() if first is not None}
        self.constructor = yaml.constructor.SafeConstructor()
        self.duplicates: list[tuple[str, int, int]] = []  # (key, first line, repeated line)

    def document(self) -> tuple[Any, Node | None]:
        try:
            return self._document()
        finally:
            self.loader.dispose()

    def _document(self) -> tuple[Any, Node | None]:
        self.next_event()  # StreamStart
        event = self.next_event()
        if isinstance(event, yaml.StreamEndEvent):
            return None, None
        event = self._content(self.next_event())
        if self.stream is not None and type(event) is yaml.MappingStartEvent:
            self._check_tag(event)
            data, node = self.mapping(event.start_mark.line, self.stream)
        else:
            data, node = self.value(event)
        self.next_event()  # DocumentEnd
        event = self.next_event()
        if not isinstance(event, yaml.StreamEndEvent):
            raise yaml.composer.ComposerError(
                "expected a single document in the stream", None,
                "but found another document", event.start_mark)
        return data, node

    def _content(self, event: Any) -> Any:
        kind = type(event)
        if kind is _ALIAS or kind not in _END and event.anchor is not None:
            raise YamlFallback
        return event

    def value(self, event: Any) -> tuple[Any, Node]:
        kind = type(event)
        if kind is _SCALAR:
            return self.scalar(event), Node(event.start_mark.line)
        self._check_tag(event)
        if kind is _SEQUENCE:
            return self.sequence(event.start_mark.line)
        return self.mapping(event.start_mark.line)

    @staticmethod
    def _check_tag(event: Any) -> None:
        if event.tag is not None and not event.implicit:
            raise YamlFallback

    def built_sequence(self, event: Any, build: Callable[[Any, Node], Any]
                       ) -> tuple[list[Any], Node]:
        """A streamed sequence: each item as ``build`` returns it, the node without items."""
        self._check_tag(event)
        data: list[Any] = []
        next_event, content, value = self.next_event, self._content, self.value
        while type(item := content(next_event())) is not _SEQUENCE_END:
            data.append(build(*value(item)))
        return data, Node(event.start_mark.line, items=[])

    def sequence(self, line: int) -> tuple[list[Any], Node]:
        data: list[Any] = []
        nodes: list[Node] = []
        next_event, content, value = self.next_event, self._content, self.value
        while type(event := content(next_event())) is not _SEQUENCE_END:
            item, item_node = value(event)
            data.append(item)
            nodes.append(item_node)
        return data, Node(line, items=nodes)

    def mapping(self, line: int, stream: Stream | None = None) -> tuple[dict[Any, Any], Node]:
        # A repeated key is recorded (parse refuses the file); the last value wins, as in
        # yaml.safe_load.
        data: dict[Any, Any] = {}
        keys: dict[str, Node] = {}
        key_lines: dict[str, int] = {}
        next_event, content, value = self.next_event, self._content, self.value
        while type(event := content(next_event())) is not _MAPPING_END:
            if type(event) is not _SCALAR or event.value == "<<":
                raise YamlFallback  # a complex key or a merge key
            key = self.scalar(event)
            key_line = event.start_mark.line
            if event.value in key_lines:
                self.duplicates.append((event.value, key_lines[event.value], key_line))
            else:
                key_lines[event.value] = key_line
            item = content(next_event())
            if stream is not None and key == stream.key and type(item) is _SEQUENCE:
                data[key], keys[event.value] = self.built_sequence(item, stream.start(data))
            else:
                data[key], keys[event.value] = value(item)
        return data, Node(line, keys=keys)

    def scalar(self, event: Any) -> Any:
        """The safe loader's value of a scalar: a quoted one is a string, a plain one is
        resolved by the safe loader's implicit resolvers and built by its constructors."""
        value = event.value
        if event.tag is not None and event.tag != "!":
            raise YamlFallback
        if not event.implicit[0]:
            return value
        candidates = self.resolvers.get(value[:1], self.any_start)
        if not candidates:
            return value
        tag = next((tag for tag, regexp in candidates if regexp.match(value)), _STR_TAG)
        if tag == _STR_TAG:
            return value
        construct = self.constructor.yaml_constructors.get(tag)
        if construct is None:
            raise YamlFallback
        return construct(self.constructor, yaml.ScalarNode(tag, value))


def _from_yaml_node(node: Any, seen: dict[int, Node] | None = None) -> Node | None:
    """The line tree of a PyYAML node tree (the fallback path). An aliased node is converted
    once and shared, as PyYAML shares it: a "billion laughs" file stays nine nodes deep, not
    nine to the ninth."""
    if node is None:
        return None
    return _yaml_node(node, {} if seen is None else seen)


def _yaml_node(node: Any, seen: dict[int, Node]) -> Node:
    if id(node) in seen:
        return seen[id(node)]
    out = seen[id(node)] = Node(node.start_mark.line)
    if isinstance(node, yaml.MappingNode):
        out.keys = {str(getattr(k, "value", "")): _yaml_node(v, seen) for k, v in node.value}
    elif isinstance(node, yaml.SequenceNode):
        out.items = [_yaml_node(v, seen) for v in node.value]
    return out
