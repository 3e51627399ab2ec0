"""Golden sets: load a YAML file, validate all of it, return frozen records.

Schema (DESIGN §3). The top level is a mapping (``name``, ``private``, ``metadata_fields``,
``case_insensitive``, ``description``, ``primary_metric`` — the metric ``compare`` decides on
—, ``queries``) or a bare list of queries. Every problem
is collected with its ``file:line`` and query id and raised as one :class:`GoldenSetError`.
"""

from __future__ import annotations

import enum
import hashlib
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Any

from kebab_mlflow import names
from kebab_mlflow.errors import GoldenSetError, Problem, SettingsAfterQueries
from kebab_mlflow.evidence.spec import EvidenceSpan, parse_evidence
from kebab_mlflow.reading import Field, Messages, Reader, table
from kebab_mlflow.yaml_source import Stream, child, location, parse, sequence_items

DEFAULT_METADATA_FIELDS = ("agency", "project", "budget", "deadline")
MAX_GRADE = 2**31 - 1
QUERY_TYPES = ("single_doc", "comparison", "follow_up", "abstention")

def _field(name: str, types: tuple[type, ...], what: str, help: str, **more: Any) -> Field:
    return Field(name=name, types=types, what=what, help=help, **more)


_LIST = ((list,), "a list of strings")
_BOOL = ((bool,), "true/false")
_TEXT = ((str, int), "a string")  # a number is read as its text
# A query's keys. Null is the same as absent; a problem is "'<key>' must be <what>, got
# <type>" at the key's line, with the query's id.
QUERY_MESSAGES = Messages(bad="{name!r} must be {what}, got {type}",
                          bad_items="{name!r} must be {what}", empty="{name!r} is empty",
                          missing="missing required key {name!r}", unknown="unknown key {key!r}",
                          null_absent=True)
QUERY_FIELDS = table((
    _field("id", *_TEXT, "the query's id, unique in the file", required=True, nonblank=True),
    _field("query", (str,), "a string", "the query text", required=True, nonblank=True),
    _field("expected_chunk_ids", *_LIST, "the relevant chunks", items=(str,)),
    _field("expected_doc_ids", (list, dict), "a list of doc ids or a mapping doc id -> grade",
           "the relevant documents (a list: grade 1 each)"),
    _field("must_contain", *_LIST, "strings a correct answer contains", items=(str,)),
    _field("forbidden", *_LIST, "strings a correct answer must not contain", items=(str,)),
    _field("ask", *_BOOL, "whether the query is answered too", default=False),
    _field("answerable", *_BOOL, "false: the right answer is a refusal", default=True),
    _field("case_insensitive", *_BOOL, "must_contain / forbidden ignore case (default: the "
           "file's)"),
    _field("query_type", (str,), "a string", f"one of {', '.join(QUERY_TYPES)}"),
    _field("hardcase_categories", *_LIST, "the hard cases the query is in", items=(str,)),
    _field("metadata_field", (str,), "a string", "one of the file's metadata_fields"),
    _field("group", *_TEXT, "queries of a group share their expected_doc_ids"),
    _field("difficulty", *_TEXT, "a free label"),
    _field("lang", (str,), "a string", "the query's language"),
    _field("evidence", (list,), "a list of {doc, quote} or {doc, start, end} entries",
           "text spans that answer the query (kebab_mlflow/evidence/)"),
))
_QUERY_KEYS = set(QUERY_FIELDS)

# The file's top level (or a bare list of queries): "'<key>' must be <type>" at the key's line.
TOP_MESSAGES = Messages(bad="{name!r} must be {what}",
                        missing="missing required top-level key {name!r}")
