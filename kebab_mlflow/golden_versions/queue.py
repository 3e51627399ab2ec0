"""The judging queue: every unjudged hit in the top k of one or more runs, as a YAML file a
curator fills in (``kebab-mlflow judge RUN... [--k 10] [--out to_judge.yaml]``).

An item is one (query, document) pair: a document is *judged* for a query when the golden set
lists it in ``expected_doc_ids`` (grade 0 included), as ``judged_at_k_doc`` counts it. A
document several chunks or several runs retrieved is one item, at its best rank, naming the
runs that retrieved it. Each item has an empty ``grade:``; ``golden merge`` adds the graded
ones back (:mod:`.merge`). An item's ``passage`` is the text the run retrieved — the chunk
(rebuilt from the corpus with the run's chunker, kebab_mlflow/app/judging.py), or the
document for a run file's hits — cut at :data:`PASSAGE_CHARS`. A private set's queue carries
ids and ranks only, no text.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kebab_mlflow.evaluation.rescore import RecordedRun
from kebab_mlflow.golden import GoldenSet
from kebab_mlflow.records import Hit

QUEUE_KIND = "kebab-mlflow judging queue"
PASSAGE_CHARS = 1000  # the passage shown to the curator, at most (whitespace collapsed)
HEADER = """\
kebab-mlflow judging queue: grade each item (0 = not relevant, 1 = relevant, 2 = highly
relevant, any integer >= 0), leave grade empty to skip it; then
  kebab-mlflow golden merge GOLDEN.yaml THIS_FILE [--out NEW.yaml]"""


@dataclass(frozen=True, kw_only=True)
class QueueItem:
    query_id: str
    doc_id: str
    chunk_id: str  # the first chunk of the document that the best rank retrieved
    rank: int  # the best (smallest) rank across the runs
    runs: tuple[str, ...]
    query: str | None = None  # None for a private set
    passage: str | None = None  # the retrieved text (cut), None for a private set or unknown


@dataclass(frozen=True, kw_only=True)
class JudgingQueue:
    golden: GoldenSet
    k: int
    runs: tuple[str, ...]
    items: tuple[QueueItem, ...]

    def to_yaml(self, with_text: bool = True) -> str:
        """The queue file; ``with_text=False`` leaves out every query and passage text."""
        from ruamel.yaml import YAML
        from ruamel.yaml.comments import CommentedMap

        doc = CommentedMap(kind=QUEUE_KIND, golden_set=self.golden.name,
                           golden_sha256=self.golden.digest, k=self.k, runs=list(self.runs),
                           items=[_item_map(item, with_text) for item in self.items])
        doc.yaml_set_start_comment(HEADER)
        buffer = io.StringIO()
        yaml = YAML()
        yaml.width = 100
        yaml.dump(doc, buffer)
        return buffer.getvalue()


def _item_map(item: QueueItem, with_text: bool) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    runs = CommentedSeq(item.runs)
    runs.fa.set_flow_style()
    fields: dict[str, Any] = {"query_id": item.query_id, "doc_id": item.doc_id,
                              "chunk_id": item.chunk_id, "rank": item.rank, "runs": runs}
    if with_text and item.query is not None:
        fields["query"] = item.query
    if with_text and item.passage is not None:
        fields["passage"] = item.passage
    fields["grade"] = None
    return CommentedMap(fields)


def judging_queue(runs: Sequence[RecordedRun], golden: GoldenSet, k: int,
                  passages: Mapping[str, str] | None = None) -> JudgingQueue:
    """Every (query, document) in the top ``k`` of ``runs`` that ``golden`` has not judged, in
    the golden set's query order, then by best rank. Queries of one ``group`` share their
    judgments (golden.py requires it): a document is one item for the group, under its first
    query, and ``golden merge`` grades it for each. ``passages``: doc id → text."""
    owner = _owners(golden)
    best: dict[tuple[str, str], tuple[int, str, list[str]]] = {}
    for run in runs:
        for row in run.rows:
            if row.id not in owner:
                continue
            for hit in row.hits:
                if hit.rank <= k:
                    _keep_best(best, (owner[row.id], hit.doc_id), hit, run.run_id)
    by_query: dict[str, list[tuple[int, str, str, list[str]]]] = {}
    for (qid, doc), (rank, chunk, found_by) in best.items():
        by_query.setdefault(qid, []).append((rank, doc, chunk, found_by))
    items = []
    for q in golden.queries:
        unjudged = sorted(entry for entry in by_query.get(q.id, ())
                          if entry[1] not in q.expected_doc_ids)
        items += [QueueItem(query_id=q.id, doc_id=doc, chunk_id=chunk, rank=rank,
                            runs=tuple(found_by),
                            query=None if golden.private else q.query,
                            passage=None if golden.private else _passage(passages, doc))
                  for rank, doc, chunk, found_by in unjudged]
    return JudgingQueue(golden=golden, k=k, runs=tuple(r.run_id for r in runs),
                        items=tuple(items))


def _owners(golden: GoldenSet) -> dict[str, str]:
    """Query id → the query its items are listed under: itself, or its group's first."""
    first: dict[str, str] = {}
    return {q.id: first.setdefault(q.group, q.id) if q.group is not None else q.id
            for q in golden.queries}


def _keep_best(best: dict[tuple[str, str], tuple[int, str, list[str]]], key: tuple[str, str],
               hit: Hit, run_id: str) -> None:
    rank, chunk, found_by = best.get(key, (hit.rank + 1, "", []))
    if run_id not in found_by:
        found_by.append(run_id)
    if hit.rank < rank:
        rank, chunk = hit.rank, hit.chunk_id
    best[key] = (rank, chunk, found_by)


def _passage(passages: Mapping[str, str] | None, doc_id: str) -> str | None:
    text = (passages or {}).get(doc_id)
    return None if text is None else cut_passage(text)


def cut_passage(text: str) -> str:
    """``text`` with its whitespace collapsed, cut at :data:`PASSAGE_CHARS` (`` …`` added)."""
    text = " ".join(text.split())
    return text if len(text) <= PASSAGE_CHARS else text[:PASSAGE_CHARS] + " …"


def with_passages(queue: JudgingQueue, passages: Mapping[tuple[str, str], str]) -> JudgingQueue:
    """``queue`` with each item's passage: ``passages[(doc_id, chunk_id)]``, cut; items
    without one keep theirs. A private set's queue is returned as it is (no text, ever)."""
    if queue.golden.private:
        return queue
    items = tuple(item if (text := passages.get((item.doc_id, item.chunk_id))) is None
                  else dataclasses.replace(item, passage=cut_passage(text))
                  for item in queue.items)
    return dataclasses.replace(queue, items=items)
