"""Tokenization shared by BM25 and the answerer: lowercase, word tokens, English stop words,
Snowball English stems (PyStemmer, the C Snowball stemmer); and the sentence splitter of the
chunker and the answerer.

Sentences end at ``.``, ``!`` or ``?`` followed by whitespace and a capital, a digit or an
opening quote or bracket, except after an initial or a common abbreviation ("Michael E. Mann",
"U.S. Army", "Brown v. Board", "St. Johns", "Jones et al. 1998"): cutting there quotes half a
name. The cost is the rare real sentence end after one ("… in the U.S. Then …" stays one
sentence), a longer quote rather than a broken one. Not a library: pysbd handles these too but
took 2.5 ms per XQuAD paragraph against 0.01 ms here (250×, and the chunker splits whole
corpora); NLTK's Punkt needs a model download.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
# the last word before a candidate boundary that keeps the sentence going
_ABBREVIATION_RE = re.compile(
    r"[(\"'\[]*(?:(?:[A-Z]\.)+|(?:[a-z]\.){2,}|(?:Mr|Mrs|Ms|Dr|Prof|Rev|St|Mt|Ft|Gen|Gov|Sen|Rep"
    r"|Col|Capt|Lt|Sgt|Jr|Sr|Fr|Hon|No|Nos|Vol|Inc|Co|Corp|Ltd|Bros|Jan|Feb|Mar|Apr|Jun|Jul|Aug"
    r"|Sep|Sept|Oct|Nov|Dec|v|vs|al|ca|cf|approx|pp|p)\.)")


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
    """The sentences of ``text``; a blank line always ends one, a line break never does."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(line.strip() for line in para.splitlines() if line.strip())
        start = 0
        for boundary in SENTENCE_RE.finditer(para):
            word_start = max(para.rfind(" ", start, boundary.start()) + 1, start)
            last_word = para[word_start: boundary.start()]
            if not _ABBREVIATION_RE.fullmatch(last_word):
                out.append(para[start: boundary.start()])
                start = boundary.end()
        out.append(para[start:])
    return [s.strip() for s in out if s.strip()]
