"""import-beir: a BEIR folder → a golden set with graded expected_doc_ids that run can use."""

from __future__ import annotations

import json
from pathlib import Path

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
    folder = beir_folder(tmp_path / "scifact" / "beir",
                         "q1\td1\t2\nq1\td2\t1\nq2\td3\t1\nq4\td1\t0\n")
    summary = import_beir(folder, "test", tmp_path / "out" / "golden.yaml")
    assert (summary.written, summary.skipped_without_judgments) == (2, 2)  # q3, q4 left out
    g = load_golden_set(summary.out)
    assert g.name == "scifact-test"  # <collection>/beir/ is named after the collection
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
    assert str(info.value.problems[0]).startswith(
        f"{folder}/queries.jsonl:1: expected a JSON object with _id and a string text")
    write(folder / "queries.jsonl", '{"_id": "q0", "text": "fine"}\n{"_id": "q1", "text": 7}\n')
    with pytest.raises(CorpusError) as info:
        import_beir(folder, "test", tmp_path / "g.yaml")
    assert str(info.value.problems[0]) == (f"{folder}/queries.jsonl:2: expected a JSON object "
                                           "with _id and a string text ('text' is a int)")


def test_the_golden_set_is_named_after_the_collection_and_records_its_corpus(tmp_path):
    folder = beir_folder(tmp_path / "nfcorpus", "q1\td1\t1\n")
    out = tmp_path / "sets" / "g.yaml"
    summary = import_beir(folder, "test", out)
    g = load_golden_set(out)
    assert (summary.name, g.name) == ("nfcorpus-test", "nfcorpus-test")
    assert "corpus: ../nfcorpus/corpus.jsonl\n" in out.read_text()  # relative to the file
    assert Path(g.corpus).resolve() == (folder / "corpus.jsonl").resolve()
    assert load_golden_set(import_beir(folder, "test", out, name="x").out).name == "x"


def test_run_finds_the_corpus_from_the_golden_set_and_says_so(tmp_path, store_uri):
    from typer.testing import CliRunner

    from kebab_mlflow.cli import app

    folder = beir_folder(tmp_path / "coll" / "beir", "q1\td1\t1\nq2\td3\t1\n")
    out = tmp_path / "coll-test.yaml"
    import_beir(folder, "test", out)
    res = CliRunner().invoke(app, ["run", "--golden", str(out), "--tracking-uri", store_uri,
                                   "--set", "chunker.mode=document", "--json"])
    assert res.exit_code == 0, res.output
    assert "corpus: " in res.stderr and "(from the golden set)" in res.stderr
    other = tmp_path / "other"  # an explicit --corpus wins: this one lacks d3 -> exit 2
    write(other / "corpus.jsonl", json.dumps({"_id": "d1", "text": "d1"}) + "\n")
    res = CliRunner().invoke(app, ["run", "--golden", str(out), "--corpus", str(other),
                                   "--tracking-uri", store_uri])
    assert res.exit_code == 2
    assert "expected doc id(s) not in the corpus: d3" in res.output


@pytest.mark.parametrize(("line", "problem"), [
    ({"_id": "d2", "text": 12}, "'text' must be a string, got a int"),
    ({"_id": "d2", "text": "t", "title": ["a"]}, "'title' must be a string, got a list"),
    ({"_id": "d2", "text": {"x": 1}}, "'text' must be a string, got a dict"),
    (["d2", "text"], "not a BEIR record"),
])
def test_beir_text_and_title_must_be_strings(tmp_path, line, problem):
    from kebab_mlflow.pipeline.corpus import load_corpus

    path = write(tmp_path / "corpus.jsonl", json.dumps({"_id": "d1", "text": "ok", "title": None})
                 + "\n" + json.dumps(line) + "\n")
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    assert info.value.exit_code == 2
    assert len(info.value.problems) == 1
    assert str(info.value.problems[0]).startswith(f"{path}:2: ")
    assert problem in str(info.value.problems[0])


def test_a_beir_title_is_part_of_the_text_in_every_chunker_mode():
    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_document
    from kebab_mlflow.pipeline.corpus import Document

    body = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(6))
    doc = Document("d", body, "Vitamin D and bone density")
    untitled = chunk_document(Document("d", body), ChunkerConfig(max_chars=300))
    titled = chunk_document(doc, ChunkerConfig(max_chars=300))
    assert [c.chunk_id for c in titled] == [c.chunk_id for c in untitled]  # ids do not move
    assert len(titled) > 1
    assert titled[0].text == "Vitamin D and bone density\n\n" + untitled[0].text
    assert [c.text for c in titled[1:]] == [c.text for c in untitled[1:]]
    whole = chunk_document(doc, ChunkerConfig("document"))
    assert whole[0].text.startswith("Vitamin D and bone density\n\nParagraph 0")
    # a title the text already holds (a folder document's first heading) is not repeated
    headed = Document("d", "# Guide\n\nSome text.", "Guide")
    assert chunk_document(headed, ChunkerConfig())[0].text.count("Guide") == 1


def test_the_fixture_chunks_do_not_change_with_titles():
    from conftest import KB

    from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus, extra_title
    from kebab_mlflow.pipeline.corpus import load_corpus

    corpus = load_corpus(KB)
    assert all(extra_title(d) == "" for d in corpus.documents)  # every title is a heading
    assert len(chunk_corpus(corpus, ChunkerConfig())) > len(corpus.documents)
