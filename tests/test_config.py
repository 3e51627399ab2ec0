"""Configuration: defaults, presets, --set overrides, and the version snapshot derived from it."""

from __future__ import annotations

import pytest

from kebab_mlflow.config import (
    DEFAULTS,
    PRESETS,
    build_config,
    digest,
    flatten,
    parse_overrides,
    preset_names,
    redacted,
)
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.pipeline.reference import versions_for
from kebab_mlflow.records import VERSION_KEYS


def test_the_required_presets_exist():
    assert {"naive_baseline", "single_chunk", "random_retrieval", "oracle"} <= set(
        preset_names())
    single = build_config("single_chunk")
    assert single["top_k"] == 1 and single["answer"]["calibrate"] is False
    assert build_config("random_retrieval")["backend"] == "random"
    assert build_config("oracle")["backend"] == "oracle"
    assert build_config() == DEFAULTS  # naive_baseline = the defaults
    assert all(description for description, _ in PRESETS.values())


def test_an_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        build_config("fancy")
    assert str(info.value) == ("unknown preset 'fancy'; valid presets: "
                               + ", ".join(PRESETS))


def test_overrides_are_typed_from_the_defaults():
    config = build_config(overrides=parse_overrides(
        ["bm25.k1=1.2", "chunker.max_chars=500", "answer.calibrate=false", "top_k=3",
         "chunker.mode=document"]))
    assert config["bm25"]["k1"] == 1.2 and config["chunker"]["max_chars"] == 500
    assert config["answer"]["calibrate"] is False and config["top_k"] == 3
    assert config["chunker"]["mode"] == "document"
    assert build_config(overrides={"top_k": "none"})["top_k"] is None
    assert build_config(overrides={"bm25.b": 1})["bm25"]["b"] == 1.0
    assert DEFAULTS["bm25"]["k1"] == 0.9  # the defaults are never mutated


def test_every_override_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        build_config(overrides={"bm25.k": "1", "chunker.max_chars": "big",
                                "answer.calibrate": "maybe", "backend": "magic"})
    problems = [p.message for p in info.value.problems]
    assert problems[0].startswith("unknown config key 'bm25.k'; valid keys: ")
    assert "bm25.k1" in problems[0]
    assert problems[1:] == ["chunker.max_chars: expected int, got 'big'",
                            "answer.calibrate: expected true/false, got 'maybe'",
                            "unknown backend 'magic'; valid: lexical, dense, hybrid, random, "
                            "oracle"]


def test_out_of_range_and_non_finite_values_are_refused():
    bad = {"top_k": "0", "chunker.max_chars": "-5", "bm25.k1": "nan", "bm25.b": "inf",
           "hybrid.rrf_k": "-60", "hybrid.depth": "0", "answer.context_k": "0",
           "answer.max_sentences": "-1", "answer.refuse_below": "-2"}
    with pytest.raises(ConfigError) as info:
        build_config(overrides=bad)
    problems = [p.message for p in info.value.problems]
    assert problems == [
        "top_k must be >= 1 and <= 10,000, got 0",
        "chunker.max_chars must be >= 1 and <= 10,000,000, got -5",
        "bm25.k1 must be >= 0 and <= 1,000, got nan", "bm25.b must be >= 0 and <= 1, got inf",
        "hybrid.rrf_k must be >= 0 and <= 1,000,000, got -60",
        "hybrid.depth must be >= 1 and <= 10,000, got 0",
        "answer.context_k must be >= 1 and <= 10,000, got 0",
        "answer.max_sentences must be >= 1 and <= 10,000, got -1",
        "answer.refuse_below must be >= 0 and <= 1, got -2.0"]
    with pytest.raises(ConfigError, match="chunker.overlap_chars \\(800\\) must be less than"):
        build_config(overrides={"chunker.overlap_chars": "800"})
    # the edges are fine, and top_k may stay unset
    edges = {"top_k": "1", "bm25.k1": "0", "bm25.b": "1", "answer.refuse_below": "0",
             "chunker.overlap_chars": "0", "hybrid.rrf_k": "0"}
    assert build_config(overrides=edges)["bm25"]["b"] == 1.0
    assert build_config()["top_k"] is None


def test_bad_set_syntax():
    with pytest.raises(ConfigError, match="expected KEY=VALUE, got 'bm25.k1'"):
        parse_overrides(["bm25.k1"])
    with pytest.raises(ConfigError, match="chunker.mode must be 'structure' or 'document'"):
        build_config(overrides={"chunker.mode": "pages"})


def test_flatten_redact_and_digest():
    flat = flatten({"a": {"b": 1, "api_key": "s3cret"}, "c": 2})
    assert flat == {"a.b": 1, "a.api_key": "s3cret", "c": 2}
    assert redacted(flat)["a.api_key"] == "***" and redacted(flat)["a.b"] == 1
    assert digest({"x": 1, "y": 2}) == digest({"y": 2, "x": 1}) != digest({"x": 1, "y": 3})


# --- the version snapshot is derived from the configuration ----------------------------------

def changed_versions(overrides):
    base = versions_for(build_config()).as_dict()
    new = versions_for(build_config(overrides=overrides)).as_dict()
    return {k for k in VERSION_KEYS if base[k] != new[k]}


def test_changing_nothing_changes_nothing():
    assert versions_for(build_config()) == versions_for(build_config())
    assert changed_versions({}) == set()
    assert changed_versions({"bm25.k1": DEFAULTS["bm25"]["k1"]}) == set()


@pytest.mark.parametrize(("override", "changed"), [
    ({"chunker.max_chars": "500"}, {"chunker_version"}),
    ({"chunker.overlap_chars": "0"}, {"chunker_version"}),
    ({"chunker.mode": "document"}, {"chunker_version"}),
    ({"bm25.k1": "1.2"}, {"index_version"}),
    ({"top_k": "1"}, {"index_version"}),
    ({"answer.refuse_below": "0.7"}, {"prompt_template_version"}),
    ({"backend": "random"}, {"embedding_version", "index_version"}),
])
def test_a_setting_changes_its_own_version_only(override, changed):
    assert changed_versions(override) == changed


def test_every_version_is_a_non_empty_string():
    for preset in ("naive_baseline", "single_chunk", "random_retrieval", "oracle"):
        versions = versions_for(build_config(preset)).as_dict()
        assert set(versions) == set(VERSION_KEYS)
        assert all(isinstance(v, str) and v and v != "unknown" for v in versions.values())
