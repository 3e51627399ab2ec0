"""A target's reply: parsed into Hits and an Answer, or a ReplyError saying what was wrong."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeGuard

from kebab_mlflow.errors import ReplyError as ReplyError  # re-exported: the targets raise it
from kebab_mlflow.records import Answer, Hit

ERROR_SNIPPET = 200
#: a chunk/doc id (or a citation) longer than this is that query's error, not stored: a
#: 5 MB id once made a 29 MB per_query.jsonl for 43 queries
MAX_ID_CHARS = 1024




def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_hits(items: Any) -> tuple[Hit, ...]:
    """Hits (``Hit`` objects or ``{chunk_id, doc_id, score[, text]}`` dicts) in rank order.

    Every problem of the list is reported at once (up to 10) in one :class:`ReplyError`.
    """
    if not isinstance(items, list | tuple):
        raise ReplyError(f"'hits' is a {type_name(items)}, not a list")
    hits: list[Hit] = []
    problems: list[str] = []
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        rank = i + 1
        if isinstance(item, Hit):
            too_long = [p for key in ("chunk_id", "doc_id")
                        if (p := _too_long(key, getattr(item, key)))]
            if too_long:
                problems += [f"hit {i}: {p}" for p in too_long]
                continue
            hit = item if item.rank == rank else replace(item, rank=rank)
        elif isinstance(item, Mapping):
            bad = _hit_problems(item)
            if bad:
                problems += [f"hit {i}: {p}" for p in bad]
                continue
            hit = Hit(chunk_id=item["chunk_id"], doc_id=item["doc_id"], score=float(item["score"]),
                      rank=rank,
                      text=item.get("text") or "")
        else:
            problems.append(f"hit {i} is a {type_name(item)}, not an object")
            continue
        if hit.chunk_id in first_seen:
            problems.append(f"duplicate chunk id {hit.chunk_id!r} at hits "
                            f"{first_seen[hit.chunk_id]} and {i}")
        first_seen.setdefault(hit.chunk_id, i)
        hits.append(hit)
    if problems:
        more = f" (+{len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ReplyError("bad hits: " + "; ".join(problems[:10]) + more)
    return tuple(hits)


def _hit_problems(item: Mapping[str, Any]) -> list[str]:
    problems = []
    for key in ("chunk_id", "doc_id"):
        value = item.get(key)
        if key not in item:
            problems.append(f"missing {key!r}")
        elif not isinstance(value, str):
            problems.append(f"{key!r} is a {type_name(value)}, not a string")
        elif not value:
            problems.append(f"{key!r} is empty")
        elif too_long := _too_long(key, value):
            problems.append(too_long)
    score = item.get("score")
    if "score" not in item:
        problems.append("missing 'score'")
    elif not _is_number(score):
        problems.append(f"'score' is a {type_name(score)}, not a number")
    elif not math.isfinite(float(score)):
        problems.append(f"'score' is {score}, not a finite number")
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        problems.append(f"'text' is a {type_name(text)}, not a string")
    return problems


def _too_long(key: str, value: Any) -> str | None:
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        return f"{key!r} is {len(value):,} characters, over the limit of {MAX_ID_CHARS:,}"
    return None


def parse_answer(obj: Any) -> Answer | None:
    """An ``Answer`` (passed through), a reply dict, or None."""
    if obj is None or isinstance(obj, Answer):
        return obj
    if not isinstance(obj, Mapping):
        raise ReplyError(f"'answer' is a {type_name(obj)}, not an object or null")
    problems = []
    text = obj.get("text")
    if not isinstance(text, str):
        problems.append("missing 'text'" if "text" not in obj
                        else f"'text' is a {type_name(text)}, not a string")
    citations = obj.get("citations", [])
    if not isinstance(citations, list | tuple) or not all(isinstance(c, str) for c in citations):
        problems.append("'citations' is not a list of strings")
    elif any(len(c) > MAX_ID_CHARS for c in citations):
        problems.append(f"a citation is over the limit of {MAX_ID_CHARS:,} characters")
    refusal = obj.get("refusal_reason")
    if refusal is not None and not isinstance(refusal, str):
        problems.append(f"'refusal_reason' is a {type_name(refusal)}, not a string or null")
    confidence = obj.get("confidence")
    if confidence is not None and not (_is_number(confidence) and 0.0 <= confidence <= 1.0):
        problems.append(f"'confidence' is {confidence!r}, not a number in [0, 1] or null")
    if problems:
        raise ReplyError("bad answer: " + "; ".join(problems))
    return Answer(text=str(text), citations=tuple(citations), refusal_reason=refusal,
                  confidence=None if confidence is None else float(confidence))


def parse_reply(obj: Any, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
    """Validate a decoded reply ``{"hits": [...], "answer": {...} | null}``."""
    if not isinstance(obj, Mapping):
        raise ReplyError(f"the reply is a {type_name(obj)}, not an object with 'hits'")
    if "hits" not in obj:
        raise ReplyError(f"the reply has no 'hits' (keys: {', '.join(map(str, obj)) or 'none'})")
    hits = parse_hits(obj["hits"])
    answer = parse_answer(obj.get("answer")) if ask else None
    return hits, answer


def decode_json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ReplyError(f"{what} is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ReplyError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}): {snippet(raw)}") from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise ReplyError(f"{what} is JSON nested too deeply: {snippet(raw)}") from None


def snippet(raw: bytes | str) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    return repr(text[:ERROR_SNIPPET] + ("…" if len(text) > ERROR_SNIPPET else ""))
