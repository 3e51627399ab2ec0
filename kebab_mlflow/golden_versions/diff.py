"""``kebab-mlflow golden diff A.yaml B.yaml``: queries added, removed and changed, by aspect.

Aspects of a changed query (one query may change in several):

- ``truth``: the judged documents or the expected chunks differ (a judgment added or removed);
- ``grades``: a document judged in both versions has another grade;
- ``answer``: ``must_contain``, ``forbidden`` or ``answerable``;
- ``type``: ``query_type``;
- ``text``: the query's text (a private set shows that it changed, never the text);
- ``labels``: ``hardcase_categories``, ``metadata_field``, ``group``, ``difficulty``, ``lang``,
  ``ask``, ``case_insensitive``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kebab_mlflow.golden import GoldenQuery, GoldenSet


class Aspect(enum.StrEnum):
    TRUTH = "truth"
    GRADES = "grades"
    ANSWER = "answer"
    TYPE = "type"
    TEXT = "text"
    LABELS = "labels"


_LABEL_FIELDS = ("hardcase_categories", "metadata_field", "group", "difficulty", "lang", "ask",
                 "case_insensitive")
_ANSWER_FIELDS = ("must_contain", "forbidden", "answerable")


@dataclass(frozen=True, kw_only=True)
class QueryChange:
    """One query present in both versions that differs; ``details``: aspect → what changed."""

    id: str
    line_a: int
    line_b: int
    details: Mapping[Aspect, str]


@dataclass(frozen=True, kw_only=True)
class GoldenDiff:
    a: GoldenSet
    b: GoldenSet
    added: tuple[GoldenQuery, ...]
    removed: tuple[GoldenQuery, ...]
    changed: tuple[QueryChange, ...]

    @property
    def private(self) -> bool:
        return self.a.private or self.b.private

    @property
    def counts(self) -> dict[str, int]:
        by_aspect = {str(aspect): sum(aspect in c.details for c in self.changed)
                     for aspect in Aspect}
        return {"added": len(self.added), "removed": len(self.removed),
                "changed": len(self.changed), **by_aspect,
                "unchanged": len(self.a) - len(self.removed) - len(self.changed)}

    def as_dict(self) -> dict[str, Any]:
        def side(g: GoldenSet) -> dict[str, Any]:
            return {"name": g.name, "path": None if g.private else g.path,
                    "sha256": g.digest, "queries": len(g), "private": g.private}

        return {"a": side(self.a), "b": side(self.b), "counts": self.counts,
                "added": [_listed(q, self.private) for q in self.added],
                "removed": [_listed(q, self.private) for q in self.removed],
                "changed": [{"id": c.id, "line_a": c.line_a, "line_b": c.line_b,
                             "aspects": {str(k): v for k, v in c.details.items()}}
                            for c in self.changed]}


def _listed(q: GoldenQuery, private: bool) -> dict[str, Any]:
    return {"id": q.id, "line": q.line, **({} if private else {"query": q.query})}


def diff_golden(a: GoldenSet, b: GoldenSet) -> GoldenDiff:
    """What changed from ``a`` to ``b``, query by query (matched by id)."""
    in_a, in_b = {q.id: q for q in a.queries}, {q.id: q for q in b.queries}
    changed = []
    for q in a.queries:
        if q.id in in_b:
            details = query_changes(q, in_b[q.id], private=a.private or b.private)
            if details:
                changed.append(QueryChange(id=q.id, line_a=q.line, line_b=in_b[q.id].line,
                                           details=details))
    return GoldenDiff(a=a, b=b, added=tuple(q for q in b.queries if q.id not in in_a),
                      removed=tuple(q for q in a.queries if q.id not in in_b),
                      changed=tuple(changed))


def query_changes(a: GoldenQuery, b: GoldenQuery, *, private: bool) -> dict[Aspect, str]:
    """Aspect → a short description of what changed from ``a`` to ``b`` (empty: the same)."""
    checks: dict[Aspect, Callable[[], str]] = {
        Aspect.TRUTH: lambda: _truth(a, b), Aspect.GRADES: lambda: _grades(a, b),
        Aspect.ANSWER: lambda: _fields(a, b, _ANSWER_FIELDS, shown=not private),
        Aspect.TYPE: lambda: _fields(a, b, ("query_type",), shown=True),
        Aspect.TEXT: lambda: _text(a, b, private),
        Aspect.LABELS: lambda: _fields(a, b, _LABEL_FIELDS, shown=True)}
    return {aspect: what for aspect, check in checks.items() if (what := check())}


def _truth(a: GoldenQuery, b: GoldenQuery) -> str:
    parts = []
    for level, old, new in (("doc", set(a.expected_doc_ids), set(b.expected_doc_ids)),
                            ("chunk", set(a.expected_chunk_ids), set(b.expected_chunk_ids))):
        if old != new:
            plus, minus = sorted(new - old), sorted(old - new)
            parts.append(f"{level}: " + ", ".join([*(f"+{x}" for x in plus),
                                                   *(f"-{x}" for x in minus)]))
    return "; ".join(parts)


def _grades(a: GoldenQuery, b: GoldenQuery) -> str:
    both = sorted(set(a.expected_doc_ids) & set(b.expected_doc_ids))
    return ", ".join(f"{d}: {a.expected_doc_ids[d]} -> {b.expected_doc_ids[d]}" for d in both
                     if a.expected_doc_ids[d] != b.expected_doc_ids[d])


def _fields(a: GoldenQuery, b: GoldenQuery, fields: tuple[str, ...], *, shown: bool) -> str:
    def value(q: GoldenQuery, name: str) -> Any:
        v = getattr(q, name)
        return list(v) if isinstance(v, tuple) else v

    differ = [f for f in fields if value(a, f) != value(b, f)]
    if not shown:  # a private set's answer strings are its text too
        return ", ".join(differ)
    return ", ".join(f"{f}: {value(a, f)!r} -> {value(b, f)!r}" for f in differ)


def _text(a: GoldenQuery, b: GoldenQuery, private: bool) -> str:
    if a.query == b.query:
        return ""
    return "changed" if private else f"{a.query!r} -> {b.query!r}"
