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

BACKENDS = ("lexical", "dense", "hybrid", "random", "oracle")
# lexical.tokenizer (pipeline/text.py has the analyzers); auto = english unless the corpus is
# mostly Korean, then multilingual
TOKENIZERS = ("auto", "english", "korean", "cjk-bigram", "multilingual")
KOREAN_INSTALL_HINT = ("install the optional extra: make setup, or pip install -e '.[korean]' "
                       "(kiwipiepy); or use lexical.tokenizer=cjk-bigram, which needs no model")

DEFAULTS: dict[str, Any] = {
    "backend": "lexical",
    "top_k": None,  # cap on the hits a search returns; None = as many as asked for
    "chunker": {"mode": "structure", "max_chars": 800, "overlap_chars": 100},
    "bm25": {"k1": 0.9, "b": 0.4},
    "lexical": {"tokenizer": "auto"},
    "dense": {"model": "all-MiniLM-L6-v2", "batch_size": 32, "max_seq_length": None},
    "hybrid": {"rrf_k": 60, "depth": 100},
    # similarity: also measure the query–answer cosine with the dense model (a second signal
    # for the calibrator; loads torch, so off by default)
    # refuse_below None: the tokenizer's own gate (pipeline/answerer.py REFUSE_BELOW; english 0.5)
    "answer": {"context_k": 3, "max_sentences": 1, "refuse_below": None, "calibrate": True,
               "similarity": False},
}
# keys whose default is None but which take this type
NULLABLE_TYPES: dict[str, type] = {"top_k": int, "dense.max_seq_length": int,
                                   "answer.refuse_below": float}

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

# The values a numeric key may take: (lowest, highest), inclusive, None = unbounded. Checked by
# build_config, so `run`, `calibrate` and a sweep's up-front validation all refuse them before
# any run exists (a negative top_k or a NaN k1 used to make a run of zeros that "finished").
# Upper bounds keep the arithmetic finite and the arrays allocatable: bm25.k1=1e308 overflowed
# the BM25 weights to inf and failed the run when its scores were written (issue 18); depths
# stop at --k's own cap.
RANGES: dict[str, tuple[float | None, float | None]] = {
    "top_k": (1, MAX_K), "chunker.max_chars": (1, 10**7), "chunker.overlap_chars": (0, 10**7),
    "bm25.k1": (0, 1000), "bm25.b": (0, 1), "dense.batch_size": (1, 2**16),
    "dense.max_seq_length": (1, 2**16), "hybrid.rrf_k": (0, 10**6), "hybrid.depth": (1, MAX_K),
    "answer.context_k": (1, MAX_K), "answer.max_sentences": (1, 10**4),
    "answer.refuse_below": (0, 1),
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
    flat_defaults = flatten(DEFAULTS)
    problems = []
    for key, raw in overrides.items():
        if key not in flat_defaults:
            problems.append(Problem(f"unknown config key {key!r}; valid keys: "
                                    f"{', '.join(valid_keys())}", source))
            continue
        try:
            value = _coerce(key, raw, flat_defaults[key])
        except ValueError as exc:
            problems.append(Problem(f"{key}: {exc}", source))
            continue
        node = config
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    if config.get("backend") not in BACKENDS:
        problems.append(Problem(f"unknown backend {config.get('backend')!r}; valid: "
                                f"{', '.join(BACKENDS)}", source))
    if config["chunker"]["mode"] not in ("structure", "document"):
        problems.append(Problem("chunker.mode must be 'structure' or 'document'", source))
    problems += [Problem(message, source) for message in _tokenizer_problems(config)]
    problems += [Problem(message, source) for message in _out_of_range(flatten(config))]
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


def _out_of_range(flat: dict[str, Any]) -> list[str]:
    out = []
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
            out.append(f"{key} must be {bounds}, got {shown}")
    if flat["chunker.overlap_chars"] >= flat["chunker.max_chars"] >= 1:
        out.append(f"chunker.overlap_chars ({flat['chunker.overlap_chars']}) must be less than "
                   f"chunker.max_chars ({flat['chunker.max_chars']})")
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
