"""``--target run:PATH``: a precomputed run file — a system's output evaluated without running it.

Formats (plain or gzipped, told apart by the content, not the name):

- TREC: one line per hit, ``qid Q0 docid rank score tag``, fields split by whitespace;
- ranx / JSON: ``{"qid": {"docid": score, ...}, ...}``.

Conventions, as trec_eval (checked against pytrec_eval in ``tests/test_run_target.py``):

- **Order**: a query's hits are sorted by score descending, ties by doc id *descending*
  (byte order, trec_eval's ``strcmp``); the file's rank column and line order are ignored.
- Hits are **documents**: each hit's ``chunk_id`` and ``doc_id`` are the file's doc id, so the
  ``_doc`` metrics are the ones to read (a chunk-level metric compares the golden set's
  ``expected_chunk_ids`` with the file's ids as they are).
- Queries are matched by **id** (not text). A golden query absent from the file has no hits (a
  miss, counted in ``no_hit_rate``); query ids of the file that are not in the golden set are
  counted and reported on stderr, and ignored. A doc id listed twice for one query makes that
  query's error (``duplicate chunk id``), as any target's duplicate hit does.
- **Versions**: each of the five version keys is ``<file name>@<first 12 hex of its sha256>``
  unless the spec gives it (``run:run.trec?index_version=bm25-v3``).

A file of 100 million lines is streamed by pyarrow's CSV reader into columns, a group of
blocks at a time, and sorted once with numpy (only if it is not in order already); a file
pyarrow cannot split on one delimiter (runs of spaces) is read line by line, with
``file:line`` for a malformed line.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import (
    ArrowUnusable,
    Problem,
    RunFileError,
    TargetError,
    TargetOptionsError,
    TooDeeplyNested,
)
from kebab_mlflow.files import digest_and_lines, json_loads, json_texts
from kebab_mlflow.progress import warn
from kebab_mlflow.records import VERSION_KEYS, Answer, Hit, VersionSnapshot
from kebab_mlflow.targets.base import Target
from kebab_mlflow.targets.spec import split_options

MAX_LISTED = 5  # ids shown when some do not match
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class RunColumns:
    """A run file as columns, one entry per line (hit)."""

    query_ids: Sequence[str]
    doc_ids: Sequence[str]
    scores: np.ndarray


class RankedRun:
    """Every query's hits in trec_eval order, held as int32 doc codes and float64 scores
    (12 bytes a hit once loaded)."""

    def __init__(self, columns: RunColumns):
        q_codes, self.query_ids = _factorize(columns.query_ids)
        d_codes, docs = _factorize(columns.doc_ids)
        self.docs = list(docs)
        # the doc's place in byte order, negated: ties sort by doc id descending (trec_eval)
        doc_order = np.empty(len(docs), dtype=np.int32)
        doc_order[np.argsort(np.array(docs, dtype=object), kind="stable")] = -np.arange(
            len(docs), dtype=np.int32)
        scores = np.ascontiguousarray(columns.scores, dtype=np.float64)
        order = _trec_order(q_codes, scores, d_codes, doc_order)
        if order is None:  # already in trec_eval order (the usual file): no copies
            self.doc_codes, self.scores, q_sorted = d_codes, scores, q_codes
        else:
            self.doc_codes, self.scores, q_sorted = d_codes[order], scores[order], q_codes[order]
        # needles of the codes' own dtype: int64 ones made numpy cast all 100 million codes
        self.bounds = np.searchsorted(q_sorted, np.arange(len(self.query_ids) + 1,
                                                          dtype=q_sorted.dtype))
        self.row_of = {qid: i for i, qid in enumerate(self.query_ids)}

    def __len__(self) -> int:
        return len(self.query_ids)

    @cached_property
    def doc_code(self) -> dict[str, int]:
        """Doc id → its code (what the golden set's ids are looked up in)."""
        return {doc: code for code, doc in enumerate(self.docs)}

    @cached_property
    def doc_json(self) -> list[str]:
        """Each doc id as ``per_query.jsonl`` writes it (``json.dumps``, ensure_ascii off), by
        code."""
        return json_texts(self.docs)

    def coded(self, query_ids: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes, scores), b × k each: the first k hits of each query in trec_eval order as
        doc codes (-1 past its last hit; a query not in the file has none) and scores — the
        hits of :meth:`hits` without a Python object per hit."""
        rows = np.fromiter((self.row_of.get(q, -1) for q in query_ids), dtype=np.int64,
                           count=len(query_ids))
        known = rows >= 0
        safe = np.where(known, rows, 0)
        starts = self.bounds[safe]
        lengths = np.where(known, np.minimum(self.bounds[safe + 1] - starts, k), 0)
        valid = np.arange(k) < lengths[:, None]
        if not self.doc_codes.size:
            return np.full(valid.shape, -1, dtype=np.int32), np.zeros(valid.shape)
        index = np.where(valid, starts[:, None] + np.arange(k), 0)
        return (np.where(valid, self.doc_codes[index], -1).astype(np.int32),
                np.where(valid, self.scores[index], 0.0))

    def hits(self, query_id: str, k: int) -> tuple[Hit, ...]:
        row = self.row_of.get(query_id)
        if row is None:
            return ()
        start = int(self.bounds[row])
        end = min(int(self.bounds[row + 1]), start + k)
        docs = self.docs
        return tuple(Hit(chunk_id=docs[code], doc_id=docs[code], score=score, rank=rank)
                     for rank, (code, score) in enumerate(
                         zip(self.doc_codes[start:end].tolist(),
                             self.scores[start:end].tolist(), strict=True), 1))


def _trec_order(queries: np.ndarray, scores: np.ndarray, docs: np.ndarray,
                doc_order: np.ndarray) -> np.ndarray | None:
    """The permutation that sorts hits by (query code, score descending, ``doc_order`` of
    the doc code), or None when they are sorted already — a run file written query by query,
    best hit first, as most are: one linear check instead of a sort (and its copies) of 100
    million hits."""
    if _in_trec_order(queries, scores, docs, doc_order):
        return None
    return np.lexsort((doc_order[docs], -scores, queries))


#: hits compared at a time by _in_trec_order: its temporaries are a block's (~50 MiB), not
#: 100 million hits' (1.1 GiB, with the tie keys of every hit)
ORDER_BLOCK = 1 << 22


def _in_trec_order(queries: np.ndarray, scores: np.ndarray, docs: np.ndarray,
                   doc_order: np.ndarray) -> bool:
    """Whether each hit follows the one before it in trec_eval order; the tie keys looked up
    only for hits tied with the one before."""
    for start in range(0, len(queries) - 1, ORDER_BLOCK):
        stop = min(start + ORDER_BLOCK, len(queries) - 1)
        q0, q1 = queries[start:stop], queries[start + 1:stop + 1]
        s0, s1 = scores[start:stop], scores[start + 1:stop + 1]
        same = q1 == q0
        if np.any(q1 < q0) or np.any(same & (s1 > s0)):
            return False
        tied = np.flatnonzero(same & (s1 == s0)) + start
        if np.any(doc_order[docs[tied + 1]] < doc_order[docs[tied]]):
            return False
    return True


class RunFileTarget(Target):
    """Hits looked up by query id in a :class:`RankedRun`; no answers."""

    kind = "run"
    answers = False
    keyed_by_id = True  # the runner passes query ids, not texts

    def __init__(self, spec: str, path: Path, run: RankedRun, versions: VersionSnapshot):
        super().__init__(spec, versions, 1)
        self.path = path
        self.run = run
        self.unmatched_query_ids = 0
        self.queries_without_hits = 0

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        return self.run.hits(text, k), None

    def coded(self, query_ids: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The runner's path without Hit objects (evaluation/coded.py): RankedRun.coded."""
        return self.run.coded(query_ids, k)

    @property
    def doc_code(self) -> dict[str, int]:
        return self.run.doc_code

    @property
    def doc_json(self) -> list[str]:
        return self.run.doc_json

    def match_golden(self, query_ids: Iterable[str]) -> None:
        """Count (and warn about) file queries not in the golden set and golden queries not
        in the file."""
        golden = set(query_ids)
        extra = sorted(set(self.run.query_ids) - golden)
        absent = sorted(golden - set(self.run.row_of))
        self.unmatched_query_ids, self.queries_without_hits = len(extra), len(absent)
        if extra:
            warn(f"run file {self.path.name}: {len(extra)} query id(s) not in the golden set, "
                 f"ignored: {_listed(extra)}")
        if absent:
            warn(f"run file {self.path.name}: {len(absent)} golden query id(s) not in the file, "
                 f"scored as no hits: {_listed(absent)}")


def _listed(ids: Sequence[str]) -> str:
    more = f", … ({len(ids) - MAX_LISTED} more)" if len(ids) > MAX_LISTED else ""
    return ", ".join(ids[:MAX_LISTED]) + more


def parse_run_spec(spec: str) -> tuple[Path, dict[str, str]]:
    """``run:PATH?version_key=value`` → (path, versions); the file must exist."""
    path_text, options = split_options(spec[len("run:"):], "run", strict=True)
    if not path_text.strip():
        raise TargetError(f"--target {spec!r}: expected run:PATH (a TREC or JSON run file)")
    path = Path(path_text.strip()).expanduser()
    if not path.is_file():
        raise TargetError(f"--target {spec!r}: run file {path} not found")
    empty = [k for k, v in options.items() if not v.strip()]
    if empty:
        raise TargetOptionsError(f"bad options in --target {spec}",
                                 [Problem(f"{k} is empty", "--target") for k in empty])
    return path, options


def load_run(spec: str) -> RunFileTarget:
    path, configured = parse_run_spec(spec)
    digest, lines = digest_and_lines(path)
    columns = read_run_file(path, lines)
    if not len(columns.scores):  # refused here, before any run exists
        raise RunFileError(f"run file {path} has no hits", [Problem(
            "empty: expected TREC lines (qid Q0 docid rank score tag) or JSON "
            "{qid: {docid: score}}", f"{path}:1")])
    default = f"{path.name}@{digest[:12]}"
    versions = VersionSnapshot(**{k: configured.get(k, default) for k in VERSION_KEYS})
    run = RankedRun(columns)
    del columns
    _release_arrow_memory()
    return RunFileTarget(spec, path, run, versions)


def _release_arrow_memory() -> None:
    """Hand back to the OS what pyarrow's pool (mimalloc) keeps of freed blocks: numpy and
    Python allocate elsewhere and cannot reuse them. After each group of CSV blocks and once
    after the coding, so the next group, the coding and the evaluation come on top of the
    codes, not of the parse."""
    try:
        import pyarrow as pa
    except ImportError:
        return
    pa.default_memory_pool().release_unused()


# --------------------------------------------------------------------------- reading


def read_run_file(path: Path, lines: int | None = None) -> RunColumns:
    """The columns of a TREC or JSON run file (gzipped or not); a truncated or corrupt gzip
    stream is a RunFileError naming the line it ended at. ``lines``: the file's line count
    (files.digest_and_lines), if known: a plain TREC file's columns are then made once."""
    try:
        return _read_run_file(path, lines)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise RunFileError(f"run file {path} is not a readable gzip file", [Problem(
            f"the compressed stream is truncated or corrupt ({exc})", f"{path}:1")]) from None


def _read_run_file(path: Path, lines: int | None) -> RunColumns:
    with path.open("rb") as fh:
        head = fh.read(2)
    gzipped = head == GZIP_MAGIC
    with (gzip.open(path, "rb") if gzipped else path.open("rb")) as fh:
        first = fh.read(4096).lstrip()
    if first.startswith(b"{"):
        return _read_json(path, gzipped)
    try:
        return _read_trec_arrow(path, gzipped, first, None if gzipped else lines)
    except ArrowUnusable:
        return _read_trec_lines(path, gzipped)


def _read_trec_arrow(path: Path, gzipped: bool, first: bytes, lines: int | None = None
                     ) -> RunColumns:
    """The columns by pyarrow's streaming CSV reader, a group of 8 MiB blocks at a time
    (:class:`_Filling`): the blocks, their dictionaries (a million-query file's doc ids are
    nearly all unique within a block: 846 MiB of them) and a second copy of a column never
    coexist. A 1M-query file read and ranked: 3,810 MiB peak whole (``read_csv``), 2,057 MiB
    streamed; alone it is slower (27 → 41 s: each group's unification re-hashes the ids seen
    so far), beside the golden set's parse about as fast (79 → 68 s, the whole run 185 →
    154 s). ``lines``: the file's line count, what a column's array is made for up front."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pa_csv
    except ImportError:
        raise ArrowUnusable from None
    first_line = first.split(b"\n", 1)[0]
    delimiter = "\t" if b"\t" in first_line else " "
    names = ["qid", "q0", "docid", "rank", "score", "tag"]
    stream = pa.input_stream(str(path), compression="gzip" if gzipped else None)
    filling = (_Filling.codes(lines), _Filling.codes(lines), _Filling(np.float64, lines))
    try:
        reader = pa_csv.open_csv(
            stream,
            # 8 MiB blocks: 32 MiB ones (4 a group) peaked 460 MiB higher at 1M, no faster
            read_options=pa_csv.ReadOptions(column_names=names, block_size=1 << 23),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False),
            convert_options=pa_csv.ConvertOptions(
                # ids as dictionaries (int32 codes): 100 million hits never become 200 million
                # strings; the blocks' dictionaries are unified by _Filling.put
                column_types={"qid": pa.dictionary(pa.int32(), pa.string()),
                              "docid": pa.dictionary(pa.int32(), pa.string()),
                              "score": pa.float64()},
                include_columns=["qid", "docid", "score"]))
        for group in iter(lambda: list(islice(reader, DRAIN_GROUP)), []):
            _fill(filling, group)
            del group
            _release_arrow_memory()  # the group's blocks, before the next group's are parsed
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError):  # OSError: a truncated .gz
        raise ArrowUnusable from None
    query_ids, doc_ids, scores = (into.values() for into in filling)
    if not np.isfinite(scores).all():
        raise ArrowUnusable
    return RunColumns(query_ids, doc_ids, scores)


#: 8 MiB blocks converted at once (~3.7 million hits). More hold more blocks (a 1M-query file
#: read alone: 16 a group peaked at 2,057 MiB, 64 at 2,281 MiB, as fast); fewer re-hash the
#: ids seen so far more often.
DRAIN_GROUP = 16


def _fill(filling: Sequence[_Filling], group: list[Any]) -> None:
    """A group's batches into the columns, column by column."""
    for at, into in enumerate(filling):
        chunks = [batch.column(at) for batch in group]
        if any(chunk.null_count for chunk in chunks):
            raise ArrowUnusable  # the line reader names the bad line
        into.put(chunks)


class _Filling:
    """One column's values as one numpy array, filled a group of blocks at a time: written
    into an array made once for the file's line count (no line holds two hits), else — a
    gzipped file, or more hits than lines — kept in parts and joined at the end. A dictionary
    column's groups are unified after the values seen so far, which keep their codes: int32
    codes and the distinct values in first-seen order."""

    def __init__(self, dtype: Any, capacity: int | None, coded: bool = False):
        self.dtype = dtype
        self.array = None if capacity is None else np.empty(capacity, dtype=dtype)
        self.parts: list[np.ndarray] = []
        self.filled = 0
        self.seen: Any = None  # a dictionary column's distinct values so far
        if coded:
            import pyarrow as pa

            self.seen = pa.array([], type=pa.string())

    @classmethod
    def codes(cls, capacity: int | None) -> _Filling:
        return cls(np.int32, capacity, coded=True)

    def put(self, chunks: Sequence[Any]) -> None:
        """A group's chunks of this column, in file order."""
        if self.seen is None:
            for chunk in chunks:
                self._put(chunk.to_numpy(zero_copy_only=False))
            return
        import pyarrow as pa

        known = pa.DictionaryArray.from_arrays(pa.array([], type=pa.int32()), self.seen)
        unified = pa.chunked_array([known, *chunks]).unify_dictionaries()
        for chunk in unified.chunks[1:]:
            self._put(chunk.indices.to_numpy(zero_copy_only=False))
        self.seen = unified.chunks[0].dictionary

    def _put(self, values: np.ndarray) -> None:
        if self.array is not None and self.filled + len(values) > len(self.array):
            self.parts, self.array = [self.array[:self.filled]], None
        if self.array is None:
            self.parts.append(values)
        else:
            self.array[self.filled:self.filled + len(values)] = values
        self.filled += len(values)

    def values(self) -> Any:
        """The column: a numpy array, or a DictionaryArray for a dictionary column."""
        if self.array is not None:
            values = self.array[:self.filled]
        else:
            values = np.concatenate(self.parts) if self.parts else np.empty(0, self.dtype)
            self.parts = []
        if self.seen is None:
            return values
        import pyarrow as pa

        return pa.DictionaryArray.from_arrays(pa.array(values), self.seen)


def _read_trec_lines(path: Path, gzipped: bool) -> RunColumns:
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    problems: list[Problem] = []
    number = 0
    with _binary(path, gzipped) as fh:
        try:
            for number, raw in enumerate(fh, 1):
                fields = _fields(raw)
                if fields is None:
                    problems.append(Problem("not UTF-8 text (a binary file?)", f"{path}:{number}"))
                    break
                if _add_trec_line(fields, f"{path}:{number}", (qids, docs, scores), problems):
                    break
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            problems.append(Problem(f"the gzip stream ends here, truncated or corrupt ({exc})",
                                    f"{path}:{number + 1}"))
    if problems:
        raise RunFileError(f"run file {path} is not a TREC run (qid Q0 docid rank score tag)",
                           problems)
    return RunColumns(qids, docs, np.array(scores, dtype=np.float64))


def _binary(path: Path, gzipped: bool) -> Any:
    return gzip.open(path, "rb") if gzipped else path.open("rb")


def _fields(raw: bytes) -> list[str] | None:
    """A line's whitespace-separated fields; None when it is not UTF-8 (or holds NUL)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text.split()


def _add_trec_line(fields: list[str], where: str,
                   columns: tuple[list[str], list[str], list[float]],
                   problems: list[Problem]) -> bool:
    """Append one line's hit, or its problem; True once there are enough problems to stop."""
    if not fields:
        return False
    problem = _trec_problem(fields)
    if problem:
        problems.append(Problem(problem, where))
        return len(problems) >= 20
    columns[0].append(fields[0])
    columns[1].append(fields[2])
    columns[2].append(float(fields[4]))
    return False


def _trec_problem(fields: list[str]) -> str | None:
    if len(fields) != 6:
        return f"expected 6 fields (qid Q0 docid rank score tag), found {len(fields)}"
    try:
        score = float(fields[4])
    except ValueError:
        return f"score {fields[4]!r} is not a number"
    if not np.isfinite(score):
        return f"score {fields[4]!r} is not finite"
    return None


def _read_json(path: Path, gzipped: bool) -> RunColumns:
    with _binary(path, gzipped) as fh:
        raw = fh.read()
    try:
        data = json_loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFileError(f"run file {path} is not valid JSON",
                           [Problem(exc.msg, f"{path}:{exc.lineno}")]) from None
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise RunFileError(f"run file {path} is not valid JSON",
                           [Problem("not UTF-8 text", f"{path}:{line}")]) from None
    except TooDeeplyNested:
        raise RunFileError(f"run file {path} is not a run", [Problem(
            "JSON nested too deeply (a run is {qid: {docid: score}})",
            f"{path}:{_deep_line(raw)}")]) from None
    if not isinstance(data, dict):
        raise TargetError(f"run file {path}: expected {{qid: {{docid: score}}}}")
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    for qid, ranking in data.items():
        if not isinstance(ranking, dict):
            raise TargetError(f"run file {path}: query {qid!r} must map doc ids to scores")
        for doc, score in ranking.items():
            if isinstance(score, bool) or not isinstance(score, (int, float)) \
                    or not np.isfinite(score):
                raise TargetError(f"run file {path}: query {qid!r}, doc {doc!r}: score "
                                  f"{score!r} is not a finite number")
            qids.append(str(qid))
            docs.append(str(doc))
            scores.append(float(score))
    return RunColumns(qids, docs, np.array(scores, dtype=np.float64))


def _deep_line(raw: bytes, limit: int = 64) -> int:
    """The line where the brackets first nest deeper than ``limit`` (strings skipped)."""
    depth, line, in_string, escaped = 0, 1, False, False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # the closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > limit:
                return line
        elif byte in b"]}":
            depth -= 1
        if byte == 0x0A:
            line += 1
    return 1


def _factorize(values: Any) -> tuple[np.ndarray, list[str]]:
    """(int32 code per value, the distinct values in first-seen order)."""
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    if pa is not None:
        array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(
            values, type=pa.string())
        if isinstance(array, pa.ChunkedArray):
            if pa.types.is_dictionary(array.type):
                array = array.unify_dictionaries()
            array = array.combine_chunks()
        encoded = array if pa.types.is_dictionary(array.type) else array.dictionary_encode()
        return (encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist())
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int32)
    return codes, list(index)

