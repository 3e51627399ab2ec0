"""A recorded run handed back to the query loop (evaluation/runner.py) as if its pipeline
answered again: what :func:`evaluation.rescore.rescore` scores.

Two recordings, one interface: :class:`RowRecording` holds whole rows (an in-memory result,
tests); :class:`FileRecording` holds, of each ``per_query.jsonl`` line, only its id, its byte
offset and two flags, and reads a batch's lines again when the loop replays that batch — a
million recorded queries of 100 hits are ~40 GB as rows (issue 32: ``rescore`` at 1M was
killed at 21.3 GB), and ~100 MB as offsets.

A file's batch whose lines are all *replayable* — hits only, each a document (chunk id = doc
id, none twice), every hit score a float, ranked 1..n, no answer, error, evidence or
repeats — is handed over as doc codes (:meth:`CodedReplayTarget.coded`) and scored and
written by :mod:`evaluation.coded`, as a run file's batch is, each line's ``hits`` text
written back as recorded where it is what that module would write (:func:`_recorded_hits`):
the same scores, first relevant ranks and line bytes as the Hit path
(``tests/test_rescore_streaming.py`` checks both on the same files), without a Hit object per
hit. Any other batch takes the Hit path.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.evaluation.coded import code_rankings
from kebab_mlflow.evaluation.per_query import (
    CompactRow,
    PerQueryRow,
    read_compact,
    read_lines_at,
    read_rows_at,
)
from kebab_mlflow.files import json_texts
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.records import QueryResult, VersionSnapshot

ANSWER_SCORE = "contains_all"  # in a row's scores when its run scored answers


class RowRecording:
    """A recorded run's rows, held whole."""

    def __init__(self, rows: Iterable[PerQueryRow]):
        self._rows = {row.id: row for row in rows}

    @property
    def ids(self) -> Sequence[str]:
        return list(self._rows)

    @property
    def scored_answers(self) -> bool:
        """Whether the run scored answers (a search-only target's rows have none)."""
        return any(ANSWER_SCORE in row.scores for row in self._rows.values())

    def answered(self, query_id: str) -> bool:
        return self._rows[query_id].answer is not None

    def rows(self, query_ids: Sequence[str]) -> list[PerQueryRow]:
        return [self._rows[i] for i in query_ids]


class FileRecording:
    """A recorded run's ``per_query.jsonl``, read again a batch at a time. ``entries``:
    (id, byte offset, whether it holds an answer, whether it scored answers) of each line
    that :func:`per_query.read_compact` has read, and checked, from ``path``."""

    def __init__(self, path: Path, shown_as: str,
                 entries: Iterable[tuple[str, int, bool, bool]]):
        self.path, self.shown_as = path, shown_as
        self._index: dict[str, int] = {}
        self._offsets = array("q")
        self._answered = bytearray()
        self.scored_answers = False
        for query_id, offset, answered, scored in entries:
            self._index[query_id] = len(self._offsets)
            self._offsets.append(offset)
            self._answered.append(answered)
            self.scored_answers |= scored

    @classmethod
    def read(cls, path: Path, shown_as: str | None = None) -> FileRecording:
        """One checked pass over ``path`` (malformed lines are the errors of
        :func:`per_query.read_per_query`, with their file:line)."""
        where = shown_as or str(path)
        return cls(path, where, (_entry(row) for row in read_compact(
            path, where, keep_query=False, names=(ANSWER_SCORE,))))

    @classmethod
    def of_compact(cls, path: Path, shown_as: str,
                   rows: Iterable[CompactRow]) -> FileRecording:
        """The recording of compact rows already read from ``path`` (compare's sides)."""
        return cls(path, shown_as, map(_entry, rows))

    @property
    def ids(self) -> Sequence[str]:
        return list(self._index)

    def answered(self, query_id: str) -> bool:
        return bool(self._answered[self._index[query_id]])

    def rows(self, query_ids: Sequence[str]) -> list[PerQueryRow]:
        return list(read_rows_at(self.path, self._offsets_of(query_ids), self.shown_as))

    def lines(self, query_ids: Sequence[str]) -> list[bytes]:
        return list(read_lines_at(self.path, self._offsets_of(query_ids)))

    def _offsets_of(self, query_ids: Sequence[str]) -> list[int]:
        return [self._offsets[self._index[i]] for i in query_ids]


Recording = RowRecording | FileRecording


def _entry(row: CompactRow) -> tuple[str, int, bool, bool]:
    return row.id, row.offset, row.refused is not None, ANSWER_SCORE in row.score_names


class ReplayTarget:
    """A target that answers every query with the hits and answer its source run recorded."""

    def __init__(self, recording: Recording, versions: VersionSnapshot, answers: bool,
                 load_ms: float | None = None):
        self._recording = recording
        self.versions = versions
        self.answers = answers  # the source scored answers (a search-only target did not)
        # nothing is loaded again: the source's load time is what the run reports
        # (evaluation/runner.py's warm_up reads it instead of timing one)
        self.recorded_load_ms = load_ms

    def replay(self, queries: Sequence[GoldenQuery], depth: int) -> list[QueryResult]:
        rows = self._recording.rows([q.id for q in queries])
        return [_result(row, depth) for row in rows]


