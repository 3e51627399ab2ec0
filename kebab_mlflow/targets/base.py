"""Evaluate any system that can answer a query: ``--target python:…``, ``http://…``, ``cmd:…``.

:func:`load_target` turns a target spec into an object the runner drives through
``run_many([(query, ask), ...], k) -> [(hits, answer | None, error | None, seconds)]``, in
input order. Queries of one call run on up to ``concurrency`` threads (targets are I/O-bound:
a service, a subprocess); results keep golden-set order.

Spec forms (options after ``?``, see :data:`OPTIONS`)::

    python:package.module:attr          attr = a Pipeline object, a class or factory returning
    python:path/to/file.py:attr         one, or a plain function f(query, k) -> hits
    http://host:port/search?timeout=10  POST {"query", "k", "ask"} -> reply; GET ./versions
    cmd:mytool search --json --k {k} {query}

Reply (HTTP body, command stdout, or what a plain function returns)::

    {"hits": [{"chunk_id": str, "doc_id": str, "score": number}, ...],
     "answer": {"text": str, "citations": [str], "refusal_reason": str | null,
                "confidence": number in [0, 1] | null} | null}

Ranks are the reply order, 1-based. A reply that breaks this shape (malformed JSON, a missing
or mistyped field, a duplicate chunk id) becomes that query's error — a string saying what was
wrong — and the run goes on. A spec that cannot be loaded at all raises
:class:`~kebab_mlflow.errors.TargetError` (exit 2) before any MLflow run exists.

Versions: a Python target's ``versions``; ``GET <url>/../versions`` for HTTP (``urljoin(url,
"versions")``); spec options (``?index_version=v3``) for any kind. Whatever is not reported is
recorded as ``unknown`` with a warning on stderr; compare treats ``unknown`` as a mismatch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kebab_mlflow.records import Answer, Hit, VersionSnapshot
from kebab_mlflow.redaction import redacted
from kebab_mlflow.targets.reply import ReplyError

#: Reply of one query: (hits, answer | None, error | None, seconds).
Reply = tuple[tuple[Hit, ...], Answer | None, str | None, float]









# --------------------------------------------------------------------------- replies


















# --------------------------------------------------------------------------- targets


class Target:
    """Common driver: ``run_many`` fans queries out to threads and keeps their order."""

    kind = "target"
    answers = True  # False: a search-only target; ask queries get no answer

    def __init__(self, spec: str, versions: VersionSnapshot, concurrency: int):
        self.spec = spec
        self.versions = versions
        self.concurrency = concurrency

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        raise NotImplementedError

    def run_one(self, text: str, ask: bool, k: int) -> Reply:
        start = time.perf_counter()
        try:
            hits, answer = self.query(text, k, ask)
            return hits, answer, None, time.perf_counter() - start
        except ReplyError as exc:
            return (), None, redacted(str(exc)), time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001 - a user's code may raise anything
            return (), None, redacted(f"{type(exc).__name__}: {exc}"), time.perf_counter() - start

    def run_many(self, items: Sequence[tuple[str, bool]], k: int) -> list[Reply]:
        workers = min(self.concurrency, len(items))
        if workers <= 1:
            return [self.run_one(text, ask, k) for text, ask in items]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kebab-target")
        try:
            futures = [pool.submit(self.run_one, text, ask, k) for text, ask in items]
            return [f.result() for f in futures]
        finally:  # on Ctrl-C do not wait for queued queries
            pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.spec)!r}, concurrency={self.concurrency})"










# --------------------------------------------------------------------------- loading


TargetT = TypeVar("TargetT", bound="Target")


def replace_versions(target: TargetT, versions: VersionSnapshot) -> TargetT:
    target.versions = versions
    return target
