"""``kebab-mlflow golden anchor``: a golden set's ``expected_chunk_ids`` of the current
chunking written as evidence spans (:mod:`kebab_mlflow.evidence.anchor`), every other field
and the comments kept.

The file is edited with ruamel.yaml's round-trip mode — the maintained YAML library that
keeps comments, key order and flow style — and the result is checked before it is written:
it must load as a golden set, its quotes must be found in the corpus, and under the chunking
it came from its evidence must resolve to exactly the chunk ids it was made from. The file is
written whole (a temporary file renamed over it) or not at all.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kebab_mlflow.config import build_config
from kebab_mlflow.errors import GoldenSetError, Problem
from kebab_mlflow.evidence.anchor import Anchor, anchor_chunk
from kebab_mlflow.evidence.resolve import ChunkIndex, IndexedChunk, resolve_query
from kebab_mlflow.golden import GoldenSet, load_golden_set, parse_golden_set
from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_spans
from kebab_mlflow.pipeline.corpus import load_corpus


@dataclass(frozen=True, kw_only=True)
class AnchorReport:
    """What ``golden anchor`` did: queries and chunks anchored, and what it could not do."""

    out: Path
    queries_anchored: int
    chunks_anchored: int
    left_alone: int  # queries that already had evidence
    not_anchored: tuple[Problem, ...] = field(default_factory=tuple)


def anchor_golden_set(golden_path: Path, corpus: str | Path | None, *, out: Path | None = None,
                      preset: str = "naive_baseline",
                      overrides: Mapping[str, Any] | None = None) -> AnchorReport:
    """Anchor the set at ``golden_path`` against ``corpus`` (None: the set's ``corpus:``)
    chunked as ``preset`` + ``overrides`` chunk it; write it to ``out`` (default: in place)."""
    golden = load_golden_set(golden_path)
    corpus_path = corpus or golden.corpus
    if not corpus_path:
        raise GoldenSetError("golden anchor needs --corpus (the golden set names none)")
    config = build_config(preset, dict(overrides or {}))
    documents = load_corpus(corpus_path).documents
    ch = config["chunker"]
    index = ChunkIndex(IndexedChunk(chunk_id=c.chunk_id, doc_id=c.doc_id, spans=c.spans)
                       for c in chunk_spans(load_corpus(corpus_path),
                                            ChunkerConfig(ch["mode"], ch["max_chars"],
                                                          ch["overlap_chars"])))
    texts = {d.doc_id: d.text for d in documents}
    yaml, data = _round_trip(golden_path)
    items = data["queries"] if isinstance(data, dict) else data
    counts, problems = _anchor_items(items, golden, index, texts)
    text = _dumped(yaml, data)
    _check(text, str(golden_path), golden, index, texts)
    target = out or golden_path
    _write_whole(target, text)
    return AnchorReport(out=target, queries_anchored=counts[0], chunks_anchored=counts[1],
                        left_alone=counts[2], not_anchored=tuple(problems))


def _round_trip(path: Path) -> tuple[Any, Any]:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments, key order, flow style kept
    yaml.width = 4096  # a quote stays on one line
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)  # "  - id: …" as the shipped sets write it
    return yaml, yaml.load(path.read_text(encoding="utf-8"))


def _anchor_items(items: Any, golden: GoldenSet, index: ChunkIndex, texts: Mapping[str, str]
                  ) -> tuple[tuple[int, int, int], list[Problem]]:
    """Add ``evidence`` to every query item that has expected_chunk_ids and no evidence yet:
    ((queries, chunks, left alone), the chunks that could not be anchored)."""
    problems: list[Problem] = []
    queries = chunks = left = 0
    for item, query in zip(items, golden.queries, strict=True):
        if not query.expected_chunk_ids:
            continue
        if query.evidence:
            left += 1
            continue
        entries: list[Anchor] = []
        missing = []
        for chunk_id in query.expected_chunk_ids:
            anchors = anchor_chunk(chunk_id, index, texts) if chunk_id in index.by_id else []
            if not anchors:
                missing.append(chunk_id)
            entries += anchors
        # a query gets evidence for all its chunks or none: evidence and expected_chunk_ids
        # must agree on documents, and half its truth would make a different query
        problems += [Problem(_why_not(c, index) + "; the query is left without evidence",
                             f"{golden.path}:{query.line}", query.id) for c in missing]
        if entries and not missing:
            _insert_evidence(item, entries)
            queries += 1
            chunks += len(query.expected_chunk_ids)
    return (queries, chunks, left), problems


def _why_not(chunk_id: str, index: ChunkIndex) -> str:
    if chunk_id not in index.by_id:
        return f"chunk {chunk_id!r} is not in this chunking (anchor with the chunker it came from)"
    return (f"chunk {chunk_id!r}: every character of its body is also in another chunk; "
            "write its evidence by hand")


def _insert_evidence(item: Any, anchors: list[Anchor]) -> None:
    """``evidence`` right after ``expected_chunk_ids``, one flow mapping per entry."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    entries = CommentedSeq()
    for anchor in anchors:
        entry = CommentedMap(anchor.entry())
        entry.fa.set_flow_style()
        entries.append(entry)
    keys = list(item.keys())
    item.insert(keys.index("expected_chunk_ids") + 1, "evidence", entries)


def _dumped(yaml: Any, data: Any) -> str:
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def _check(text: str, source: str, golden: GoldenSet, index: ChunkIndex,
           texts: Mapping[str, str]) -> None:
    """The anchored text loads, its quotes are found and resolve to the chunks they came from
    (a failure here is a bug of the anchor: nothing is written)."""
    from kebab_mlflow.evaluation.evidence import locate_all

    anchored = parse_golden_set(text.encode("utf-8"), source)
    located = locate_all(anchored, texts)
    for before, after in zip(golden.queries, anchored.queries, strict=True):
        if after.id in located and not before.evidence:
            got = set(resolve_query(located[after.id], index).grades)
            if not got <= set(before.expected_chunk_ids):
                raise GoldenSetError("golden anchor made evidence that resolves elsewhere",
                                     [Problem(f"resolves to {sorted(got)}", source, after.id)])


def _write_whole(target: Path, text: str) -> None:
    """``text`` to ``target``, via a temporary file beside it renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
