"""TREC qrels and topics → a golden set (``kebab-mlflow import-trec QRELS TOPICS --out FILE``).

- **qrels**: ``qid iteration docno relevance`` per line, split by whitespace (the iteration
  column is ignored, as trec_eval ignores it). Every judgment is kept: a plain list of doc ids
  when every grade is 1, else a ``{doc: grade}`` mapping that also keeps the judged
  non-relevant docs (grade <= 0 — not relevant, but judged).
- **topics**, told apart by their content:
  - classic TREC SGML: ``<top> <num> Number: 301 <title> … <desc> … <narr> … </top>``;
  - the newer XML form: ``<topic number="1"> <query>…</query> <description>…`` ;
  - a TSV ``qid<TAB>text`` per line (MS MARCO / TREC DL ``queries.tsv``).
  ``field`` picks the query text: ``title`` (default; ``<query>`` in the XML form) or ``desc``.
- Topics without a positive judgment are left out and counted (a query without ground truth
  is skipped by every metric anyway); judgments of topics not in the topics file are counted.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from kebab_mlflow.errors import Problem, TrecFileError

FIELDS = ("title", "desc")
MAX_PROBLEMS = 50
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_NUM = re.compile(r"<num>\s*(?:Number\s*:)?\s*(\S+)", re.I)
_SGML_FIELD = {"title": re.compile(r"<title>\s*(?:Topic\s*:)?(.*?)(?=<[a-z]+>|$)", re.S | re.I),
               "desc": re.compile(r"<desc>\s*(?:Description\s*:)?(.*?)(?=<[a-z]+>|$)",
                                  re.S | re.I)}
_TOPIC = re.compile(r"<topic\b([^>]*)>(.*?)</topic>", re.S | re.I)
_NUMBER_ATTR = re.compile(r"""number\s*=\s*["']?([^"'\s>]+)""", re.I)
_XML_FIELD = {"title": re.compile(r"<query>(.*?)</query>", re.S | re.I),
              "desc": re.compile(r"<description>(.*?)</description>", re.S | re.I)}


@dataclass(frozen=True, kw_only=True)
class TrecImportSummary:
    written: int
    topics_without_judgments: int
    judged_topics_not_in_topics: int
    topics_format: str
    out: Path


def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrecFileError(f"cannot read {path}: {exc.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrecFileError(f"{path} is not UTF-8", [Problem(f"byte {exc.start}: {exc.reason}",
                                                             str(path))]) from None


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``qid iter docno rel`` lines → query → doc → grade; every bad line reported."""
    qrels: dict[str, dict[str, int]] = {}
    problems: list[Problem] = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) != 4:
                raise ValueError
            qrels.setdefault(fields[0], {})[fields[2]] = int(fields[3])
        except ValueError:
            problems.append(Problem(f"expected 'qid iteration docno relevance' (an integer "
                                    f"relevance), got {line.strip()[:80]!r}", f"{path}:{number}"))
    if problems:
        raise TrecFileError(f"invalid TREC qrels {path}", problems[:MAX_PROBLEMS])
    return qrels


def read_trec_topics(path: Path, field: str = "title") -> tuple[dict[str, str], str]:
    """(query id → text, the format found: ``sgml``, ``xml`` or ``tsv``)."""
    if field not in FIELDS:
        raise TrecFileError(f"--field must be one of {', '.join(FIELDS)}, got {field!r}")
    text = _text(path)
    if _TOP.search(text):
        return _sgml_topics(text, path, field), "sgml"
    if _TOPIC.search(text):
        return _xml_topics(text, path, field), "xml"
    return _tsv_topics(text, path), "tsv"


def _clean(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def _sgml_topics(text: str, path: Path, field: str) -> dict[str, str]:
    topics: dict[str, str] = {}
    problems: list[Problem] = []
    for match in _TOP.finditer(text):
        where = f"{path}:{text.count(chr(10), 0, match.start()) + 1}"
        body = match.group(1)
        num, value = _NUM.search(body), _SGML_FIELD[field].search(body)
        if num is None or value is None or not _clean(value.group(1)):
            problems.append(Problem(f"<top> without <num> or a non-empty <{field}>", where))
            continue
        _add(topics, num.group(1), _clean(value.group(1)), where, problems)
    if problems:
        raise TrecFileError(f"invalid TREC topics {path}", problems[:MAX_PROBLEMS])
    return topics


def _xml_topics(text: str, path: Path, field: str) -> dict[str, str]:
    topics: dict[str, str] = {}
    problems: list[Problem] = []
    for match in _TOPIC.finditer(text):
        where = f"{path}:{text.count(chr(10), 0, match.start()) + 1}"
        num, value = _NUMBER_ATTR.search(match.group(1)), _XML_FIELD[field].search(match.group(2))
        if num is None or value is None or not _clean(value.group(1)):
            tag = "query" if field == "title" else "description"
            problems.append(Problem(f"<topic> without number=… or a non-empty <{tag}>", where))
            continue
        _add(topics, num.group(1), _clean(value.group(1)), where, problems)
    if problems:
        raise TrecFileError(f"invalid TREC topics {path}", problems[:MAX_PROBLEMS])
    return topics


def _tsv_topics(text: str, path: Path) -> dict[str, str]:
    topics: dict[str, str] = {}
    problems: list[Problem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        qid, sep, query = line.partition("\t")
        where = f"{path}:{number}"
        if not sep or not qid.strip() or not query.strip():
            problems.append(Problem("expected qid<TAB>query text (or TREC <top> topics)", where))
            continue
        _add(topics, qid.strip(), " ".join(query.split()), where, problems)
    if problems:
        raise TrecFileError(f"invalid topics {path}", problems[:MAX_PROBLEMS])
    return topics


def _add(topics: dict[str, str], qid: str, text: str, where: str,
         problems: list[Problem]) -> None:
    if qid in topics:
        problems.append(Problem(f"topic {qid!r} is listed twice", where))
    topics[qid] = text


def import_trec(qrels_path: Path, topics_path: Path, out: Path, name: str | None = None,
                field: str = "title") -> TrecImportSummary:
    """Write a golden set of the judged topics (in the topics file's order)."""
    qrels = read_trec_qrels(qrels_path)
    topics, form = read_trec_topics(topics_path, field)
    entries, without = [], 0
    for qid, text in topics.items():
        grades = qrels.get(qid, {})
        if not any(g > 0 for g in grades.values()):
            without += 1
            continue
        binary = all(g == 1 for g in grades.values())
        entries.append({"id": qid, "query": text,
                        "expected_doc_ids": sorted(grades) if binary else dict(grades)})
    stray = len(set(qrels) - set(topics))
    header = (f"# Imported from TREC qrels {qrels_path.name} and topics {topics_path.name} "
              f"({form}, field {field}) by kebab-mlflow import-trec.\n# {len(entries)} judged "
              f"topics; {without} without a positive judgment left out; {stray} judged "
              "topics not in the topics file. Doc-level ground truth: read the _doc metrics.\n")
    doc = {"name": name or topics_path.name.split(".")[0], "queries": entries}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000),
                   encoding="utf-8")
    return TrecImportSummary(written=len(entries), topics_without_judgments=without,
                             judged_topics_not_in_topics=stray, topics_format=form, out=out)
