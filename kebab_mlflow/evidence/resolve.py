"""Evidence spans → relevant chunks (the ``evidence-v1`` rule), the audit, character metrics.

The rule ``evidence-v1`` with τ = :data:`EVIDENCE_TAU`: chunk c is relevant to evidence span
s when they share characters and

    |s ∩ c| >= τ · min(|s|, |c|)

where |c| counts the characters of the document text the chunk holds (its body, from its
first paragraph to the end of its last: :func:`kebab_mlflow.pipeline.chunker.chunk_spans`) and
|s| the span's characters that some chunk holds (the blank lines between two chunks and the
headings are in none). For a span shorter than the
chunk this is "the chunk holds at least τ of the span" (all of it, for a span inside one
chunk); for a span longer than the chunk it is "at least τ of the chunk is that span", so a
long passage cut into many small chunks makes each of them relevant rather than none. A
chunk's grade is the highest grade of the spans it is relevant to.

Character metrics (per query with evidence, at each cut-off k; E = the union of the query's
evidence characters, per document; src(c) = the document characters chunk c holds):

- ``evidence_precision_at_k`` = Σ_{c in top k} |src(c) ∩ E| / Σ_{c in top k} |src(c)|
  (0 when the top k holds no characters);
- ``evidence_recall_at_k`` = |(∪_{c in top k} src(c)) ∩ E| / |E|;
- ``retrieved_chars_at_k`` = Σ_{c in top k} |src(c)|.

The precision sums chunk by chunk (overlapping chunks are read twice, as a reader reads
them); the recall takes the union (evidence found twice is found once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kebab_mlflow.evidence.locate import LocatedSpan

EVIDENCE_RULE = "evidence-v1"
EVIDENCE_TAU = 0.5

Span = tuple[int, int]


@dataclass(frozen=True, kw_only=True)
class IndexedChunk:
    """What the resolver needs of a chunk: its document and the spans of text it holds."""

    chunk_id: str
    doc_id: str
    spans: tuple[Span, ...]

    @property
    def size(self) -> int:
        return sum(e - s for s, e in self.spans)


@dataclass(frozen=True, kw_only=True)
class ChunkCover:
    """How one chunk covers one evidence span (only chunks sharing characters are listed)."""

    chunk_id: str
    span_share: float  # |s ∩ c| / |s|
    chunk_share: float  # |s ∩ c| / |c|
    relevant: bool


@dataclass(frozen=True, kw_only=True)
class ResolvedSpan:
    span: LocatedSpan
    covers: tuple[ChunkCover, ...]


@dataclass(frozen=True, kw_only=True)
class QueryResolution:
    """One query's evidence resolved against one chunking."""

    spans: tuple[ResolvedSpan, ...]
    grades: Mapping[str, int]  # relevant chunk id -> grade, in document order

    def audit(self) -> list[dict[str, object]]:
        """The ``evidence`` field of the query's per_query.jsonl line: offsets and ids only
        (never a quote: the line is written for private sets too)."""
        return [{"doc": r.span.doc, "start": r.span.start, "end": r.span.end,
                 "grade": r.span.grade,
                 "chunks": [{"chunk_id": c.chunk_id, "span_share": round(c.span_share, 6),
                             "chunk_share": round(c.chunk_share, 6), "relevant": c.relevant}
                            for c in r.covers]} for r in self.spans]


class ChunkIndex:
    """The chunks of one chunking, by document and by id."""

    def __init__(self, chunks: Iterable[IndexedChunk]):
        self.by_doc: dict[str, list[IndexedChunk]] = {}
        self.by_id: dict[str, IndexedChunk] = {}
        for chunk in chunks:
            self.by_doc.setdefault(chunk.doc_id, []).append(chunk)
            self.by_id[chunk.chunk_id] = chunk
        self._chunked: dict[str, list[Span]] = {}

    def chunked(self, doc_id: str) -> list[Span]:
        """The characters of a document that some chunk holds (disjoint spans)."""
        if doc_id not in self._chunked:
            self._chunked[doc_id] = merged(s for c in self.by_doc.get(doc_id, ())
                                           for s in c.spans)
        return self._chunked[doc_id]


def shared(spans: Sequence[Span], start: int, end: int) -> int:
    """Characters of [start, end) inside the disjoint ``spans``."""
    return sum(max(0, min(e, end) - max(s, start)) for s, e in spans)


def is_relevant(overlap: int, span_length: int, chunk_size: int,
                tau: float = EVIDENCE_TAU) -> bool:
    """The ``evidence-v1`` rule (module docstring)."""
    return overlap > 0 and overlap >= tau * min(span_length, chunk_size)


def resolve_query(spans: Sequence[LocatedSpan], index: ChunkIndex,
                  tau: float = EVIDENCE_TAU) -> QueryResolution:
    resolved: list[ResolvedSpan] = []
    grades: dict[str, int] = {}
    for span in spans:
        covers = []
        # the span's characters that some chunk holds: blank lines between two chunks belong
        # to neither, and must not keep a span that straddles them from resolving
        held = shared(index.chunked(span.doc), span.start, span.end)
        for chunk in index.by_doc.get(span.doc, ()):
            overlap = shared(chunk.spans, span.start, span.end)
            if overlap == 0:
                continue
            relevant = is_relevant(overlap, held, chunk.size, tau)
            covers.append(ChunkCover(chunk_id=chunk.chunk_id, span_share=overlap / span.length,
                                     chunk_share=overlap / chunk.size, relevant=relevant))
            if relevant:
                grades[chunk.chunk_id] = max(span.grade, grades.get(chunk.chunk_id, 0))
        resolved.append(ResolvedSpan(span=span, covers=tuple(covers)))
    return QueryResolution(spans=tuple(resolved), grades=grades)


def merged(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as disjoint ascending spans."""
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


@dataclass(frozen=True, kw_only=True)
class CharCounts:
    """The sums behind the character metrics of one query at one cut-off."""

    evidence_read: int  # Σ |src(c) ∩ E| over the top k
    read: int  # Σ |src(c)| over the top k
    evidence_found: int  # |∪ src(c) ∩ E|
    evidence: int  # |E|


def char_counts(evidence: Sequence[LocatedSpan], top: Sequence[str],
                index: ChunkIndex) -> CharCounts:
    """The character sums of one query for the chunk ids ``top`` (the top k, in rank order);
    a chunk id the index does not know holds no characters."""
    union = {doc: merged((s.start, s.end) for s in evidence if s.doc == doc)
             for doc in {s.doc for s in evidence}}
    evidence_read = read = 0
    seen: dict[str, list[Span]] = {}
    for chunk_id in top:
        chunk = index.by_id.get(chunk_id)
        if chunk is None:
            continue
        read += chunk.size
        doc_evidence = union.get(chunk.doc_id, [])
        evidence_read += sum(shared(chunk.spans, s, e) for s, e in doc_evidence)
        seen.setdefault(chunk.doc_id, []).extend(chunk.spans)
    found = sum(shared(merged(seen.get(doc, [])), s, e)
                for doc, spans in union.items() for s, e in spans)
    total = sum(e - s for spans in union.values() for s, e in spans)
    return CharCounts(evidence_read=evidence_read, read=read, evidence_found=found,
                      evidence=total)
