"""The ``evidence:`` entries of a golden query, checked for shape.

An entry is ``{doc: ID, quote: "…"}`` (exact text of the document as parsed; ``occurrence: N``,
1-based, when the quote occurs more than once) or ``{doc: ID, start: I, end: J}`` (character
offsets into the parsed text, end exclusive), each with an optional ``grade`` (an integer
>= 1, default 1). Whether a quote is in the document is checked later, against the corpus
(:mod:`kebab_mlflow.evidence.locate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EVIDENCE_KEYS = frozenset({"doc", "quote", "occurrence", "start", "end", "grade"})
MAX_EVIDENCE_GRADE = 127  # chunk gains are int8 when every grade is a whole number <= 127


@dataclass(frozen=True, kw_only=True)
class EvidenceSpan:
    """One evidence entry as written: a quote (with its occurrence) or offsets."""

    doc: str
    quote: str | None = None
    occurrence: int | None = None  # 1-based; None: the quote must occur exactly once
    start: int | None = None
    end: int | None = None
    grade: int = 1
    line: int = 0  # the entry's line in the golden file (1-based; 0 unknown)

    @property
    def by_quote(self) -> bool:
        return self.quote is not None


Report = Callable[[str, int], None]  # (message, line) -> records one problem


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_evidence(value: Any, item_lines: list[int], report: Report) -> tuple[EvidenceSpan, ...]:
    """The entries of one query's ``evidence`` value; every shape problem goes to ``report``
    with the entry's line (``item_lines[i]``, 1-based). Entries with problems are dropped."""
    if not isinstance(value, list) or not value:
        report("'evidence' must be a non-empty list of {doc, quote} or {doc, start, end}",
               item_lines[0] if item_lines else 0)
        return ()
    spans = []
    for i, entry in enumerate(value):
        line = item_lines[i] if i < len(item_lines) else (item_lines[0] if item_lines else 0)
        span = _parse_entry(entry, i + 1, line, report)
        if span is not None:
            spans.append(span)
    return tuple(spans)


def _parse_entry(entry: Any, number: int, line: int, report: Report) -> EvidenceSpan | None:
    where = f"evidence #{number}"
    if not isinstance(entry, dict):
        report(f"{where} must be a mapping with doc and quote, or doc, start and end", line)
        return None
    problems = [f"{where}: unknown key {key!r} (known: {', '.join(sorted(EVIDENCE_KEYS))})"
                for key in sorted(set(map(str, entry)) - EVIDENCE_KEYS)]
    doc = entry.get("doc")
    if not (isinstance(doc, str) and doc) and not _is_int(doc):
        problems.append(f"{where}: 'doc' must be a doc id")
    problems += _form_problems(entry, where)
    grade = entry.get("grade", 1)
    if not _is_int(grade) or not 1 <= grade <= MAX_EVIDENCE_GRADE:
        problems.append(f"{where}: 'grade' must be an integer from 1 to {MAX_EVIDENCE_GRADE}")
    for message in problems:
        report(message, line)
    if problems:
        return None
    return EvidenceSpan(doc=str(doc), quote=entry.get("quote"),
                        occurrence=entry.get("occurrence"), start=entry.get("start"),
                        end=entry.get("end"), grade=grade, line=line)


def _form_problems(entry: dict[str, Any], where: str) -> list[str]:
    """A quote (with an optional occurrence) or a start/end pair, never both."""
    has_quote = "quote" in entry
    has_offsets = "start" in entry or "end" in entry
    if has_quote == has_offsets:
        return [f"{where} needs either 'quote' or 'start' and 'end' (not both)"]
    if has_quote:
        quote, occurrence = entry["quote"], entry.get("occurrence")
        problems = [] if isinstance(quote, str) and quote.strip() else [
            f"{where}: 'quote' must be non-empty text"]
        if occurrence is not None and (not _is_int(occurrence) or occurrence < 1):
            problems.append(f"{where}: 'occurrence' must be an integer >= 1")
        return problems
    start, end = entry.get("start"), entry.get("end")
    if not (_is_int(start) and _is_int(end)) or start is None or end is None:
        return [f"{where}: 'start' and 'end' must both be integers"]
    if "occurrence" in entry:
        return [f"{where}: 'occurrence' goes with a quote, not with offsets"]
    if not 0 <= start < end:
        return [f"{where}: offsets must satisfy 0 <= start < end, got {start}..{end}"]
    return []
