"""``per_query.jsonl`` is written and read by one definition (issue 26): a line reads back
into the same ``Hit`` and ``Answer`` records the run scored, and writing them again gives
the same bytes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kebab_mlflow.errors import PerQueryError
from kebab_mlflow.evaluation.per_query import PerQueryWriter, read_per_query, record
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.records import Answer, Hit, QueryResult

QUERY = GoldenQuery(id="q1", query="what is it?", ask=True)
HITS = (Hit(chunk_id="d1#0", doc_id="d1", score=0.75, rank=1, text="the chunk"),
        Hit(chunk_id="d2#3", doc_id="d2", score=2, rank=2))  # an int score stays an int
ANSWER = Answer(text="it is this", citations=("d1#0",), confidence=0.9, raw_confidence=0.8,
                similarity=0.5)
RESULT = QueryResult(query_id="q1", hits=HITS, answer=ANSWER, latency_ms=3.5, search_ms=1.0,
                     answer_ms=2.5)


def _written(path: Path, results: list[QueryResult], private: bool = False) -> bytes:
    writer = PerQueryWriter(path)
    for r in results:
        writer.write(record(QUERY, r, {"mrr": 1.0}, private))
    writer.close()
    return path.read_bytes()


def _again(path: Path, private: bool = False) -> bytes:
    """Each row read back, as a QueryResult, written again."""
    results = [QueryResult(query_id=row.id, hits=row.hits, answer=row.answer,
                           latency_ms=row.latency_ms, error=row.error,
                           search_ms=(row.stage_ms or {}).get("search"),
                           answer_ms=(row.stage_ms or {}).get("answer"))
               for row in read_per_query(path)]
    return _written(path.with_suffix(".again"), results, private)


def test_hits_and_answers_read_back_as_the_records_written(tmp_path):
    refusal = replace(RESULT, answer=Answer(text="", refusal_reason="no evidence"))
    first = _written(tmp_path / "pq.jsonl", [RESULT, refusal, replace(RESULT, answer=None)])
    rows = list(read_per_query(tmp_path / "pq.jsonl"))
    assert [r.hits for r in rows] == [tuple(replace(h, text="") for h in HITS)] * 3
    assert type(rows[0].hits[1].score) is int  # noqa: E721 - the exact type is the point
    assert [r.answer for r in rows] == [ANSWER, refusal.answer, None]
    assert [r.refused for r in rows] == [False, True, None] and rows[0].top_score == 0.75
    assert _again(tmp_path / "pq.jsonl") == first


def test_a_private_answer_text_reads_back_empty_and_writes_back_null(tmp_path):
    first = _written(tmp_path / "pq.jsonl", [RESULT], private=True)
    assert json.loads(first)["answer"]["text"] is None
    (row,) = read_per_query(tmp_path / "pq.jsonl")
    assert row.answer == replace(ANSWER, text="") and row.query is None
    assert _again(tmp_path / "pq.jsonl", private=True) == first


def test_a_hit_or_answer_that_is_no_record_is_reported_with_its_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    line = json.loads(_written(tmp_path / "pq.jsonl", [RESULT]))
    bad = {**line, "hits": [{**line["hits"][0], "rank": 0}],
           "answer": {**line["answer"], "citations": "d1#0"}}
    path.write_text(json.dumps(line) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(PerQueryError) as err:
        list(read_per_query(path))
    message = str(err.value)
    assert f"{path}:2" in message and "'hits' must be" in message and "'answer' must be" in message


def test_the_writer_hands_blocks_to_its_thread_in_order_with_their_digest(tmp_path,
                                                                          monkeypatch):
    """Lines go out BLOCK bytes at a time on a second thread: the file is every line in
    order and the digest is the file's, across many blocks and a partial last one."""
    import hashlib

    from kebab_mlflow.evaluation.per_query import PerQueryWriter

    monkeypatch.setattr(PerQueryWriter, "BLOCK", 100)
    lines = [f'{{"id": "q{i}", "query": "ü{"x" * (i % 37)}"}}\n' for i in range(2_000)]
    writer = PerQueryWriter(tmp_path / "per_query.jsonl")
    for line in lines:
        writer.write_line(line)
    digest = writer.close()
    data = (tmp_path / "per_query.jsonl").read_bytes()
    assert data == "".join(lines).encode() and writer.count == 2_000
    assert digest == hashlib.sha256(data).hexdigest()


def test_an_error_writing_on_the_writers_thread_is_raised_to_the_caller(tmp_path, monkeypatch):
    import errno

    from kebab_mlflow.evaluation.per_query import PerQueryWriter

    monkeypatch.setattr(PerQueryWriter, "BLOCK", 10)
    writer = PerQueryWriter(tmp_path / "per_query.jsonl")

    def full(data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer._fh, "write", full)
    with pytest.raises(OSError, match="No space left"):
        for i in range(1_000):  # raised by a later block once the thread has failed
            writer.write_line(f'{{"id": "q{i}"}}\n')
        writer.close()
    with pytest.raises(OSError, match="No space left"):  # as run_queries' finally calls it
        writer.close()
    assert writer._fh.closed and not writer._thread.is_alive()
