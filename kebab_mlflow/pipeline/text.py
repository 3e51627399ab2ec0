"""Tokenization shared by BM25 and the answerer: lowercase, word tokens, English stop words,
Snowball English stems (PyStemmer, the C Snowball stemmer); and the sentence splitter of the
chunker and the answerer.

Sentences end at ``.``, ``!`` or ``?`` followed by whitespace and a capital, a digit or an
opening quote or bracket, except after an initial or a common abbreviation ("Michael E. Mann",
"J. R. R. Tolkien", "U.S. Army", "Brown v. Board", "St. Johns", "Jones et al. 1998"): cutting
there quotes half a name. A lone capital counts as an initial only after a capitalised word or
another initial, so "vitamin C. We …" and "meiosis I. The …" still end there. The cost is a
real sentence end after an abbreviation or a name's last letter ("… in the U.S. Then …", "Mac
OS X. The …" stay one sentence), a longer quote rather than a broken one, and an initial after a
lowercase word ("millionaire M. Theo Kearney") is still cut. Not a library: pysbd handles these
too but took 2.5 ms per XQuAD paragraph against 0.014 ms here (~180×, and the chunker splits
whole corpora); NLTK's Punkt needs a model download.
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
_LONE_CAPITAL_RE = re.compile(r"[(\"'\[]*[A-Z]\.")


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
            if not _goes_on(para[start: boundary.start()]):
                out.append(para[start: boundary.start()])
                start = boundary.end()
        out.append(para[start:])
    return [s.strip() for s in out if s.strip()]


def _goes_on(sentence: str) -> bool:
    """Whether a sentence candidate ends in an initial or abbreviation rather than its end."""
    words = sentence.rsplit(maxsplit=2)
    if not words or not _ABBREVIATION_RE.fullmatch(words[-1]):
        return False
    if not _LONE_CAPITAL_RE.fullmatch(words[-1]):  # "U.S.", "Dr.", "e.g.", "v."
        return True
    # "E." is an initial after a name or an initial ("Michael E.", "J. R."), at a sentence's
    # start ("E. Mann said"), but a letter after a lowercase word ("vitamin C.")
    return len(words) == 1 or words[-2].lstrip("(\"'[")[:1].isupper()
