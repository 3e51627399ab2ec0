"""Run a golden set through a pipeline: per-query results streamed to ``per_query.jsonl``,
per-query scores accumulated, aggregate blocks built. No MLflow here.

Queries go to the pipeline in batches when it has ``search_batch`` (the reference pipeline
scores a batch with one sparse product); a batch that raises is retried query by query so one
bad query is recorded as that query's error and counted in ``error_rate``. A query's latency
is its share of the batch search time plus its own ``ask`` time. One-time loads are not: a
pipeline with ``warm_up()`` (the reference pipeline loads its tokenizer — Kiwi — and answerer
statistics there) is warmed up before the first query, timed apart as ``latency/load_ms``.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow import progress
from kebab_mlflow.errors import CorpusError, Problem, QueryFailed
from kebab_mlflow.evaluation.coded import CODED_BATCH, score_coded_batch, timed_coded_hits
from kebab_mlflow.evaluation.evidence import EvidenceRun
from kebab_mlflow.evaluation.per_query import PerQueryWriter, record
from kebab_mlflow.evaluation.repeats import (
    RepeatStats,
    mean_scores,
    query_stats,
    repeats_block,
    write_flaky_list,
)
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.interrupts import checkpoint
from kebab_mlflow.metrics.aggregate import Aggregate, aggregate_block, breakdowns, counts
from kebab_mlflow.metrics.calibration import (
    abstention_outcomes,
    calibration_block,
    calibration_pairs,
    reliability_bins,
)
from kebab_mlflow.metrics.scoring import (
    doc_lengths,
    first_relevant_ranks,
    judged_table,
    retrieval_tables,
    score_results,
)
from kebab_mlflow.metrics.unjudged import bound_scores, bounds_block
from kebab_mlflow.records import Answer, Hit, QueryResult

BATCH_SIZE = 64
# a query searched: (hits as the pipeline returned them, error | None, seconds)
Searched = tuple[tuple[Any, ...], str | None, float]
# a batch scored: (scores, answers, latencies in ms, pipeline seconds, metrics seconds,
# per-query repeat stats, bounds for unjudged hits: metrics/unjudged.bound_scores, or {})
BatchScored = tuple[dict[str, np.ndarray], list[Answer | None], list[float], float, float,
                    list[RepeatStats], dict[str, np.ndarray]]


@dataclass(kw_only=True)
class EvalOutcome:
    aggregate: Aggregate
    per_query_path: Path
    per_query_sha256: str
    scores: dict[str, np.ndarray]
    timings: dict[str, float] = field(default_factory=dict)
    # per query: <metric>_upper and unjudged_hits_at_<k>_doc (metrics/unjudged.py); not in
    # per_query.jsonl, summed up in the aggregate's unjudged_bounds block
    bound_scores: dict[str, np.ndarray] = field(default_factory=dict)


def check_expected_ids(golden: GoldenSet, chunk_ids: set[str] | None, doc_ids: set[str]) -> None:
    """Expected ids the index does not contain are an error listing them (sorted). Without
    ``chunk_ids`` (a sweep, before each row's chunker has run) only the doc ids are checked."""
    problems = []
    missing_chunks = [] if chunk_ids is None else sorted(
        {c for q in golden.queries for c in q.expected_chunk_ids} - chunk_ids)
    missing_docs = sorted({d for q in golden.queries for d in q.expected_doc_ids} - doc_ids)
    if missing_chunks:
        problems.append(Problem(f"{len(missing_chunks)} expected chunk id(s) not in the index: "
                                f"{', '.join(missing_chunks[:50])}", golden.path))
    if missing_docs:
        problems.append(Problem(f"{len(missing_docs)} expected doc id(s) not in the corpus: "
                                f"{', '.join(missing_docs[:50])}", golden.path))
    if problems:
        raise CorpusError("the golden set does not match the corpus", problems)


def shown_error(error: str, private: bool) -> str:
    """A query's error as it may be shown: of a private set, the exception type only (the
    message may quote the query text, as per_query.jsonl does)."""
    return error.split(":", 1)[0] + " (message withheld: private golden set)" if private \
        else error


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _search_batch(pipeline: Any, queries: Sequence[GoldenQuery], depth: int
                  ) -> list[Searched]:
    """[(hits | None, error | None, seconds)] per query."""
    texts = [q.query for q in queries]
    if hasattr(pipeline, "search_batch") and len(queries) > 1:
        start = time.perf_counter()
        try:
            batch = pipeline.search_batch(texts, depth)
            share = (time.perf_counter() - start) / len(queries)
            return [(tuple(hits), None, share) for hits in batch]
        except Exception:  # noqa: BLE001 - isolate the failing query below
            pass
    out: list[Searched] = []
    for text in texts:
        start = time.perf_counter()
        try:
            hits = tuple(pipeline.search(text, depth))
            out.append((hits, None, time.perf_counter() - start))
        except Exception as exc:  # noqa: BLE001 - a user pipeline may raise anything
            out.append(((), _error_text(exc), time.perf_counter() - start))
    return out


def _validate_hits(hits: Sequence[Any]) -> str | None:
    seen = set()
    for i, h in enumerate(hits):
        if not isinstance(h, Hit):
            return f"hit {i} is a {type(h).__name__}, not a Hit"
        if h.chunk_id in seen:
            return f"duplicate chunk id {h.chunk_id!r} in hits"
        seen.add(h.chunk_id)
    return None


def run_queries(pipeline: Any, golden: GoldenSet, depth: int, cutoffs: Sequence[int],
                per_query_path: Path, *, fail_fast: bool = False,
                repeat: int = 1, evidence: EvidenceRun | None = None) -> EvalOutcome:
    """``repeat`` > 1: every query that many times (evaluation/repeats.py). ``evidence``: the
    run's evidence (evaluation/evidence.py), scored beside the rest."""
    writer = PerQueryWriter(per_query_path)
    columns, bound_columns = _Columns(len(golden.queries)), _Columns(len(golden.queries))
    # bounds for unjudged hits: only where some query has doc-level truth (every batch then
    # has the same keys)
    bounded = any(q.has_doc_truth for q in golden.queries)
    answers: list[Answer | None] = []
    latencies: list[float] = []
    t_pipeline = t_metrics = 0.0
    with_answers = getattr(pipeline, "answers", True) and any(q.ask for q in golden.queries)
    # a run file hands its hits over as codes (evaluation/coded.py): bigger batches, no Hits
    by_codes = hasattr(pipeline, "coded") and not with_answers and repeat == 1
    stats: list[RepeatStats] = []
    step = CODED_BATCH if by_codes else BATCH_SIZE
    load_ms = warm_up(pipeline)
    with progress.task("queries", len(golden.queries), "q") as task:
        try:
            for start in range(0, len(golden.queries), step):
                batch = golden.queries[start:start + step]
                checkpoint("batch-start")
                scored = _batch_by_codes(pipeline, golden, batch, depth, cutoffs, writer,
                                         bounded) if by_codes else None
                if scored is None:
                    scored = _batch_by_hits(pipeline, golden, batch, depth, cutoffs, writer,
                                            with_answers, fail_fast, repeat, evidence, bounded)
                scores, batch_answers, batch_latencies, spent_pipeline, spent_metrics, \
                    batch_stats, batch_bounds = scored
                stats += batch_stats
                columns.put(scores)
                bound_columns.put(batch_bounds)
                answers += batch_answers
                latencies += batch_latencies
                t_pipeline += spent_pipeline
                t_metrics += spent_metrics
                task.advance(len(batch))
        finally:
            digest = writer.close()
    t2 = time.perf_counter()
    all_scores, all_bounds = columns.arrays(), bound_columns.arrays()
    aggregate = build_aggregate(golden, all_scores, answers, np.array(latencies), load_ms)
    if all_bounds:
        aggregate = dataclasses.replace(aggregate, unjudged_bounds=bounds_block(
            all_bounds, cutoffs, depth))
    if repeat > 1:
        write_flaky_list(per_query_path.parent, stats)
        aggregate = dataclasses.replace(aggregate, repeats=repeats_block(repeat, stats))
    t_metrics += time.perf_counter() - t2
    return EvalOutcome(aggregate=aggregate, per_query_path=per_query_path, per_query_sha256=digest,
                       scores=all_scores,
                       timings={"pipeline_s": t_pipeline, "metrics_s": t_metrics},
                       bound_scores=all_bounds)


class _Columns:
    """Each name's values, a batch at a time, in arrays made once for every query: batches'
    arrays joined at the end held a million queries' 53 scores (424 MB) twice, and the
    small ones freed are not handed back to the OS."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.columns: dict[str, np.ndarray] = {}
        self.filled: dict[str, int] = {}

    def put(self, values_of: Mapping[str, np.ndarray]) -> None:
        for name, given in values_of.items():
            values = np.asarray(given)
            start = self.filled.get(name, 0)
            stop = start + len(values)
            column = self.columns.get(name)
            if column is None:
                column = np.empty(max(self.capacity, stop), dtype=values.dtype)
            wider = np.result_type(column.dtype, values.dtype)
            if stop > len(column) or wider != column.dtype:
                # more values than queries, or a wider type: what joining them would give
                grown = np.empty(max(stop, 2 * len(column)), wider)
                grown[:start] = column[:start]
                column = grown
            column[start:stop] = values
            self.columns[name], self.filled[name] = column, stop

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: column[:self.filled[name]] for name, column in self.columns.items()}


def warm_up(pipeline: Any) -> float | None:
    """Milliseconds the pipeline's ``warm_up()`` took; None when it has none. A replayed run
    (evaluation/rescore.py) loads nothing and reports its source's load time."""
    if hasattr(pipeline, "recorded_load_ms"):
        recorded: float | None = pipeline.recorded_load_ms
        return recorded
    warm = getattr(pipeline, "warm_up", None)
    if not callable(warm):
        return None
    start = time.perf_counter()
    warm()
    return (time.perf_counter() - start) * 1000.0


def _batch_results(pipeline: Any, batch: Sequence[GoldenQuery], depth: int
                   ) -> list[QueryResult]:
    if hasattr(pipeline, "replay"):  # a recorded run's results (evaluation/rescore.py)
        return list(pipeline.replay(batch, depth))
    if hasattr(pipeline, "run_many"):  # targets that search and answer in one call
        return _run_many(pipeline, batch, depth)
    return [_answer(pipeline, q, *searched, depth)
            for q, searched in zip(batch, _search_batch(pipeline, batch, depth), strict=True)]


def _batch_by_hits(pipeline: Any, golden: GoldenSet, batch: Sequence[GoldenQuery], depth: int,
                   cutoffs: Sequence[int], writer: PerQueryWriter, with_answers: bool,
                   fail_fast: bool, repeat: int = 1, evidence: EvidenceRun | None = None,
                   bounded: bool = False) -> BatchScored:
    """Search (and answer) one batch ``repeat`` times, score it and write its lines: (scores
    — means over the repeats —, answers of the first repeat, every latency, pipeline seconds,
    metrics seconds, per-query repeat stats, the bounds for unjudged hits when ``bounded``
    — means over the repeats too)."""
    spent_pipeline = spent_metrics = 0.0
    runs: list[tuple[list[QueryResult], dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    bounds: list[dict[str, np.ndarray]] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        results = _batch_results(pipeline, batch, depth)
        t1 = time.perf_counter()
        failed = next((r for r in results if r.error), None)
        if fail_fast and failed and failed.error:
            raise QueryFailed(f"query {failed.query_id} raised: "
                              f"{shown_error(failed.error, golden.private)}")
        tables = retrieval_tables(batch, results, depth)
        judged = judged_table(batch, results, depth)
        scores = score_results(batch, results, depth, cutoffs, with_answers=with_answers,
                               tables=tables, judged=judged)
        if bounded:
            bounds.append(bound_scores(tables["doc"], judged, doc_lengths(results, depth),
                                       cutoffs, depth))
        if evidence is not None:
            scores.update(evidence.scores(batch, results, cutoffs))
        runs.append((results, scores, first_relevant_ranks(tables)))
        spent_pipeline += t1 - t0
        spent_metrics += time.perf_counter() - t1
    t1 = time.perf_counter()
    stats = _write_lines(golden, batch, runs, writer, evidence)
    results, scores = runs[0][0], (runs[0][1] if repeat == 1
                                   else mean_scores([r[1] for r in runs]))
    latencies = [r.latency_ms for rs, _, _ in runs for r in rs]
    bound = (bounds[0] if len(bounds) == 1 else mean_scores(bounds)) if bounds else {}
    return (scores, [r.answer for r in results], latencies, spent_pipeline,
            spent_metrics + time.perf_counter() - t1, stats, bound)


def _write_lines(golden: GoldenSet, batch: Sequence[GoldenQuery], runs: Sequence[Any],
                 writer: PerQueryWriter,
                 evidence: EvidenceRun | None = None) -> list[RepeatStats]:
    """One line per query; with repeats, the means as its scores, each repeat in
    ``repeats``, its ``flip_rate`` and ``topk_churn``."""
    results, scores, ranks = runs[0]
    if len(runs) == 1:
        for i, (q, r) in enumerate(zip(batch, results, strict=True)):
            writer.write(record(q, r, {k: v[i] for k, v in scores.items()}, golden.private,
                                {level: v[i] for level, v in ranks.items()},
                                evidence.audit(q.id) if evidence is not None else None))
        return []
    means = mean_scores([r[1] for r in runs])
    stats = query_stats([q.id for q in batch], [r[1] for r in runs], [r[0] for r in runs])
    for i, q in enumerate(batch):
        rec = record(q, results[i], {k: v[i] for k, v in means.items()}, golden.private,
                     {level: v[i] for level, v in ranks.items()},
                     evidence.audit(q.id) if evidence is not None else None)
        rec["repeats"] = [_repeat_entry(record(q, rs[i], {k: v[i] for k, v in sc.items()},
                                               golden.private))
                          for rs, sc, _ in runs]
        rec["flip_rate"], rec["topk_churn"] = stats[i].flip_rate, stats[i].topk_churn
        writer.write(rec)
    return stats


def _repeat_entry(rec: dict[str, Any]) -> dict[str, Any]:
    """A repeat as kept in its query's line: what the pipeline returned and how it scored."""
    return {k: rec[k] for k in ("hits", "answer", "scores", "latency_ms", "error")
            if k in rec}


def _batch_by_codes(pipeline: Any, golden: GoldenSet, batch: Sequence[GoldenQuery], depth: int,
                    cutoffs: Sequence[int], writer: PerQueryWriter,
                    bounded: bool = False) -> BatchScored | None:
    """:func:`_batch_by_hits` for a target with ``coded`` (evaluation/coded.py); None when
    the batch must take the Hit path (a doc listed twice)."""
    coded, seconds = timed_coded_hits(pipeline, batch, depth)
    if coded is None:
        return None
    t1 = time.perf_counter()
    # a replayed run (evaluation/replay.py): its own times and hits texts
    recorded, hits = pipeline.recorded(batch) if hasattr(pipeline, "recorded") else (None, None)
    scores, lines, latencies, bound = score_coded_batch(
        pipeline, batch, coded, depth, cutoffs, golden.private, seconds, bounded,
        recorded=recorded, recorded_hits=hits)
    for line in lines:
        writer.write_line(line)
    return (scores, [None] * len(batch), latencies, seconds, time.perf_counter() - t1, [],
            bound)


def _answer(pipeline: Any, query: GoldenQuery, hits: tuple[Any, ...], error: str | None,
            seconds: float, depth: int) -> QueryResult:
    answer = None
    hits, truncated = hits[:depth], max(len(hits) - depth, 0)
    if error is None:
        error = _validate_hits(hits)
        if error:
            hits = ()
    search_s, answer_s = seconds, None  # the stages' times (spans of the query's trace)
    if error is None and query.ask:
        start = time.perf_counter()
        try:
            answer = pipeline.ask(query.query, hits)
            if not isinstance(answer, Answer):
                error, answer = f"ask returned a {type(answer).__name__}, not an Answer", None
        except Exception as exc:  # noqa: BLE001
            error = _error_text(exc)
            traceback.clear_frames(exc.__traceback__)
        answer_s = time.perf_counter() - start
    return QueryResult(query_id=query.id, hits=hits if error is None else (), answer=answer,
                       latency_ms=(search_s + (answer_s or 0.0)) * 1000.0, error=error,
                       truncated_hits=truncated if error is None else 0, search_ms=search_s * 1e3,
                       answer_ms=None if answer_s is None else answer_s * 1e3)


def _run_many(pipeline: Any, queries: Sequence[GoldenQuery], depth: int) -> list[QueryResult]:
    """``run_many([(text, ask)], k) -> [(hits, answer | None, error | None, seconds)]`` in
    input order; the target may work on several queries at once (see targets.py)."""
    by_id = getattr(pipeline, "keyed_by_id", False)  # a run file looks hits up by query id
    replies = pipeline.run_many([(q.id if by_id else q.query, q.ask) for q in queries], depth)
    results = []
    for q, (hits, answer, error, seconds) in zip(queries, replies, strict=True):
        hits = tuple(hits or ())
        hits, truncated = hits[:depth], max(len(hits) - depth, 0)
        error = error or _validate_hits(hits)
        if (error is None and q.ask and not isinstance(answer, Answer)
                and getattr(pipeline, "answers", True)):
            error = "the target returned no answer for an ask query"
        results.append(QueryResult(query_id=q.id, hits=hits if error is None else (),
                                   answer=answer if error is None and q.ask else None,
                                   latency_ms=seconds * 1000.0, error=error,
                                   truncated_hits=truncated if error is None else 0))
    return results


def build_aggregate(golden: GoldenSet, scores: dict[str, np.ndarray],
                    answers: Sequence[Answer | None], latencies_ms: np.ndarray,
                    load_ms: float | None = None) -> Aggregate:
    queries = golden.queries
    calibration: dict[str, Any] = {}
    if "contains_all" in scores:
        calibrated = calibration_pairs(queries, answers, scores["contains_all"])
        raw = calibration_pairs(queries, answers, scores["contains_all"], _uncalibrated)
        calibration = {"abstention_calibration": calibration_block(*calibrated),
                       "abstention_calibration_raw": calibration_block(*raw)}
        if calibrated[0].size:
            calibration["reliability_bins"] = tuple(reliability_bins(*calibrated))
    split = breakdowns(queries, scores)
    return Aggregate(
        overall=aggregate_block(scores),
        counts=counts(queries),
        by_query_type=split["by_query_type"],
        by_hardcase_category=split["by_hardcase_category"],
        by_metadata_field=split["by_metadata_field"],
        abstention_outcomes=abstention_outcomes(queries, answers),
        latency=_latency(latencies_ms, load_ms),
        **calibration)


def _latency(latencies_ms: np.ndarray, load_ms: float | None) -> dict[str, float] | None:
    """The queries' latency percentiles; ``load_ms``: the warm-up, apart from them."""
    if not latencies_ms.size:
        return None
    block = {"p50_ms": float(np.percentile(latencies_ms, 50)),
             "p95_ms": float(np.percentile(latencies_ms, 95)),
             "mean_ms": float(latencies_ms.mean())}
    return block if load_ms is None else {**block, "load_ms": load_ms}


def _uncalibrated(answer: Answer) -> float | None:
    """The confidence the answerer would report without a calibrator."""
    if answer.raw_confidence is None:
        return answer.confidence
    return 1.0 - answer.raw_confidence if answer.refused else answer.raw_confidence
