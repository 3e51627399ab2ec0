"""import-beir: a BEIR folder → a golden set with graded expected_doc_ids that run can use."""

from __future__ import annotations

import json

import pytest
from conftest import write

from kebab_mlflow.errors import CorpusError
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.importers.beir import import_beir, read_qrels


def beir_folder(root, qrels: str, queries=None):
    queries = queries or [("q1", "first query"), ("q2", "second query"), ("q3", "third"),
                          ("q4", "only a zero judgment")]
    write(root / "corpus.jsonl", "".join(json.dumps({"_id": d, "title": "", "text": d}) + "\n"
                                         for d in ("d1", "d2", "d3")))
    write(root / "queries.jsonl", "".join(json.dumps({"_id": q, "text": t}) + "\n"
                                          for q, t in queries))
    write(root / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n" + qrels)
    return root


def test_graded_and_binary_judgments_and_skipped_queries(tmp_path):
    folder = beir_folder(tmp_path / "beir", "q1\td1\t2\nq1\td2\t1\nq2\td3\t1\nq4\td1\t0\n")
    summary = import_beir(folder, "test", tmp_path / "out" / "golden.yaml")
    assert (summary.written, summary.skipped_without_judgments) == (2, 2)  # q3, q4 left out
    g = load_golden_set(summary.out)
    assert g.name == "beir-test"
    assert [(q.id, q.query, dict(q.expected_doc_ids)) for q in g.queries] == [
        ("q1", "first query", {"d1": 2, "d2": 1}), ("q2", "second query", {"d3": 1})]
    text = summary.out.read_text()
    assert "2 judged queries; 2 without judgments left out" in text
    assert "expected_doc_ids:\n  - d3" in text  # binary judgments stay a plain list


def test_a_zero_grade_next_to_a_positive_one_is_kept_as_a_grade(tmp_path):
    folder = beir_folder(tmp_path / "beir", "q1\td1\t1\nq1\td2\t0\n")
    g = load_golden_set(import_beir(folder, "test", tmp_path / "g.yaml", name="mine").out)
    assert g.name == "mine"
    assert dict(g.queries[0].expected_doc_ids) == {"d1": 1, "d2": 0}
    assert g.queries[0].relevant_doc_grades == {"d1": 1}


def test_bad_qrels_rows_are_reported_with_their_lines(tmp_path):
    path = write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n"
                 "q2\td3\thigh\n")
    with pytest.raises(CorpusError) as info:
        read_qrels(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}:3: expected query-id<TAB>corpus-id<TAB>score, got ['q1', 'd2']",
        f"{path}:4: expected query-id<TAB>corpus-id<TAB>score, got ['q2', 'd3', 'high']"]


def test_missing_files_and_bad_queries(tmp_path):
    with pytest.raises(CorpusError, match="not a BEIR folder: missing .*queries.jsonl"):
        import_beir(tmp_path, "test", tmp_path / "g.yaml")
    folder = beir_folder(tmp_path / "beir", "q1\td1\t1\n")
    with pytest.raises(CorpusError, match=r"missing .*qrels/dev\.tsv"):
        import_beir(folder, "dev", tmp_path / "g.yaml")
    write(folder / "queries.jsonl", '{"_id": "q1"}\n')
    with pytest.raises(CorpusError) as info:
        import_beir(folder, "test", tmp_path / "g.yaml")
    assert str(info.value.problems[0]) == (f"{folder}/queries.jsonl:1: expected a JSON object "
                                           "with _id and text")
