"""Chunker: stable ids, headings respected, maximum size, overlap."""

from __future__ import annotations

import pytest
from conftest import KB

from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus, chunk_document
from kebab_mlflow.pipeline.corpus import Document, load_corpus


def sentences(n: int, tag: str) -> str:
    return " ".join(f"Sentence {i} of {tag} says something." for i in range(n))


def test_ids_are_doc_id_hash_n_and_stable():
    corpus = load_corpus(KB)
    first = chunk_corpus(corpus, ChunkerConfig())
    again = chunk_corpus(load_corpus(KB), ChunkerConfig())
    assert first == again
    by_doc: dict[str, list[str]] = {}
    for c in first:
        by_doc.setdefault(c.doc_id, []).append(c.chunk_id)
    for doc_id, ids in by_doc.items():
        assert ids == [f"{doc_id}#{n}" for n in range(len(ids))]
    assert set(by_doc) == {d.doc_id for d in corpus.documents}


def test_headings_split_sections_and_prefix_their_chunks():
    doc = Document("d", "# Guide\n\nIntro text.\n\n## Costs\n\nIt costs 5 euros.\n\n"
                        "### Fees\n\nA fee of 1 euro.\n\n## Dates\n\nOpens in May.\n")
    texts = [c.text for c in chunk_document(doc, ChunkerConfig())]
    assert texts == ["Guide\n\nIntro text.", "Guide > Costs\n\nIt costs 5 euros.",
                     "Guide > Costs > Fees\n\nA fee of 1 euro.",
                     "Guide > Dates\n\nOpens in May."]


def test_a_heading_inside_a_code_fence_is_not_a_heading():
    doc = Document("d", "# Top\n\n```\n# not a heading\n\nstill code\n```\n\nAfter.\n")
    texts = [c.text for c in chunk_document(doc, ChunkerConfig())]
    assert texts == ["Top\n\n```\n# not a heading\n\nstill code\n```\n\nAfter."]


def test_document_without_text_gets_one_chunk_named_after_it():
    assert [c.text for c in chunk_document(Document("d", "", "Title"), ChunkerConfig())] == \
        ["Title"]


@pytest.mark.parametrize("max_chars", [200, 400, 800])
def test_chunks_respect_the_maximum_size(max_chars):
    paragraphs = [sentences(n, f"p{n}") for n in (1, 3, 7, 2, 12, 1, 4)]
    doc = Document("d", "# T\n\n" + "\n\n".join(paragraphs))
    chunks = chunk_document(doc, ChunkerConfig(max_chars=max_chars, overlap_chars=60))
    assert len(chunks) > 1
    assert max(len(c.text) for c in chunks) <= max_chars
    for c in load_corpus(KB).documents:
        for chunk in chunk_document(c, ChunkerConfig(max_chars=max_chars)):
            assert len(chunk.text) <= max_chars, chunk.chunk_id


def test_whole_short_paragraphs_carry_over_as_overlap():
    paras = [f"Paragraph {i} " + "x" * 40 for i in range(6)]  # 52 chars each
    doc = Document("d", "\n\n".join(paras))
    chunks = [c.text for c in chunk_document(doc, ChunkerConfig(max_chars=170,
                                                                overlap_chars=60))]
    assert chunks[0] == "\n\n".join(paras[0:3])
    # the next chunk starts with the last whole paragraph of the previous one
    assert chunks[1] == "\n\n".join(paras[2:5])
    assert chunks[2] == "\n\n".join(paras[4:6])


def test_a_long_last_paragraph_carries_its_last_sentences():
    p1 = sentences(6, "one")  # ~ 200 chars, longer than the overlap
    p2 = sentences(6, "two")
    doc = Document("d", p1 + "\n\n" + p2)
    a, b = (c.text for c in chunk_document(doc, ChunkerConfig(max_chars=300, overlap_chars=80)))
    assert a == p1
    carried = "Sentence 4 of one says something. Sentence 5 of one says something."
    assert len(carried) <= 80 and p1.endswith(carried)
    assert b == carried + "\n\n" + p2


def test_a_long_last_sentence_carries_its_last_words():
    p1 = "word " * 60 + "end."
    doc = Document("d", p1.strip() + "\n\n" + "Next paragraph here.")
    a, b = (c.text for c in chunk_document(doc, ChunkerConfig(max_chars=320, overlap_chars=30)))
    tail = b.split("\n\n")[0]
    assert a.endswith(tail) and 0 < len(tail) <= 30 and tail.endswith("word end.")


def test_no_overlap_when_overlap_is_zero():
    doc = Document("d", sentences(6, "one") + "\n\n" + sentences(6, "two"))
    a, b = (c.text for c in chunk_document(doc, ChunkerConfig(max_chars=300, overlap_chars=0)))
    assert b == sentences(6, "two")


def test_a_paragraph_longer_than_the_maximum_is_windowed_with_overlap():
    words = [f"w{i:03d}" for i in range(200)]  # 5 chars each with the space
    doc = Document("d", " ".join(words))
    chunks = [c.text.split() for c in chunk_document(doc, ChunkerConfig(max_chars=100,
                                                                        overlap_chars=20))]
    assert all(len(" ".join(c)) <= 100 for c in chunks)
    assert chunks[0] == words[:19]  # 19 x 5 chars - 1 = 94 <= the 98-char budget (max - 2)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        shared = [w for w in prev if w in nxt]
        assert shared == prev[-4:]  # 4 words x 5 chars = the 20-char overlap
    assert chunks[-1][-1] == "w199"
    assert sorted({w for c in chunks for w in c}) == words


def test_document_mode_keeps_each_document_whole_with_its_title():
    doc = Document("123", "Body text.", "A title")
    assert [(c.chunk_id, c.text) for c in chunk_document(doc, ChunkerConfig("document"))] == \
        [("123#0", "A title\n\nBody text.")]
    # a title already at the start of the text is not repeated
    doc = Document("x", "# A title\n\nBody.", "A title")
    assert chunk_document(doc, ChunkerConfig("document"))[0].text == "# A title\n\nBody."
