"""Corpus ingestion (folder, BEIR jsonl/gz) and the on-disk index cache."""

from __future__ import annotations

import gzip
import hashlib
import json
import os

import pytest
from conftest import KB, write

from kebab_mlflow.config import build_config
from kebab_mlflow.errors import CorpusError
from kebab_mlflow.pipeline.backends.lexical import BM25Index
from kebab_mlflow.pipeline.corpus import load_corpus
from kebab_mlflow.pipeline.reference import build_pipeline


def test_folder_doc_ids_are_relative_paths_without_suffix(tmp_path):
    write(tmp_path / "kb" / "flood" / "riverside.md", "# Riverside\n\nText.")
    write(tmp_path / "kb" / "notes.txt", "plain text")
    write(tmp_path / "kb" / "image.png", "not text")
    corpus = load_corpus(tmp_path / "kb")
    assert [(d.doc_id, d.title) for d in corpus.documents] == [
        ("flood/riverside", "Riverside"), ("notes", "notes")]


def test_the_digest_follows_the_content(tmp_path):
    write(tmp_path / "kb" / "a.md", "one")
    first = load_corpus(tmp_path / "kb").digest
    assert load_corpus(tmp_path / "kb").digest == first
    write(tmp_path / "kb" / "a.md", "two")
    assert load_corpus(tmp_path / "kb").digest != first