TOP_FIELDS = table((
    _field("name", (str,), "str", "the set's name (default: the file's stem)"),
    _field("private", (bool,), "bool", "queries' text is kept out of MLflow", default=False),
    _field("metadata_fields", (list,), "a list of strings", "the breakdown fields a query's "
           "metadata_field names", items=(str,), default=DEFAULT_METADATA_FIELDS,
           message="metadata_fields must be a list of strings"),
    _field("case_insensitive", (bool,), "bool", "every query's default", default=False),
    _field("description", (str,), "str", "what the set is", default=""),
    _field("primary_metric", (str,), "a metric name", "the metric compare decides on", null=True,
           check=re.compile(r"[a-z][a-z0-9_]*").fullmatch,
           message="'primary_metric' must be a metric name such as ndcg_at_10_doc"),
    _field("queries", (list,), "a list", "the queries", required=True),
    _field("corpus", (str,), "str", "the corpus, relative to the file (import-beir writes it)",
           default=""),
))
TOP_LEVEL_KEYS = set(TOP_FIELDS)


class SliceKey(enum.StrEnum):
    """The query fields ``compare --by`` slices a comparison by (comparison/slices.py)."""

    QUERY_TYPE = "query_type"
    LANG = "lang"
    HARDCASE_CATEGORY = "hardcase_category"  # a query is in each of its hardcase_categories
    METADATA_FIELD = "metadata_field"
    GROUP = "group"
    DIFFICULTY = "difficulty"


@dataclass(frozen=True, slots=True, kw_only=True)
class GoldenQuery:
    id: str
    query: str
    expected_chunk_ids: tuple[str, ...] = ()
    # doc id -> graded relevance (a plain list means grade 1 each)
    expected_doc_ids: Mapping[str, int] = field(default_factory=dict)
    must_contain: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    ask: bool = False
    answerable: bool = True
    case_insensitive: bool = False
    query_type: str | None = None
    hardcase_categories: tuple[str, ...] = ()
    metadata_field: str | None = None
    group: str | None = None
    difficulty: str | None = None
    lang: str | None = None
    line: int = 0
    # text spans that answer the query (kebab_mlflow/evidence/); a run derives chunk truth
    # from them, into expected_chunk_ids and expected_chunk_grades
    evidence: tuple[EvidenceSpan, ...] = ()
    expected_chunk_grades: Mapping[str, int] = field(default_factory=dict)

    @property
    def has_chunk_truth(self) -> bool:
        return bool(self.expected_chunk_ids or self.evidence)

    @property
    def chunk_grades(self) -> dict[str, int]:
        """Chunk id -> grade: the evidence-derived grades, else 1 per expected chunk id."""
        return dict(self.expected_chunk_grades) or dict.fromkeys(self.expected_chunk_ids, 1)

    @property
    def has_doc_truth(self) -> bool:
        return any(g > 0 for g in self.expected_doc_ids.values())

    @property
    def relevant_doc_grades(self) -> dict[str, int]:
        """Doc id -> grade for the docs that count as relevant (grade > 0)."""
        return {d: g for d, g in self.expected_doc_ids.items() if g > 0}


SHORT_DIGEST = 8  # hex digits of a golden version's digest shown beside its name


def version_label(name: str, digest: str) -> str:
    """How a golden version is shown everywhere (runs, the UI, slices, rescored runs' names):
    ``name@`` and the digest's first SHORT_DIGEST hex digits."""
    return f"{name}@{digest[:SHORT_DIGEST]}"


@dataclass(frozen=True, kw_only=True)
class GoldenSet:
    name: str
    queries: tuple[GoldenQuery, ...]
    path: str = ""
    private: bool = False
    metadata_fields: tuple[str, ...] = DEFAULT_METADATA_FIELDS
    description: str = ""
    digest: str = ""  # sha256 of the file bytes
    corpus: str = ""  # the corpus the file names (``corpus:``, relative to the file), or ""
    primary_metric: str | None = None  # the metric compare decides on (a metric name)

    def __len__(self) -> int:
        return len(self.queries)

    def subset(self, ids: set[str]) -> GoldenSet:
        return replace(self, queries=tuple(q for q in self.queries if q.id in ids))


# (source, sha256 of the bytes) -> golden set: a sweep validates the file and then loads it once
# per row in the same process; parsing thousands of queries once is enough.
_PARSED: dict[tuple[str, str], GoldenSet] = {}


def load_golden_set(path: str | Path) -> GoldenSet:
    """Read and validate a golden-set file; raise one GoldenSetError listing every problem."""
    raw = _read(Path(path))
    return _parsed(raw, str(path), hashlib.sha256(raw).hexdigest())


