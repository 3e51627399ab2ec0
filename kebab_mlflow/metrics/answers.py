"""Answer metrics per query (NaN where the query does not count).

Conditional semantics: a correct refusal (``answerable: false`` and refused) is NaN for the
answer-quality metrics and counted by the abstention metrics instead; an answerable question
that is refused scores 0 on ``contains_all``, so refusing does not make a run look better; and
an unanswerable question that is answered scores 0 (it should have been refused), so answering
everything does not either. ``contains_all`` compares case-sensitively unless the query (or its
file) says ``case_insensitive: true``; then both sides are case-folded.
"""

from __future__ import annotations

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
        "ask_grounded_rate": np.array([grounded(q, a) for q, a, _ in rows]),
        "citation_validity": np.array([citation_validity(q, a, h) for q, a, h in rows]),
    }
