"""``kebab-mlflow golden merge GOLDEN to_judge.yaml [--out NEW]``: the graded items of a
judging queue (:mod:`.queue`) added to the golden set as ``expected_doc_ids`` grades.

The golden file is edited as a YAML round trip (ruamel.yaml), so the curator's comments,
key order and flow style stay as written; only the judged queries' ``expected_doc_ids``
change. Every item is validated first and every problem reported at once, each with its
``file:line``: an unknown query, a grade that is not an integer >= 0, and a *conflict* — the
document already judged for that query with another grade — naming the golden set's line and
the queue's. Items without a grade are left out. The result is validated as a golden set
before it is written; nothing is written when anything is wrong.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import GoldenSetError, InputError, Problem
from kebab_mlflow.golden import MAX_GRADE, GoldenSet, parse_golden_set


@dataclass(frozen=True, kw_only=True)
class Judgment:
    query_id: str
    doc_id: str
    grade: int
    line: int  # 1-based, in the queue file


@dataclass(frozen=True, kw_only=True)
class MergeOutcome:
    text: str  # the new golden file
    golden: GoldenSet  # it, parsed and validated
    added: int  # judgments added
    already: int  # items whose grade the golden set already had
    ungraded: int  # items left out (no grade)


def _round_trip(text: str = "") -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments, order and flow style preserved
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-fold the curator's long lines
    offset = _sequence_offset(text)
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yaml


def _sequence_offset(text: str) -> int:
    """How far the file indents a list's dashes under its key (``queries:\n  - id``: 2)."""
    match = re.search(r"^queries:[ \t]*(?:#.*)?\n(?:[ \t]*(?:#.*)?\n)*([ ]*)- ", text, re.M)
    return len(match.group(1)) if match else 0


def read_judgments(path: Path) -> tuple[list[Judgment], int]:
    """The graded items of a queue file and how many were left ungraded; every malformed item
    is a problem with its file:line."""
    try:
        data = _round_trip().load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    except Exception as exc:  # noqa: BLE001 - ruamel's parse errors have no common base
        raise InputError(f"{path} is not YAML: {str(exc).splitlines()[0]}") from None
    items = data.get("items") if hasattr(data, "get") else None
    if not isinstance(items, list):
        raise InputError(f"{path} is not a judging queue", [Problem(
            "expected a mapping with 'items' (written by `kebab-mlflow judge`)", f"{path}:1")])
    judgments, problems, ungraded = [], [], 0
    for index, item in enumerate(items):
        line = item.lc.line + 1 if hasattr(item, "lc") else 0
        where = f"{path}:{line}"
        if not hasattr(item, "get"):
            problems.append(Problem(f"item #{index + 1} must be a mapping", where))
            continue
        qid, doc, grade = item.get("query_id"), item.get("doc_id"), item.get("grade")
        if not isinstance(qid, str | int) or not isinstance(doc, str | int):
            problems.append(Problem("'query_id' and 'doc_id' must be ids", where))
            continue
        if grade is None or (isinstance(grade, str) and not grade.strip()):
            ungraded += 1
            continue
        if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= MAX_GRADE:
            problems.append(Problem(f"'grade' must be an integer >= 0, got {grade!r}", where,
                                    str(qid)))
            continue
        judgments.append(Judgment(query_id=str(qid), doc_id=str(doc), grade=grade, line=line))
    if problems:
        raise InputError(f"invalid judging queue {path}", problems)
    return judgments, ungraded


def merge_judgments(golden_path: Path, queue_path: Path) -> MergeOutcome:
    """The golden file with the queue's graded items added (nothing written here). A query of
    a ``group`` shares its judgments with the group's other queries (the golden set requires
    them equal), so a judgment is added to each of them."""
    judgments, ungraded = read_judgments(queue_path)
    source = golden_path.read_text(encoding="utf-8")
    yaml = _round_trip(source)
    data = yaml.load(source)
    queries = data.get("queries") if hasattr(data, "get") else data
    by_id = {str(q.get("id")): q for q in queries if hasattr(q, "get")}
    groups: dict[str, list[str]] = {}
    for qid, q in by_id.items():
        if q.get("group") is not None:
            groups.setdefault(str(q.get("group")), []).append(qid)
    problems: list[Problem] = []
    applied: dict[tuple[str, str], Judgment] = {}
    added = already = 0
    for j in judgments:
        query = by_id.get(j.query_id)
        if query is None:
            problems.append(Problem(f"query {j.query_id!r} is not in {golden_path}",
                                    f"{queue_path}:{j.line}", j.query_id))
            continue
        group = query.get("group")
        for qid in groups[str(group)] if group is not None else [j.query_id]:
            outcome = _apply(by_id[qid], qid, j, applied, golden_path, queue_path)
            if isinstance(outcome, Problem):
                problems.append(outcome)
                break  # the group's other queries would repeat the same conflict
            if qid == j.query_id:
                added, already = added + outcome, already + (1 - outcome)
    if problems:
        raise InputError(f"cannot merge {queue_path} into {golden_path}", problems)
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    text = buffer.getvalue()
    try:
        merged = parse_golden_set(text.encode("utf-8"), str(golden_path))
    except GoldenSetError as exc:
        raise InputError(f"the merged golden set would be invalid: {exc}") from None
    return MergeOutcome(text=text, golden=merged, added=added, already=already,
                        ungraded=ungraded)


def _apply(query: Any, qid: str, j: Judgment, applied: dict[tuple[str, str], Judgment],
           golden_path: Path, queue_path: Path) -> int | Problem:
    """Add ``j`` to ``query``: 1 added, 0 already there, or the conflict (with the golden
    set's line, or with an earlier item of the queue)."""
    earlier = applied.get((qid, j.doc_id))
    if earlier is not None:
        if earlier.grade == j.grade:
            return 0
        return Problem(f"conflict: {queue_path}:{earlier.line} grades {j.doc_id} "
                       f"{earlier.grade} for {qid}, {queue_path}:{j.line} grades it {j.grade}",
                       f"{queue_path}:{j.line}", j.query_id)
    existing = _grades(query.get("expected_doc_ids"))
    if j.doc_id in existing and existing[j.doc_id] != j.grade:
        return Problem(f"conflict: {golden_path}:{query.lc.line + 1} grades {j.doc_id} "
                       f"{existing[j.doc_id]} for {qid}, {queue_path}:{j.line} grades it "
                       f"{j.grade}", f"{queue_path}:{j.line}", j.query_id)
    applied[(qid, j.doc_id)] = j
    if j.doc_id in existing:
        return 0
    _add_grade(query, j.doc_id, j.grade)
    return 1


def _grades(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if hasattr(value, "items"):
        return {str(d): int(g) for d, g in value.items()}
    return {str(d): 1 for d in value}


def _add_grade(query: Any, doc_id: str, grade: int) -> None:
    """Add one judgment, keeping the form the query uses: a list grows while every grade is 1;
    otherwise the list becomes a mapping (in flow style, as lists usually are)."""
    from ruamel.yaml.comments import CommentedMap

    value = query.get("expected_doc_ids")
    if value is None:
        mapping = CommentedMap({doc_id: grade})
        mapping.fa.set_flow_style()
        query["expected_doc_ids"] = mapping
    elif hasattr(value, "items"):
        value[doc_id] = grade
    elif grade == 1:
        value.append(doc_id)
    else:
        mapping = CommentedMap({str(d): 1 for d in value})
        mapping[doc_id] = grade
        mapping.fa.set_flow_style()
        query["expected_doc_ids"] = mapping


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.kebab-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror}") from None
