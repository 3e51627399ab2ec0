"""Per-query traces (``run --traces none|failures|all``): which queries, and what each holds.

A trace is built from the run's ``per_query.jsonl`` rows plus the text of each hit (the
pipeline's chunks; per_query.jsonl never holds hit text). The payloads are written to
``traces.jsonl`` in the work folder, so a recovery folder publishes them too, and the store
logs them all at once (:meth:`kebab_mlflow.tracking.store.Tracker.log_traces`). No mlflow
import here.

``failures`` = a query that raised, missed (no relevant hit within the depth at some level
with ground truth), or failed ``contains_all``. A private golden set is never traced: its
queries and chunk text must not leave the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import ConfigError
from kebab_mlflow.evaluation.per_query import PerQueryRow, read_per_query
from kebab_mlflow.golden import GoldenSet

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


@dataclass(frozen=True, kw_only=True)
class TracePayload:
    """One query as a trace: its spans' inputs/outputs and its assessments."""

    query_id: str
    query: str
    hits: tuple[dict[str, Any], ...]  # {doc_id, chunk_id, score, rank, text}
    answer: dict[str, Any] | None
    scores: Mapping[str, float]
    error: str | None
    latency_ms: float
    failure: tuple[str, ...]


def payload(row: PerQueryRow, texts: Mapping[str, str] | None) -> TracePayload:
    hits = tuple({**h, "text": (texts or {}).get(h["chunk_id"], "")} for h in row.hits)
    scores = {n: v for n in ASSESSED if (v := row.scores.get(n)) is not None}
    return TracePayload(query_id=row.id, query=row.query or "", hits=hits, answer=row.answer,
                        scores=scores, error=row.error,
                        latency_ms=row.latency_ms, failure=tuple(failure_reasons(row)))


def write_traces(path: Path, result: Any, publishing: Any) -> int:
    """Write the payloads of the queries to trace; how many (0: none asked or none failed)."""
    if publishing.traces == "none":
        return 0
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for row in read_per_query(result.per_query_path):
            p = payload(row, publishing.chunk_text)
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
