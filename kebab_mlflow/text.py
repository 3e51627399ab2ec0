"""Tokenization shared by BM25 and the answerer: lowercase, word tokens, English stop words,
Snowball English stems (PyStemmer, the C Snowball stemmer)."""

from __future__ import annotations

import re
from functools import lru_cache

TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str, *, stem: bool = True, remove_stop_words: bool = True) -> list[str]:
    words = TOKEN_RE.findall(text.lower())
    if remove_stop_words:
        stops = stop_words()
        words = [w for w in words if w not in stops]
    return _stemmer().stemWords(words) if stem else words


def split_sentences(text: str) -> list[str]:
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(line.strip() for line in para.splitlines() if line.strip())
        out += [s.strip() for s in SENTENCE_RE.split(para) if s.strip()]
    return out
