"""The one-pass YAML composer gives what ``yaml.safe_load`` gives, with the right lines."""

from __future__ import annotations

import datetime

import pytest
import yaml

from kebab_mlflow.errors import InputError
from kebab_mlflow.yaml_source import _Composer, child, location, parse, sequence_items

CASES = [
    "a: 1\nb: [x, 'y', \"z\", 2.5, -3, 0x1f, .inf, ~, null, '', true, no, On]\n",
    "- {id: 1, q: hello}\n- id: '2'\n  q: >\n    folded\n    text\n",
    "k: 2026-12-01\nt: 2026-12-01 10:00:00\nv: 1_000\nw: 0o17\ne: 1e3\nf: .nan\n",
    "plain: Yes\nquoted: 'Yes'\nempty:\nlist: []\nmap: {}\n",
    "1: int key\n2.5: float key\nnull: null key\n",
    "",
    "# only a comment\n",
    "just a scalar",
    "unicode: \"caf\\u00e9 \U0001F600\"\n",
    "? explicit\n: key\n",
    # a plain scalar's first character picks the resolvers tried: each kind, and ids none takes
    "v: [d72, s0000000, y, n, Y, N, yes, off, True, FALSE, Null, NULL, +1, -1.5, .5, 0b101, "
    "1:30, 190:20:30.15, 0.1e+2, .NaN, -.Inf, <<x, abc, _x, é, 2001-12-14t21:59:43.10-05:00]\n",
]

FALLBACK = [
    "a: &x [1, 2]\nb: *x\n",  # anchors and aliases
    "base: &b {k: 1}\nm:\n  <<: *b\n  j: 2\n",  # merge key
    "s: !!str 12\ni: !!int '7'\n",  # explicit tags
    "? [a, b]\n: complex key\n",  # safe_load refuses it too: the same error
]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("text", CASES + FALLBACK[:-1])
def test_data_equals_safe_load(text):
    data, _ = parse(text.encode(), "f.yaml", InputError, "file")
    assert _same(data, yaml.safe_load(text)), (data, yaml.safe_load(text))


def test_timestamps_are_the_safe_loaders():
    data, _ = parse(b"d: 2026-12-01\n", "f.yaml", InputError, "file")
    assert data == {"d": datetime.date(2026, 12, 1)}


def test_a_key_safe_load_refuses_is_refused():
    with pytest.raises(InputError, match="not valid YAML"):
        parse(FALLBACK[-1].encode(), "f.yaml", InputError, "file")


@pytest.mark.parametrize("text", FALLBACK[:-1])
def test_unsupported_constructs_fall_back_with_lines(text):
    from kebab_mlflow.errors import YamlFallback

    with pytest.raises(YamlFallback):
        _Composer(text.encode()).document()
    _, node = parse(text.encode(), "f.yaml", InputError, "file")
    assert node is not None and node.keys


def test_lines_of_keys_and_items():
    text = "name: x\nqueries:\n  - id: a\n    query: one\n\n  - id: b\n    query: two\n"
    data, node = parse(text.encode(), "g.yaml", InputError, "golden set")
    assert data["queries"][1] == {"id": "b", "query": "two"}
    queries = sequence_items(child(node, "queries"))
    assert [location("g.yaml", q) for q in queries] == ["g.yaml:3", "g.yaml:6"]
    assert location("g.yaml", child(queries[1], "query")) == "g.yaml:7"
    assert child(node, "missing") is None and sequence_items(child(node, "name")) == []


def test_bad_yaml_names_its_line():
    with pytest.raises(InputError) as err:
        parse(b"a: 1\nb: [1, 2\nc: 3\n", "bad.yaml", InputError, "file")
    assert err.value.problems[0].location.startswith("bad.yaml:")


def test_two_documents_are_an_error():
    with pytest.raises(InputError, match="not valid YAML"):
        parse(b"a: 1\n---\nb: 2\n", "two.yaml", InputError, "file")


@pytest.mark.parametrize("text", ["dup: 1\ndup: 2\n", "{dup: 1, dup: 2}\n",
                                  "a: &x {k: 1}\nb: *x\nb: 2\n"])
def test_a_key_given_twice_is_an_error_on_either_path(text):
    """The event composer and the PyYAML fallback (anchors) both refuse a repeated key."""
    with pytest.raises(InputError, match="duplicated key 'dup'|duplicated key 'b'"):
        parse(text.encode(), "f.yaml", InputError, "file")
