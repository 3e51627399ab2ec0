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

Korean sentences end the same way ("…했다. 그 뒤 …"): a boundary is also taken before a Hangul
letter, so a Korean paragraph is not one long sentence. Text without Hangul splits exactly as
before.

Tokenizers (``lexical.tokenizer``; BM25 and the answerer's evidence use the same one):

- ``english``: ``\\w\\w+`` lowercased, scikit-learn's English stop words, Snowball stems.
- ``korean``: kiwipiepy (Kiwi, a maintained Korean morphological analyzer with a bundled model)
  over the whole text; its content morphemes are the tokens: nouns, numerals, verb and adjective
  stems, roots, foreign words (lowercased), numbers, Hanja (tags NNG NNP NNB NR VV VA XR SL SN
  SH). Particles and endings are dropped, so 임세영은 and 임세영이 are both 임세영. Pronouns
  (NP: 무엇, 누구, 그), auxiliaries and the copula are dropped too: a question's 무엇 is no
  evidence of where its answer is.
- ``cjk-bigram``: character bigrams of each Hangul, Han or Kana run (a one-letter run is its
  own token; no model, as Lucene's CJK analyzer), the rest of the text by ``english``.
- ``multilingual``: each script run by its own analyzer: Hangul runs (words joined by spaces,
  so Kiwi sees phrases) by Kiwi's content morphemes, Han/Kana runs by bigrams, everything else
  by ``english`` — so ``Cargo workspace`` is the same tokens in an English and a Korean
  sentence, and an English document never pays for Kiwi.
- ``auto`` (the default) resolves per corpus (:func:`resolve_tokenizer`): ``multilingual`` when
  at least :data:`KOREAN_SHARE` of the corpus's words hold Hangul, else ``english`` (so every
  existing English configuration keeps its tokens and versions).

Kiwi loads once per process (1–2.6 s, ~500 MB), on the first Korean text, under a lock.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from kebab_mlflow.config import KOREAN_INSTALL_HINT, TOKENIZERS
from kebab_mlflow.errors import ConfigError

TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
HANGUL = "\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f"  # syllables, jamo, compatibility jamo
HAN_KANA = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff"
SENTENCE_RE = re.compile(rf"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[{HANGUL}])")
# the last word before a candidate boundary that keeps the sentence going
_ABBREVIATION_RE = re.compile(
    r"[(\"'\[]*(?:(?:[A-Z]\.)+|(?:[a-z]\.){2,}|(?:Mr|Mrs|Ms|Dr|Prof|Rev|St|Mt|Ft|Gen|Gov|Sen|Rep"
    r"|Col|Capt|Lt|Sgt|Jr|Sr|Fr|Hon|No|Nos|Vol|Inc|Co|Corp|Ltd|Bros|Jan|Feb|Mar|Apr|Jun|Jul|Aug"
    r"|Sep|Sept|Oct|Nov|Dec|v|vs|al|ca|cf|approx|pp|p)\.)")
_LONE_CAPITAL_RE = re.compile(r"[(\"'\[]*[A-Z]\.")


@lru_cache(maxsize=1)
def _stemmer() -> Any:  # a PyStemmer Stemmer
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (318, from the Glasgow IR group), read from the data
    module that holds them: importing it the usual way runs ``sklearn/__init__``, which loads
    SciPy and costs about 1 s on every search process, for a constant. Falls back to the usual
    import if a scikit-learn release moves the module."""
    try:
        # Any: a missing package or spec (None) raises AttributeError / TypeError, caught below
        package: Any = importlib.util.find_spec("sklearn")  # finds the package, does not run it
        path = Path(package.submodule_search_locations[0], "feature_extraction",
                    "_stop_words.py")
        spec: Any = importlib.util.spec_from_file_location("_kebab_stop_words", path)
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


# --- tokenizers ------------------------------------------------------------------------------

AUTO = "auto"
KOREAN_SHARE = 0.2  # share of a corpus's words holding Hangul from which `auto` is multilingual
_KIWI_CONTENT_TAGS = frozenset("NNG NNP NNB NR VV VA XR SL SN SH".split())
_HANGUL_RUN = re.compile(rf"[{HANGUL}]+(?:[ \t]+[{HANGUL}]+)*")
_CJK_RUN = re.compile(rf"[{HANGUL}{HAN_KANA}]+")
_HANGUL_CHAR = re.compile(rf"[{HANGUL}]")
_WORD = re.compile(r"\w+")
_kiwi_lock = threading.Lock()
_kiwi_instance = None


def kiwi_version() -> str:
    """kiwipiepy's version (its model ships with it), read without importing it; ConfigError
    (exit 2) with the install hint when it is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        if importlib.util.find_spec("kiwipiepy") is None:
            raise PackageNotFoundError("kiwipiepy")
        return version("kiwipiepy")
    except (PackageNotFoundError, ValueError):
        raise ConfigError("the korean and multilingual tokenizers need kiwipiepy, which is not "
                          f"installed: {KOREAN_INSTALL_HINT}") from None


def _kiwi() -> Any:  # a kiwipiepy Kiwi
    """The process's one Kiwi (slow to load: once, lazily, whichever thread asks first)."""
    global _kiwi_instance
    with _kiwi_lock:
        if _kiwi_instance is None:
            kiwi_version()  # the install hint rather than an ImportError
            try:
                from kiwipiepy import Kiwi
            except ImportError as exc:
                raise ConfigError(f"kiwipiepy cannot be imported ({exc}): "
                                  f"{KOREAN_INSTALL_HINT}") from None
            _kiwi_instance = Kiwi()
        return _kiwi_instance


def _morphemes(text: str, hangul_only: bool = False) -> list[str]:
    """Kiwi's content morphemes of ``text``, in order; a foreign word (SL) as its lowercased
    ``\\w+`` parts. ``hangul_only``: only the morphemes written in Hangul."""
    out = []
    for t in _kiwi().tokenize(text):
        if t.tag not in _KIWI_CONTENT_TAGS:
            continue
        if hangul_only:
            if _HANGUL_CHAR.search(t.form):
                out.append(t.form)
        elif t.tag == "SL":
            out += _WORD.findall(t.form.lower())
        else:
            out.append(t.form)
    return out


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]


