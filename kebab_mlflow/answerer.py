"""The reference answerer: extractive, cites what it quotes, refuses below a confidence gate.

For each sentence of the first ``context_k`` hits it computes the share of the query's content
tokens (stemmed, stop words removed) that the sentence contains. The best sentences (ties: the
better-ranked hit, then the earlier sentence) become the answer, citing their chunks. The raw
confidence is that share of the best sentence, in [0, 1]; an optional calibrator maps it to an
estimated probability that the answer is right. Headings (lines without sentence punctuation)
are never quoted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kebab_mlflow.pipeline import Answer, Hit
from kebab_mlflow.text import split_sentences, tokenize

_SENTENCE_END = re.compile(r"[.!?;:)\"']$")


@dataclass(frozen=True)
class AnswererConfig:
    context_k: int = 3
    max_sentences: int = 1
    refuse_below: float = 0.5


def extractive_answer(query: str, hits: Sequence[Hit], config: AnswererConfig,
                      calibrator: Callable[[float, bool], float] | None = None) -> Answer:
    """Confidence = P(this response is right): the raw evidence share for an answer, one minus
    it for a refusal, or the calibrator's estimate of either when one is given."""
    candidates = _rank_sentences(query, hits, config) if hits else []
    raw = candidates[0][0] if candidates else 0.0

    def confidence(refusal: bool) -> float:
        return calibrator(raw, refusal) if calibrator else (1.0 - raw if refusal else raw)

    if not candidates or raw < config.refuse_below:
        reason = ("no_hits" if not hits else "no_quotable_sentence" if not candidates
                  else f"best evidence {raw:.2f} below gate {config.refuse_below}")
        return Answer("", (), reason, confidence(True), raw)
    chosen = candidates[: config.max_sentences]
    citations = tuple(dict.fromkeys(chunk_id for _, _, _, chunk_id, _ in chosen))
    return Answer(" ".join(sentence for *_, sentence in chosen), citations, None,
                  confidence(False), raw)


def _rank_sentences(query: str, hits: Sequence[Hit], config: AnswererConfig):
    query_tokens = set(tokenize(query))
    if not query_tokens:
        return []
    out = []
    for hit in hits[: config.context_k]:
        for position, sentence in enumerate(split_sentences(hit.text)):
            if not _SENTENCE_END.search(sentence):
                continue
            share = len(query_tokens & set(tokenize(sentence))) / len(query_tokens)
            out.append((share, hit.rank, position, hit.chunk_id, sentence))
    out.sort(key=lambda c: (-c[0], c[1], c[2]))
    return out
