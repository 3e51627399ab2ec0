"""kebab_mlflow/reading.py: every input format reports all its problems at once, each at its
file:line. The expected lines are counted by hand from the files written here."""

from __future__ import annotations

import pytest

from kebab_mlflow import config
from kebab_mlflow.app.lifecycle import MANIFEST, read_manifest
from kebab_mlflow.errors import ConfigError, GoldenSetError, InputError, SweepError, TuneError
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.reading import Field, Messages, Reader, json_lines, table
from kebab_mlflow.sweep.spec import load_sweep
from kebab_mlflow.sweep.tune_spec import load_tune
from kebab_mlflow.yaml_source import parse
from tests.conftest import FIXTURES, KB, write


def found(error: InputError) -> list[tuple[str, str | None, str]]:
    return [(p.location, p.query_id, p.message) for p in error.problems]


def test_a_golden_set_with_several_problems_lists_each_at_its_line(tmp_path):
    path = write(tmp_path / "g.yaml", """\
name: multi
private: maybe
queries:
  - id: q1
    query: ""
  - id: q2
    query: fine
    ask: yes-please
    colour: red
  - query: no id
""")
    with pytest.raises(GoldenSetError) as err:
        load_golden_set(path)
    g = str(path)
    assert found(err.value) == [
        (f"{g}:2", None, "'private' must be bool"),
        (f"{g}:5", "q1", "'query' is empty"),
        (f"{g}:9", "q2", "unknown key 'colour'"),
        (f"{g}:8", "q2", "'ask' must be true/false, got str"),
        (f"{g}:10", None, "missing required key 'id'"),
    ]


def test_a_sweep_file_with_several_problems_lists_each_at_its_line(tmp_path):
    path = write(tmp_path / "sweep.yaml", f"""\
name: multi
golden: {FIXTURES / "golden_queries.yaml"}
corpus: {KB}
k: 0
seed: -1
colour: red
rows:
  - name: base
  - name: bad
    k: two
    ask: sometimes
""")
    with pytest.raises(SweepError) as err:
        load_sweep(path)
    s = str(path)
    problems = found(err.value)
    assert problems[0][0] == f"{s}:6"
    assert problems[0][2].startswith("unknown top-level key 'colour' (known: ")
    assert problems[1:] == [
        (f"{s}:4", None, "'k' must be an integer >= 1, got 0"),
        (f"{s}:5", None, "'seed' must be an integer >= 0, got -1"),
        (f"{s}:9", None, "row bad: 'k' must be an integer >= 1, got 'two'"),
        (f"{s}:9", None, "row bad: 'ask' must be true or false, got 'sometimes'"),
    ]


def test_a_tune_file_with_several_problems_lists_each_at_its_line(tmp_path):
    pytest.importorskip("optuna", reason="the `tune` extra (optuna) is not installed")
    path = write(tmp_path / "tune.yaml", f"""\
train: {FIXTURES / "tune" / "train.yaml"}
test: {FIXTURES / "tune" / "test.yaml"}
corpus: {KB}
trials: 0
seed: x
space:
  bm25.k1: [0.3, 2.0]
  nope.key: [1, 2]
""")
    with pytest.raises(TuneError) as err:
        load_tune(path)
    t = str(path)
    problems = found(err.value)
    assert [(where, message[:40]) for where, _, message in problems] == [
        (f"{t}:4", "'trials' must be an integer >= 1, got 0"),
        (f"{t}:8", "space: unknown config key 'nope.key'; va"),
        (f"{t}:5", "'seed' must be an integer >= 0, got 'x'"),
    ]


def test_set_options_with_several_problems_are_each_reported_at_their_option():
    overrides = config.parse_overrides(["bm25.k1=abc", "top_k=0", "colour=red",
                                        "chunker.overlap_chars=900"])
    with pytest.raises(ConfigError) as err:
        config.build_config("naive_baseline", overrides)
    problems = [(p.location, p.message) for p in err.value.problems]
    assert problems[0] == ("--set bm25.k1=abc", "bm25.k1: expected float, got 'abc'")
    assert problems[1][0] == "--set colour=red"
    assert problems[1][1].startswith("unknown config key 'colour'; valid keys: ")
    assert problems[2:] == [
        ("--set top_k=0", "top_k must be >= 1 and <= 10,000, got 0"),
        # two keys at once: the option in general
        ("--set", "chunker.overlap_chars (900) must be less than chunker.max_chars (800)"),
    ]