def _korean(text: str) -> list[str]:
    return _morphemes(text) if text.strip() else []


def _bigram_runs(runs: list[str]) -> list[str]:
    return [b for run in runs for b in _bigrams(run)]


def _cjk_bigram(text: str) -> list[str]:
    return _split_runs(text, _CJK_RUN, _bigram_runs)


def _multilingual(text: str) -> list[str]:
    """Hangul by Kiwi, the rest by :func:`_cjk_bigram` (Han/Kana bigrams, Latin by
    ``english``). Kiwi reads the whole text, so a particle after a Latin word ("bm25s를")
    is still known as one, but only its Hangul morphemes are kept: every Latin word is
    tokenized by the English analyzer, alike in a Korean and an English sentence."""
    if not _HANGUL_CHAR.search(text):
        return _cjk_bigram(text)
    return _morphemes(text, hangul_only=True) + _cjk_bigram(_HANGUL_RUN.sub(" ", text))


def _split_runs(text: str, runs_re: re.Pattern[str], analyze: Callable[[list[str]], list[str]],
                ) -> list[str]:
    """``analyze`` over the runs that ``runs_re`` finds, ``english`` over the text between
    them (a run becomes a space, so words on either side stay apart). The runs' tokens come
    first: BM25 and the answerer use the bag of tokens, and the order is fixed either way."""
    runs = runs_re.findall(text)
    if not runs:
        return tokenize(text)
    return analyze(runs) + tokenize(runs_re.sub(" ", text))


_ANALYZERS: dict[str, Callable[[str], list[str]]] = {
    "english": tokenize, "korean": _korean, "cjk-bigram": _cjk_bigram,
    "multilingual": _multilingual}


def tokenizer_version(name: str) -> str:
    """What the tokens depend on: part of ``embedding_version``/``index_version`` and, through
    them, of the cache keys and calibrator keys. ``english`` keeps its historical string."""
    if name == "english":
        return "tok1-lower-sklearnstop-snowballen"
    if name == "cjk-bigram":
        return "tok-cjkbigram1+tok1-lower-sklearnstop-snowballen"
    if name == "korean":
        return f"tok-kiwi{kiwi_version()}-content1"
    if name == "multilingual":
        return (f"tok-multi1-hangul=kiwi{kiwi_version()}-content1-hankana=bigram"
                "-latin=tok1-lower-sklearnstop-snowballen")
    raise ConfigError(f"unknown lexical.tokenizer {name!r}; valid: {', '.join(TOKENIZERS)}")


def get_analyzer(name: str) -> Callable[[str], list[str]]:
    """The tokenizer ``name``, checked now (a missing kiwipiepy is a ConfigError before any
    text is read, not in the middle of a run)."""
    tokenizer_version(name)
    return _ANALYZERS[name]


@cache
def get_tokenizer(name: str) -> Callable[[str], list[str]]:
    """:func:`get_analyzer`, memoised per text, for queries and the answerer, which tokenize
    the same chunks' sentences for many queries (Kiwi reads ~100k characters a second)."""
    analyze = get_analyzer(name)

    @lru_cache(maxsize=100_000)
    def cached(text: str) -> tuple[str, ...]:
        return tuple(analyze(text))

    return lambda text: list(cached(text))


def hangul_share(texts: Iterable[str]) -> float:
    """Share of the words (``\\w+`` runs) of ``texts`` holding a Hangul letter."""
    words = hangul = 0
    for text in texts:
        for word in _WORD.findall(text):
            words += 1
            hangul += bool(_HANGUL_CHAR.search(word))
    return hangul / words if words else 0.0


