"""Corpus folders with links (issue 28): each real file indexed once, links leaving the folder
refused with their path (exit 2), dangling links warned about."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import CorpusError
from kebab_mlflow.pipeline.corpus import load_corpus
from tests.conftest import runs_in, write

runner = CliRunner()


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write(root / "CLAUDE.md", "# Agents\nhow to work here\n")
    write(root / "notes" / "other.md", "# Other\nsomething else\n")
    (root / "AGENTS.md").symlink_to("CLAUDE.md")
    (root / "GEMINI.md").symlink_to(root / "CLAUDE.md")  # absolute, still inside
    return root


def doc_ids(root: Path) -> list[str]:
    return [d.doc_id for d in load_corpus(root).documents]


def test_links_to_one_file_are_one_document_named_in_one_warning(kb, caplog):
    with caplog.at_level(logging.WARNING, logger="kebab_mlflow"):
        assert doc_ids(kb) == ["CLAUDE", "notes/other"]
    (warning,) = caplog.messages
    assert "2 file(s) are links" in warning
    assert "AGENTS.md (= CLAUDE.md)" in warning and "GEMINI.md (= CLAUDE.md)" in warning


def test_a_hard_link_is_the_same_real_file(kb):
    os.link(kb / "notes" / "other.md", kb / "copy.md")
    assert doc_ids(kb) == ["CLAUDE", "copy"]  # first by path; no symlink among them


def test_a_link_only_reached_through_links_is_indexed_once_under_the_first(tmp_path):
    root = tmp_path / "kb"
    write(root / "real" / "x.txt", "text")
    (root / "b.txt").symlink_to(root / "real" / "x.txt")
    (root / "a.txt").symlink_to(root / "real" / "x.txt")
    assert doc_ids(root) == ["real/x"]  # the file itself wins over links


def test_a_folder_link_inside_is_not_walked_twice(kb):
    (kb / "notes-again").symlink_to("notes", target_is_directory=True)
    assert doc_ids(kb) == ["CLAUDE", "notes/other"]


def test_a_link_leaving_the_folder_is_refused_with_its_path(kb, tmp_path):
    secret = write(tmp_path / "outside" / "private.txt", "not part of the corpus")
    (kb / "notes" / "leak.txt").symlink_to(secret)
    (kb / "elsewhere").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(CorpusError) as caught:
        load_corpus(kb)
    where = {p.location for p in caught.value.problems}
    assert where == {str(kb / "notes" / "leak.txt"), str(kb / "elsewhere")}
    assert "outside the corpus folder" in str(caught.value)


def test_a_dangling_link_is_warned_about_and_skipped(kb, caplog):
    (kb / "gone.md").symlink_to("missing.md")
    with caplog.at_level(logging.WARNING, logger="kebab_mlflow"):
        assert doc_ids(kb) == ["CLAUDE", "notes/other"]
    assert any("1 dangling link(s) skipped: gone.md" in m for m in caplog.messages)


def test_run_refuses_a_leaving_link_with_exit_2_before_any_run(kb, tmp_path, store_uri):
    secret = write(tmp_path / "outside.md", "private")
    (kb / "leak.md").symlink_to(secret)
    golden = write(tmp_path / "g.yaml", "name: g\nqueries:\n"
                   "  - {id: q1, query: how to work, expected_doc_ids: [CLAUDE]}\n")
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(kb),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 2, res.output
    assert f"{kb / 'leak.md'}: a link to {secret}" in res.output.replace("\n", "")
    assert runs_in(store_uri) == []
