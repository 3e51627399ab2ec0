"""``per_query.jsonl``: one JSON object per query — an interface that compare reads back and
users ``jq``. Core keys (more may be added)::

    {"id", "query", "hits": [{"rank", "chunk_id", "doc_id", "score"}],
     "answer": {"text", "citations", "refusal_reason", "confidence", "raw_confidence",
                "similarity"} | null,
     "scores": {metric: value | null}, "latency_ms", "error",
     "first_relevant_rank": {level: rank | 0 (a miss) | null (no ground truth)},
     "truncated_hits": N,   # only when the pipeline returned N hits past k (dropped)
     "stage_ms": {"search", "answer"},  # ms the query loop measured for each stage (they
                            # sum to latency_ms; answer only for an ask query); absent when
                            # the target reports one time per query (a run file, run_many)
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

Hits and answers are written and read back by one definition (:func:`hit_fields`,
:func:`answer_fields` and the ``_FIELDS`` table): :func:`read_per_query` gives back the same
:class:`~kebab_mlflow.records.Hit` and :class:`~kebab_mlflow.records.Answer` records the run
scored (hit text empty: never written).
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from kebab_mlflow.errors import PerQueryError, Problem, ScoreNotKept
from kebab_mlflow.files import file_digest  # noqa: F401 - tests read it from here
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.answers import AbstentionOutcome, abstention_outcome
from kebab_mlflow.records import Answer, Hit, QueryResult


def record(query: GoldenQuery, result: QueryResult, scores: Mapping[str, float],
           private: bool, first_relevant: Mapping[str, float] | None = None,
           evidence: list[dict[str, object]] | None = None) -> dict[str, Any]:
    """One line of ``per_query.jsonl``. ``first_relevant``: level → rank of the first relevant
    hit (0 = none within the depth, NaN = no ground truth), written as ``first_relevant_rank``
    so that ``compare`` can tell a regression at any retrieval depth (``mrr`` needs 10)."""
    rec: dict[str, Any] = {
        "id": query.id,
        "query": None if private else query.query,
        "hits": [hit_fields(h) for h in result.hits],
        "answer": None if result.answer is None else answer_fields(result.answer, private),
        "scores": {k: (None if v is None or math.isnan(v) else float(v))
                   for k, v in scores.items()},
        "latency_ms": result.latency_ms,
        "error": result.error,
    }
    if result.search_ms is not None:  # the stages the query loop timed (traces' spans)
        rec["stage_ms"] = {"search": result.search_ms, **(
            {} if result.answer_ms is None else {"answer": result.answer_ms})}
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


def hit_fields(hit: Hit) -> dict[str, Any]:
    """A hit as a line holds it (read back by :func:`_hit`): no text."""
    return {"rank": hit.rank, "chunk_id": hit.chunk_id, "doc_id": hit.doc_id, "score": hit.score}


def answer_fields(answer: Answer, private: bool = False) -> dict[str, Any]:
    """An answer as a line holds it (read back by :func:`_answer`); ``private``: no text."""
    return {"text": None if private else answer.text, "citations": list(answer.citations),
            "refusal_reason": answer.refusal_reason, "confidence": answer.confidence,
            "raw_confidence": answer.raw_confidence, "similarity": answer.similarity}


class PerQueryWriter:
    """Streams records to disk and keeps the running sha256 of the exact bytes written. The
    bytes go out BLOCK at a time on a second thread, whose write and hash leave the GIL: a
    1M-query run writes 8.3 GB while its next batches are scored. An error writing is raised
    by the next block handed on, else by :meth:`close` (which every caller reaches)."""

    BLOCK = 4 << 20
    QUEUED = 4  # blocks waiting at most: the writer holds ~20 MiB, not the file

    def __init__(self, path: Path):
        self.path = path
        self._fh: IO[bytes] = path.open("wb")
        self._sha = hashlib.sha256()
        self.count = 0
        self._pending: list[bytes] = []
        self._size = 0
        self._blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=self.QUEUED)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="kebab-per-query", daemon=True)
        self._thread.start()

    def write(self, rec: Mapping[str, Any]) -> None:
        self.write_line(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")

    def write_line(self, line: str) -> None:
        """One line already serialised (ending in a newline)."""
        data = line.encode("utf-8")
        self._pending.append(data)
        self._size += len(data)
        self.count += 1
        if self._size >= self.BLOCK:
            self._hand_on()

    def _hand_on(self) -> None:
        if self._error is not None:
            raise self._error
        block, self._pending, self._size = b"".join(self._pending), [], 0
        self._blocks.put(block)

    def _drain(self) -> None:
        while (block := self._blocks.get()) is not None:
            if self._error is None:
                try:
                    self._fh.write(block)
                    self._sha.update(block)
                except BaseException as exc:  # raised again on the caller's thread
                    self._error = exc

    def close(self) -> str:
        try:
            if self._pending and self._error is None:
                self._hand_on()
            self._blocks.put(None)
            self._thread.join()
        finally:
            self._fh.close()
        if self._error is not None:
            raise self._error
        return self._sha.hexdigest()


@dataclass(frozen=True, kw_only=True)
class PerQueryRow:
    """One line read back. ``answer.text`` is ``""`` where the line holds null — a private
    golden set's run (its ``kebab.private`` tag says so) withholds every answer's text; the
    record stays an :class:`Answer`, whose text is a string for the metrics that read it."""

    id: str
    query: str | None
    hits: tuple[Hit, ...]
    answer: Answer | None
    scores: dict[str, float | None]
    latency_ms: float
    error: str | None
    # level -> rank, 0 = miss, None = no truth
    first_relevant_rank: dict[str, int | None] | None = None
    abstention: str | None = None  # an unanswerable ask query's AbstentionOutcome
    flip_rate: float | None = None  # run --repeat: share of repeats off the modal outcome
    evidence: tuple[dict[str, Any], ...] | None = None  # how its evidence spans resolved
    truncated_hits: int = 0  # hits past k the pipeline returned (dropped); rescore replays it
    stage_ms: dict[str, float] | None = None  # {"search", "answer"}: as the query loop timed

    # what compare reads of a row, the same on a CompactRow
    def score(self, name: str) -> float | None:
        return self.scores.get(name)

    def has_value(self, name: str) -> bool:
        return self.scores.get(name) is not None

    @property
    def score_names(self) -> Collection[str]:
        return self.scores

    @property
    def has_hits(self) -> bool:
        return bool(self.hits)

    @property
    def top_score(self) -> float | None:
        return float(self.hits[0].score) if self.hits else None

    @property
    def refused(self) -> bool | None:
        """Whether its answer is a refusal; None without an answer."""
        return None if self.answer is None else self.answer.refused

    @property
    def has_evidence(self) -> bool:
        return self.evidence is not None


def read_per_query(path: Path, shown_as: str | None = None) -> Iterator[PerQueryRow]:
    """Read rows back; any malformed line is a PerQueryError naming file and line —
    ``shown_as`` instead of ``path`` for a download about to be deleted (compare names the
    run and its artifact, not a temporary folder that will not exist). A line's ``repeats``
    and ``topk_churn`` (run --repeat) are not read back: nothing reads them again (compare
    reads ``flip_rate``), and parsing every repeat's hits would multiply the reading."""
    where = shown_as or str(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            yield _row(raw, f"{where}:{lineno}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _hit_ok(hit: Any) -> bool:
    return (isinstance(hit, dict) and isinstance(hit.get("chunk_id"), str)
            and isinstance(hit.get("doc_id"), str) and _count(hit.get("rank"))
            and hit["rank"] >= 1 and _number(hit.get("score")))


def top_hit(hits: Sequence[dict[str, Any]]) -> tuple[Hit, ...]:
    """The first of a line's hits (as :func:`_hit` reads it), none without hits."""
    return tuple(map(_hit, hits[:1]))


def _hit(hit: dict[str, Any]) -> Hit:
    """A hit :func:`hit_fields` wrote, back as a Hit (its score as written: an int stays one,
    so that rescore writes the same bytes)."""
    return Hit(chunk_id=hit["chunk_id"], doc_id=hit["doc_id"], score=hit["score"],
               rank=hit["rank"])


#: An answer's keys, each with its rule; any may be absent (older files): None, or () for
#: the citations.
_ANSWER: dict[str, Callable[[Any], bool]] = {
    "text": lambda v: v is None or isinstance(v, str),
    "citations": lambda v: v is None or (isinstance(v, list)
                                         and all(isinstance(c, str) for c in v)),
    "refusal_reason": lambda v: v is None or isinstance(v, str),
    "confidence": lambda v: v is None or _number(v),
    "raw_confidence": lambda v: v is None or _number(v),
    "similarity": lambda v: v is None or _number(v),
}


def _answer_ok(answer: Any) -> bool:
    return isinstance(answer, dict) and all(ok(answer.get(k)) for k, ok in _ANSWER.items())


def _answer(answer: dict[str, Any]) -> Answer:
    """An answer :func:`answer_fields` wrote, back as an Answer; a withheld (private) text
    is read as ``""`` (see :class:`PerQueryRow`)."""
    return Answer(text=answer.get("text") or "", citations=tuple(answer.get("citations") or ()),
                  refusal_reason=answer.get("refusal_reason"),
                  confidence=answer.get("confidence"),
                  raw_confidence=answer.get("raw_confidence"),
                  similarity=answer.get("similarity"))


def _optional(rule: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or rule(value)


#: Every key a line is read back with: (value when absent, rule, what the rule asks). Keys
#: absent from older files (first_relevant_rank, abstention, flip_rate, evidence,
#: truncated_hits) have their defaults; every broken rule of a line is reported at once.
_FIELDS: dict[str, tuple[Any, Callable[[Any], bool], str]] = {
    "id": (None, lambda v: isinstance(v, str), "must be a string"),
    "hits": (None, lambda v: isinstance(v, list) and all(_hit_ok(h) for h in v),
             "must be a list of {rank, chunk_id, doc_id, score}"),
    "scores": (None, lambda v: isinstance(v, dict) and all(
        x is None or _number(x) for x in v.values()),
        "must map metric names to numbers or null"),
    "answer": (None, _optional(_answer_ok),
               "must be an object {text, citations, refusal_reason, confidence, "
               "raw_confidence, similarity} or null"),
    "latency_ms": (0.0, _number, "must be a number"),
    "error": (None, _optional(lambda v: isinstance(v, str)), "must be a string or null"),
    "query": (None, _optional(lambda v: isinstance(v, str)), "must be a string or null"),
    "first_relevant_rank": (None, _optional(lambda v: isinstance(v, dict) and all(
        x is None or _count(x) for x in v.values())),
        "must map levels to ranks >= 0 or null"),
    "abstention": (None, _optional(lambda v: v in set(AbstentionOutcome)),
                   f"must be one of {', '.join(AbstentionOutcome)} or absent"),
    "flip_rate": (None, _optional(lambda v: _number(v) and 0 <= v <= 1),
                  "must be a number in [0, 1] or absent"),
    "evidence": (None, _optional(lambda v: isinstance(v, list) and all(
        isinstance(e, dict) for e in v)), "must be a list of objects"),
    "truncated_hits": (0, _count, "must be an integer >= 0"),
    "stage_ms": (None, _optional(lambda v: isinstance(v, dict) and all(
        _number(x) for x in v.values())), "must map stages to milliseconds or be absent"),
}


def _json_object(raw: bytes, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PerQueryError("unreadable per_query.jsonl", [Problem(f"not JSON: {exc}", where)]) \
            from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise PerQueryError("unreadable per_query.jsonl",
                            [Problem("JSON nested too deeply", where)]) from None
    if not isinstance(rec, dict):
        raise PerQueryError("unreadable per_query.jsonl", [Problem("not an object", where)])
    return rec


def _row(raw: bytes, where: str, top_hit_only: bool = False) -> PerQueryRow:
    """The line as a row, every field checked. ``top_hit_only``: only the first hit becomes a
    Hit record (all are still checked) — what a CompactRow reads of them; building the other
    99 made the compact read 1.7× slower."""
    rec = _json_object(raw, where)
    v = {name: rec.get(name, default) for name, (default, _, _) in _FIELDS.items()}
    problems = [Problem(f"'{name}' {what}", where)
                for name, (_, ok, what) in _FIELDS.items() if not ok(v[name])]
    if problems:
        raise PerQueryError("unreadable per_query.jsonl", problems)
    hits = v["hits"][:1] if top_hit_only else v["hits"]
    return PerQueryRow(id=v["id"], query=v["query"], hits=tuple(map(_hit, hits)),
                       answer=None if v["answer"] is None else _answer(v["answer"]),
                       scores=v["scores"], latency_ms=float(v["latency_ms"]), error=v["error"],
                       first_relevant_rank=v["first_relevant_rank"], abstention=v["abstention"],
                       flip_rate=None if v["flip_rate"] is None else float(v["flip_rate"]),
                       evidence=None if v["evidence"] is None else tuple(v["evidence"]),
                       truncated_hits=v["truncated_hits"], stage_ms=v["stage_ms"])


def _fast_row(raw: bytes, top_hit_only: bool = False) -> PerQueryRow | None:
    """:func:`_row` by msgspec (evaluation/line_decoding.py): the compact read of 100k lines
    of 100 hits in 4.3 s of CPU instead of 15 s; None when its structs refuse the line:
    :func:`_row` then reads it, or reports it."""
    from kebab_mlflow.evaluation import line_decoding as ld

    try:
        line = ld.LINE.decode(raw)
    except ld.REFUSED:
        return None
    top = line.hits[:1] if top_hit_only else line.hits
    answer = line.answer
    return PerQueryRow(
        id=line.id, query=line.query,
        hits=tuple(Hit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank)
                   for h in top),
        answer=None if answer is None else Answer(
            text=answer.text or "", citations=tuple(answer.citations or ()),
            refusal_reason=answer.refusal_reason, confidence=answer.confidence,
            raw_confidence=answer.raw_confidence, similarity=answer.similarity),
        scores=line.scores, latency_ms=line.latency_ms, error=line.error,
        first_relevant_rank=line.first_relevant_rank, abstention=line.abstention,
        flip_rate=line.flip_rate,
        evidence=None if line.evidence is None else tuple(line.evidence),
        truncated_hits=line.truncated_hits, stage_ms=line.stage_ms)


# ---------------------------------------------------------------------------------------------
# compact rows: what compare keeps of a line, never its hit list (issue 32)

_LAYOUTS: dict[tuple[tuple[str, ...], frozenset[str] | None], _Layout] = {}  # shared by rows
_RANKS: dict[tuple[tuple[str, int | None], ...], Mapping[str, int | None]] = {}


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where a row's scores are: ``kept`` maps a kept name to (its place in the values
    array, its bit); ``bits``, every name of the line to its bit in the row's None mask."""

    kept: dict[str, tuple[int, int]]
    bits: dict[str, int]

    @classmethod
    def of(cls, every: tuple[str, ...], names: frozenset[str] | None) -> _Layout:
        """The layout of a line with the scores ``every`` of which ``names`` are kept (None:
        all), made once: the kept names are picked only then, not a row."""
        layout = _LAYOUTS.get((every, names))
        if layout is None:
            bits = {n: i for i, n in enumerate(every)}
            kept = every if names is None else [n for n in every if n in names]
            layout = _LAYOUTS.setdefault((every, names), cls(
                kept={n: (i, bits[n]) for i, n in enumerate(kept)}, bits=bits))
        return layout


class CompactRow:
    """One ``per_query.jsonl`` line as compare needs it: the scores it reads packed in an
    array (one :class:`_Layout` shared by every row with the same names), which of all the
    line's scores are None (a bit mask: compare's "metrics with values"), the first relevant
    ranks (shared by every row with the same ones), whether there are hits and the top hit's
    score, the answer's refusal flag, and the line's byte ``offset`` to read the whole row
    again (:func:`read_rows_at`). ``query`` is None when not kept."""

    __slots__ = ("_layout", "_nones", "_values", "abstention", "first_relevant_rank", "flip_rate",
                 "has_evidence", "has_hits", "id", "offset", "query", "refused", "top_score")

    def __init__(self, *, id: str, query: str | None, scores: Mapping[str, float | None],
                 first_relevant_rank: Mapping[str, int | None] | None, abstention: str | None,
                 flip_rate: float | None, has_evidence: bool, has_hits: bool,
                 top_score: float | None, refused: bool | None, offset: int,
                 names: frozenset[str] | None = None):
        """``names``: keep only these of ``scores`` (a 1M-query compare reads 5 of 53: the
        other values would be 1.6 GB of its two sides); the others' names stay known."""
        self.id = id
        self.query = query
        self._layout = _Layout.of(tuple(scores), names)
        self._values = array("d", [math.nan if (v := scores[n]) is None else v
                                   for n in self._layout.kept])
        self._nones = sum(1 << i for i, v in enumerate(scores.values()) if v is None)
        self.first_relevant_rank = _shared_ranks(first_relevant_rank)
        self.abstention = abstention
        self.flip_rate = flip_rate
        self.has_evidence = has_evidence
        self.has_hits = has_hits
        self.top_score = top_score
        self.refused = refused
        self.offset = offset

    @classmethod
    def of(cls, row: PerQueryRow, offset: int, keep_query: bool = True,
           names: frozenset[str] | None = None) -> CompactRow:
        """``row`` (the line at byte ``offset``) compact; its query text only if kept."""
        return cls(id=row.id, query=row.query if keep_query else None, scores=row.scores,
                   first_relevant_rank=row.first_relevant_rank, abstention=row.abstention,
                   flip_rate=row.flip_rate, has_evidence=row.has_evidence,
                   has_hits=row.has_hits, top_score=row.top_score, refused=row.refused,
                   offset=offset, names=names)

    def share_strings(self, twin: QueryRow) -> None:
        """Hold ``twin``'s id and, when equal, its query text and top score instead of copies:
        both sides of a comparison carry the same ones (1M queries: ~170 bytes a row)."""
        self.id = twin.id
        if self.query == twin.query:
            self.query = twin.query
        if self.top_score == twin.top_score:
            self.top_score = twin.top_score

    def score(self, name: str) -> float | None:
        """The score, None when the line has none; raises ScoreNotKept for one left out."""
        place = self._layout.kept.get(name)
        if place is None:
            if name in self._layout.bits:
                raise ScoreNotKept(name)
            return None
        i, bit = place
        return None if self._nones >> bit & 1 else self._values[i]

    def has_value(self, name: str) -> bool:
        """Whether the line has a value for this score, kept or not."""
        bit = self._layout.bits.get(name)
        return bit is not None and not self._nones >> bit & 1

    @property
    def score_names(self) -> Collection[str]:
        """Every score name of the line, kept or not, as the one collection every row with the
        same names shares (compare tells the distinct collections apart by identity)."""
        return self._layout.bits

    @property
    def scores(self) -> dict[str, float | None]:
        """The kept scores as a dict (built on each call: :meth:`score` reads one)."""
        return {n: self.score(n) for n in self._layout.kept}


def _shared_ranks(ranks: Mapping[str, int | None] | None) -> Mapping[str, int | None] | None:
    if ranks is None:
        return None
    key = tuple(ranks.items())
    shared = _RANKS.get(key)
    if shared is None:
        shared = _RANKS.setdefault(key, MappingProxyType(dict(ranks)))
    return shared


#: A row as compare reads it: parsed whole (in memory, tests) or compact (from a file).
QueryRow = PerQueryRow | CompactRow


def read_compact(path: Path, shown_as: str | None = None, keep_query: bool = True,
                 names: Collection[str] | None = None,
                 twins: Mapping[str, QueryRow] | None = None) -> Iterator[CompactRow]:
    """Read rows back compact, checked as :func:`read_per_query` checks them (the same
    errors), each with its line's byte offset. ``names``: keep only these scores. ``twins``:
    rows by id (the other side's) whose id and query strings an equal row shares."""
    where = shown_as or str(path)
    kept = None if names is None else frozenset(names)
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                row = _fast_row(raw, top_hit_only=True) or _row(raw, f"{where}:{lineno}",
                                                                  top_hit_only=True)
                compact = CompactRow.of(row, offset, keep_query, kept)
                if twins is not None and (twin := twins.get(compact.id)) is not None:
                    compact.share_strings(twin)
                yield compact
            offset += len(raw)


def read_lines_at(path: Path, offsets: Iterable[int]) -> Iterator[bytes]:
    """The lines at these byte offsets, as bytes: for lines that :func:`read_compact` has read
    (and checked) from the same file."""
    with path.open("rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            yield fh.readline()


def read_rows_at(path: Path, offsets: Iterable[int], shown_as: str | None = None
                 ) -> Iterator[PerQueryRow]:
    """The whole rows at these byte offsets (from :class:`CompactRow`), in the order given
    (msgspec: SciFact's 2 × 300 lines of 100 hits, compare's bounds, in a fifth of the time)."""
    where = shown_as or str(path)
    with path.open("rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            raw = fh.readline()
            yield _fast_row(raw) or _row(raw, f"{where}@{offset}")