def resolve_tokenizer(name: str, corpus_hangul_share: Callable[[], float]) -> str:
    """``auto`` → ``multilingual`` for a corpus whose words are at least ``KOREAN_SHARE``
    Hangul (mostly Korean, or a mixed knowledge base), else ``english``; a named one as is.
    ``corpus_hangul_share`` (:func:`hangul_share` of the corpus, or its cached value) is called
    only for ``auto``."""
    if name != AUTO:
        tokenizer_version(name)
        return name
    return "multilingual" if corpus_hangul_share() >= KOREAN_SHARE else "english"


# --- quotable units of markdown ----------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_TABLE_RULE = re.compile(r"^[\s|:-]+$")
SENTENCE_END = re.compile(r"[.!?;:)\"'。]$")


@dataclass(frozen=True)
class Unit:
    """One piece of a chunk for the answerer. ``kind``: ``sentence`` (of a paragraph or list
    item), ``item`` (a table row, or the last sentence of a list item: quotable even without
    a full stop), ``heading`` (a markdown heading, or the heading path / title line a chunk
    starts with) or ``code`` (a fenced block)."""

    text: str
    kind: str

    @property
    def quotable(self) -> bool:
        """A list item always (it is a unit, punctuated or not); a sentence when it ends like
        one (a line without sentence punctuation is a label); never a heading or code."""
        return self.kind == "item" or (self.kind == "sentence"
                                       and bool(SENTENCE_END.search(self.text)))


def text_units(text: str) -> list[Unit]:
    """The units of a chunk: paragraphs and list items split into sentences
    (:func:`split_sentences`), each list item apart from the next, a table row whole, headings
    and fenced code apart. Text without markdown gives
    exactly :func:`split_sentences`'s sentences. A chunk's first line, alone in its paragraph
    and followed by more, is its heading path or title ("Guide > Setup", "규칙은?") when it
    holds " > " or ends in "?": a heading, not a question to quote."""
    units: list[Unit] = []
    paragraph: list[str] = []
    code: list[str] | None = None  # the open fence's lines

    def flush(kind: str = "sentence") -> None:
        if paragraph:
            sentences = split_sentences(" ".join(paragraph))
            units.extend(Unit(s, "sentence") for s in sentences[:-1])
            units.extend(Unit(s, kind) for s in sentences[-1:])
            paragraph.clear()

    item = False
    for line in text.splitlines():
        if _FENCE.match(line):
            flush("item" if item else "sentence")
            item = False
            if code is None:
                code = []
            else:
                units.append(Unit("\n".join(code), "code"))
                code = None
            continue
        if code is not None:
            code.append(line)
            continue
        stripped = line.strip()
        heading, listed, row = _HEADING.match(line), _LIST_ITEM.match(line), _TABLE_ROW.match(line)
        if listed and paragraph and not item and _interrupts_not(stripped):
            listed = None  # "… compressed O\n2. This method …" is prose, as CommonMark says
        if not stripped or heading or listed or row:
            flush("item" if item else "sentence")
            item = False
        if heading:
            units.append(Unit(heading.group(1), "heading"))
        elif row:
            if not _TABLE_RULE.match(stripped):
                units.append(Unit(" | ".join(c.strip() for c in row.group(1).split("|")), "item"))
        elif listed:  # without its marker ("- ", "2. ")
            paragraph.append(listed.group(1).strip())
            item = True
        elif stripped:
            paragraph.append(stripped)
    flush("item" if item else "sentence")
    if code:
        units.append(Unit("\n".join(code), "code"))
    return _first_line_heading(text, units)


def _interrupts_not(line: str) -> bool:
    """Whether a numbered line cannot start a list inside a paragraph: CommonMark lets only
    ``1.`` (or ``1)``) interrupt one."""
    number = re.match(r"(\d{1,3})[.)]", line)
    return number is not None and number.group(1) != "1"


def _first_line_heading(text: str, units: list[Unit]) -> list[Unit]:
    """The heading path line as one heading unit, however the sentence splitter cut it: a
    path ending in a numbered heading ("Design > 1. Headline UX scenes") splits at "1.", and
    its first part would otherwise be quotable."""
    first, _, rest = text.strip().partition("\n\n")
    first = first.strip()
    if not (units and rest.strip() and "\n" not in first
            and (" > " in first or first.endswith("?"))):
        return units
    joined = ""
    for taken, unit in enumerate(units, 1):
        if unit.kind != "sentence":
            return units
        joined = f"{joined} {unit.text}".strip()
        if joined == first:
            return [Unit(first, "heading"), *units[taken:]]
        if not (first.startswith(joined) and _NUMBERED_CUT.search(unit.text)):
            return units  # cut anywhere else than at a heading number: prose, not a path
    return units


# where the sentence splitter cuts a heading path: after a heading's number ("> 1.", "> IV.")
_NUMBERED_CUT = re.compile(r"(?:^|\s)(?:\d{1,3}|[A-Za-z]|[IVXivx]{1,4})[.)]$")
