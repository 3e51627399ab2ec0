"""Pipeline configuration: defaults, presets, ``--set key=value`` overrides, flattening.

A configuration is a nested dict whose shape and value types are fixed by :data:`DEFAULTS`;
overrides are dotted keys (``bm25.k1=1.2``) checked against it, so a typo is an error that
lists the valid keys rather than a silently ignored setting.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from typing import Any

from kebab_mlflow.errors import ConfigError, Problem
from kebab_mlflow.names import MAX_K
from kebab_mlflow.reading import Field

BACKENDS = ("lexical", "dense", "hybrid", "random", "oracle")
CHUNKER_MODES = ("structure", "document")
# lexical.tokenizer (pipeline/text.py has the analyzers); auto = english unless the corpus is
# mostly Korean, then multilingual
TOKENIZERS = ("auto", "english", "korean", "cjk-bigram", "multilingual")
KOREAN_INSTALL_HINT = ("install the optional extra: make setup, or pip install -e '.[korean]' "
                       "(kiwipiepy); or use lexical.tokenizer=cjk-bigram, which needs no model")

def _setting(key: str, default: Any, kind: type, help: str, *, low: float | None = None,
             high: float | None = None, choices: tuple[str, ...] | None = None) -> Field:
    return Field(name=key, what=kind.__name__, types=(kind,), default=default, low=low,
                 high=high, choices=choices, null=default is None, help=help)


# Every setting once: its default, type, range (inclusive) or choices, and what it does.
# DEFAULTS, NULLABLE_TYPES and RANGES derive from it; the pipeline's own defaults
# (pipeline/chunker.py, answerer.py, backends/hybrid.py) are read from it.
# Upper bounds keep the arithmetic finite and the arrays allocatable: bm25.k1=1e308 overflowed
# the BM25 weights to inf and failed the run when its scores were written (issue 18); depths
# stop at --k's own cap. A negative top_k or a NaN k1 used to make a run of zeros that
# "finished": build_config refuses them before any run exists.
SETTINGS: tuple[Field, ...] = (
    _setting("backend", "lexical", str, "the retrieval backend", choices=BACKENDS),
    _setting("top_k", None, int, "cap on the hits a search returns; None = as many as asked "
             "for", low=1, high=MAX_K),
    _setting("chunker.mode", "structure", str, "structure: split at headings and paragraphs; "
             "document: one chunk per document", choices=CHUNKER_MODES),
    _setting("chunker.max_chars", 800, int, "longest chunk, in characters", low=1, high=10**7),
    _setting("chunker.overlap_chars", 100, int, "characters a chunk repeats of the one before",
             low=0, high=10**7),
    _setting("bm25.k1", 0.9, float, "BM25 term-frequency saturation", low=0, high=1000),
    _setting("bm25.b", 0.4, float, "BM25 length normalization", low=0, high=1),
    # auto = english unless the corpus is mostly Korean, then multilingual (pipeline/text.py)
    _setting("lexical.tokenizer", "auto", str, "the lexical analyzer", choices=TOKENIZERS),
    _setting("dense.model", "all-MiniLM-L6-v2", str, "the sentence-embedding model"),
    _setting("dense.batch_size", 32, int, "texts embedded per batch", low=1, high=2**16),
    _setting("dense.max_seq_length", None, int, "the model's token limit; None = its own",
             low=1, high=2**16),
    _setting("hybrid.rrf_k", 60, int, "reciprocal-rank fusion constant", low=0, high=10**6),
    _setting("hybrid.depth", 100, int, "hits fused from each backend", low=1, high=MAX_K),
    _setting("answer.context_k", 3, int, "hits the answer is drawn from", low=1, high=MAX_K),
    _setting("answer.max_sentences", 1, int, "sentences an answer holds", low=1, high=10**4),
    # None: the tokenizer's own gate (pipeline/answerer.py REFUSE_BELOW; english 0.5)
    _setting("answer.refuse_below", None, float, "refuse below this evidence; None = the "
             "tokenizer's own gate", low=0, high=1),
    _setting("answer.calibrate", True, bool, "fit the answer calibrator"),
    # a second signal for the calibrator; loads torch, so off by default
    _setting("answer.similarity", False, bool, "also measure the query-answer cosine with the "
             "dense model"),
)
SETTING = {s.name: s for s in SETTINGS}


def _nested(settings: tuple[Field, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in settings:
        *parents, leaf = s.name.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = s.default
    return out


def default(key: str) -> Any:
    """The default of a setting (``chunker.max_chars`` → 800)."""
    return SETTING[key].default


DEFAULTS: dict[str, Any] = _nested(SETTINGS)
# keys whose default is None but which take this type
NULLABLE_TYPES: dict[str, type] = {s.name: s.types[0] for s in SETTINGS if s.default is None}
# The values a numeric key may take: (lowest, highest), inclusive, None = unbounded.
RANGES: dict[str, tuple[float | None, float | None]] = {
    s.name: (s.low, s.high) for s in SETTINGS if s.low is not None or s.high is not None}

PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "naive_baseline": ("BM25 over structure-aware chunks, extractive answers", {}),
    "single_chunk": ("floor: one hit, one sentence, every enhancement off",
                     {"top_k": 1, "answer.context_k": 1, "answer.max_sentences": 1,
                      "answer.calibrate": False}),
    "random_retrieval": ("floor: SHA-256 random ranking, no model call", {"backend": "random"}),
    "oracle": ("ceiling: the expected chunks first", {"backend": "oracle"}),
    "dense": ("sentence embeddings (all-MiniLM-L6-v2), exact inner product",
              {"backend": "dense"}),
    "hybrid": ("reciprocal-rank fusion of BM25 and dense", {"backend": "hybrid"}),
}

# "token" but not "tokenizer" (lexical.tokenizer is a setting, not a secret)
SECRET_RE = re.compile(r"(secret|password|passwd|token(?!iz)|api[_-]?key|credential|auth)", re.I)


def preset_names() -> list[str]:
    return list(PRESETS)


def build_config(preset: str = "naive_baseline", overrides: dict[str, Any] | None = None,
                 source: str = "--set") -> dict[str, Any]:
    """Defaults, then the preset, then the overrides; every problem reported at once."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; valid presets: "
                          f"{', '.join(PRESETS)}")
    config = copy.deepcopy(DEFAULTS)
    _apply(config, PRESETS[preset][1], f"preset {preset}")
    _apply(config, overrides or {}, source)
    return config


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["bm25.k1=1.2", "top_k=5"]`` → ``{"bm25.k1": "1.2", ...}`` (typed later)."""
    out, problems = {}, []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(f"expected KEY=VALUE, got {pair!r}", "--set"))
            continue
        out[key.strip()] = value.strip()
    if problems:
        raise ConfigError("bad --set option", problems)
    return out


def valid_keys() -> list[str]:
    return sorted(flatten(DEFAULTS))


def _apply(config: dict[str, Any], overrides: dict[str, Any], source: str) -> None:
    """Each override checked against :data:`SETTINGS` and set; every problem raised at once,
    a key's own at its option (``--set bm25.k1=abc``) when they come from the command line."""
    problems = []

    def at(key: str | None) -> str:
        if source == "--set" and key in overrides:
            return f"--set {key}={overrides[key]}"
        return source

    for key, raw in overrides.items():
        if key not in SETTING:
            problems.append(Problem(f"unknown config key {key!r}; valid keys: "
                                    f"{', '.join(valid_keys())}", at(key)))
            continue
        try:
            value = _coerce(key, raw, SETTING[key].default)
        except ValueError as exc:
            problems.append(Problem(f"{key}: {exc}", at(key)))
            continue
        node = config
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    if config.get("backend") not in BACKENDS:
        problems.append(Problem(f"unknown backend {config.get('backend')!r}; valid: "
                                f"{', '.join(BACKENDS)}", at("backend")))
    if config["chunker"]["mode"] not in CHUNKER_MODES:
        problems.append(Problem("chunker.mode must be 'structure' or 'document'",
                                at("chunker.mode")))
    problems += [Problem(message, at("lexical.tokenizer"))
                 for message in _tokenizer_problems(config)]
    problems += [Problem(message, at(key)) for key, message in _out_of_range(flatten(config))]
    if problems:
        raise ConfigError("invalid configuration", problems)


