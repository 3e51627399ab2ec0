"""A run's evidence: the golden set's evidence spans located in the corpus, resolved against
the pipeline's chunking, and scored at character level (kebab_mlflow/evidence/).

:func:`prepare_evidence` runs before any query: a quote not found is a GoldenSetError with
file:line; the golden set it returns has, for every query with evidence, the chunk truth the
rule derived (``expected_chunk_ids`` + ``expected_chunk_grades``), so the chunk-level metrics
are computed from it as from hand-written ids. :class:`EvidenceRun` then adds the character
metrics and each query's audit to the runner's batches.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow import progress
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import GoldenSetError, Problem
from kebab_mlflow.evidence.locate import LocatedSpan, locate_spans
from kebab_mlflow.evidence.resolve import (
    EVIDENCE_RULE,
    EVIDENCE_TAU,
    ChunkIndex,
    IndexedChunk,
    QueryResolution,
    char_counts,
    resolve_query,
)
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.records import QueryResult


@dataclass(frozen=True, kw_only=True)
class EvidenceRun:
    """The evidence of one run: where it is, which chunks it made relevant."""

    index: ChunkIndex
    located: Mapping[str, tuple[LocatedSpan, ...]]  # query id -> its spans
    resolutions: Mapping[str, QueryResolution]
    seconds: float  # locating and resolving, before the first query

    @staticmethod
    def params() -> dict[str, Any]:
        return {vocab.EVIDENCE_RULE: EVIDENCE_RULE, vocab.EVIDENCE_TAU: EVIDENCE_TAU}

    def audit(self, query_id: str) -> list[dict[str, object]] | None:
        resolution = self.resolutions.get(query_id)
        return None if resolution is None else resolution.audit()

    def scores(self, batch: Sequence[GoldenQuery], results: Sequence[QueryResult],
               cutoffs: Sequence[int]) -> dict[str, np.ndarray]:
        """The character metrics of a batch (NaN for a query without evidence)."""
        scores: dict[str, np.ndarray] = {}
        for k in cutoffs:
            values = np.array([self._at(q.id, r, k) for q, r in zip(batch, results,
                                                                    strict=True)])
            scores[f"evidence_precision_at_{k}"] = values[:, 0] if values.size else values
            scores[f"evidence_recall_at_{k}"] = values[:, 1] if values.size else values
            scores[f"retrieved_chars_at_{k}"] = values[:, 2] if values.size else values
        return scores

    def _at(self, query_id: str, result: QueryResult, k: int) -> tuple[float, float, float]:
        spans = self.located.get(query_id)
        if not spans:
            return math.nan, math.nan, math.nan
        counts = char_counts(spans, [h.chunk_id for h in result.hits[:k]], self.index)
        precision = counts.evidence_read / counts.read if counts.read else 0.0
        return precision, counts.evidence_found / counts.evidence, float(counts.read)


def prepare_evidence(golden: GoldenSet, pipeline: Any) -> tuple[GoldenSet, EvidenceRun | None]:
    """The golden set with evidence-derived chunk truth, and the run's evidence; unchanged
    and None when no query has evidence. A pipeline without a corpus and a chunking (a
    target) cannot place evidence: chunk truth stays ``expected_chunk_ids``, with a warning."""
    if not any(q.evidence for q in golden.queries):
        return golden, None
    corpus, spans_of = getattr(pipeline, "corpus", None), getattr(pipeline, "chunk_spans", None)
    if corpus is None or not callable(spans_of):
        progress.warn("the golden set has evidence, but this pipeline has no corpus and "
                      "chunking to place it in: chunk truth is expected_chunk_ids only")
        return golden, None
    t0 = time.perf_counter()
    located = locate_all(golden, {d.doc_id: d.text for d in corpus.documents})
    index = ChunkIndex(IndexedChunk(chunk_id=c.chunk_id, doc_id=c.doc_id, spans=c.spans)
                       for c in spans_of())
    resolutions = {qid: resolve_query(spans, index) for qid, spans in located.items()}
    queries = tuple(_with_truth(q, resolutions.get(q.id)) for q in golden.queries)
    _warn_about(golden.queries, resolutions)
    run = EvidenceRun(index=index, located=located, resolutions=resolutions,
                      seconds=time.perf_counter() - t0)
    return dataclasses.replace(golden, queries=queries), run


def check_evidence(golden: GoldenSet, corpus_path: str | Path) -> None:
    """:func:`locate_all` against a corpus on disk, before its index is built (a no-op for a
    set without evidence)."""
    if any(q.evidence for q in golden.queries):
        from kebab_mlflow.pipeline.corpus import load_corpus

        locate_all(golden, {d.doc_id: d.text for d in load_corpus(corpus_path).documents})


def locate_all(golden: GoldenSet, texts: Mapping[str, str]) -> dict[str, tuple[LocatedSpan, ...]]:
    """Every query's evidence placed in ``texts`` (doc id -> parsed text); every entry that
    cannot be placed is one problem of one GoldenSetError (file:line, query, document)."""
    located: dict[str, tuple[LocatedSpan, ...]] = {}
    problems: list[Problem] = []
    for q in golden.queries:
        if not q.evidence:
            continue
        spans, wrong = locate_spans(q.evidence, texts, private=golden.private)
        located[q.id] = spans
        problems += [Problem(w.message, f"{golden.path}:{w.line}", q.id) for w in wrong]
    if problems:
        raise GoldenSetError(f"the evidence of golden set {golden.path} does not match the "
                             "corpus", problems)
    return located


def _with_truth(query: GoldenQuery, resolution: QueryResolution | None) -> GoldenQuery:
    if resolution is None:
        return query
    return dataclasses.replace(query, expected_chunk_ids=tuple(resolution.grades),
                               expected_chunk_grades=dict(resolution.grades))


def _warn_about(queries: Sequence[GoldenQuery], resolutions: Mapping[str, QueryResolution]
                ) -> None:
    """Say when a span made no chunk relevant, and when evidence and hand-written chunk ids
    disagree (evidence wins: it is the truth that survives re-chunking)."""
    unplaced = sum(1 for r in resolutions.values() for s in r.spans
                   if not any(c.relevant for c in s.covers))
    if unplaced:
        progress.warn(f"{unplaced} evidence span(s) made no chunk relevant (text the "
                      "chunker leaves out, such as blank lines): see 'evidence' in "
                      "per_query.jsonl")
    differ = sum(1 for q in queries if q.evidence and q.expected_chunk_ids
                 and set(q.expected_chunk_ids) != set(resolutions[q.id].grades))
    if differ:
        progress.warn(f"{differ} queries' expected_chunk_ids differ from the chunks their "
                      "evidence resolves to under this chunking: the evidence is used")
