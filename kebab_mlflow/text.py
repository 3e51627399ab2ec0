"""Tokenization shared by BM25 and the answerer: lowercase, word tokens, English stop words,
Snowball English stems (PyStemmer, the C Snowball stemmer)."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (318, from the Glasgow IR group), read from the data
    module that holds them: importing it the usual way runs ``sklearn/__init__``, which loads
    SciPy and costs about 1 s on every search process, for a constant. Falls back to the usual
    import if a scikit-learn release moves the module."""
    try:
        package = importlib.util.find_spec("sklearn")  # finds the package, does not run it
        path = Path(package.submodule_search_locations[0], "feature_extraction",
                    "_stop_words.py")
        spec = importlib.util.spec_from_file_location("_kebab_stop_words", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return frozenset(module.ENGLISH_STOP_WORDS)
    except (AttributeError, OSError, TypeError):
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
