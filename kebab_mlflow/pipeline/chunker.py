"""Heading- and paragraph-aware chunking with stable chunk ids ``<doc_id>#<n>``.

``mode: structure`` splits a markdown document at headings, packs whole paragraphs into chunks of
at most ``max_chars`` characters, and starts each follow-on chunk of a section with the end of
the previous one, up to ``overlap_chars``: its last whole paragraphs, or, when its last
paragraph is longer than that, the last sentences of it (the last words of a long sentence).
A paragraph longer than ``max_chars`` is cut at word boundaries into overlapping windows. Every
chunk begins with its heading path, so a chunk says what it is about. ``mode: document`` keeps
each document whole (one chunk), the usual choice for BEIR collections whose documents are
already passages.

:func:`chunk_spans` gives, for each chunk, where its own text comes from: the character
offsets in the parsed document text (``Document.text``) of its body, from the first paragraph
it holds to the end of its last. The heading path it repeats is context, shared by every chunk
of the section, and not counted. Evidence spans (:mod:`kebab_mlflow.evidence`) are resolved
against these offsets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from kebab_mlflow import progress
from kebab_mlflow.config import default
from kebab_mlflow.pipeline.corpus import Corpus, Document
from kebab_mlflow.pipeline.text import split_sentences

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class ChunkerConfig:
    # the defaults are the configuration's (config.SETTINGS), written once
    mode: str = default("chunker.mode")  # structure | document
    max_chars: int = default("chunker.max_chars")
    overlap_chars: int = default("chunker.overlap_chars")


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    text: str


Span = tuple[int, int]  # [start, end) character offsets into Document.text


@dataclass(frozen=True, kw_only=True)
class ChunkSpans:
    """Where a chunk's own text (its body) is in its document: one span, none for a document
    without a body."""

    chunk_id: str
    doc_id: str
    spans: tuple[Span, ...]


@dataclass(frozen=True, kw_only=True)
class _Piece:
    """A paragraph, a window of one or a heading, with its span in the document text."""

    text: str
    start: int
    end: int
    continues: bool = False  # a window that continues the previous unit's paragraph


def chunk_corpus(corpus: Corpus, config: ChunkerConfig) -> list[Chunk]:
    """Every document's chunks, in corpus order (a progress bar per document)."""
    chunks: list[Chunk] = []
    with progress.task("chunking documents", len(corpus.documents), "docs") as task:
        for doc in corpus.documents:
            chunks += chunk_document(doc, config)
            task.advance()
    return chunks


def chunk_document(doc: Document, config: ChunkerConfig) -> list[Chunk]:
    return [chunk for chunk, _ in _chunks_with_spans(doc, config)]


def chunk_spans(corpus: Corpus, config: ChunkerConfig) -> Iterator[ChunkSpans]:
    """Every chunk's spans in the parsed document text, in :func:`chunk_corpus` order."""
    for doc in corpus.documents:
        for chunk, spans in _chunks_with_spans(doc, config):
            yield ChunkSpans(chunk_id=chunk.chunk_id, doc_id=doc.doc_id, spans=spans)