def _parsed(raw: bytes, source: str, digest: str) -> GoldenSet:
    key = (source, digest)
    if key not in _PARSED:
        if len(_PARSED) >= 8:
            _PARSED.clear()
        _PARSED[key] = parse_golden_set(raw, source, digest=digest)
    return _PARSED[key]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GoldenSetError(f"cannot read golden set {path}: {exc.strerror}") from None


@dataclass(frozen=True, kw_only=True)
class GoldenFile:
    """A golden-set file and the sha256 its bytes must have (a run's recorded golden version):
    loaded whole or streamed a chunk of queries at a time, refused once its bytes differ."""

    path: str
    digest: str

    @classmethod
    def of(cls, path: str | Path) -> GoldenFile:
        """The file as it is now (only hashed, not parsed)."""
        return cls(path=str(path), digest=hashlib.sha256(_read(Path(path))).hexdigest())

    def load(self) -> GoldenSet:
        raw = _read(Path(self.path))
        self._check(hashlib.sha256(raw).hexdigest())
        return _parsed(raw, self.path, self.digest)

    def stream(self, size: int, sink: Callable[[GoldenSet], None]) -> GoldenSet:
        """:func:`stream_golden_set` of the file."""
        raw = _read(Path(self.path))
        self._check(hashlib.sha256(raw).hexdigest())
        return stream_golden_set(raw, self.path, size, sink, digest=self.digest)

    def _check(self, digest: str) -> None:
        if digest != self.digest:
            raise GoldenSetError(f"golden set {self.path} changed while it was being read", [
                Problem(f"sha256 {digest[:12]}, expected {self.digest[:12]}", self.path)])


def parse_golden_set(raw: bytes, source: str, digest: str | None = None) -> GoldenSet:
    """The golden set of a file's bytes; its queries are built as the parser reaches them
    (:class:`_QueryBuilder`), parsed whole again only when a setting they depend on comes
    after ``queries:``. ``digest``: the bytes' sha256 when the caller has it already."""
    digest = digest or hashlib.sha256(raw).hexdigest()
    data, node = parse(raw, source, GoldenSetError, "golden set",
                       Stream("queries", lambda top: _QueryBuilder(top, source)))
    try:
        return _build(data, node, source, digest)
    except SettingsAfterQueries:
        return _build(*parse(raw, source, GoldenSetError, "golden set"), source, digest)


def stream_golden_set(raw: bytes, source: str, size: int, sink: Callable[[GoldenSet], None],
                      digest: str | None = None) -> GoldenSet:
    """The golden set of a file's bytes handed to ``sink`` ``size`` queries at a time, as the
    parser reaches them, never held whole (a 1M-query set's records are ~1 GB); returns the
    set without its queries. For a file a run was scored on (its digest recorded), so loaded
    and checked whole before: the first query with a problem raises GoldenSetError, and the
    checks across queries (duplicate ids, metric keys) are not made again. Raises
    SettingsAfterQueries, possibly after some chunks, when the queries could not be built as
    a whole parse builds them (a setting after ``queries:``, a bare list, YAML the streaming
    parser hands to PyYAML): the caller then loads the set whole. ``digest``: the bytes' sha256
    when the caller has it already."""
    digest = digest or hashlib.sha256(raw).hexdigest()
    builders: list[_ChunkBuilder] = []

    def start(top: dict[Any, Any]) -> _ChunkBuilder:
        builders.append(_ChunkBuilder(top, source, digest, size, sink))
        return builders[-1]

    data, node = parse(raw, source, GoldenSetError, "golden set", Stream("queries", start))
    problems: list[Problem] = []
    header, queries, _ = _header(data, node, source, lambda n: location(source, n), problems)
    if problems:
        raise GoldenSetError(f"invalid golden set {source}", problems)
    # built under other settings, or parsed again whole by PyYAML (its items are not None)
    if not builders or builders[0].header != header or any(q is not None for q in queries):
        raise SettingsAfterQueries
    return builders[0].finish()


