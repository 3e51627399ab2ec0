"""A precomputed run scored from integer doc codes: no Python object per hit.

A target with ``coded(query_ids, k)`` (a run file: ``targets/run.py``) hands each batch's hits
over as a b × k matrix of doc codes and one of scores. The relevance tables are then built by
:meth:`RelevanceTable.from_codes` (the golden set's ids looked up once in the target's
``doc_code``) and each ``per_query.jsonl`` line is written from the codes, byte for byte the
line that the Hit path (:func:`per_query.record`) writes — ``tests/test_run_target.py`` checks
both paths on the same files. At a million queries of 100 hits that is 100 million Hit objects
and their dicts not built.

A batch where some query lists a doc twice goes through the Hit path instead, which makes that
query's error (``duplicate chunk id``) as for any target.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from itertools import chain, count, repeat
from operator import add
from typing import Any

import msgspec
import numpy as np

from kebab_mlflow.evaluation.per_query import record
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.retrieval import RelevanceTable
from kebab_mlflow.metrics.scoring import first_relevant_ranks, table_scores
from kebab_mlflow.metrics.unjudged import bound_scores
from kebab_mlflow.records import QueryResult

CODED_BATCH = 1024  # queries per batch: the per-batch numpy calls stay a small share
UNKNOWN = -3  # the code of a judged id the run never returns: it matches no hit
_NUMBERS = msgspec.json.Encoder()


def coded_hits(pipeline: Any, batch: Sequence[GoldenQuery],
               depth: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, scores) of the batch, None when a query lists a doc twice (the Hit path then
    reports it) or the target cannot hand this batch over as codes (a replayed line with an
    answer: evaluation/replay.py)."""
    coded = pipeline.coded([q.id for q in batch], depth)
    if coded is None:
        return None
    codes, scores = coded
    ordered = np.sort(codes, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
        return None
    return codes, scores


def _judgments(per_query: Iterable[Mapping[str, float]],
               doc_code: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query row, item code, grade) of every judgment, query by query in each dict's order;
    the lookups run in C (``map`` of ``dict.get``): a Python loop per judgment was a third of
    the bounds' rescore at 100k queries."""
    judged = list(per_query)
    items = list(chain.from_iterable(judged))
    n = len(items)
    # the dtypes RelevanceTable.from_codes reads them as
    rows = np.repeat(np.arange(len(judged), dtype=np.int64),
                     np.fromiter(map(len, judged), dtype=np.int64, count=len(judged)))
    codes = np.fromiter(map(doc_code.get, items, repeat(UNKNOWN, n)), dtype=np.int64, count=n)
    grades = np.fromiter(chain.from_iterable(j.values() for j in judged), dtype=np.float64,
                         count=n)
    return rows, codes, grades


def code_rankings(rankings: Sequence[Sequence[str]], depth: int
                  ) -> tuple[np.ndarray, dict[str, int]]:
    """(b × ``depth`` codes of each ranking's first ``depth`` doc ids, -1 past its end; the
    code of each id, in order of first appearance). Codes of one batch only: a dict of a
    million ids made every lookup a cache miss (1 µs a hit)."""
    firsts = [ranking[:depth] for ranking in rankings]
    flat = list(chain.from_iterable(firsts))
    doc_code = dict(zip(dict.fromkeys(flat), count()))
    lengths = np.fromiter(map(len, firsts), dtype=np.int64, count=len(firsts))
    codes = np.full((len(firsts), depth), -1, dtype=np.int64)
    codes[np.arange(depth) < lengths[:, None]] = np.fromiter(
        map(doc_code.__getitem__, flat), dtype=np.int64, count=len(flat))
    return codes, doc_code


def coded_tables(batch: Sequence[GoldenQuery], codes: np.ndarray, doc_code: Mapping[str, int],
                 depth: int, chunks: tuple[np.ndarray, Mapping[str, int]] | None = None,
                 ) -> tuple[dict[str, RelevanceTable], RelevanceTable]:
    """The chunk, doc and judged tables of :mod:`metrics.scoring` from codes: ``codes``, the
    doc rankings' (in order of first appearance); ``chunks``, the chunk rankings' codes and
    their code of each chunk id — None where the hits are documents (a run file's: chunk id
    = doc id, no repeats), so one code matrix serves all three. The judgments are the same
    dicts ``retrieval_tables``/``judged_table`` build."""
    chunk_codes, chunk_code = chunks if chunks is not None else (codes, doc_code)
    levels = {
        "chunk": (chunk_codes, chunk_code, (q.chunk_grades for q in batch)),
        "doc": (codes, doc_code, (q.relevant_doc_grades for q in batch)),
        "judged": (codes, doc_code, (dict.fromkeys(q.expected_doc_ids, 1) for q in batch)),
    }
    tables = {level: RelevanceTable.from_codes(matrix, *_judgments(judged, code), depth=depth)
              for level, (matrix, code, judged) in levels.items()}
    judged = tables.pop("judged")
    return tables, judged


def hits_json(codes: Sequence[int], scores: Sequence[str], doc_json: Sequence[str]) -> str:
    """The ``hits`` list of a per_query.jsonl line, as ``json.dumps`` writes the Hit path's
    dicts (default separators); ``scores``: each float as ``json.dumps`` writes it
    (:func:`json_floats`). The pieces go into a copy of the constant ones by slices and are
    joined once, all in C: 2.5× faster than an f-string a hit, and this is the per-hit cost
    of a run file."""
    parts = _hits_pieces(len(codes)).copy()
    parts[1::7] = parts[3::7] = list(map(doc_json.__getitem__, codes))
    parts[5::7] = scores  # a length that differs raises ValueError
    return "[" + "".join(parts)[:-2] + "]"


@lru_cache(maxsize=8)
def _hits_pieces(n: int) -> list[str]:
    """The constant pieces of ``n`` hits, 7 a hit: ``{"rank": r, "chunk_id": ``, the doc,
    ``, "doc_id": ``, the doc, ``, "score": ``, the score, ``}, ``."""
    parts = ["}, "] * (7 * n)
    parts[0::7] = [f'{{"rank": {rank}, "chunk_id": ' for rank in range(1, n + 1)]
    parts[2::7] = [', "doc_id": '] * n
    parts[4::7] = [', "score": '] * n
    return parts


def json_floats(values: np.ndarray) -> list[list[str]]:
    """Each row of a b × k float matrix as ``json.dumps`` writes its floats (``repr``), NaN
    as null (a score without ground truth, as :func:`per_query.record` writes it). msgspec
    writes them 10× faster with the same shortest round-trip digits
    (``tests/test_coded_scores.py`` holds over a million against ``json.dumps``) but another
    notation outside [1e-4, 1e16): a row with such a value is written one value at a time;
    an infinite one is refused, as ``json.dumps(allow_nan=False)`` refuses it. With
    :func:`hits_json`'s slices, a 1M-query run file's ``metrics_s`` went from 85 to 63 s."""
    magnitude = np.abs(values)
    plain = (((magnitude >= 1e-4) & (magnitude < 1e16)) | (values == 0)
             | np.isnan(values)).all(axis=1)
    return [_NUMBERS.encode(row)[1:-1].decode().split(",") if fast and row else
            list(map(_json_float, row))
            for row, fast in zip(values.tolist(), plain.tolist(), strict=True)]


def _json_float(value: float) -> str:
    if math.isnan(value):
        return "null"
    if math.isinf(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return repr(value)


def _scores_json(scores: Mapping[str, np.ndarray], rows: int) -> list[str]:
    """Each query's ``scores`` object of a batch's score columns, as ``json.dumps`` writes
    :func:`per_query.record`'s dict."""
    keys = [json.dumps(name, ensure_ascii=False) + ": " for name in scores]
    matrix = np.column_stack([*scores.values()]) if scores else np.zeros((rows, 0))
    return ["{" + ", ".join(map(add, keys, row)) + "}" for row in json_floats(matrix)]


def coded_line(query: GoldenQuery, result: QueryResult, hits: str, scores: str,
               private: bool, first_relevant: Mapping[str, float]) -> str:
    """One per_query.jsonl line: :func:`record` of the hit-less, score-less result, with
    ``hits`` and ``scores`` (their JSON text) put in their places."""
    rec = record(query, result, {}, private, first_relevant)
    head = json.dumps({"id": rec.pop("id"), "query": rec.pop("query")}, ensure_ascii=False,
                      allow_nan=False)
    answer = json.dumps({"answer": rec.pop("answer")}, ensure_ascii=False, allow_nan=False)
    del rec["hits"], rec["scores"]
    tail = json.dumps(rec, ensure_ascii=False, allow_nan=False)
    return f'{head[:-1]}, "hits": {hits}, {answer[1:-1]}, "scores": {scores}, {tail[1:]}\n'


def score_coded_batch(pipeline: Any, batch: Sequence[GoldenQuery],
                      coded: tuple[np.ndarray, np.ndarray], depth: int, cutoffs: Sequence[int],
                      private: bool, seconds: float, bounded: bool = False,
                      recorded: Sequence[QueryResult] | None = None,
                      recorded_hits: Sequence[str | None] | None = None
                      ) -> tuple[dict[str, np.ndarray], list[str], list[float],
                                 dict[str, np.ndarray]]:
    """(scores, lines, latencies in ms, bounds for unjudged hits when ``bounded``, else {})
    of one batch from its codes; ``seconds``: the time taken to look its hits up, shared by
    its queries, unless ``recorded`` gives each query's hit-less result (its times as a
    replayed run recorded them); ``recorded_hits``: each line's ``hits`` text where the
    replayed line holds it as this would write it (None: written from the codes)."""
    codes, hit_scores = coded
    tables, judged = coded_tables(batch, codes, pipeline.doc_code, depth)
    scores = table_scores(tables, judged, depth, cutoffs)
    lengths = (codes >= 0).sum(axis=1)
    bound = bound_scores(tables["doc"], judged, np.minimum(lengths, depth), cutoffs, depth) \
        if bounded else {}
    scores["no_hit_rate"] = (lengths == 0).astype(float)
    scores["error_rate"] = np.zeros(len(batch))
    ranks = first_relevant_ranks(tables)
    latency_ms = seconds * 1000.0 / max(len(batch), 1)
    results = recorded or [QueryResult(query_id=q.id, hits=(), answer=None,
                                       latency_ms=latency_ms) for q in batch]
    texts = _hits_texts(pipeline, codes, hit_scores, lengths,
                        recorded_hits or [None] * len(batch))
    level_ranks = {level: v.tolist() for level, v in ranks.items()}
    lines: list[str] = []
    for i, (q, result, text, scored) in enumerate(zip(batch, results, texts,
                                                      _scores_json(scores, len(batch)),
                                                      strict=True)):
        lines.append(coded_line(q, result, text, scored, private,
                                {level: v[i] for level, v in level_ranks.items()}))
    return scores, lines, [r.latency_ms for r in results], bound


def _hits_texts(pipeline: Any, codes: np.ndarray, hit_scores: np.ndarray, lengths: np.ndarray,
                given: Sequence[str | None]) -> list[str]:
    """Each line's ``hits`` text: the one given, else written from its codes."""
    if None not in given:
        return [text for text in given if text is not None]
    doc_json = pipeline.doc_json
    rows = zip(codes.tolist(), json_floats(hit_scores), lengths.tolist(), strict=True)
    return [text if text is not None else hits_json(row[:n], row_scores[:n], doc_json)
            for text, (row, row_scores, n) in zip(given, rows, strict=True)]


def timed_coded_hits(pipeline: Any, batch: Sequence[GoldenQuery], depth: int
                     ) -> tuple[tuple[np.ndarray, np.ndarray] | None, float]:
    """(coded hits or None, seconds)."""
    start = time.perf_counter()
    coded = coded_hits(pipeline, batch, depth)
    return coded, time.perf_counter() - start
