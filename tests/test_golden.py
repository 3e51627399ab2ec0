"""Golden sets: schema, every kind of problem reported at once with file:line and query id."""

from __future__ import annotations

import textwrap

import pytest
from conftest import GOLDEN, write

from kebab_mlflow.errors import GoldenSetError, InputError, KebabError
from kebab_mlflow.golden import load_golden_set, parse_golden_set


def load_text(tmp_path, text, name="g.yaml"):
    return load_golden_set(write(tmp_path / name, textwrap.dedent(text)))


def problems_of(tmp_path, text):
    with pytest.raises(GoldenSetError) as info:
        load_text(tmp_path, text)
    return info.value, [str(p) for p in info.value.problems]


def test_the_shipped_fixture_loads_and_uses_every_field():
    g = load_golden_set(GOLDEN)
    assert g.name == "kebab-fixtures" and len(g) >= 20
    assert {q.query_type for q in g.queries} >= {"single_doc", "comparison", "follow_up",
                                                 "abstention"}
    assert any(q.expected_chunk_ids for q in g.queries)
    assert any(not q.answerable for q in g.queries)
    assert len(g.digest) == 64


def test_mapping_form_with_every_field(tmp_path):
    g = load_text(tmp_path, """\
        name: demo
        private: true
        metadata_fields: [owner]
        case_insensitive: true
        description: a demo
        queries:
          - id: q1
            query: "What is the budget?"
            expected_chunk_ids: ["d1#0"]
            expected_doc_ids: {d1: 2, d2: 1, d3: 0}
            must_contain: ["42"]
            forbidden: ["41"]
            ask: true
            answerable: true
            query_type: single_doc
            hardcase_categories: [numeric]
            metadata_field: owner
            group: g
            difficulty: easy
            lang: en
          - id: 7
            query: "unanswerable"
            answerable: false
            case_insensitive: false
        """)
    assert (g.name, g.private, g.metadata_fields, g.description) == ("demo", True, ("owner",),
                                                                     "a demo")
    q1, q2 = g.queries
    assert q1.expected_chunk_ids == ("d1#0",)
    assert dict(q1.expected_doc_ids) == {"d1": 2, "d2": 1, "d3": 0}
    assert q1.relevant_doc_grades == {"d1": 2, "d2": 1}
    assert q1.has_doc_truth and q1.has_chunk_truth and q1.ask and q1.case_insensitive
    assert (q1.line, q2.line) == (7, 21)
    assert q2.id == "7" and not q2.answerable and not q2.case_insensitive
    assert not q2.has_doc_truth and q2.expected_doc_ids == {}


def test_bare_list_form_and_doc_id_list_means_grade_1(tmp_path):
    g = load_text(tmp_path, """\
        - id: a
          query: one
          expected_doc_ids: [d1, d2]
        - id: b
          query: two
        """, name="bare.yaml")
    assert g.name == "bare" and [q.id for q in g.queries] == ["a", "b"]
    assert dict(g.queries[0].expected_doc_ids) == {"d1": 1, "d2": 1}


@pytest.mark.parametrize(("body", "message"), [
    ("    colour: red\n", "g.yaml:5 [query q1]: unknown key 'colour'"),
    ("    ask: 'yes'\n", "g.yaml:5 [query q1]: 'ask' must be true/false, got str"),
    ("    expected_chunk_ids: d1#0\n",
     "g.yaml:5 [query q1]: 'expected_chunk_ids' must be a list of strings, got str"),
    ("    must_contain: [1, 2]\n",
     "g.yaml:5 [query q1]: 'must_contain' must be a list of strings"),
    ("    expected_doc_ids: {d1: high}\n",
     "g.yaml:5 [query q1]: grade of doc 'd1' must be an integer"),
    ("    query_type: multi_hop\n",
     "g.yaml:5 [query q1]: unknown query_type 'multi_hop' (known: single_doc, comparison, "
     "follow_up, abstention)"),
    ("    metadata_field: colour\n",
     "g.yaml:5 [query q1]: unknown metadata_field 'colour' (this file's metadata_fields: "
     "agency, project, budget, deadline)"),
])
def test_each_kind_of_problem_with_its_location(tmp_path, body, message):
    _, problems = problems_of(tmp_path, "queries:\n  - id: q1\n    query: x\n    lang: en\n"
                              + body)
    assert problems == [f"{tmp_path / message}"]


def test_missing_id_missing_query_not_a_mapping_bad_id_type(tmp_path):
    _, problems = problems_of(tmp_path, """\
        queries:
          - query: "no id"
          - id: q2
          - just a string
          - id: true
            query: x
          - id: q5
            query: ""
          - id: q6
            query: "   "
        """)
    assert problems == [
        f"{tmp_path}/g.yaml:2: missing required key 'id'",
        f"{tmp_path}/g.yaml:3 [query q2]: missing required key 'query'",
        f"{tmp_path}/g.yaml:4: query #3 must be a mapping",
        f"{tmp_path}/g.yaml:5: 'id' must be a string, got bool",
        f"{tmp_path}/g.yaml:8 [query q5]: 'query' is empty",
        f"{tmp_path}/g.yaml:10 [query q6]: 'query' is empty",
    ]


