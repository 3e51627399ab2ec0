"""``per_query.jsonl``: one JSON object per query — an interface that compare reads back and
users ``jq``. Core keys (more may be added)::

    {"id", "query", "hits": [{"rank", "chunk_id", "doc_id", "score"}],
     "answer": {"text", "citations", "refusal_reason", "confidence", "raw_confidence",
                "similarity"} | null,
     "scores": {metric: value | null}, "latency_ms", "error",
     "first_relevant_rank": {level: rank | 0 (a miss) | null (no ground truth)},
     "truncated_hits": N,   # only when the pipeline returned N hits past k (dropped)
     "abstention": "correct_refusal" | "boundary_partial" | "incorrect_answer",
                            # only on an unanswerable ask query (metrics/answers.py)
     "repeats": [{"hits", "answer", "scores", "latency_ms", "error"}], "flip_rate",
     "topk_churn",          # only with run --repeat N (evaluation/repeats.py): scores are
                            # then the means over the repeats, hits and answer the first's
     "evidence": [{"doc", "start", "end", "grade",
                   "chunks": [{"chunk_id", "span_share", "chunk_share", "relevant"}]}]}
                            # only for a query with evidence spans: how each resolved

A private golden set drops ``query`` and ``answer.text`` (ids and numbers only). Hit text is
never written. Floats are written as JSON numbers, NaN scores as null.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kebab_mlflow.errors import PerQueryError, Problem
from kebab_mlflow.files import file_digest  # noqa: F401 - compare reads it from here
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.answers import AbstentionOutcome, abstention_outcome
from kebab_mlflow.records import QueryResult


def record(query: GoldenQuery, result: QueryResult, scores: Mapping[str, float],
           private: bool, first_relevant: Mapping[str, float] | None = None,
           evidence: list[dict[str, object]] | None = None) -> dict[str, Any]:
    """One line of ``per_query.jsonl``. ``first_relevant``: level → rank of the first relevant
    hit (0 = none within the depth, NaN = no ground truth), written as ``first_relevant_rank``
    so that ``compare`` can tell a regression at any retrieval depth (``mrr`` needs 10)."""
    answer = None
    if result.answer is not None:
        a = result.answer
        answer = {"text": None if private else a.text, "citations": list(a.citations),
                  "refusal_reason": a.refusal_reason, "confidence": a.confidence,
                  "raw_confidence": a.raw_confidence, "similarity": a.similarity}
    rec = {
        "id": query.id,
        "query": None if private else query.query,
        "hits": [{"rank": h.rank, "chunk_id": h.chunk_id, "doc_id": h.doc_id, "score": h.score}
                 for h in result.hits],
        "answer": answer,
        "scores": {k: (None if v is None or math.isnan(v) else float(v))
                   for k, v in scores.items()},
        "latency_ms": result.latency_ms,
        "error": result.error,
    }
    if result.truncated_hits:  # the pipeline returned more than k: only the first k are kept
        rec["truncated_hits"] = result.truncated_hits
    outcome = abstention_outcome(query, result.answer)
    if outcome is not None:  # compare's per-query evidence on abstention cases
        rec["abstention"] = str(outcome)
    if first_relevant is not None:
        rec["first_relevant_rank"] = {level: (None if math.isnan(r) else int(r))
                                      for level, r in first_relevant.items()}
    if evidence is not None:  # offsets and ids only: no quote, for private sets too
        rec["evidence"] = evidence
    if private and result.error:
        rec["error"] = result.error.split(":", 1)[0]  # exception type only: messages may quote text
    return rec


class PerQueryWriter:
    """Streams records to disk and keeps the running sha256 of the exact bytes written."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: IO[bytes] = path.open("wb")
        self._sha = hashlib.sha256()
        self.count = 0

    def write(self, rec: Mapping[str, Any]) -> None:
        self.write_line(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")

    def write_line(self, line: str) -> None:
        """One line already serialised (ending in a newline)."""
        data = line.encode("utf-8")
        self._fh.write(data)
        self._sha.update(data)
        self.count += 1

    def close(self) -> str:
        self._fh.close()
        return self._sha.hexdigest()


@dataclass(frozen=True, kw_only=True)
class PerQueryRow:
    id: str
    query: str | None
    hits: tuple[dict, ...]
    answer: dict | None
    scores: dict
    latency_ms: float
    error: str | None
    first_relevant_rank: dict | None = None  # level -> rank, 0 = miss, None = no truth
    abstention: str | None = None  # an unanswerable ask query's AbstentionOutcome
    flip_rate: float | None = None  # run --repeat: share of repeats off the modal outcome
    evidence: tuple[dict[str, Any], ...] | None = None  # how its evidence spans resolved


def read_per_query(path: Path, shown_as: str | None = None) -> Iterator[PerQueryRow]:
    """Read rows back; any malformed line is a PerQueryError naming file and line —
    ``shown_as`` instead of ``path`` for a download about to be deleted (compare names the
    run and its artifact, not a temporary folder that will not exist)."""
    where = shown_as or str(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            yield _row(raw, f"{where}:{lineno}")


def _row(raw: bytes, where: str) -> PerQueryRow:
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PerQueryError("unreadable per_query.jsonl", [Problem(f"not JSON: {exc}", where)]) \
            from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise PerQueryError("unreadable per_query.jsonl",
                            [Problem("JSON nested too deeply", where)]) from None
    problems = []
    if not isinstance(rec, dict):
        raise PerQueryError("unreadable per_query.jsonl", [Problem("not an object", where)])
    if not isinstance(rec.get("id"), str):
        problems.append(Problem("'id' must be a string", where))
    hits = rec.get("hits")
    if not isinstance(hits, list) or not all(
            isinstance(h, dict) and isinstance(h.get("chunk_id"), str)
            and isinstance(h.get("doc_id"), str)
            and isinstance(h.get("rank"), int) and not isinstance(h.get("rank"), bool)
            and isinstance(h.get("score"), (int, float)) for h in hits):
        problems.append(Problem("'hits' must be a list of {rank, chunk_id, doc_id, score}", where))
    scores = rec.get("scores")
    if not isinstance(scores, dict) or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in scores.values()):
        problems.append(Problem("'scores' must map metric names to numbers or null", where))
    answer = rec.get("answer")
    if answer is not None and not isinstance(answer, dict):
        problems.append(Problem("'answer' must be an object or null", where))
    latency = rec.get("latency_ms", 0.0)
    if not isinstance(latency, (int, float)) or isinstance(latency, bool):
        problems.append(Problem("'latency_ms' must be a number", where))
    error = rec.get("error")
    if error is not None and not isinstance(error, str):
        problems.append(Problem("'error' must be a string or null", where))
    query = rec.get("query")
    if query is not None and not isinstance(query, str):
        problems.append(Problem("'query' must be a string or null", where))
    first = rec.get("first_relevant_rank")  # absent in files written before it existed
    if first is not None and not (isinstance(first, dict) and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
            for v in first.values())):
        problems.append(Problem("'first_relevant_rank' must map levels to ranks >= 0 or null",
                                where))
    abstention = rec.get("abstention")  # absent on other queries and in older files
    if abstention is not None and abstention not in set(AbstentionOutcome):
        problems.append(Problem(f"'abstention' must be one of "
                                f"{', '.join(AbstentionOutcome)} or absent", where))
    flip = rec.get("flip_rate")  # only in files of run --repeat
    if flip is not None and (not isinstance(flip, (int, float)) or isinstance(flip, bool)
                             or not 0 <= flip <= 1):
        problems.append(Problem("'flip_rate' must be a number in [0, 1] or absent", where))
    evidence = rec.get("evidence")  # only for queries with evidence spans
    if evidence is not None and not (isinstance(evidence, list)
                                     and all(isinstance(e, dict) for e in evidence)):
        problems.append(Problem("'evidence' must be a list of objects", where))
    if problems:
        raise PerQueryError("unreadable per_query.jsonl", problems)
    return PerQueryRow(id=rec["id"], query=query, hits=tuple(hits), answer=answer, scores=scores,
                       latency_ms=float(latency), error=error,
                       first_relevant_rank=first, abstention=abstention,
                       flip_rate=None if flip is None else float(flip),
                       evidence=None if evidence is None else tuple(evidence))