def _tokenizer_problems(config: dict[str, Any]) -> list[str]:
    name = config["lexical"]["tokenizer"]
    if name not in TOKENIZERS:
        return [f"unknown lexical.tokenizer {name!r}; valid: {', '.join(TOKENIZERS)}"]
    if name in ("korean", "multilingual") and not _kiwi_installed():
        return [f"lexical.tokenizer={name} needs kiwipiepy, which is not installed: "
                f"{KOREAN_INSTALL_HINT}"]
    return []


def _kiwi_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("kiwipiepy") is not None


def _out_of_range(flat: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(the key, the problem) of every value out of its range; None: of two keys at once."""
    out: list[tuple[str | None, str]] = []
    for key, (low, high) in RANGES.items():
        value = flat[key]
        if value is None:  # only the nullable keys (NULLABLE_TYPES) can be
            continue
        bounds = " and ".join(f"{word} {b:,}" if isinstance(b, int) else f"{word} {b:g}"
                              for word, b in ((">=", low), ("<=", high)) if b is not None)
        if isinstance(value, float) and not math.isfinite(value) or \
                (low is not None and value < low) or \
                (high is not None and value > high):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
            out.append((key, f"{key} must be {bounds}, got {shown}"))
    if flat["chunker.overlap_chars"] >= flat["chunker.max_chars"] >= 1:
        out.append((None, f"chunker.overlap_chars ({flat['chunker.overlap_chars']}) must be "
                          f"less than chunker.max_chars ({flat['chunker.max_chars']})"))
    return out


def _coerce(key: str, raw: Any, default: Any) -> Any:
    target = NULLABLE_TYPES.get(key) if default is None else type(default)
    if isinstance(raw, str):
        if raw.lower() in ("null", "none", "") and default is None:
            return None
        if target is bool:
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"expected true/false, got {raw!r}")
            return raw.lower() in ("true", "1", "yes")
        if target in (int, float):
            try:
                return target(raw)
            except ValueError:
                raise ValueError(f"expected {target.__name__}, got {raw!r}") from None
        return raw
    if raw is None and default is None:
        return None
    if target is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if target is None:  # a nullable key without a declared type: nothing to check it by
        raise TypeError(f"config key {key!r} has no declared type")
    if not isinstance(raw, target) or (target is int and isinstance(raw, bool)):
        raise ValueError(f"expected {target.__name__}, got {type(raw).__name__}")
    return raw


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def redacted(flat: dict[str, Any]) -> dict[str, Any]:
    """Flattened config with any secret-looking key's value replaced."""
    return {k: ("***" if SECRET_RE.search(k) else v) for k, v in flat.items()}


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