def test_duplicate_ids_and_group_disagreement(tmp_path):
    _, problems = problems_of(tmp_path, """\
        queries:
          - id: q1
            query: a
            expected_doc_ids: [d1]
            group: budget
          - id: q2
            query: b
            expected_doc_ids: [d2]
            group: budget
          - id: q1
            query: c
          - id: q3
            query: d
            expected_doc_ids: [d1]
            group: budget
        """)
    assert problems == [
        f"{tmp_path}/g.yaml:10 [query q1]: duplicate id (first at line 2)",
        f"{tmp_path}/g.yaml:6 [query q2]: group 'budget' disagrees on expected_doc_ids with "
        "query 'q1' (line 2)",
    ]


def test_several_problems_at_once_including_in_the_same_query(tmp_path):
    error, problems = problems_of(tmp_path, """\
        name: 3
        metadata_fields: [agency]
        extra: 1
        queries:
          - id: q1
            query: 3
            colour: red
            query_type: nonsense
          - id: q1
            query: ok
        """)
    assert problems == [
        f"{tmp_path}/g.yaml:3: unknown top-level key 'extra' (known: case_insensitive, "
        "corpus, description, metadata_fields, name, primary_metric, private, queries)",
        f"{tmp_path}/g.yaml:1: 'name' must be str",
        f"{tmp_path}/g.yaml:7 [query q1]: unknown key 'colour'",
        f"{tmp_path}/g.yaml:6 [query q1]: 'query' must be a string, got int",
        f"{tmp_path}/g.yaml:8 [query q1]: unknown query_type 'nonsense' (known: single_doc, "
        "comparison, follow_up, abstention)",
        f"{tmp_path}/g.yaml:9 [query q1]: duplicate id (first at line 5)",
    ]
    assert str(error).startswith(f"invalid golden set {tmp_path}/g.yaml (6 problem(s)):")
    assert isinstance(error, InputError) and isinstance(error, KebabError)
    assert error.exit_code == 2


def test_top_level_must_be_a_mapping_or_a_list(tmp_path):
    _, problems = problems_of(tmp_path, "just text\n")
    assert problems == [f"{tmp_path}/g.yaml:1: top level must be a mapping with 'queries' or a "
                        "list of queries"]


def test_missing_queries_and_empty_sets(tmp_path):
    assert problems_of(tmp_path, "name: x\n")[1] == [
        f"{tmp_path}/g.yaml:1: missing required top-level key 'queries'"]
    assert problems_of(tmp_path, "queries: []\n")[1] == [
        f"{tmp_path}/g.yaml:1: the golden set has no queries"]
    assert problems_of(tmp_path, "queries: {a: 1}\n")[1] == [
        f"{tmp_path}/g.yaml:1: 'queries' must be a list"]


def test_bad_yaml_reports_the_line(tmp_path):
    _, problems = problems_of(tmp_path, """\
        queries:
          - id: q1
            query: [unclosed
          - id: q2
        """)
    # PyYAML says "expected ',' or ']', but got ':'", libyaml "did not find expected ',' or ']'"
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path}/g.yaml:4: ")
    assert "expected ',' or ']'" in problems[0]


def test_python_object_tags_are_refused_by_the_safe_loader(tmp_path):
    marker = tmp_path / "pwned"
    error, problems = problems_of(tmp_path, f"""\
        queries:
          - id: q1
            query: !!python/object/apply:os.system ["touch {marker}"]
        """)
    assert error.summary == "golden set is not valid YAML"
    assert problems == [f"{tmp_path}/g.yaml:3: could not determine a constructor for the tag "
                        "'tag:yaml.org,2002:python/object/apply:os.system'"]
    assert not marker.exists()


def test_unreadable_and_non_utf8_files(tmp_path):
    with pytest.raises(GoldenSetError, match="cannot read golden set .*nope.yaml"):
        load_golden_set(tmp_path / "nope.yaml")
    with pytest.raises(GoldenSetError) as info:
        parse_golden_set(b"queries:\n  - id: \xff\n", "raw.yaml")
    assert info.value.summary == "golden set is not UTF-8"
    assert str(info.value.problems[0]) == "raw.yaml: byte 17: invalid start byte"


def test_subset_and_digest(tmp_path):
    g = load_text(tmp_path, "- {id: a, query: x}\n- {id: b, query: y}\n")
    assert [q.id for q in g.subset({"b"}).queries] == ["b"]
    same = load_text(tmp_path, "- {id: a, query: x}\n- {id: b, query: y}\n", name="h.yaml")
    other = load_text(tmp_path, "- {id: a, query: x}\n- {id: b, query: z}\n", name="i.yaml")
    assert g.digest == same.digest != other.digest