@dataclass(frozen=True, kw_only=True)
class _Header:
    """The file-level settings of a golden set."""

    name: str
    private: bool = False
    case_insensitive: bool = False
    description: str = ""
    metadata_fields: tuple[str, ...] = DEFAULT_METADATA_FIELDS
    corpus: str = ""  # where the corpus is (import-beir writes it), resolved against the file
    primary_metric: str | None = None  # the metric compare decides on


@dataclass(frozen=True, slots=True)
class _Built:
    """A query item checked (its problems) and built (None when it has problems; its
    identity for the cross-query checks when it has an id), under ``settings``."""

    query: GoldenQuery | None
    identity: _Identity | None
    problems: tuple[Problem, ...]
    settings: tuple[tuple[str, ...], bool]  # the file's metadata_fields and case_insensitive


class _QueryBuilder:
    """Each query item built as soon as it is parsed (yaml_source.Stream), with the file's
    settings parsed before ``queries:``: a large file then never holds every item parsed
    beside the records (a 1M-query set: 2 GB)."""

    def __init__(self, top: dict[Any, Any], source: str):
        self.at: Callable[[Any], str] = lambda node: location(source, node)
        self.header = _header(top, None, source, self.at, [])[0]  # its problems: _build's
        self.count = 0

    def __call__(self, item: Any, node: Any) -> _Built:
        self.count += 1
        return _built(item, node, self.count - 1, self.header, self.at)


class _ChunkBuilder:
    """Each query item built as it is parsed (:class:`_QueryBuilder`) and handed on ``size``
    at a time (:func:`stream_golden_set`); the item's place keeps None."""

    def __init__(self, top: dict[Any, Any], source: str, digest: str, size: int,
                 sink: Callable[[GoldenSet], None]):
        self.build = _QueryBuilder(top, source)
        self.header = self.build.header
        self.empty = _golden_set(self.header, (), source, digest)
        self.size, self.sink = size, sink
        self.pending: list[GoldenQuery] = []

    def __call__(self, item: Any, node: Any) -> None:
        built = self.build(item, node)
        if built.problems or built.query is None:
            raise GoldenSetError(f"invalid golden set {self.empty.path}", list(built.problems))
        self.pending.append(built.query)
        if len(self.pending) == self.size:
            self._hand_on()

    def _hand_on(self) -> None:
        chunk, self.pending = tuple(self.pending), []
        self.sink(replace(self.empty, queries=chunk))

    def finish(self) -> GoldenSet:
        """The last chunk handed on; the set without its queries."""
        if not self.build.count:
            raise GoldenSetError(f"invalid golden set {self.empty.path}",
                                 [Problem("the golden set has no queries", self.empty.path)])
        if self.pending:
            self._hand_on()
        return self.empty


def _settings(header: _Header) -> tuple[tuple[str, ...], bool]:
    return header.metadata_fields, header.case_insensitive


def _build(data: Any, node: Any, source: str, digest: str) -> GoldenSet:
    def at(node: Any) -> str:
        return location(source, node)

    problems: list[Problem] = []
    header, queries, queries_node = _header(data, node, source, at, problems)
    first = queries[0] if isinstance(queries, list) and queries else None
    if isinstance(first, _Built) and first.settings != _settings(header):
        raise SettingsAfterQueries
    parsed, identities = _parse_queries(queries, sequence_items(queries_node), header, at, problems)
    if not queries and not problems:
        problems.append(Problem("the golden set has no queries", at(node)))
    # cross-query checks see every query with an id, also those with problems of their own,
    # so a duplicate id is reported together with the rest
    problems += _cross_query_problems(identities, source)
    problems += _mlflow_name_problems(header.name, header.metadata_fields, parsed, node, at)
    if problems:
        raise GoldenSetError(f"invalid golden set {source}", problems)
    return _golden_set(header, tuple(parsed), source, digest)


def _golden_set(header: _Header, queries: tuple[GoldenQuery, ...], source: str,
                digest: str) -> GoldenSet:
    return GoldenSet(name=header.name, queries=queries, path=source, private=header.private,
                     metadata_fields=header.metadata_fields, description=header.description,
                     digest=digest, corpus=header.corpus, primary_metric=header.primary_metric)


