"""The extractive answerer never quotes a heading path (issue 27 item 6): a path ending in a
numbered heading ("… — Frozen Design > 1. Headline UX scenes") was cut by the sentence
splitter at "1.", and its first part quoted as the answer."""

from __future__ import annotations

from kebab_mlflow.pipeline.answerer import AnswererConfig, extractive_answer
from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_document
from kebab_mlflow.pipeline.corpus import Document
from kebab_mlflow.pipeline.text import text_units
from kebab_mlflow.records import Hit

DOC = """# KB v1 최종 결과물 형태 — Frozen Design

## 1. Headline UX scenes

The search box opens on the first screen. Results appear below it as the user types.
"""


def test_the_issues_heading_path_is_one_heading_unit_never_quotable():
    chunks = chunk_document(Document(doc_id="design", text=DOC), ChunkerConfig())
    body = next(c for c in chunks if "search box" in c.text)
    assert body.text.startswith("KB v1 최종 결과물 형태 — Frozen Design > 1. Headline UX scenes\n")
    units = text_units(body.text)
    assert units[0].text == "KB v1 최종 결과물 형태 — Frozen Design > 1. Headline UX scenes"
    assert units[0].kind == "heading" and not units[0].quotable
    assert [u.text for u in units[1:]] == ["The search box opens on the first screen.",
                                          "Results appear below it as the user types."]


def test_a_question_about_the_heading_words_quotes_the_body_not_the_path():
    chunks = chunk_document(Document(doc_id="design", text=DOC), ChunkerConfig())
    hits = [Hit(chunk_id=c.chunk_id, doc_id=c.doc_id, score=1.0 - i / 10, rank=i + 1,
                text=c.text) for i, c in enumerate(chunks)]
    answer = extractive_answer("What does the Frozen Design headline UX scene show first?",
                               hits, AnswererConfig(refuse_below=0.0))
    assert not answer.refused
    assert " > " not in answer.text and "Frozen Design" not in answer.text
    assert "search box" in answer.text


def test_a_first_line_that_only_looks_like_the_path_start_is_left_alone():
    text = "Guide > Setup is where it starts. Then it goes on\n\nMore text follows here."
    units = text_units(text)
    assert units[0].kind == "sentence" and units[0].quotable
