"""The random floor (bit-exact SHA-256 scores) and the oracle ceiling."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

from kebab_mlflow.config import build_config
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.pipeline.backends.floors import (
    OracleBackend,
    RandomBackend,
    oracle_truth,
    random_score,
    random_scores,
)
from kebab_mlflow.pipeline.reference import build_pipeline
from tests.conftest import KB, ROOT


def independent_score(query: str, chunk_id: str) -> Fraction:
    digest = hashlib.sha256(f"{query}\x00{chunk_id}".encode()).hexdigest()
    return Fraction(int(digest[:16], 16), 1 << 64)


def test_random_score_is_bit_exact():
    for query, chunk in [("budget", "a#0"), ("", ""), ("é ü 漢字", "doc/x#12"),
                         ("tram", "harbor-transit#2")]:
        score = random_score(query, chunk)
        # n / 2**64 with n < 2**64 rounds to the nearest double: compare exactly
        assert score == float(independent_score(query, chunk))
        assert 0.0 <= score < 1.0
    assert random_score("budget", "a#0").hex() == float(
        independent_score("budget", "a#0")).hex()


def test_all_chunk_scores_at_once_are_bit_exact():
    ids = [f"doc-{i}/é#{i % 7}" for i in range(3000)]
    for query in ("tram budget", "", "漢字 question?"):
        scores = random_scores(query, [c.encode("utf-8") for c in ids])
        assert scores.dtype == np.float64 and scores.shape == (len(ids),)
        assert [s.hex() for s in scores.tolist()] == [
            float(independent_score(query, c)).hex() for c in ids]


def test_deterministic_per_query_and_chunk_and_different_across_queries():
    ids = [f"d{i}#0" for i in range(200)]
    backend = RandomBackend(ids)
    a, again = backend.search_batch(["q one"], 20), RandomBackend(ids).search_batch(["q one"], 20)
    assert a == again
    b = backend.search_batch(["q two"], 20)
    assert [i for i, _ in a[0]] != [i for i, _ in b[0]]
    scores = [s for _, s in a[0]]
    assert scores == sorted(scores, reverse=True)
    assert a[0][0] == max(((i, random_score("q one", c)) for i, c in enumerate(ids)),
                          key=lambda t: t[1])


def test_random_differs_from_lexical():
    query = "What is the budget of the Bayline Tram Extension?"
    lexical = build_pipeline(build_config(), KB).search(query, 10)
    floor = build_pipeline(build_config("random_retrieval"), KB).search(query, 10)
    assert [h.chunk_id for h in floor] != [h.chunk_id for h in lexical]
    assert all(h.score == random_score(query, h.chunk_id) for h in floor)
    assert [h.rank for h in floor] == list(range(1, 11))


SCRIPT = """
import json, sys
from kebab_mlflow.config import build_config
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.pipeline.reference import build_pipeline
p = build_pipeline(build_config("random_retrieval"), sys.argv[1])
print(json.dumps([[h.chunk_id, h.score.hex()] for h in p.search("tram budget", 10)]))
"""


def test_top_k_is_the_same_in_another_process(tmp_path):
    here = build_pipeline(build_config("random_retrieval"), KB).search("tram budget", 10)
    env_cache = {"KEBAB_CACHE_DIR": str(tmp_path / "other-cache"), "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(KB)], capture_output=True,
                         text=True, check=True, cwd=ROOT, env={**os.environ, **env_cache})
    assert json.loads(out.stdout) == [[h.chunk_id, h.score.hex()] for h in here]


def test_oracle_truth_serves_a_repeated_query_text_all_its_expectations():

    queries = [GoldenQuery(id="a", query="same words", expected_chunk_ids=("x#0", "x#1"),
                           expected_doc_ids={"x": 1}),
               GoldenQuery(id="b", query="same words", expected_chunk_ids=("y#0",),
                           expected_doc_ids={"y": 1, "x": 2}),
               GoldenQuery(id="c", query="other", expected_chunk_ids=("z#0",))]
    truth = oracle_truth(queries)
    assert truth["same words"][0] == ("x#0", "y#0", "x#1")  # each one's first, then seconds
    assert truth["same words"][1] == {"x": 2, "y": 1}  # a document at its highest grade
    assert truth["other"] == (("z#0",), {})  # chunk truth only: no doc grades of its own
    ranked = OracleBackend(["x#0", "x#1", "y#0", "z#0"], ["x", "x", "y", "z"],
                           truth).search_batch(["same words"], 2)[0]
    assert [i for i, _ in ranked] == [0, 2]  # both queries hit at rank <= 2


def test_oracle_puts_the_expected_chunks_first():
    ids = ["a#0", "a#1", "b#0", "c#0", "c#1"]
    docs = ["a", "a", "b", "c", "c"]
    truth = {"q": (["c#1", "a#0"], {"b": 1, "c": 2, "z": 3, "a": 0})}
    ranked = OracleBackend(ids, docs, truth).search_batch(["q", "unknown"], 10)
    assert [i for i, _ in ranked[0]] == [4, 0, 3, 2]  # chunks, then first chunk of c, b
    scores = [s for _, s in ranked[0]]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert ranked[1] == []
    assert [i for i, _ in OracleBackend(ids, docs, truth).search_batch(["q"], 1)[0]] == [4]