def _mlflow_name_problems(name: str, metadata_fields: tuple[str, ...],
                          queries: list[GoldenQuery], node: Any,
                          at: Callable[[Any], str]) -> list[Problem]:
    """What MLflow would refuse once the run exists (kebab_mlflow/names.py): the set's name as
    a dataset name, every breakdown group as part of a metric key; two groups whose keys would
    be one are a problem too."""
    where_name = at(child(node, "name") or node)
    problems = [Problem(why, where_name) for why in (
        names.length_problem("'name'", name, names.MAX_DATASET_NAME),) if why]
    groups: list[tuple[str, str, str, str | None]] = [
        ("by_metadata_field", f, at(child(node, "metadata_fields")), None)
        for f in metadata_fields]
    groups += [("by_hardcase_category", tag, f"{at(None)}:{q.line}", q.id)
               for q in queries for tag in q.hardcase_categories]
    first: dict[tuple[str, str], str] = {}
    for block, group, where, qid in groups:
        why = names.group_problem(block, group)
        segment = names.group_segment(group)
        seen = first.setdefault((block, segment), group)
        if why is None and seen != group:
            why = f"becomes the same metric key as {seen!r} ({block}/{segment}/…)"
        if why:
            problems.append(Problem(f"{block.removeprefix('by_')} {group!r}: {why}", where, qid))
    return list(dict.fromkeys(problems))


def _header(data: Any, node: Any, source: str, at: Callable[[Any], str],
            problems: list[Problem]) -> tuple[_Header, list[Any], Any]:
    """(file settings, the query items, their sequence node) of a mapping or a bare list."""
    if isinstance(data, list):
        return _Header(name=Path(source).stem), data, node
    if not isinstance(data, dict):
        raise GoldenSetError("invalid golden set", [Problem(
            "top level must be a mapping with 'queries' or a list of queries", at(node))])
    r = Reader(data, node, source, TOP_MESSAGES, problems=problems)
    r.unknown_keys(TOP_LEVEL_KEYS)
    f = TOP_FIELDS
    metadata_fields = tuple(r.value(f["metadata_fields"]))
    corpus = r.value(f["corpus"])  # where the corpus is, relative to this file
    header = _Header(name=r.value(f["name"], Path(source).stem),
                     private=r.value(f["private"]),
                     case_insensitive=r.value(f["case_insensitive"]),
                     description=r.value(f["description"]),
                     metadata_fields=metadata_fields,
                     corpus=str(Path(source).parent / corpus) if corpus else "",
                     primary_metric=r.value(f["primary_metric"]))
    queries = r.value(f["queries"], [])
    return header, queries, child(node, "queries")


def _parse_queries(queries: list[Any], item_nodes: list[Any], header: _Header,
                   at: Callable[[Any], str], problems: list[Problem]
                   ) -> tuple[list[GoldenQuery], list[_Identity]]:
    """Each item checked and built; the parsed YAML item is released as soon as its record
    exists, so a large file does not hold both at once."""
    parsed: list[GoldenQuery] = []
    identities: list[_Identity] = []
    for i, item in enumerate(queries):
        built = item if isinstance(item, _Built) else _built(
            item, item_nodes[i] if i < len(item_nodes) else None, i, header, at)
        problems += built.problems
        if built.query is not None:
            parsed.append(built.query)
        if built.identity is not None:
            identities.append(built.identity)
        queries[i] = None
        if i < len(item_nodes):
            item_nodes[i] = None
    return parsed, identities


_NO_PROBLEMS: tuple[Problem, ...] = ()


def _built(item: Any, node: Any, index: int, header: _Header,
           at: Callable[[Any], str]) -> _Built:
    problems: list[Problem] = []
    q = _parse_query(item, node, index, at, problems, header.metadata_fields,
                     header.case_insensitive)
    if q is not None:
        identity: _Identity | None = _Identity(
            id=q.id, line=q.line, group=q.group, expected_doc_ids=q.expected_doc_ids,
            expected_ids=(*q.expected_doc_ids, *q.expected_chunk_ids))
    else:
        identity = _identity(item, node)
    return _Built(q, identity, tuple(problems) if problems else _NO_PROBLEMS,
                  _settings(header))


