"""Anchoring: the chunk ids of one chunking turned into evidence spans.

A chunk is anchored to the characters of its body that no other chunk of its document holds
(overlap removed, whitespace trimmed at both ends), written as a quote of the parsed text
(with its ``occurrence`` when the text occurs more than once). Under the chunking it came
from, such a span shares characters with its own chunk only, so the ``evidence-v1`` rule
(:mod:`kebab_mlflow.evidence.resolve`) gives back exactly the anchored chunks: the chunk-level
metrics of the anchored set equal those of its ``expected_chunk_ids``. A chunk all of whose
body is also in other chunks cannot be anchored that way and is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kebab_mlflow.evidence.locate import occurrences
from kebab_mlflow.evidence.resolve import ChunkIndex, Span, merged


@dataclass(frozen=True, kw_only=True)
class Anchor:
    """One evidence entry for a chunk: its quote and, when needed, the occurrence."""

    doc: str
    quote: str
    occurrence: int | None
    start: int
    end: int

    def entry(self) -> dict[str, object]:
        out: dict[str, object] = {"doc": self.doc, "quote": self.quote}
        if self.occurrence is not None:
            out["occurrence"] = self.occurrence
        return out


def unique_body(chunk_id: str, index: ChunkIndex) -> list[Span]:
    """The pieces of the chunk's body that no other chunk of its document holds, in document
    order."""
    chunk = index.by_id[chunk_id]
    if not chunk.spans:
        return []
    others = merged(s for c in index.by_doc[chunk.doc_id] if c.chunk_id != chunk_id
                    for s in c.spans)
    pieces = [chunk.spans[-1]]
    for o_start, o_end in others:
        cut: list[Span] = []
        for start, end in pieces:
            cut += [(s, e) for s, e in ((start, min(end, o_start)), (max(start, o_end), end))
                    if e > s]
        pieces = cut
    return pieces


def anchor_chunk(chunk_id: str, index: ChunkIndex, texts: Mapping[str, str]) -> list[Anchor]:
    """The evidence entries of one chunk (empty: it cannot be anchored)."""
    chunk = index.by_id[chunk_id]
    text = texts[chunk.doc_id]
    anchors = []
    for start, end in unique_body(chunk_id, index):
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        quote = piece.strip()
        if not quote:
            continue
        start += lead
        found = occurrences(text, quote)
        occurrence = found.index(start) + 1 if len(found) > 1 else None
        anchors.append(Anchor(doc=chunk.doc_id, quote=quote, occurrence=occurrence,
                              start=start, end=start + len(quote)))
    return anchors
