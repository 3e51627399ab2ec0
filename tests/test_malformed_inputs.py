"""Malformed run files and BEIR inputs (issue 28): exit 2 naming file:line, before any run.

Before: an empty run file was an IndexError and a FAILED run, a binary file a
UnicodeDecodeError, a truncated .gz an OSError, deep-nested JSON a RecursionError (run files,
BEIR corpus and queries alike).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.targets.run import _deep_line
from tests.conftest import GOLDEN, runs_in, write

runner = CliRunner()
DEEP = "[" * 50_000 + "]" * 50_000  # far past Python's recursion limit
TREC_LINE = "q1 Q0 d1 1 1.0 tag\n"


def _truncated_gzip(path: Path) -> Path:
    whole = gzip.compress(TREC_LINE.encode() * 5000)
    path.write_bytes(whole[: len(whole) // 2])
    return path


RUN_FILES = {
    # name: (how to write it, the line the error names, a phrase of the message)
    "empty.trec": (lambda p: p.write_bytes(b""), 1, "has no hits"),
    "blank.trec": (lambda p: p.write_text("  \n\n"), 1, "has no hits"),
    "binary.trec": (lambda p: p.write_bytes(TREC_LINE.encode() + b"\xff\xfe\x00\x01" * 300),
                    2, "not UTF-8"),
    "truncated.trec.gz": (_truncated_gzip, None, "truncated or corrupt"),
    "deep.json": (lambda p: p.write_text('{"q1": {"d1": 1.0},\n"q2": ' + DEEP + "}"), 2,
                  "nested too deeply"),
    "bad.json": (lambda p: p.write_text('{"q1": {"d1": 1.0},\n"q2":\n'), 3, "not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(RUN_FILES))
def test_a_malformed_run_file_exits_2_with_file_line_and_no_run(tmp_path, store_uri, name):
    make, line, phrase = RUN_FILES[name]
    path = tmp_path / name
    make(path)
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--target", f"run:{path}",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2, res.output
    assert phrase in res.output and "Traceback" not in res.output
    assert f"{path}:{line if line else ''}" in res.output.replace("\n", "")
    assert runs_in(store_uri) == []


def test_a_truncated_gzip_names_the_line_it_ends_in(tmp_path, store_uri):
    path = _truncated_gzip(tmp_path / "run.trec.gz")
    with gzip.open(path, "rb") as fh:  # the lines that can be read before the stream ends
        whole_lines = 0
        try:
            for _ in fh:
                whole_lines += 1
        except EOFError:
            pass
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--target", f"run:{path}",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2
    assert f"{path}:{whole_lines + 1}: the gzip stream ends here" in res.output.replace("\n", "")


@pytest.mark.parametrize("text, line", [
    ('{"a": 1}', 1),
    ('{"a":\n\n' + "[" * 70, 3),
    ('{"a": "' + "[" * 100 + '",\n"b": ' + "[" * 70, 2),  # brackets in a string do not count
    ('{"a": "\\"' + "[" * 100 + '",\n"b": ' + "{" * 70, 2),  # nor after an escaped quote
])
def test_deep_line_counts_brackets_outside_strings(text, line):
    assert _deep_line(text.encode()) == line


def _beir_folder(root: Path, corpus_lines: list[str], query_lines: list[str]) -> Path:
    root.mkdir()
    write(root / "corpus.jsonl", "\n".join(corpus_lines) + "\n")
    write(root / "queries.jsonl", "\n".join(query_lines) + "\n")
    write(root / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


GOOD_DOC = json.dumps({"_id": "d1", "title": "t", "text": "some text"})
GOOD_QUERY = json.dumps({"_id": "q1", "text": "some query"})


def test_a_deep_nested_beir_corpus_line_exits_2_with_file_line(tmp_path, store_uri):
    folder = _beir_folder(tmp_path / "beir", [GOOD_DOC, '{"_id": "d2", "text": ' + DEEP + "}"],
                          [GOOD_QUERY])
    golden = write(tmp_path / "g.yaml", "name: g\nqueries:\n"
                   "  - {id: q1, query: some query, expected_doc_ids: [d1]}\n")
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(folder),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2, res.output
    assert f"{folder / 'corpus.jsonl'}:2" in res.output and "nested too deeply" in res.output
    assert runs_in(store_uri) == []


@pytest.mark.parametrize("bad_line, phrase", [
    ('{"_id": "q2", "text": ' + DEEP + "}", "nested too deeply"),
    ("\udcff", "utf-8"),  # written as invalid UTF-8 below
])
def test_a_malformed_beir_queries_line_exits_2_with_file_line(tmp_path, bad_line, phrase):
    folder = _beir_folder(tmp_path / "beir", [GOOD_DOC], [GOOD_QUERY, "PLACEHOLDER"])
    queries = folder / "queries.jsonl"
    bad = bad_line.encode("utf-8", "surrogateescape")
    queries.write_bytes(queries.read_bytes().replace(b"PLACEHOLDER", bad))
    out = tmp_path / "golden.yaml"
    res = runner.invoke(app, ["import-beir", str(folder), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert f"{queries}:2" in res.output and phrase in res.output.lower()
    assert not out.exists()