def _parse_query(item: Any, node: Any, index: int, at: Callable[[Any], str],
                 problems: list[Problem], metadata_fields: tuple[str, ...],
                 file_ci: bool) -> GoldenQuery | None:
    if not isinstance(item, dict):
        problems.append(Problem(f"query #{index + 1} must be a mapping", at(node)))
        return None
    qid = item.get("id")
    qid_str = str(qid) if isinstance(qid, (str, int)) and not isinstance(qid, bool) else None
    before = len(problems)
    r = Reader(item, node, at(None), QUERY_MESSAGES, query_id=qid_str, problems=problems)
    r.unknown_keys(_QUERY_KEYS)
    r.values(QUERY_FIELDS, required_first=True)

    def bad(message: str, key: str | None = None) -> None:
        r.problem(message, key)

    doc_ids = _doc_grades(item.get("expected_doc_ids"), bad)
    evidence = _evidence(item, node, at, problems, qid_str, doc_ids)
    qtype = item.get("query_type")
    if isinstance(qtype, str) and qtype not in QUERY_TYPES:
        bad(f"unknown query_type {qtype!r} (known: {', '.join(QUERY_TYPES)})", "query_type")
    mfield = item.get("metadata_field")
    if isinstance(mfield, str) and mfield not in metadata_fields:
        bad(f"unknown metadata_field {mfield!r} (this file's metadata_fields: "
            f"{', '.join(metadata_fields)})", "metadata_field")
    if len(problems) > before:
        return None

    def strs(key: str) -> tuple[str, ...]:
        return tuple(item.get(key) or ())

    def opt(key: str) -> str | None:
        return None if item.get(key) is None else str(item[key])

    return GoldenQuery(
        id=qid_str or "", query=item["query"], expected_chunk_ids=strs("expected_chunk_ids"),
        expected_doc_ids=doc_ids, must_contain=strs("must_contain"), forbidden=strs("forbidden"),
        ask=bool(item.get("ask", False)), answerable=bool(item.get("answerable", True)),
        case_insensitive=bool(item.get("case_insensitive", file_ci)), query_type=qtype,
        hardcase_categories=strs("hardcase_categories"), metadata_field=mfield,
        group=opt("group"), difficulty=opt("difficulty"), lang=opt("lang"),
        line=node.line + 1 if node is not None else 0, evidence=evidence)


def _evidence(item: dict[str, Any], node: Any, at: Callable[[Any], str],
              problems: list[Problem], qid: str | None,
              doc_ids: Mapping[str, int]) -> tuple[EvidenceSpan, ...]:
    """The query's evidence entries (kebab_mlflow/evidence/spec.py), each problem at its
    entry's line; their documents must agree with expected_doc_ids / expected_chunk_ids."""
    value = item.get("evidence")
    if value is None or not isinstance(value, list):
        return ()
    evidence_node = child(node, "evidence")
    lines = [n.line + 1 for n in sequence_items(evidence_node)] or \
        [evidence_node.line + 1 if evidence_node is not None else 0]
    source = at(None)

    def report(message: str, line: int) -> None:
        problems.append(Problem(message, f"{source}:{line}", qid))

    spans = parse_evidence(value, lines, report)
    docs = {s.doc for s in spans}
    relevant = {d for d, g in doc_ids.items() if g > 0}
    for doc in sorted(docs - relevant) if doc_ids else ():
        report(f"evidence in doc {doc!r}, which expected_doc_ids does not list as relevant",
               lines[0])
    chunk_ids = item.get("expected_chunk_ids") or []
    if not isinstance(chunk_ids, list):  # not a list: its own field check reports it
        chunk_ids = []
    chunk_docs = {c.rsplit("#", 1)[0] for c in chunk_ids if isinstance(c, str) and "#" in c}
    for doc in sorted(chunk_docs - docs) if spans else ():
        report(f"expected_chunk_ids name doc {doc!r}, which has no evidence", lines[0])
    return spans


