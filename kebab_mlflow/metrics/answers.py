"""Answer metrics per query (NaN where the query does not count).

Conditional semantics: a correct refusal (``answerable: false`` and refused) is NaN for the
answer-quality metrics and counted by the abstention metrics instead; an answerable question
that is refused scores 0 on ``contains_all``, so refusing does not make a run look better; and
an unanswerable question that is answered scores 0 (it should have been refused), so answering
everything does not either. ``abstention_accuracy`` scores the refusal decision where it
matters: 1 when an unanswerable question was refused, 0 when it was answered or an answerable one
was refused (NaN for an answerable question answered: ``contains_all``'s). The verdict gates on
it, so a candidate that stops refusing is caught although its correct refusals were NaN for
``contains_all``.
``contains_all`` compares case-sensitively unless the query (or its
file) says ``case_insensitive: true``; then both sides are case-folded.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.records import Answer, Hit

NAN = float("nan")


def contains_all(query: GoldenQuery, answer: Answer | None) -> float:
    if not query.ask or answer is None:
        return NAN if not query.ask else 0.0
    if answer.refused:
        return NAN if not query.answerable else 0.0
    if not query.answerable:
        return 0.0

    def norm(s: str) -> str:
        return s.casefold() if query.case_insensitive else s

    text = norm(answer.text)
    ok = all(norm(s) in text for s in query.must_contain) and not any(
        norm(s) in text for s in query.forbidden)
    return float(ok)


def refused(query: GoldenQuery, answer: Answer | None) -> float:
    """No answer at all means the query raised: that is error_rate's, not a refusal."""
    if not query.ask or answer is None:
        return NAN
    return 1.0 if answer.refused else 0.0


def abstention_accuracy(query: GoldenQuery, answer: Answer | None) -> float:
    """Whether a refusal decision that matters was right: 1 = an unanswerable question refused,
    0 = one answered, or an answerable one refused. NaN for an answerable question answered
    (``contains_all`` judges it), off ask queries, and for a query that raised (error_rate's).
    An answer set's answered quality and its abstention are thus judged apart: answering more
    answerable questions cannot hide answering the unanswerable ones."""
    if not query.ask or answer is None:
        return NAN
    if query.answerable and not answer.refused:
        return NAN
    return float(answer.refused and not query.answerable)


class AbstentionOutcome(enum.StrEnum):
    """What became of an unanswerable ask query (the ``abstention`` field of per_query.jsonl),
    best first."""

    CORRECT_REFUSAL = "correct_refusal"  # refused, citing nothing
    BOUNDARY_PARTIAL = "boundary_partial"  # a refusal that cites, an uncited answer, an error
    INCORRECT_ANSWER = "incorrect_answer"  # answered, citing evidence


def abstention_outcome(query: GoldenQuery, answer: Answer | None) -> AbstentionOutcome | None:
    """The outcome of an ``answerable: false`` ask query; None for every other query."""
    if query.answerable or not query.ask:
        return None
    if answer is not None and answer.refused and not answer.citations:
        return AbstentionOutcome.CORRECT_REFUSAL
    if answer is not None and not answer.refused and answer.citations:
        return AbstentionOutcome.INCORRECT_ANSWER
    return AbstentionOutcome.BOUNDARY_PARTIAL


def grounded(query: GoldenQuery, answer: Answer | None) -> float:
    if not query.ask:
        return NAN
    return float(answer is not None and not answer.refused and bool(answer.citations))


def citation_validity(query: GoldenQuery, answer: Answer | None, hits: Sequence[Hit]) -> float:
    if not query.ask or answer is None or answer.refused or not answer.citations:
        return NAN
    retrieved = {h.chunk_id for h in hits}
    return float(all(c in retrieved for c in answer.citations))


def answer_scores(queries: Sequence[GoldenQuery], answers: Sequence[Answer | None],
                  hits: Sequence[Sequence[Hit]]) -> dict[str, np.ndarray]:
    rows = list(zip(queries, answers, hits, strict=True))
    return {
        "contains_all": np.array([contains_all(q, a) for q, a, _ in rows]),
        "refusal_rate": np.array([refused(q, a) for q, a, _ in rows]),
        "abstention_accuracy": np.array([abstention_accuracy(q, a) for q, a, _ in rows]),
        "ask_grounded_rate": np.array([grounded(q, a) for q, a, _ in rows]),
        "citation_validity": np.array([citation_validity(q, a, h) for q, a, h in rows]),
    }
