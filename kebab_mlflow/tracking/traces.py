"""Per-query traces (``run --traces none|failures|all``): which queries, and what each holds.

A trace is built from the run's ``per_query.jsonl`` rows plus the text of each hit (the
pipeline's chunks; per_query.jsonl never holds hit text). The payloads are written to
``traces.jsonl`` in the work folder, so a recovery folder publishes them too, and the store
logs them all at once (:meth:`kebab_mlflow.tracking.store.Tracker.log_traces`). No mlflow
import here.

``failures`` = a query that raised, missed (no relevant hit within the depth at some level
with ground truth), or failed ``contains_all``. A private golden set is never traced: its
queries and chunk text must not leave the machine.

Each span lasts what was measured for it (:func:`span_times`): the root the query's latency,
``retrieve`` its search time, ``answer`` its ask time, from ``stage_ms`` of per_query.jsonl. A
target that reports one time per query (a run file, ``run_many``) has no stage times: its
child spans last the whole query and the trace's ``kebab.stage_times`` tag says
``not_measured``. Each retrieved document carries its judgment (:func:`judgment`): relevant,
not relevant or unjudged, with its grade and the level the golden set judged it at.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.evaluation.per_query import (
    PerQueryRow,
    answer_fields,
    hit_fields,
    read_per_query,
)
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.records import Hit

TRACES = "traces.jsonl"
MODES = ("none", "failures", "all")
# the per-query scores attached to a trace as assessments (those the query has)
ASSESSED = ("hit_at_1", "hit_at_5", "hit_at_10", "mrr", "mrr_doc", "ndcg_at_10_doc",
            "recall_at_10_doc", "contains_all", "ask_grounded_rate", "refusal_rate")


def check_traces(mode: str, golden: GoldenSet) -> None:
    if mode not in MODES:
        raise ConfigError(f"--traces must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "none" and golden.private:
        raise ConfigError(f"--traces {mode}: golden set {golden.name!r} is private and is "
                          "never traced (its queries and chunk text would be stored in MLflow)")


def chunk_texts(pipeline: Any, mode: str = "all") -> dict[str, str] | None:
    """chunk id -> text, when traces are asked for and the pipeline exposes its chunks."""
    chunks = getattr(pipeline, "chunks", None)
    if mode == "none" or not chunks:
        return None
    return {c.chunk_id: c.text for c in chunks}


def failure_reasons(row: PerQueryRow) -> list[str]:
    reasons = []
    if row.error:
        reasons.append("error")
    if any(rank == 0 for rank in (row.first_relevant_rank or {}).values()):
        reasons.append("miss")
    if row.scores.get("contains_all") == 0:
        reasons.append("contains_all")
    return reasons


class Judgment(enum.StrEnum):
    """What the golden set says of a retrieved document (the retriever span's metadata)."""

    RELEVANT = "relevant"
    NOT_RELEVANT = "not relevant"
    UNJUDGED = "unjudged"


def judgment(hit: Hit, query: GoldenQuery | None) -> dict[str, Any]:
    """``{judgment, judgment_grade, judgment_level}`` of one hit: relevant when its chunk or
    its document has a grade > 0 (the chunk's grade first); not relevant when its document is
    judged with grade 0, or when the query has chunk truth (its chunk list names every
    relevant chunk: any other counts grade 0, as the metrics count it); else unjudged — a
    document the qrels do not list, or a query without retrieval truth (grade None)."""
    if query is None:
        return {"judgment": Judgment.UNJUDGED.value, "judgment_grade": None,
                "judgment_level": None}
    chunk = query.chunk_grades.get(hit.chunk_id, 0)
    doc = query.expected_doc_ids.get(hit.doc_id)
    if chunk > 0:
        found: tuple[Judgment, int | None, str | None] = (Judgment.RELEVANT, chunk, "chunk")
    elif doc is not None and doc > 0:
        found = (Judgment.RELEVANT, doc, "doc")
    elif doc is not None:
        found = (Judgment.NOT_RELEVANT, doc, "doc")
    elif query.has_chunk_truth:
        found = (Judgment.NOT_RELEVANT, 0, "chunk")
    else:
        found = (Judgment.UNJUDGED, None, "doc" if query.expected_doc_ids else None)
    return {"judgment": found[0].value, "judgment_grade": found[1], "judgment_level": found[2]}


@dataclass(frozen=True, kw_only=True)
class TracePayload:
    """One query as a trace: its spans' inputs/outputs and its assessments, as
    ``traces.jsonl`` holds them (JSON objects: the hits and answer as per_query.jsonl writes
    them, each hit with its text and judgment)."""

    query_id: str
    query: str
    hits: tuple[dict[str, Any], ...]  # {doc_id, chunk_id, score, rank, text, judgment...}
    answer: dict[str, Any] | None
    scores: Mapping[str, float]
    error: str | None
    latency_ms: float
    failure: tuple[str, ...]
    stage_ms: Mapping[str, float] | None = None  # {"search", "answer"}; None: not measured


def payload(row: PerQueryRow, texts: Mapping[str, str] | None,
            query: GoldenQuery | None = None) -> TracePayload:
    hits = tuple({**hit_fields(h), "text": (texts or {}).get(h.chunk_id, ""), **judgment(h, query)}
                 for h in row.hits)
    scores = {n: v for n in ASSESSED if (v := row.scores.get(n)) is not None}
    answer = None if row.answer is None else answer_fields(row.answer)  # never private
    return TracePayload(query_id=row.id, query=row.query or "", hits=hits, answer=answer,
                        scores=scores, error=row.error, latency_ms=row.latency_ms,
                        failure=tuple(failure_reasons(row)), stage_ms=row.stage_ms)


def span_times(p: TracePayload, start_ns: int) -> dict[str, tuple[int, int]]:
    """(start, end) in ns of the ``root``, ``retrieve`` and ``answer`` spans: each its own
    measured time, the answer right after the search; without stage times (a target that
    reports one time per query) the child spans last the whole query."""
    end = start_ns + max(round(p.latency_ms * 1e6), 1000)
    if not p.stage_ms:
        return {"root": (start_ns, end), "retrieve": (start_ns, end), "answer": (start_ns, end)}
    searched = start_ns + round(p.stage_ms.get("search", 0.0) * 1e6)
    answered = searched + round(p.stage_ms.get("answer", 0.0) * 1e6)
    return {"root": (start_ns, max(end, answered)), "retrieve": (start_ns, searched),
            "answer": (searched, answered)}


def document_metadata(hit: Mapping[str, Any]) -> dict[str, Any]:
    """A retrieved document's metadata in the retriever span: its judgment first (the keys
    starting with ``judgment``: the trace view's document list shows the first key beside
    each document), then ids, score and rank."""
    return {**{k: v for k, v in hit.items() if k.startswith("judgment")},
            "doc_uri": hit["doc_id"], "doc_id": hit["doc_id"], "chunk_id": hit["chunk_id"],
            "score": hit["score"], "rank": hit["rank"]}


def trace_tags(p: TracePayload) -> dict[str, str]:
    """The trace's own tags: its query id, why it failed, whether its stages were timed."""
    stages = vocab.StageTimes.MEASURED if p.stage_ms else vocab.StageTimes.NOT_MEASURED
    return {"mlflow.traceName": p.query_id, vocab.TRACE_QUERY_ID: p.query_id,
            vocab.TRACE_FAILURE: ",".join(p.failure) or "none",
            vocab.TRACE_STAGE_TIMES: stages.value}


def write_traces(path: Path, result: Any, publishing: Any) -> int:
    """Write the payloads of the queries to trace; how many (0: none asked or none failed)."""
    if publishing.traces == "none":
        return 0
    n = 0
    queries = {q.id: q for q in result.golden.queries}
    with path.open("w", encoding="utf-8") as out:
        for row in read_per_query(result.per_query_path):
            p = payload(row, publishing.chunk_text, queries.get(row.id))
            if publishing.traces == "all" or p.failure:
                out.write(json.dumps(p.__dict__, ensure_ascii=False) + "\n")
                n += 1
    return n


def read_traces(path: Path) -> Iterator[TracePayload]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                d = json.loads(line)
                yield TracePayload(**{**d, "hits": tuple(d["hits"]),
                                      "failure": tuple(d["failure"])})