def _chunks_with_spans(doc: Document,
                       config: ChunkerConfig) -> list[tuple[Chunk, tuple[Span, ...]]]:
    title = extra_title(doc)
    if config.mode == "document":
        text = f"{title}\n\n{doc.text}" if title else doc.text
        body = doc.text.strip()
        lead = len(doc.text) - len(doc.text.lstrip())
        spans = ((lead, lead + len(body)),) if body else ()
        return [(Chunk(f"{doc.doc_id}#0", doc.doc_id, text.strip()), spans)]
    pieces: list[tuple[str, tuple[Span, ...]]] = []
    for headings, paragraphs in _sections(doc.text):
        prefix = " > ".join(h.text for h in headings)
        budget = max(config.max_chars - len(prefix) - 2, config.max_chars // 2)
        for units in _pack(paragraphs, budget, config.overlap_chars, doc.text):
            body = "\n\n".join(u.text for u in units)
            extent = (min(u.start for u in units), max(u.end for u in units))
            body_spans: tuple[Span, ...] = (extent,) if extent[1] > extent[0] else ()
            pieces.append((f"{prefix}\n\n{body}" if prefix else body, body_spans))
    if not pieces:
        return [(Chunk(f"{doc.doc_id}#0", doc.doc_id, doc.title or doc.doc_id), ())]
    if title:  # the heading of the first chunk: no chunk is added, so ids do not move
        pieces[0] = (f"{title}\n\n{pieces[0][0]}", pieces[0][1])
    return [(Chunk(f"{doc.doc_id}#{n}", doc.doc_id, text), spans)
            for n, (text, spans) in enumerate(pieces)]


def extra_title(doc: Document) -> str:
    """The title to add to a document's text: a BEIR ``title`` the text does not already hold
    (a folder document's title is its first heading, already in the text)."""
    return doc.title if doc.title and doc.title not in doc.text else ""


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line without its ending) of every line, as ``str.splitlines`` cuts them."""
    offset = 0
    for raw, line in zip(text.splitlines(True), text.splitlines(), strict=True):
        yield offset, line
        offset += len(raw)


def _paragraph(lines: list[tuple[int, str]]) -> _Piece:
    """The lines joined by newlines and stripped, with the span of what is left."""
    joined = "\n".join(line for _, line in lines)
    text = joined.strip()
    if not text:
        return _Piece(text="", start=lines[0][0], end=lines[0][0])
    lead, kept = len(joined) - len(joined.lstrip()), len(text)
    return _Piece(text=text, start=_offset(lines, lead), end=_offset(lines, lead + kept - 1) + 1)


def _offset(lines: list[tuple[int, str]], position: int) -> int:
    """The document offset of ``position`` in the newline-joined ``lines``."""
    for start, line in lines:
        if position <= len(line):
            return start + position
        position -= len(line) + 1
    return lines[-1][0] + len(lines[-1][1])


def _sections(text: str) -> list[tuple[list[_Piece], list[_Piece]]]:
    """Split markdown into (heading path, paragraphs) sections; fenced code stays intact."""
    sections: list[tuple[list[_Piece], list[_Piece]]] = []
    path: list[tuple[int, _Piece]] = []
    paragraphs: list[_Piece] = []
    current: list[tuple[int, str]] = []
    in_fence = False

    def close_paragraph() -> None:
        if current:
            paragraphs.append(_paragraph(current))
            current.clear()

    def close_section() -> None:
        close_paragraph()
        if paragraphs:
            sections.append(([h for _, h in path], list(paragraphs)))
            paragraphs.clear()

    for offset, line in _lines(text):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else HEADING_RE.match(line)
        if match:
            close_section()
            level = len(match.group(1))
            heading = _Piece(text=match.group(2), start=offset + match.start(2),
                             end=offset + match.end(2))
            path = [(lv, h) for lv, h in path if lv < level] + [(level, heading)]
        elif not line.strip() and not in_fence:
            close_paragraph()
        else:
            current.append((offset, line))
    close_section()
    return sections


def _pack(paragraphs: list[_Piece], max_chars: int, overlap_chars: int,
          doc_text: str) -> list[list[_Piece]]:
    """Paragraphs (windows of long ones) packed into chunks of at most ``max_chars``."""
    units: list[_Piece] = []
    for p in paragraphs:
        if len(p.text) > max_chars:
            units += _windows(p, max_chars, overlap_chars, doc_text)
        else:
            units.append(p)
    chunks: list[list[_Piece]] = []
    current: list[_Piece] = []
    for unit in units:
        if current and len("\n\n".join([u.text for u in current] + [unit.text])) > max_chars:
            chunks.append(current)
            # a window of a long paragraph already overlaps the one before it
            current = [] if unit.continues else _tail(current, overlap_chars,
                                                      max_chars - len(unit.text) - 2, doc_text)
        current.append(unit)
    if current:
        chunks.append(current)
    return chunks


def _tail(units: list[_Piece], overlap_chars: int, room: int, doc_text: str) -> list[_Piece]:
    """What a follow-on chunk repeats of the previous one, at most ``min(overlap_chars, room)``
    characters: its last whole paragraphs that fit; when not even the last paragraph fits,
    the last sentences of it that do (or, for one long sentence, its last words)."""
    limit = min(overlap_chars, room)
    tail: list[_Piece] = []
    size = 0
    for unit in reversed(units):
        size += len(unit.text) + 2
        if size > limit:
            break
        tail.insert(0, unit)
    if tail or not units or limit <= 0:
        return tail
    last = units[-1]
    part = _last_pieces(split_sentences(last.text), limit)
    if not part:
        part = _last_pieces(last.text.split(), limit)
    if not part:
        return []
    return [_Piece(text=part, start=_suffix_start(last, part, doc_text), end=last.end)]


def _word_starts(doc_text: str, start: int, words: list[str]) -> list[int]:
    """Where each of ``words`` (the whitespace-split text from ``start`` on) begins: between
    two words there is only whitespace, so each is the next occurrence after the last."""
    starts, position = [], start
    for word in words:
        position = doc_text.find(word, position)
        starts.append(position)
        position += len(word)
    return starts


def _suffix_start(unit: _Piece, part: str, doc_text: str) -> int:
    """The document offset where ``part`` (the last words of ``unit``) begins."""
    words, kept = unit.text.split(), part.split()
    if kept and words[-len(kept):] == kept:
        starts = _word_starts(doc_text, unit.start, words)
        if -1 not in starts:
            return starts[-len(kept)]
    return max(unit.start, unit.end - len(part))  # not expected: sentences keep every word


def _last_pieces(pieces: list[str], limit: int) -> str:
    """The longest suffix of ``pieces`` whose space-joined text fits in ``limit``."""
    kept: list[str] = []
    size = -1
    for piece in reversed(pieces):
        if size + len(piece) + 1 > limit:
            break
        size += len(piece) + 1
        kept.insert(0, piece)
    return " ".join(kept)


def _windows(paragraph: _Piece, max_chars: int, overlap_chars: int,
             doc_text: str) -> list[_Piece]:
    words = paragraph.text.split()
    starts = _word_starts(doc_text, paragraph.start, words)
    out: list[_Piece] = []
    start = 0
    while start < len(words):
        end, size = start, 0
        while end < len(words) and size + len(words[end]) + 1 <= max_chars:
            size += len(words[end]) + 1
            end += 1
        end = max(end, start + 1)
        out.append(_Piece(text=" ".join(words[start:end]), start=starts[start],
                          end=starts[end - 1] + len(words[end - 1]), continues=bool(out)))
        if end >= len(words):
            break
        back, size = end, 0
        while back > start + 1 and size + len(words[back - 1]) + 1 <= overlap_chars:
            back -= 1
            size += len(words[back]) + 1
        start = back
    return out
