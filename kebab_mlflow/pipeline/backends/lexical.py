"""BM25 with sparse matrices.

score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))  (Lucene's, never negative).

The per-(term, doc) weights are precomputed once into a CSR matrix (terms × docs), so a batch
of queries is one sparse product (queries × terms)·(terms × docs). A query term counts once per
occurrence in the query, as in Lucene's BooleanQuery. Documents and queries go through the
same ``lexical.tokenizer`` (``pipeline/text.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from kebab_mlflow.pipeline.backends import top_k_positions
from kebab_mlflow.pipeline.text import get_analyzer, get_tokenizer, tokenizer_version

TOKENIZER_VERSION = tokenizer_version("english")  # the default's, as before tokenizers existed


def term_counts(texts: Sequence[str], tokenizer: str = "english",
                advance: Callable[[int], None] | None = None
                ) -> tuple[sp.csr_matrix, dict[str, int]]:
    """(docs × terms) counts of the tokenizer's tokens, and the term → column map.
    ``advance(n)``: told every 256 texts tokenized (a progress bar)."""
    from sklearn.feature_extraction.text import CountVectorizer

    analyze = get_analyzer(tokenizer)
    done = 0

    def analyzer(text: str) -> list[str]:
        nonlocal done
        done += 1
        if advance is not None and done % 256 == 0:
            advance(256)
        return analyze(text)

    vectorizer = CountVectorizer(analyzer=analyzer, dtype=np.float32)
    tf = vectorizer.fit_transform(texts).tocsr()
    if advance is not None and done % 256:
        advance(done % 256)
    return tf, {t: int(i) for t, i in vectorizer.vocabulary_.items()}


class BM25Index:
    def __init__(self, weights: sp.csr_matrix, vocabulary: dict[str, int],
                 tokenizer: str = "english"):
        self.weights = weights  # terms × docs
        self.vocabulary = vocabulary
        self.tokenizer = tokenizer
        self._tokenize = get_tokenizer(tokenizer)

    @classmethod
    def build(cls, texts: Sequence[str], k1: float, b: float,
              tokenizer: str = "english") -> BM25Index:
        return cls.from_counts(*term_counts(texts, tokenizer), k1, b, tokenizer)

    @classmethod
    def from_counts(cls, tf: sp.csr_matrix, vocabulary: dict[str, int], k1: float,
                    b: float, tokenizer: str = "english") -> BM25Index:
        """The weights from (docs × terms) term counts: cheap next to tokenizing, so sweeps
        over k1 and b share one :func:`term_counts`."""
        tf = tf.tocsr().astype(np.float64)
        n_docs = tf.shape[0]
        doc_len = np.asarray(tf.sum(axis=1)).ravel()
        avgdl = doc_len.mean() if n_docs and doc_len.mean() > 0 else 1.0
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        # tf-saturation per stored entry: rows of tf are docs, so repeat each doc's norm
        norm = k1 * (1 - b + b * doc_len / avgdl)
        row_norm = np.repeat(norm, np.diff(tf.indptr))
        data = tf.data * (k1 + 1) / (tf.data + row_norm) * idf[tf.indices]
        weights = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape)
        return cls(weights.T.tocsr(), dict(vocabulary), tokenizer)

    def query_matrix(self, queries: Sequence[str]) -> sp.csr_matrix:
        """(queries × terms) term counts of the queries (out-of-vocabulary terms dropped)."""
        rows, cols = self._query_terms(queries)
        # rows come in order, so the CSR arrays are direct; a repeated term is a repeated
        # entry, which the product adds up like a count of 2
        indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=len(queries)))))
        return sp.csr_matrix((np.ones(len(cols)), cols, indptr),
                             shape=(len(queries), len(self.vocabulary)))

    def _query_terms(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(query row, term column) per query token in the vocabulary, repeats kept."""
        rows, cols = [], []
        vocab = self.vocabulary
        for row, query in enumerate(queries):
            for token in self._tokenize(query):
                col = vocab.get(token)
                if col is not None:
                    rows.append(row)
                    cols.append(col)
        return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Dense (queries × docs) BM25 scores."""
        return np.asarray((self.query_matrix(queries) @ self.weights).toarray())

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top k (doc index, score) per query; docs sharing no term with the query (score 0)
        are never returned. Ranks straight from the sparse product's rows: a doc without a
        stored entry scores 0, and every stored entry is > 0 (idf > 0, tf > 0)."""
        product = (self.query_matrix(queries) @ self.weights).tocsr()
        indptr, indices, data = product.indptr, product.indices, product.data
        out: list[list[tuple[int, float]]] = []
        for row in range(len(queries)):
            cols, vals = indices[indptr[row]:indptr[row + 1]], data[indptr[row]:indptr[row + 1]]
            if vals.size and vals.min() <= 0:  # defensive: explicit zeros
                positive = vals > 0
                cols, vals = cols[positive], vals[positive]
            top = top_k_positions(cols, vals, k)
            out.append(list(zip(cols[top].tolist(), vals[top].tolist(), strict=True)))
        return out

    def save(self, folder: Path) -> None:
        import json

        # uncompressed: 30× faster to write, 1.6× the size (SciFact: 0.17 s → 0.005 s, 5 MB)
        sp.save_npz(folder / "bm25_weights.npz", self.weights, compressed=False)
        (folder / "bm25_vocabulary.json").write_text(json.dumps(self.vocabulary))

    @classmethod
    def load(cls, folder: Path, tokenizer: str = "english") -> BM25Index:
        """``tokenizer``: the one it was built with (the cache folder's name holds its
        version)."""
        import json

        weights = sp.load_npz(folder / "bm25_weights.npz").tocsr()
        return cls(weights, json.loads((folder / "bm25_vocabulary.json").read_text()),
                   tokenizer)
