"""Golden ids that collide under Unicode NFC normalization or case folding (issue 28): exit 2
naming both lines. Exact duplicates keep their own message ("duplicate id")."""

from __future__ import annotations

import unicodedata

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import GoldenSetError
from kebab_mlflow.golden import folded, parse_golden_set

runner = CliRunner()
NFC_CAFE = unicodedata.normalize("NFC", "café")
NFD_CAFE = unicodedata.normalize("NFD", "café")


def golden(*queries: str) -> bytes:
    return ("name: g\nqueries:\n" + "".join(f"  - {q}\n" for q in queries)).encode()


def problems_of(raw: bytes) -> list[str]:
    with pytest.raises(GoldenSetError) as caught:
        parse_golden_set(raw, "g.yaml")
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("first, second", [
    (NFC_CAFE, NFD_CAFE),  # one precomposed é, one e + combining accent
    ("Q-1", "q-1"),
    ("STRASSE", "straße"),  # case folding, not lower(): ß folds to ss
    (unicodedata.normalize("NFC", "한국"), unicodedata.normalize("NFD", "한국")),  # jamo
])
def test_query_ids_colliding_name_both_lines(first, second):
    raw = golden(f'{{id: "{first}", query: a, expected_doc_ids: [d1]}}',
                 f'{{id: "{second}", query: b, expected_doc_ids: [d2]}}')
    assert problems_of(raw) == [
        f"g.yaml:4 [query {second}]: query id {ascii(second)} collides with {ascii(first)} "
        "(line 3) under Unicode NFC normalization or case folding"]


def test_expected_ids_colliding_across_queries_name_both_lines():
    raw = golden('{id: q1, query: a, expected_doc_ids: [Doc-1], expected_chunk_ids: ["c#0"]}',
                 '{id: q2, query: b, expected_doc_ids: [doc-1, Doc-1]}',
                 '{id: q3, query: c, expected_chunk_ids: ["C#0"]}')
    assert problems_of(raw) == [
        "g.yaml:4 [query q2]: expected id 'doc-1' collides with 'Doc-1' (line 3) under "
        "Unicode NFC normalization or case folding",
        "g.yaml:5 [query q3]: expected id 'C#0' collides with 'c#0' (line 3) under "
        "Unicode NFC normalization or case folding"]


def test_the_same_spelling_twice_is_not_a_collision():
    raw = golden("{id: q1, query: a, expected_doc_ids: [d1]}",
                 "{id: q2, query: b, expected_doc_ids: [d1]}")
    assert [q.id for q in parse_golden_set(raw, "g.yaml").queries] == ["q1", "q2"]


def test_an_exact_duplicate_keeps_its_own_message():
    raw = golden("{id: q1, query: a, expected_doc_ids: [d1]}",
                 "{id: q1, query: b, expected_doc_ids: [d1]}")
    assert problems_of(raw) == ["g.yaml:4 [query q1]: duplicate id (first at line 3)"]


def test_folded():
    assert folded(NFD_CAFE) == folded("CAFÉ") == NFC_CAFE


def test_validate_exits_2(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_bytes(golden(f'{{id: "{NFC_CAFE}", query: a, expected_doc_ids: [d1]}}',
                            f'{{id: "{NFD_CAFE}", query: b, expected_doc_ids: [d1]}}'))
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2
    assert f"{path}:4" in res.output and "(line 3)" in res.output
