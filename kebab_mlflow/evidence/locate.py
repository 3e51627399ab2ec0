"""Evidence entries as character offsets into the parsed document text, checked.

A quote is looked up in ``Document.text`` — the text the chunker cuts, whatever the file
format was — so an edit that moves a quote moves its offsets with it, and one that removes
or duplicates it is a problem with the golden file's line, the query and the document, never
a silent zero. Offsets are checked to lie inside the text. Of a private golden set, problems
give a quote's length, never its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kebab_mlflow.evidence.spec import EvidenceSpan

QUOTE_SHOWN = 60  # characters of a quote a problem shows (public sets only)


@dataclass(frozen=True, kw_only=True)
class LocatedSpan:
    """One evidence entry at its place in the parsed document text: ``[start, end)``."""

    doc: str
    start: int
    end: int
    grade: int = 1

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, kw_only=True)
class SpanProblem:
    """Why an entry could not be placed (the caller turns it into an errors.Problem)."""

    message: str
    line: int


def locate_spans(spans: Sequence[EvidenceSpan], texts: Mapping[str, str], *,
                 private: bool) -> tuple[tuple[LocatedSpan, ...], list[SpanProblem]]:
    """Each entry of one query placed in its document's text, and what could not be."""
    located: list[LocatedSpan] = []
    problems: list[SpanProblem] = []
    for number, span in enumerate(spans, 1):
        text = texts.get(span.doc)
        if text is None:
            problems.append(SpanProblem(message=f"evidence #{number}: doc {span.doc!r} is not "
                                        "in the corpus", line=span.line))
            continue
        place = _place(span, text, number, private)
        if isinstance(place, str):
            problems.append(SpanProblem(message=place, line=span.line))
        else:
            located.append(LocatedSpan(doc=span.doc, start=place[0], end=place[1],
                                       grade=span.grade))
    return tuple(located), problems


def _place(span: EvidenceSpan, text: str, number: int, private: bool) -> tuple[int, int] | str:
    """(start, end) of the entry in ``text``, or why not."""
    if span.quote is None:
        if span.start is None or span.end is None:  # spec.py gives one or the other
            return f"evidence #{number}: needs a quote or start and end"
        if span.end > len(text):
            return (f"evidence #{number}: offsets {span.start}..{span.end} are out of range: "
                    f"doc {span.doc!r} has {len(text):,} characters as parsed")
        return span.start, span.end
    starts = occurrences(text, span.quote)
    shown = shown_quote(span.quote, private)
    if not starts:
        return (f"evidence #{number}: {shown} is not in doc {span.doc!r} as parsed (edited "
                "document? re-anchor or fix the quote)")
    if span.occurrence is None and len(starts) > 1:
        at = ", ".join(map(str, starts[:5])) + (", …" if len(starts) > 5 else "")
        return (f"evidence #{number}: {shown} occurs {len(starts)} times in doc {span.doc!r} "
                f"(at offsets {at}): add occurrence: N (1 to {len(starts)})")
    index = (span.occurrence or 1) - 1
    if index >= len(starts):
        return (f"evidence #{number}: occurrence {span.occurrence} of {shown}, but doc "
                f"{span.doc!r} holds it {len(starts)} time(s)")
    return starts[index], starts[index] + len(span.quote)


def occurrences(text: str, quote: str) -> list[int]:
    """Every offset where ``quote`` starts in ``text`` (overlapping ones included)."""
    found, position = [], text.find(quote)
    while position >= 0:
        found.append(position)
        position = text.find(quote, position + 1)
    return found


def shown_quote(quote: str, private: bool) -> str:
    """How a problem names a quote: its text (cut) for a public set, its length for a private
    one (golden-set text never leaves a private set)."""
    if private:
        return f"the quote of {len(quote)} characters"
    cut = quote if len(quote) <= QUOTE_SHOWN else quote[:QUOTE_SHOWN] + "…"
    return f"quote {cut!r}"
