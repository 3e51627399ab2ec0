"""BM25 (lexical backend) against a direct implementation of its formula; tokenization."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from kebab_mlflow.pipeline.backends import top_k_indices, top_k_positions
from kebab_mlflow.pipeline.backends.lexical import BM25Index
from kebab_mlflow.pipeline.text import split_sentences, stop_words, tokenize

DOCS = [
    "The tram extension budget is large.",
    "Budget cuts hit the parks department budget again.",
    "Cycling lanes and trams share the harbour road.",
    "Nothing relevant here at all.",
]


def bm25_by_hand(docs, query, k1, b):
    """score(q, d) = Σ_t idf(t)·tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl)), Lucene idf."""
    tokenized = [tokenize(d) for d in docs]
    n = len(docs)
    avgdl = sum(map(len, tokenized)) / n
    out = []
    for tokens in tokenized:
        score = 0.0
        for term in tokenize(query):  # each occurrence in the query counts
            tf = tokens.count(term)
            if not tf:
                continue
            df = sum(term in t for t in tokenized)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(tokens) / avgdl))
        out.append(score)
    return out


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.2, 0.75), (2.0, 0.0)])
@pytest.mark.parametrize("query", ["tram budget", "budget budget", "harbour trams cycling",
                                   "zebra", "the and of"])
def test_scores_match_the_formula(k1, b, query):
    index = BM25Index.build(DOCS, k1, b)
    assert index.scores([query])[0] == pytest.approx(bm25_by_hand(DOCS, query, k1, b),
                                                     rel=1e-12, abs=1e-12)


def test_search_ranks_by_score_then_position_and_skips_zero_scores():
    index = BM25Index.build(["alpha beta", "gamma", "alpha beta", "alpha"], 0.9, 0.4)
    hits = index.search_batch(["beta"], 10)[0]
    assert [i for i, _ in hits] == [0, 2]  # a tie: corpus order; docs 1 and 3 score 0
    assert hits[0][1] == hits[1][1] > 0
    assert index.search_batch(["zebra"], 10) == [[]]
    assert index.search_batch([""], 10) == [[]]


def test_batch_equals_one_by_one_and_depth_is_respected():
    index = BM25Index.build(DOCS, 0.9, 0.4)
    queries = ["tram budget", "harbour", "zebra", "budget"]
    batch = index.search_batch(queries, 2)
    assert batch == [index.search_batch([q], 2)[0] for q in queries]
    assert all(len(h) <= 2 for h in batch)
    assert [i for i, _ in index.search_batch(["budget"], 1)[0]] == [1]


def test_save_and_load_round_trip(tmp_path):
    index = BM25Index.build(DOCS, 0.9, 0.4)
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path)
    assert loaded.vocabulary == index.vocabulary
    assert np.array_equal(loaded.scores(DOCS), index.scores(DOCS))


def test_tokenize_lowercases_drops_stop_words_and_stems():
    assert tokenize("The Running dogs ARE running!") == ["run", "dog", "run"]
    assert tokenize("Budgets, budgeting; BUDGET.") == ["budget", "budget", "budget"]
    assert tokenize("a I x") == []  # single characters are not tokens
    assert tokenize("The dogs", stem=False, remove_stop_words=False) == ["the", "dogs"]


def test_split_sentences():
    assert split_sentences("One here. Two there!\n\nThree\nlines. 4 starts") == [
        "One here.", "Two there!", "Three lines.", "4 starts"]


@pytest.mark.parametrize("text", [
    "A panel headed by Nicholas E. Golovin met.", "Ruled in Brown v. Board of Education.",
    "The U.S. Army and the St. Johns River.", "As Jones et al. 1998 and Dr. Who said.",
    "J. R. R. Tolkien wrote it.", "Fresno, e.g. Kearney Boulevard.",
    "Built by Theo M. Kearney in Mar. 1900.", "E. Mann, T. T. Tsui and Dr. Who met."])
def test_an_initial_or_abbreviation_does_not_end_a_sentence(text):
    assert split_sentences(f"{text} Next one. E. Last") == [text, "Next one.", "E. Last"]


def test_words_that_only_end_like_an_abbreviation_still_end_a_sentence():
    assert split_sentences("It was DNA. Then RNA. A co. Fine. To St. Ok") == [
        "It was DNA.", "Then RNA.", "A co.", "Fine.", "To St. Ok"]
    # a lone capital after a lowercase word is a letter, not an initial
    assert split_sentences("Take vitamin C. We did.\tIn meiosis I. The end. A, B and C. Go") == [
        "Take vitamin C.", "We did.", "In meiosis I.", "The end.", "A, B and C.", "Go"]


def test_top_k_without_a_full_sort_breaks_ties_by_index():
    scores = np.array([0.5, 0.9, 0.5, 0.0, 0.9, 0.5])
    assert top_k_indices(scores, 3).tolist() == [1, 4, 0]
    assert top_k_indices(scores, 4).tolist() == [1, 4, 0, 2]
    assert top_k_indices(scores, 10, positive_only=True).tolist() == [1, 4, 0, 2, 5]
    assert top_k_indices(scores, 0).tolist() == []
    assert top_k_indices(np.zeros(3), 2, positive_only=True).tolist() == []
    candidates = np.array([7, 3, 5])
    assert top_k_positions(candidates, np.array([1.0, 2.0, 1.0]), 2).tolist() == [1, 2]


def test_top_k_agrees_with_a_full_sort_on_random_ties():
    rng = np.random.default_rng(7)
    for _ in range(50):
        scores = rng.integers(0, 4, size=30).astype(float)
        k = int(rng.integers(1, 35))
        expected = sorted(range(30), key=lambda i: (-scores[i], i))[:k]
        assert top_k_indices(scores, k).tolist() == expected


def test_stop_words_are_scikit_learns_read_without_importing_scikit_learn():
    probe = ("import sys; from kebab_mlflow.pipeline.text import stop_words; words = stop_words(); "
             "print(len(words), 'sklearn' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.split() == ["318", "False"]
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert stop_words() == frozenset(ENGLISH_STOP_WORDS)
