"""The floor and ceiling backends: deterministic random ranking and the oracle."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from itertools import zip_longest
from typing import Any

import numpy as np

from kebab_mlflow.pipeline.backends import top_k_indices


def random_score(query: str, chunk_id: str) -> float:
    """First 8 bytes of SHA-256(query + "\\x00" + chunk_id), big-endian, / 2**64."""
    digest = hashlib.sha256((query + "\x00" + chunk_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def random_scores(query: str, encoded_chunk_ids: Sequence[bytes]) -> np.ndarray:
    """``random_score`` for every chunk: the query prefix is hashed once and copied per chunk,
    and the first 8 bytes of the digests are read as big-endian uint64 in one go (same bytes
    in, same digest out; uint64 → float64 then / 2**64 rounds exactly as the int division)."""
    copy = hashlib.sha256((query + "\x00").encode("utf-8")).copy

    def first_8_bytes(chunk_id: bytes) -> bytes:
        h = copy()
        h.update(chunk_id)
        return h.digest()[:8]

    head = b"".join(map(first_8_bytes, encoded_chunk_ids))
    return np.frombuffer(head, dtype=">u8") / 2.0**64


class RandomBackend:
    """Floor: a ranking that knows nothing about relevance, yet is the same on every machine."""

    def __init__(self, chunk_ids: Sequence[str]):
        self.chunk_ids = list(chunk_ids)
        self.encoded = [c.encode("utf-8") for c in self.chunk_ids]

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        out = []
        for query in queries:
            scores = random_scores(query, self.encoded)
            out.append([(int(i), float(scores[i])) for i in top_k_indices(scores, k)])
        return out


def oracle_truth(queries: Iterable[Any]) -> dict[str, tuple[tuple[str, ...], dict[str, int]]]:
    """Golden queries → the oracle's ``truth``: query text → (expected chunk ids, doc grades).
    The oracle sees only the text, as any pipeline does, so a text asked several times with
    different expectations gets one ranking for all: their expected chunks in turns (each
    one's first, then each one's second, …) and every document at its highest grade."""
    chunk_lists: dict[str, list[Sequence[str]]] = {}
    grades: dict[str, dict[str, int]] = {}
    for q in queries:
        chunk_lists.setdefault(q.query, []).append(q.expected_chunk_ids)
        merged = grades.setdefault(q.query, {})
        for doc, grade in q.relevant_doc_grades.items():
            merged[doc] = max(grade, merged.get(doc, grade))
    return {text: (tuple(dict.fromkeys(c for turn in zip_longest(*lists) for c in turn if c)),
                   grades[text]) for text, lists in chunk_lists.items()}


class OracleBackend:
    """Ceiling: for a golden query, its expected chunks first (then the first chunk of each
    expected document, by grade); nothing else. Unknown queries get no hits."""

    def __init__(self, chunk_ids: Sequence[str], doc_ids: Sequence[str],
                 truth: Mapping[str, tuple[Sequence[str], Mapping[str, int]]]):
        self.position = {c: i for i, c in enumerate(chunk_ids)}
        self.first_chunk: dict[str, int] = {}
        for i, d in enumerate(doc_ids):
            self.first_chunk.setdefault(d, i)
        self.truth = truth  # query text -> (expected chunk ids, doc grades)

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        out = []
        for query in queries:
            chunks, grades = self.truth.get(query, ((), {}))
            order = [self.position[c] for c in chunks if c in self.position]
            by_grade = sorted((d for d, g in grades.items() if g > 0),
                              key=lambda d: -grades[d])
            order += [self.first_chunk[d] for d in by_grade if d in self.first_chunk]
            seen, ranked = set(), []
            for i in order:
                if i not in seen:
                    seen.add(i)
                    ranked.append(i)
            out.append([(i, 1.0 - r / (len(ranked) + 1)) for r, i in enumerate(ranked[:k])])
        return out
