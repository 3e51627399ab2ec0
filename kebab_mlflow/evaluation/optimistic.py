"""A recorded run's rows rescored from codes, compact: what ``compare --unjudged`` reads of
both runs under the optimistic judgments (comparison/unjudged.py), without the rescore's Hit
path, its temporary ``per_query.jsonl`` and reading that back (issue 32: 237 s of a 100k-query
compare's 290 s).

The rows come as :class:`CodedLine` records, each decoded from its line's bytes as it is read
(:func:`per_query.read_lines_at`; msgspec, evaluation/line_decoding.py), so a chunk of 1,000
lines holds 100 doc ids a line, not 1,000 parsed lines (~40 KB each). A chunk of rows is
taken here only when the rescore would score it from its hits alone — no answer scored, no
error, no evidence, no repeats, no chunk twice — so :mod:`evaluation.coded`'s tables give the
rescore's scores and first relevant ranks exactly: from one code matrix where every hit is a
document (a run file's: chunk id = doc id), else from two, the chunks' and the documents' in
order of first appearance (``tests/test_run_target.py`` and ``tests/test_unjudged_bounds.py``
check both against the Hit path); any other chunk returns None and is rescored
(evaluation/rescore.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow.evaluation.coded import code_rankings, coded_tables
from kebab_mlflow.evaluation.evaluate import with_ask
from kebab_mlflow.evaluation.per_query import CompactRow
from kebab_mlflow.evaluation.rescore import ask_override, rescore_cutoffs
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.metrics.answers import abstention_outcome
from kebab_mlflow.metrics.retrieval import first_appearance
from kebab_mlflow.metrics.scoring import first_relevant_ranks, table_scores
from kebab_mlflow.records import Hit


@dataclass(frozen=True, slots=True, kw_only=True)
class CodedLine:
    """What the coded rescore reads of a line: its id, its hits' doc ids and chunk ids in rank
    order (``chunk_ids`` None where each is its doc id: a run file's), its first hit as
    recorded, and whether codes score it as the rescore would (``scorable``)."""

    id: str
    doc_ids: tuple[str, ...]
    chunk_ids: tuple[str, ...] | None
    top: tuple[Hit, ...]
    scorable: bool

    @classmethod
    def of(cls, raw: bytes) -> CodedLine:
        """The line's fields, decoded unchecked: :func:`per_query.read_compact` checked it."""
        from kebab_mlflow.evaluation.line_decoding import CODED

        line = CODED.decode(raw)
        top = tuple(Hit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank)
                    for h in line.hits[:1])
        doc_ids = tuple([h.doc_id for h in line.hits])
        chunk_ids = tuple([h.chunk_id for h in line.hits])
        return cls(id=line.id, doc_ids=doc_ids, chunk_ids=None if chunk_ids == doc_ids
                   else chunk_ids, top=top, scorable=line.scorable_with(chunk_ids))

    def doc_ranking(self, depth: int) -> tuple[str, ...]:
        """The documents of the first ``depth`` hits in order of first appearance, as the doc
        metrics rank them (metrics.scoring.retrieval_tables)."""
        firsts = self.doc_ids[:depth]
        return firsts if self.chunk_ids is None else tuple(first_appearance(firsts))


def coded_compact(lines: Sequence[CodedLine], golden: GoldenSet, params: Mapping[str, str],
                  names: Collection[str]) -> list[CompactRow] | None:
    """The rows of :func:`rescore` (intersect) of ``lines`` under ``golden``, read back
    compact with only ``names``; None when some line needs the rescore's Hit path."""
    k = int(params.get("k", "10"))
    if k < 1 or not all(line.scorable for line in lines):
        return None
    by_id = {line.id: line for line in lines}
    wanted = with_ask(golden.subset(set(by_id)), ask_override(params.get("ask")))
    queries = wanted.queries
    rows = [by_id[q.id] for q in queries]
    doc_codes, doc_code = code_rankings([line.doc_ranking(k) for line in rows], k)
    if all(line.chunk_ids is None for line in rows):  # hits are documents: one code matrix
        codes, chunks = doc_codes, None
    else:
        codes, chunk_code = code_rankings([line.chunk_ids or line.doc_ids for line in rows], k)
        chunks = (codes, chunk_code)
    tables, judged = coded_tables(queries, doc_codes, doc_code, k, chunks)
    scores = table_scores(tables, judged, k, rescore_cutoffs(params))
    scores["no_hit_rate"] = ((codes >= 0).sum(axis=1) == 0).astype(float)
    scores["error_rate"] = np.zeros(len(rows))
    # what record() writes of them (NaN as null, ranks as ints), only the scores kept
    kept = [name for name in scores if name in names]
    columns = [[None if math.isnan(v) else v for v in scores[name].tolist()] for name in kept]
    ranks = {level: [None if math.isnan(r) else int(r) for r in v.tolist()]
             for level, v in first_relevant_ranks(tables).items()}
    return [_compact(q, line, dict(zip(kept, (c[i] for c in columns), strict=True)),
                     {level: v[i] for level, v in ranks.items()})
            for i, (q, line) in enumerate(zip(queries, rows, strict=True))]


def _compact(query: GoldenQuery, coded: CodedLine, scores: Mapping[str, float | None],
             ranks: Mapping[str, int | None]) -> CompactRow:
    """The compact row of the line the rescore writes for ``coded`` (:func:`record` of its
    hit-less result: these scores and ranks, its abstention), its first hit as recorded; no
    query text, offset 0 (the optimistic sides have no file to read whole rows from)."""
    outcome = abstention_outcome(query, None)
    top = coded.top[0] if coded.top else None
    return CompactRow(id=query.id, query=None, scores=scores, first_relevant_rank=ranks,
                      abstention=None if outcome is None else str(outcome), flip_rate=None,
                      has_evidence=False, has_hits=top is not None,
                      top_score=None if top is None else float(top.score), refused=None,
                      offset=0)