def test_folder_problems(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="has no .md/.markdown/.txt files"):
        load_corpus(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.md").write_bytes(b"ok \xff")
    with pytest.raises(CorpusError) as info:
        load_corpus(tmp_path / "bad")
    assert [str(p) for p in info.value.problems] == [f"{tmp_path}/bad/x.md: not UTF-8 at byte 3"]
    with pytest.raises(CorpusError, match="is neither a folder"):
        load_corpus(tmp_path / "missing.csv")


def beir_lines(*records):
    return "".join(json.dumps(r) + "\n" for r in records)


def test_beir_jsonl_and_gz_give_the_same_corpus(tmp_path):
    text = beir_lines({"_id": "1", "title": "T1", "text": "alpha"},
                      {"_id": 2, "text": "beta", "metadata": {}})
    write(tmp_path / "plain" / "corpus.jsonl", text)
    (tmp_path / "gz").mkdir()
    with gzip.open(tmp_path / "gz" / "corpus.jsonl.gz", "wt") as fh:
        fh.write(text)
    plain, gz = load_corpus(tmp_path / "plain"), load_corpus(tmp_path / "gz" / "corpus.jsonl.gz")
    assert plain.documents == gz.documents
    assert [(d.doc_id, d.title, d.text) for d in plain.documents] == [
        ("1", "T1", "alpha"), ("2", "", "beta")]
    assert plain.digest == gz.digest  # over the decompressed bytes


def test_beir_problems_are_reported_with_lines(tmp_path):
    path = write(tmp_path / "corpus.jsonl",
                 beir_lines({"_id": "1", "text": "a"}) + "not json\n"
                 + beir_lines({"text": "no id"}, {"_id": "1", "text": "again"}))
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    problems = [str(p) for p in info.value.problems]
    assert problems[0].startswith(f"{path}:2: not a BEIR record (JSONDecodeError")
    assert problems[1] == f"{path}:3: not a BEIR record (KeyError: '_id')"
    assert problems[2] == f"{path}:4: duplicate _id '1'"
    with pytest.raises(CorpusError, match="is empty"):
        load_corpus(write(tmp_path / "e" / "corpus.jsonl", "\n"))


@pytest.mark.parametrize("tokenizer", ["auto", "english"])
def test_a_beir_corpus_is_parsed_once_for_its_index_and_not_again(tmp_path, monkeypatch,
                                                                   tokenizer):
    """A cached index needs only the corpus's digest; a bad corpus fails before any cache
    entry is made for it, whether or not its script is scanned first (tokenizer auto)."""
    from kebab_mlflow.pipeline import corpus

    config = build_config(overrides={"lexical.tokenizer": tokenizer})
    bad = write(tmp_path / "bad" / "corpus.jsonl", beir_lines({"_id": "1", "text": "a"}) + "{\n")
    with pytest.raises(CorpusError, match="invalid BEIR corpus") as info:
        build_pipeline(config, bad)
    assert str(info.value.problems[0]).startswith(f"{bad}:2: not a BEIR record")
    assert not (tmp_path / ".kebab-cache").exists()

    good = write(tmp_path / "good" / "corpus.jsonl",
                 beir_lines({"_id": "d1", "text": "alpha beta"}, {"_id": "d2", "text": "gamma"}))
    parsed = []
    parse = corpus._parse_beir
    monkeypatch.setattr(corpus, "_parse_beir", lambda *a: parsed.append(a) or parse(*a))
    first = build_pipeline(config, good)
    corpus._PARSED_BEIR.clear()  # as a new process finds it
    second = build_pipeline(config, good)
    assert len(parsed) == 1
    assert second.folder == first.folder
    assert second.search("gamma", 2) == first.search("gamma", 2)
    assert [d.doc_id for d in second.corpus.documents] == ["d1", "d2"]  # parsed when read
    assert len(parsed) == 2


def test_a_beir_files_digest_is_kept_by_its_identity_once_the_file_has_settled(tmp_path,
                                                                                 monkeypatch):
    from kebab_mlflow.pipeline import corpus

    path = write(tmp_path / "c" / "corpus.jsonl", beir_lines({"_id": "d1", "text": "alpha"}))
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    digests = tmp_path / ".kebab-cache" / "corpus-digests"
    # just written (however slow the machine: "just" is as long as the test needs): a rewrite
    # in the same tick keeps size and times, so nothing is kept
    monkeypatch.setattr(corpus, "SETTLED_NS", 10**18)
    assert load_corpus(path).digest == expected
    assert not digests.exists()

    monkeypatch.setattr(corpus, "SETTLED_NS", -1)  # as if written long ago
    corpus._PARSED_BEIR.clear()
    assert load_corpus(path).digest == expected
    [entry] = digests.iterdir()
    assert entry.read_text() == expected

    reads = []
    decompressed = corpus._decompressed
    monkeypatch.setattr(corpus, "_decompressed", lambda *a: reads.append(a) or decompressed(*a))
    corpus._PARSED_BEIR.clear()  # a new process: the digest without reading the file
    opened = corpus.open_corpus(path)
    assert (opened.digest, reads) == (expected, [])
    assert [d.doc_id for d in opened.documents] == ["d1"] and len(reads) == 1

    write(path, beir_lines({"_id": "d2", "text": "gamma"}))  # the same size, new content
    os.utime(path, ns=(1, 1))  # and an old modification time: the change time still moved
    corpus._PARSED_BEIR.clear()
    assert load_corpus(path).digest == hashlib.sha256(path.read_bytes()).hexdigest()

    for found in digests.iterdir():  # an entry that lies: the content read is checked
        found.write_text("0" * 64)
    corpus._PARSED_BEIR.clear()
    with pytest.raises(CorpusError, match="changed while it was being read"):
        load_corpus(path)
    for found in digests.iterdir():  # an entry that is not a digest is computed again
        found.write_text("garbage")
    corpus._PARSED_BEIR.clear()
    assert load_corpus(path).digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (digests / corpus._identity(path)).read_text() == load_corpus(path).digest  # again


def test_the_index_is_cached_and_a_second_build_loads_it(tmp_path, monkeypatch):
    from kebab_mlflow.pipeline.backends import lexical

    config = build_config()
    first = build_pipeline(config, KB)
    original, original_counts = BM25Index.from_counts, lexical.term_counts

    def refuse(*args, **kwargs):
        raise AssertionError("the index was rebuilt instead of loaded from the cache")

    monkeypatch.setattr(BM25Index, "from_counts", refuse)
    monkeypatch.setattr(lexical, "term_counts", refuse)
    second = build_pipeline(config, KB)
    assert second.folder == first.folder and str(first.folder).startswith(str(tmp_path))
    assert [c.chunk_id for c in second.chunks] == [c.chunk_id for c in first.chunks]
    query = "budget of the tram extension"
    assert second.search(query, 5) == first.search(query, 5)
    # another BM25 setting is another index, weighed from the cached term counts: the chunks
    # are not tokenized again, and the result is what a fresh build gives
    monkeypatch.setattr(BM25Index, "from_counts", original)  # term_counts stays refused
    other = build_pipeline(build_config(overrides={"bm25.k1": 1.5}), KB)
    assert other.folder == first.folder  # same chunks, separate bm25 sub-folder
    monkeypatch.setattr(lexical, "term_counts", original_counts)
    fresh = BM25Index.build([c.text for c in first.chunks], 1.5, 0.4)
    assert (other.backend.weights != fresh.weights).nnz == 0
    assert other.backend.vocabulary == fresh.vocabulary
    assert (first.folder / f"bm25-{lexical.TOKENIZER_VERSION}-k1=1.5-b=0.4" /
            "bm25_weights.npz").is_file()


def test_a_changed_corpus_or_chunker_gets_a_new_cache_entry(tmp_path):
    write(tmp_path / "kb" / "a.md", "# A\n\nalpha beta")
    first = build_pipeline(build_config(), tmp_path / "kb").folder
    assert build_pipeline(build_config(overrides={"chunker.max_chars": 300}),
                          tmp_path / "kb").folder != first
    write(tmp_path / "kb" / "a.md", "# A\n\nalpha gamma")
    assert build_pipeline(build_config(), tmp_path / "kb").folder != first


def test_a_half_moved_bm25_cache_is_rebuilt_not_read(tmp_path):
    """A parallel sweep worker may move the weights in before the vocabulary file."""
    from kebab_mlflow.pipeline.backends import lexical

    config = build_config()
    first = build_pipeline(config, KB)
    sub = first.folder / f"bm25-{lexical.TOKENIZER_VERSION}-k1=0.9-b=0.4"
    (sub / "bm25_vocabulary.json").unlink()
    again = build_pipeline(config, KB)
    query = "budget of the tram extension"
    assert again.search(query, 5) == first.search(query, 5)
    assert (sub / "bm25_vocabulary.json").is_file()


def test_processes_building_the_same_index_at_once_build_it_once(tmp_path):
    """Parallel sweep workers: one builds each cached file, the others wait and load it."""
    import multiprocessing
    import time

    from kebab_mlflow.pipeline import chunker, reference
    from kebab_mlflow.pipeline.backends import lexical

    log = tmp_path / "builds.log"
    arrived = multiprocessing.get_context("fork").Value("i", 0)

    def slow(name, build):
        def wrapped(*args, **kwargs):
            with log.open("a") as fh:
                fh.write(f"{name}\n")
            deadline = time.monotonic() + 60  # the builder waits for the event: all 3 started
            while arrived.value < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            return build(*args, **kwargs)
        return wrapped

    def arrive_then_build(*args):
        with arrived.get_lock():
            arrived.value += 1
        build_pipeline(*args)

    config = build_config()
    with pytest.MonkeyPatch.context() as mp:  # inherited by the forked processes
        mp.setattr(reference, "chunk_corpus", slow("chunks", chunker.chunk_corpus))
        mp.setattr(lexical, "term_counts", slow("term_counts", lexical.term_counts))
        context = multiprocessing.get_context("fork")
        processes = [context.Process(target=arrive_then_build, args=(config, KB))
                     for _ in range(3)]
        for p in processes:
            p.start()
        for p in processes:
            p.join(60)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    assert sorted(log.read_text().split()) == ["chunks", "term_counts"]
    built = build_pipeline(config, KB)  # what they left is whole: what a fresh build gives
    fresh = BM25Index.build([c.text for c in built.chunks], 0.9, 0.4)
    assert (built.backend.weights != fresh.weights).nnz == 0


def test_a_cached_number_is_computed_once_and_a_bad_entry_again(tmp_path):
    from kebab_mlflow.pipeline.cache import cached_number

    calls = []

    def compute() -> float:
        calls.append(1)
        return 0.25

    assert cached_number("shares", "k", compute) == cached_number("shares", "k", compute) == 0.25
    entry = tmp_path / ".kebab-cache" / "shares" / "k"
    assert (len(calls), entry.read_text()) == (1, "0.25")
    entry.write_text("not a number")
    assert cached_number("shares", "k", compute) == 0.25
    assert (len(calls), entry.read_text()) == (2, "0.25")