class CodedReplayTarget(ReplayTarget):
    """A :class:`FileRecording` replayed, its replayable batches as doc codes (the module's
    docstring): ``coded``, ``doc_code`` and ``doc_json`` as a run file has them
    (targets/run.py) — the codes of the batch :meth:`coded` handed over last — and
    :meth:`recorded` for what its lines recorded."""

    def __init__(self, recording: FileRecording, versions: VersionSnapshot, answers: bool,
                 load_ms: float | None = None):
        super().__init__(recording, versions, answers, load_ms)
        self._file = recording
        self.doc_code: dict[str, int] = {}
        self._batch: list[Any] = []  # the lines coded() decoded last
        self._hits: list[str | None] = []  # their hits texts as recorded, where usable

    @property
    def doc_json(self) -> list[str]:
        """The JSON text of each code of the last batch (written only for lines whose hits
        text is not reused: :meth:`recorded`)."""
        return json_texts(self.doc_code)

    def coded(self, query_ids: Sequence[str], depth: int
              ) -> tuple[np.ndarray, np.ndarray] | None:
        """(codes, scores), b × depth, -1 / 0.0 past a query's hits; None when some line of
        the batch is not replayable (the Hit path then replays it)."""
        from kebab_mlflow.evaluation.line_decoding import REPLAY

        raws = self._file.lines(query_ids)
        lines = [REPLAY.decode(raw) for raw in raws]
        rankings = [[h.doc_id for h in line.hits] for line in lines]
        if not all([line.replayable_with(r) for line, r in zip(lines, rankings, strict=True)]):
            return None
        codes, self.doc_code = code_rankings(rankings, depth)
        scores = np.zeros(codes.shape, dtype=np.float64)
        scores[codes >= 0] = [h.score for line in lines for h in line.hits[:depth]]
        self._batch = lines
        self._hits = [_recorded_hits(raw, line, depth)
                      for raw, line in zip(raws, lines, strict=True)]
        return codes, scores

    def recorded(self, queries: Sequence[GoldenQuery]
                 ) -> tuple[list[QueryResult], list[str | None]]:
        """Of each line of the batch :meth:`coded` handed over last: its hit-less result
        (the times and truncated-hit count it recorded), and its ``hits`` text as recorded
        where it is what evaluation/coded.py would write from the codes (None: written from
        them)."""
        results = [_timed(q.id, line) for q, line in zip(queries, self._batch, strict=True)]
        return results, self._hits


def replay_target(recording: Recording, versions: VersionSnapshot, answers: bool,
                  load_ms: float | None = None) -> ReplayTarget:
    """The target replaying ``recording``: by codes where it is a file."""
    if isinstance(recording, FileRecording):
        return CodedReplayTarget(recording, versions, answers, load_ms)
    return ReplayTarget(recording, versions, answers, load_ms)


def _result(row: PerQueryRow, depth: int) -> QueryResult:
    stages = row.stage_ms or {}  # replayed as recorded (absent in older files: none)
    return QueryResult(query_id=row.id, hits=row.hits[:depth], answer=row.answer,
                       latency_ms=row.latency_ms, error=row.error,
                       truncated_hits=row.truncated_hits, search_ms=stages.get("search"),
                       answer_ms=stages.get("answer"))


def _recorded_hits(raw: bytes, line: Any, depth: int) -> str | None:
    """The replayable line's ``hits`` text as it holds it, when :func:`coded.hits_json` would
    write the same from its codes (a 1M-query replay: ~40 s less): at most ``depth`` hits,
    nothing escaped, the first hit in that function's form — one writer wrote the whole list,
    so the rest follow. A file of another writer (spacing, key order, extra fields) gets None
    and is written anew, as the Hit path would."""
    from kebab_mlflow.evaluation.coded import hits_json
    from kebab_mlflow.evaluation.line_decoding import RECORDED_HITS

    hits = line.hits
    if len(hits) > depth:
        return None
    text = bytes(RECORDED_HITS.decode(raw).hits).decode()
    if "\\" in text:
        return None
    if not hits:
        return text if text == "[]" else None
    first = hits_json([0], [repr(hits[0].score)], json_texts([hits[0].doc_id]))[:-1]
    return text if text.startswith(first) and text[len(first)] in ",]" else None


def _timed(query_id: str, line: Any) -> QueryResult:
    stages = line.stage_ms or {}
    return QueryResult(query_id=query_id, latency_ms=line.latency_ms,
                       truncated_hits=line.truncated_hits, search_ms=stages.get("search"),
                       answer_ms=stages.get("answer"))
