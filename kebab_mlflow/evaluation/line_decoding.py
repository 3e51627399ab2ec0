"""``per_query.jsonl`` lines decoded by msgspec into typed structs: what compare reads of every
line (issue 32), without ``json.loads`` building 100 hit dicts a line and Python checking them.

msgspec (a C library) checks types while it decodes, so a struct here is exactly as strict as
per_query's ``_FIELDS`` rules, or stricter: a line these structs refuse (wrong type, a rank
below 1, a big integer, bad UTF-8, anything else) is read again by the ``_FIELDS`` path, which
either accepts it or reports every problem with its file:line — so errors stay the same, and
the fast path only ever returns rows the checked path would return. Unknown keys are skipped
(``repeats`` and ``topk_churn``, as :func:`per_query.read_per_query` skips them).

Measured: docs/performance.md ("msgspec decoding, lean bound lines, blocked MDE draws").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec

Rank = Annotated[int, msgspec.Meta(ge=1)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Share = Annotated[float, msgspec.Meta(ge=0, le=1)]
Abstention = Literal["correct_refusal", "boundary_partial", "incorrect_answer"]


class HitLine(msgspec.Struct, gc=False):
    """A hit as :func:`per_query.hit_fields` writes it (every key required). Untracked by the
    cyclic GC (it holds only strings and numbers, so it is in no cycle): a read of 100k lines
    makes ten million of them."""

    rank: Rank
    chunk_id: str
    doc_id: str
    score: int | float  # an int stays one (rescore writes the same bytes)


class AnswerLine(msgspec.Struct):
    """An answer as :func:`per_query.answer_fields` writes it; any key may be absent."""

    text: str | None = None
    citations: list[str] | None = None
    refusal_reason: str | None = None
    confidence: float | None = None
    raw_confidence: float | None = None
    similarity: float | None = None


class Line(msgspec.Struct):
    """A whole line, as per_query's ``_FIELDS`` reads it (the same defaults)."""

    id: str
    hits: list[HitLine]
    scores: dict[str, float | None]
    answer: AnswerLine | None = None
    latency_ms: float = 0.0
    error: str | None = None
    query: str | None = None
    first_relevant_rank: dict[str, Count | None] | None = None
    abstention: Abstention | None = None
    flip_rate: Share | None = None
    evidence: list[dict[str, Any]] | None = None
    truncated_hits: Count = 0
    stage_ms: dict[str, float] | None = None


class CodedFields(msgspec.Struct):
    """What the coded rescore reads of a line already checked (evaluation/optimistic.py)."""

    id: str
    hits: list[HitLine]
    scores: dict[str, float | None]
    answer: Any = None
    error: Any = None
    evidence: Any = None
    flip_rate: Any = None
    repeats: Any = msgspec.UNSET

    def plain_with(self, doc_ids: Sequence[str]) -> bool:
        """A line the rescore scores as a run file's: hits only, each a distinct document,
        given the hits' doc ids (list comprehensions: twice as fast as a generator per hit)."""
        return self.scorable_with(doc_ids) and [h.chunk_id for h in self.hits] == list(doc_ids)

    def scorable_with(self, chunk_ids: Sequence[str]) -> bool:
        """Whether codes score the line as the rescore would (evaluation/optimistic.py): hits
        only — no answer, error, evidence or repeats — each a distinct chunk, given their
        chunk ids. A chunk twice is the Hit path's error."""
        if self.answer is not None or self.error is not None or self.evidence is not None \
                or self.flip_rate is not None or self.repeats is not msgspec.UNSET \
                or "contains_all" in self.scores:
            return False
        return len(set(chunk_ids)) == len(chunk_ids)


class ReplayFields(CodedFields):
    """What a rescore replaying a file by codes reads of a line already checked
    (evaluation/replay.py): :class:`CodedFields` and the times the line recorded."""

    latency_ms: float = 0.0
    stage_ms: dict[str, int | float] | None = None  # as json.loads reads them
    truncated_hits: int = 0

    def replayable_with(self, doc_ids: Sequence[str]) -> bool:
        """:meth:`plain_with`, every hit score a float and the hits ranked 1..n: a code
        matrix of float64 scores writes them back as they are (an int score would come back
        as a float) and ranks them by position (a Python target may have ranked them
        otherwise, and the Hit path writes its ranks back)."""
        return self.plain_with(doc_ids) and all([type(h.score) is float for h in self.hits]) \
            and [h.rank for h in self.hits] == list(range(1, len(self.hits) + 1))


class RecordedHits(msgspec.Struct):
    """A line's ``hits`` as the bytes it holds: a replay writes them back unparsed."""

    hits: msgspec.Raw = msgspec.Raw(b"[]")


LINE = msgspec.json.Decoder(Line)
CODED = msgspec.json.Decoder(CodedFields)
REPLAY = msgspec.json.Decoder(ReplayFields)
RECORDED_HITS = msgspec.json.Decoder(RecordedHits)
#: what a struct refuses: the line is then read by the checked path
REFUSED = (msgspec.ValidationError, msgspec.DecodeError)
