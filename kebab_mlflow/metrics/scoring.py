"""From per-query results to per-query scores (numpy arrays, NaN = does not count)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kebab_mlflow.errors import ConfigError
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.answers import answer_scores
from kebab_mlflow.metrics.registry import (
    CUTOFFS,
    JUDGED_LEVELS,
    Level,
    judged_metrics,
    retrieval_metrics,
)
from kebab_mlflow.metrics.retrieval import (
    RelevanceTable,
    first_appearance,
    first_relevant_rank,
)
from kebab_mlflow.records import QueryResult


def cutoffs_for(depth: int, extra: Sequence[int] = ()) -> list[int]:
    """The cut-offs a run of this retrieval depth can report: never deeper than it searched."""
    return sorted({k for k in (*CUTOFFS, *extra, depth) if 0 < k <= depth})


def run_cutoffs(depth: int, requested: Sequence[int] | None = None) -> list[int]:
    """The cut-offs of a run: ``requested`` (``--cutoffs``) exactly, each checked against the
    depth (one deeper than the run searches is an error, not a silent drop); without it, the
    standard ones and the depth (:func:`cutoffs_for`)."""
    if requested is None:
        return cutoffs_for(depth)
    ks = sorted(set(requested))
    bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, int) or k < 1]
    if bad or not ks:
        raise ConfigError(f"cut-offs must be integers >= 1, got {list(requested)!r}")
    deep = [k for k in ks if k > depth]
    if deep:
        raise ConfigError(f"cut-off(s) {', '.join(map(str, deep))} deeper than the retrieval "
                          f"depth --k {depth}: raise --k or drop them")
    return ks


def parse_cutoffs(text: str) -> list[int]:
    """``"1,5,10,100"`` → [1, 5, 10, 100]; anything else is a ConfigError naming it."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--cutoffs must be comma-separated integers, got {text!r}") from None


def retrieval_tables(queries: Sequence[GoldenQuery], results: Sequence[QueryResult],
                     depth: int) -> dict[str, RelevanceTable]:
    chunk_rank = [[h.chunk_id for h in r.hits] for r in results]
    doc_rank = [first_appearance([h.doc_id for h in r.hits]) for r in results]
    chunk_rel = [q.chunk_grades for q in queries]
    doc_rel = [q.relevant_doc_grades for q in queries]
    return {
        "chunk": RelevanceTable.from_rankings(chunk_rank, chunk_rel, depth),
        "doc": RelevanceTable.from_rankings(doc_rank, doc_rel, depth),
    }


def judged_table(queries: Sequence[GoldenQuery], results: Sequence[QueryResult],
                 depth: int) -> RelevanceTable:
    """Doc-level table where every *judged* document (grade 0 included) has gain 1."""
    doc_rank = [first_appearance([h.doc_id for h in r.hits]) for r in results]
    return RelevanceTable.from_rankings(
        doc_rank, [dict.fromkeys(q.expected_doc_ids, 1) for q in queries], depth)


def doc_lengths(results: Sequence[QueryResult], depth: int) -> np.ndarray:
    """The distinct documents each result's hits hold, at most ``depth`` (the doc ranking's
    length)."""
    return np.array([min(len({h.doc_id for h in r.hits}), depth) for r in results],
                    dtype=np.int64)


def first_relevant_ranks(tables: dict[str, RelevanceTable]) -> dict[str, np.ndarray]:
    """Per level, each query's first relevant rank (0 = a miss, NaN = no ground truth)."""
    return {level: first_relevant_rank(table) for level, table in tables.items()}


def table_scores(tables: dict[str, RelevanceTable], judged: RelevanceTable | None, depth: int,
                 cutoffs: Sequence[int]) -> dict[str, np.ndarray]:
    """The retrieval scores of :func:`score_results` from its tables (``judged``: the
    :func:`judged_table`, None when no level has judged_at_k), in the same key order."""
    scores: dict[str, np.ndarray] = {}
    for level, table in tables.items():
        table.prepare(cutoffs)  # one pass for every cut-off's count and DCG
        for metric in retrieval_metrics(Level(level), cutoffs, depth):
            scores[metric.name] = metric.score(table)
    if judged is not None:
        judged.prepare(cutoffs)
        for metric in judged_metrics(cutoffs):
            scores[metric.name] = metric.score(judged)
    return scores


def score_results(queries: Sequence[GoldenQuery], results: Sequence[QueryResult],
                  depth: int, cutoffs: Sequence[int], *, with_answers: bool | None = None,
                  tables: dict[str, RelevanceTable] | None = None,
                  judged: RelevanceTable | None = None) -> dict[str, np.ndarray]:
    """Every per-query score of a run, keyed by metric name. ``with_answers``: whether the run
    scores answers at all — False for a search-only target (its missing answers are not
    refusals); None: when any of ``queries`` asks. A run scoring in batches decides it once
    for the whole set, so every batch has the same keys (a query without ``ask`` scores NaN).
    ``tables``, ``judged``: the :func:`retrieval_tables` and :func:`judged_table` of these
    results, when the caller has them."""
    tables = tables if tables is not None else retrieval_tables(queries, results, depth)
    if judged is None and Level.DOC in JUDGED_LEVELS:
        judged = judged_table(queries, results, depth)
    scores = table_scores(tables, judged, depth, cutoffs)
    scores["no_hit_rate"] = np.array([float(not r.hits and r.error is None) for r in results])
    scores["error_rate"] = np.array([float(r.error is not None) for r in results])
    if with_answers if with_answers is not None else any(q.ask for q in queries):
        scores.update(answer_scores(queries, [r.answer for r in results],
                                    [r.hits for r in results]))
    return scores