def _doc_grades(value: Any, bad: Callable[[str, str], None]) -> dict[str, int]:
    if value is None:
        return {}
    if isinstance(value, list):
        if not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in value):
            bad("'expected_doc_ids' list items must be doc ids", "expected_doc_ids")
            return {}
        return {str(x): 1 for x in value}
    if isinstance(value, dict):
        grades = {}
        for doc, grade in value.items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                bad(f"grade of doc {doc!r} must be an integer", "expected_doc_ids")
            elif abs(grade) > MAX_GRADE:
                bad(f"grade of doc {doc!r} is out of range (|grade| <= {MAX_GRADE:,}, as "
                    "trec_eval's 32-bit relevance)", "expected_doc_ids")
            else:
                grades[str(doc)] = grade
        return grades
    return {}


@dataclass(frozen=True, kw_only=True, slots=True)
class _Identity:
    """What the cross-query checks need of a query (even one that failed its own checks)."""

    id: str
    line: int
    group: str | None
    expected_doc_ids: Mapping[str, int] | None  # None: unreadable, left out of the group check
    expected_ids: tuple[str, ...] = ()  # its expected doc and chunk ids, for the collisions


def _identity(item: Any, node: Any) -> _Identity | None:
    if not isinstance(item, dict):
        return None
    qid = item.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or qid == "":
        return None
    group = item.get("group")
    group = str(group) if isinstance(group, (str, int)) and not isinstance(group, bool) else None
    raw = item.get("expected_doc_ids")
    problems: list[str] = []  # already reported by _parse_query; here they only disqualify
    grades = _doc_grades(raw, lambda message, key: problems.append(message))
    readable = raw is None or isinstance(raw, (list, dict)) and not problems
    line = node.line + 1 if node is not None else 0
    chunks = item.get("expected_chunk_ids")
    expected = [*grades, *(c for c in chunks if isinstance(c, str))] \
        if isinstance(chunks, list) else list(grades)
    return _Identity(id=str(qid), line=line, group=group,
                     expected_doc_ids=grades if readable else None,
                     expected_ids=tuple(expected))


def folded(identifier: str) -> str:
    """The form two ids must not share unless equal: NFC-normalized and case-folded (``café``
    typed precomposed or with a combining accent, ``Doc-1`` and ``doc-1``)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", identifier).casefold())


def _collision_problems(queries: list[_Identity], source: str) -> list[Problem]:
    """Query ids, and expected ids, that differ but collide under :func:`folded`: one of them
    is almost surely a typo or an encoding accident; each names both lines. Looked for line
    by line only when the distinct spellings fold into fewer forms (a 1M-query set: 3 s)."""
    distinct = ({q.id for q in queries}, set(chain.from_iterable(q.expected_ids for q in queries)))
    if all(len(set(map(folded, spellings))) == len(spellings) for spellings in distinct):
        return []
    problems = []
    for what, spellings in (("query id", ((q.id, q) for q in queries)),
                            ("expected id", ((i, q) for q in queries for i in q.expected_ids))):
        first: dict[str, tuple[str, _Identity]] = {}
        reported: set[str] = set()
        for spelling, q in spellings:
            seen, seen_q = first.setdefault(folded(spelling), (spelling, q))
            if seen != spelling and spelling not in reported:  # each other spelling once
                reported.add(spelling)
                problems.append(Problem(
                    f"{what} {ascii(spelling)} collides with {ascii(seen)} (line {seen_q.line}) "
                    "under Unicode NFC normalization or case folding", f"{source}:{q.line}",
                    q.id))
    return problems


def _cross_query_problems(queries: list[_Identity], source: str) -> list[Problem]:
    problems = _collision_problems(queries, source)
    seen: dict[str, _Identity] = {}
    for q in queries:
        if q.id in seen:
            problems.append(Problem(f"duplicate id (first at line {seen[q.id].line})",
                                    f"{source}:{q.line}", q.id))
        else:
            seen[q.id] = q
    groups: dict[str, _Identity] = {}
    for q in queries:
        if q.group is None or q.expected_doc_ids is None:
            continue
        first = groups.setdefault(q.group, q)
        if dict(first.expected_doc_ids or {}) != dict(q.expected_doc_ids):
            problems.append(Problem(
                f"group {q.group!r} disagrees on expected_doc_ids with query {first.id!r} "
                f"(line {first.line})", f"{source}:{q.line}", q.id))
    return problems
