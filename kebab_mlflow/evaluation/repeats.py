"""``run --repeat N``: every query run N times, for nondeterministic pipelines (an LLM
answering, an approximate index, an HTTP service).

The query stays the unit: its ``scores`` in ``per_query.jsonl`` are the means over its repeats
(NaN where every repeat is NaN), so every metric is a mean over repeats and ``compare`` pairs
per-query means. Each repeat is kept in the line's ``repeats`` list. Per query:

* ``flip_rate``: the share of repeats whose outcome (every score, and whether it refused)
  differs from the most common one — 0 for a deterministic pipeline; > 0 makes it *flaky*;
* ``topk_churn``: the mean share of the first repeat's top-k chunk ids missing from each
  later repeat (a reordering within the top k is not churn).

The run's ``repeats`` block (``aggregate.json``, MLflow metrics ``repeats/...``) has ``n``,
``flaky_queries`` (count), ``flaky_share`` and ``topk_churn``; ``flaky_queries.json`` lists the
flaky queries' ids and flip rates.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kebab_mlflow.records import QueryResult

FLAKY_FILE = "flaky_queries.json"


@dataclass(frozen=True, kw_only=True)
class RepeatStats:
    """One query's stability over its repeats."""

    query_id: str
    flip_rate: float
    topk_churn: float


def mean_scores(per_repeat: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per metric, the per-query mean over the repeats (NaN where every repeat is NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
        return {name: np.nanmean(np.stack([r[name] for r in per_repeat]), axis=0)
                for name in per_repeat[0]}


def _outcome(scores: Mapping[str, float], result: QueryResult) -> tuple[object, ...]:
    values = tuple((k, None if math.isnan(v) else round(float(v), 9))
                   for k, v in sorted(scores.items()))
    refused = result.answer.refused if result.answer is not None else None
    return (*values, refused, result.error is not None)


def flip_rate(outcomes: Sequence[tuple[object, ...]]) -> float:
    """The share of outcomes that differ from the most common one."""
    most = Counter(outcomes).most_common(1)[0][1]
    return 1.0 - most / len(outcomes)


def topk_churn(results: Sequence[QueryResult]) -> float:
    """Mean share of the first repeat's chunk ids missing from each later repeat's."""
    first = {h.chunk_id for h in results[0].hits}
    if not first or len(results) < 2:
        return 0.0
    return float(np.mean([len(first - {h.chunk_id for h in r.hits}) / len(first)
                          for r in results[1:]]))


def query_stats(query_ids: Sequence[str], per_repeat: Sequence[Mapping[str, np.ndarray]],
                results: Sequence[Sequence[QueryResult]]) -> list[RepeatStats]:
    """Each query's flip rate and top-k churn; ``results[r][i]``: repeat r of query i."""
    out = []
    for i, qid in enumerate(query_ids):
        outcomes = [_outcome({k: v[i] for k, v in scores.items()}, rs[i])
                    for scores, rs in zip(per_repeat, results, strict=True)]
        out.append(RepeatStats(query_id=qid, flip_rate=flip_rate(outcomes),
                               topk_churn=topk_churn([rs[i] for rs in results])))
    return out


def repeats_block(n: int, stats: Sequence[RepeatStats]) -> dict[str, float] | None:
    """The run's ``repeats`` block; None for a single run."""
    if n < 2 or not stats:
        return None
    flaky = sum(s.flip_rate > 0 for s in stats)
    return {"n": float(n), "flaky_queries": float(flaky), "flaky_share": flaky / len(stats),
            "topk_churn": float(np.mean([s.topk_churn for s in stats]))}


def write_flaky_list(folder: Path, stats: Sequence[RepeatStats]) -> Path:
    """``flaky_queries.json``: the flaky queries, most flaky first (ids only: never text)."""
    flaky = sorted((s for s in stats if s.flip_rate > 0), key=lambda s: (-s.flip_rate,
                                                                        s.query_id))
    path = folder / FLAKY_FILE
    path.write_text(json.dumps([{"id": s.query_id, "flip_rate": s.flip_rate,
                                 "topk_churn": s.topk_churn} for s in flaky], indent=1))
    return path