def test_a_manifest_with_several_problems_lists_each_at_its_line(tmp_path):
    folder = tmp_path / "r1"
    write(folder / MANIFEST, """\
{
 "run_id": "",
 "experiment_id": "1",
 "tracking_uri": 3,
 "description": "",
 "metrics": {
  "mrr": "NaN"
 },
 "tags": {"a/../b": "x"},
 "dataset": {"name": "g"}
}
""")
    with pytest.raises(InputError) as err:
        read_manifest(folder)
    m = str(folder / MANIFEST)
    assert [(where, message) for where, _, message in found(err.value)] == [
        (f"{m}:2", "'run_id' must be a non-empty string"),
        (f"{m}:4", "'tracking_uri' must be a non-empty string"),
        (f"{m}:6", "'metrics' must map names to finite numbers"),
        (f"{m}:9", "key 'a/../b': MLflow reads it as the path 'b'"),
        (f"{m}:10", "'dataset' must hold 'name', 'digest' and 'tags'"),
    ]
    write(folder / MANIFEST, '{"run_id": "r"}')  # missing keys: at the object's line
    with pytest.raises(InputError) as err:
        read_manifest(folder)
    assert {where for where, _, _ in found(err.value)} == {f"{m}:1"}
    assert len(err.value.problems) == 6  # experiment_id ... dataset


def test_json_lines_finds_the_top_level_keys_only():
    node = json_lines('{"a": 1,\n "b": {"a": 2,\n  "c": "x:\\"y"},\n "d": [{"e": 1}]}')
    assert {k: n.line for k, n in (node.keys or {}).items()} == {"a": 0, "b": 1, "d": 3}


def test_the_reader_checks_types_ranges_choices_and_defaults():
    fields = table((
        Field(name="k", what="an integer >= 1", types=(int,), low=1, default=10),
        Field(name="mode", what="a mode", types=(str,), choices=("a", "b"), default="a"),
        Field(name="flag", what="true/false", types=(bool,), default=False),
        Field(name="names", what="a list of names", types=(list,), items=(str,), default=[]),
        Field(name="need", what="a string", types=(str,), required=True),
    ))
    text = b"k: true\nmode: c\nflag: 1\nnames: [x, 2]\nother: 0\n"
    data, node = parse(text, "f.yaml", InputError, "file")
    r = Reader(data, node, "f.yaml", Messages())
    r.unknown_keys(fields)
    got = r.values(fields)
    # a bool is not an integer, nor 1 a bool; every bad value falls back to its default
    assert got == {"k": 10, "mode": "a", "flag": False, "names": [], "need": None}
    assert [(p.location, p.message) for p in r.problems] == [
        ("f.yaml:5", "unknown top-level key 'other' (known: flag, k, mode, names, need)"),
        ("f.yaml:1", "'k' must be an integer >= 1, got True"),
        ("f.yaml:2", "'mode' must be a mode, got 'c'"),
        ("f.yaml:3", "'flag' must be true/false, got 1"),
        ("f.yaml:4", "'names' must be a list of names, got ['x', 2]"),
        ("f.yaml:1", "missing required key 'need'"),
    ]
    assert got["names"] is not fields["names"].default  # a fresh default each time


def test_the_configuration_defaults_are_written_once():
    from kebab_mlflow.pipeline.answerer import AnswererConfig
    from kebab_mlflow.pipeline.chunker import ChunkerConfig

    chunker, answer = ChunkerConfig(), AnswererConfig()
    assert (chunker.mode, chunker.max_chars, chunker.overlap_chars) == ("structure", 800, 100)
    assert (answer.context_k, answer.max_sentences) == (3, 1)
    assert config.DEFAULTS["chunker"] == {"mode": "structure", "max_chars": 800,
                                          "overlap_chars": 100}
    assert config.RANGES["bm25.b"] == (0, 1) and config.NULLABLE_TYPES["top_k"] is int
