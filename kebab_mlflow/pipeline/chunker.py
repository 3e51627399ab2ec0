"""Heading- and paragraph-aware chunking with stable chunk ids ``<doc_id>#<n>``.

``mode: structure`` splits a markdown document at headings, packs whole paragraphs into chunks of
at most ``max_chars`` characters, and starts each follow-on chunk of a section with the end of
the previous one, up to ``overlap_chars``: its last whole paragraphs, or, when its last
paragraph is longer than that, the last sentences of it (the last words of a long sentence).
A paragraph longer than ``max_chars`` is cut at word boundaries into overlapping windows. Every
chunk begins with its heading path, so a chunk says what it is about. ``mode: document`` keeps
each document whole (one chunk), the usual choice for BEIR collections whose documents are
already passages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kebab_mlflow import progress
from kebab_mlflow.pipeline.corpus import Corpus, Document
from kebab_mlflow.pipeline.text import split_sentences

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class ChunkerConfig:
    mode: str = "structure"  # structure | document
    max_chars: int = 800
    overlap_chars: int = 100


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    text: str


def chunk_corpus(corpus: Corpus, config: ChunkerConfig) -> list[Chunk]:
    """Every document's chunks, in corpus order (a progress bar per document)."""
    chunks: list[Chunk] = []
    with progress.task("chunking documents", len(corpus.documents), "docs") as task:
        for doc in corpus.documents:
            chunks += chunk_document(doc, config)
            task.advance()
    return chunks


def chunk_document(doc: Document, config: ChunkerConfig) -> list[Chunk]:
    title = extra_title(doc)
    if config.mode == "document":
        text = f"{title}\n\n{doc.text}" if title else doc.text
        return [Chunk(f"{doc.doc_id}#0", doc.doc_id, text.strip())]
    pieces: list[str] = []
    for heading_path, paragraphs in _sections(doc.text):
        prefix = " > ".join(heading_path)
        budget = max(config.max_chars - len(prefix) - 2, config.max_chars // 2)
        for body in _pack(paragraphs, budget, config.overlap_chars):
            pieces.append(f"{prefix}\n\n{body}" if prefix else body)
    if not pieces:
        return [Chunk(f"{doc.doc_id}#0", doc.doc_id, doc.title or doc.doc_id)]
    if title:  # the heading of the first chunk: no chunk is added, so ids do not move
        pieces[0] = f"{title}\n\n{pieces[0]}"
    return [Chunk(f"{doc.doc_id}#{n}", doc.doc_id, text) for n, text in enumerate(pieces)]


def extra_title(doc: Document) -> str:
    """The title to add to a document's text: a BEIR ``title`` the text does not already hold
    (a folder document's title is its first heading, already in the text)."""
    return doc.title if doc.title and doc.title not in doc.text else ""


def _sections(text: str) -> list[tuple[list[str], list[str]]]:
    """Split markdown into (heading path, paragraphs) sections; fenced code stays intact."""
    sections: list[tuple[list[str], list[str]]] = []
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    current: list[str] = []
    in_fence = False

    def close_paragraph() -> None:
        if current:
            paragraphs.append("\n".join(current).strip())
            current.clear()

    def close_section() -> None:
        close_paragraph()
        if paragraphs:
            sections.append(([h for _, h in path], list(paragraphs)))
            paragraphs.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else HEADING_RE.match(line)
        if match:
            close_section()
            level = len(match.group(1))
            path = [(lv, h) for lv, h in path if lv < level] + [(level, match.group(2))]
        elif not line.strip() and not in_fence:
            close_paragraph()
        else:
            current.append(line)
    close_section()
    return sections


def _pack(paragraphs: list[str], max_chars: int, overlap_chars: int) -> list[str]:
    units: list[tuple[str, bool]] = []  # (text, continues the previous unit's paragraph)
    for p in paragraphs:
        if len(p) > max_chars:
            units += [(w, i > 0) for i, w in enumerate(_windows(p, max_chars, overlap_chars))]
        else:
            units.append((p, False))
    chunks: list[str] = []
    current: list[str] = []
    for unit, continues in units:
        if current and len("\n\n".join(current + [unit])) > max_chars:
            chunks.append("\n\n".join(current))
            # a window of a long paragraph already overlaps the one before it
            current = [] if continues else _tail(current, overlap_chars,
                                                 max_chars - len(unit) - 2)
        current.append(unit)
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _tail(units: list[str], overlap_chars: int, room: int) -> list[str]:
    """What a follow-on chunk repeats of the previous one, at most ``min(overlap_chars, room)``
    characters: its last whole paragraphs that fit; when not even the last paragraph fits,
    the last sentences of it that do (or, for one long sentence, its last words)."""
    limit = min(overlap_chars, room)
    tail: list[str] = []
    size = 0
    for unit in reversed(units):
        size += len(unit) + 2
        if size > limit:
            break
        tail.insert(0, unit)
    if tail or not units or limit <= 0:
        return tail
    part = _last_pieces(split_sentences(units[-1]), limit)
    if not part:
        part = _last_pieces(units[-1].split(), limit)
    return [part] if part else []


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


def _windows(paragraph: str, max_chars: int, overlap_chars: int) -> list[str]:
    words = paragraph.split()
    out, start = [], 0
    while start < len(words):
        end, size = start, 0
        while end < len(words) and size + len(words[end]) + 1 <= max_chars:
            size += len(words[end]) + 1
            end += 1
        end = max(end, start + 1)
        out.append(" ".join(words[start:end]))
        if end >= len(words):
            break
        back, size = end, 0
        while back > start + 1 and size + len(words[back - 1]) + 1 <= overlap_chars:
            back -= 1
            size += len(words[back]) + 1
        start = back
    return out
