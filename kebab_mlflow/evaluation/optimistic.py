"""A recorded run's rows rescored from doc codes, compact: what ``compare --unjudged`` reads of
both runs under the optimistic judgments (comparison/unjudged.py), without the rescore's Hit
path, its temporary ``per_query.jsonl`` and reading that back (issue 32: 237 s of a 100k-query
compare's 290 s).

The rows come as :class:`CodedLine` records, each decoded from its line's bytes as it is read
(:func:`per_query.read_lines_at`; msgspec, evaluation/line_decoding.py), so a chunk of 1,000
lines holds 100 doc ids a line, not 1,000 parsed lines (~40 KB each). A chunk of rows is
taken here only when the rescore would score it as a run file is scored — no answer scored,
no error, no evidence, no repeats, every hit a document (chunk id = doc id, none twice) — so
:mod:`evaluation.coded`'s tables give the rescore's scores and first relevant ranks exactly
(``tests/test_run_target.py`` checks that path against the Hit path); any other chunk returns
None and is rescored (evaluation/rescore.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.evaluation.coded import code_rankings, coded_tables
from kebab_mlflow.evaluation.evaluate import with_ask
from kebab_mlflow.evaluation.per_query import CompactRow, PerQueryRow, record
from kebab_mlflow.evaluation.rescore import ask_override, rescore_cutoffs
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.metrics.scoring import first_relevant_ranks, table_scores
from kebab_mlflow.records import Hit, QueryResult


@dataclass(frozen=True, slots=True, kw_only=True)
class CodedLine:
    """What the coded rescore reads of a line: its id, its hits' doc ids in rank order, its
    first hit as recorded, and whether the rescore scores it as a run file's (``plain``)."""

    id: str
    doc_ids: tuple[str, ...]
    top: tuple[Hit, ...]
    plain: bool

    @classmethod
    def of(cls, raw: bytes) -> CodedLine:
        """The line's fields, decoded unchecked: :func:`per_query.read_compact` checked it."""
        from kebab_mlflow.evaluation.line_decoding import CODED

        line = CODED.decode(raw)
        top = tuple(Hit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank)
                    for h in line.hits[:1])
        doc_ids = tuple([h.doc_id for h in line.hits])
        return cls(id=line.id, doc_ids=doc_ids, top=top, plain=line.plain_with(doc_ids))


def coded_compact(lines: Sequence[CodedLine], golden: GoldenSet,
                  params: Mapping[str, str], tags: Mapping[str, str],
                  names: Collection[str]) -> list[CompactRow] | None:
    """The rows of :func:`rescore` (intersect) of ``lines`` under ``golden``, read back
    compact with only ``names``; None when some line needs the rescore's Hit path."""
    k = int(params.get("k", "10"))
    if k < 1 or not all(line.plain for line in lines):
        return None
    by_id = {line.id: line for line in lines}
    wanted = with_ask(golden.subset(set(by_id)), ask_override(params.get("ask")))
    queries = wanted.queries
    rows = [by_id[q.id] for q in queries]
    codes, doc_code = code_rankings([line.doc_ids for line in rows], k)
    tables, judged = coded_tables(queries, codes, doc_code, k)
    scores = table_scores(tables, judged, k, rescore_cutoffs(params))
    scores["no_hit_rate"] = ((codes >= 0).sum(axis=1) == 0).astype(float)
    scores["error_rate"] = np.zeros(len(rows))
    ranks = {level: v.tolist() for level, v in first_relevant_ranks(tables).items()}
    columns = {name: v.tolist() for name, v in scores.items()}
    private = tags.get(vocab.PRIVATE) == "true"
    return [_compact(q, line, {n: c[i] for n, c in columns.items()},
                     {level: v[i] for level, v in ranks.items()}, private, names)
            for i, (q, line) in enumerate(zip(queries, rows, strict=True))]


def _compact(query: GoldenQuery, coded: CodedLine, scores: Mapping[str, float],
             ranks: Mapping[str, float], private: bool, names: Collection[str]) -> CompactRow:
    """The compact row of the line the rescore writes for ``coded``: :func:`record` of its
    hit-less result (scores, ranks and abstention as written), its first hit as recorded."""
    line = record(query, QueryResult(query_id=query.id, hits=(), answer=None, latency_ms=0.0),
                  scores, private, ranks)
    row = PerQueryRow(id=query.id, query=None, hits=coded.top, answer=None,
                      scores=line["scores"], latency_ms=0.0, error=None,
                      first_relevant_rank=line["first_relevant_rank"],
                      abstention=line.get("abstention"))
    # offset 0: the optimistic sides have no source file to read whole rows from
    return CompactRow(row, 0, keep_query=False, names=names)
