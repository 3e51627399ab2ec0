"""The built-in reference pipeline: ingest → chunk → index (cached on disk) → search → answer.

The version snapshot is derived from the configuration alone, so changing a chunker setting
changes ``chunker_version`` and changing nothing changes nothing. The built index lives in
``$KEBAB_CACHE_DIR`` (default ``.kebab-cache/`` in the working directory) under a key made of
the corpus digest and the versions; a second run with the same inputs loads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from kebab_mlflow import progress
from kebab_mlflow.pipeline.answerer import (
    GATES,
    REFUSE_BELOW,
    AnswererConfig,
    answerer_version,
    extractive_answer,
)
from kebab_mlflow.pipeline.cache import (
    atomic_folder,
    cache_root,
    cached_number,
    load_or_build_once,
)
from kebab_mlflow.pipeline.chunker import (
    Chunk,
    ChunkerConfig,
    ChunkSpans,
    chunk_corpus,
    chunk_spans,
)
from kebab_mlflow.pipeline.corpus import Corpus, open_corpus
from kebab_mlflow.pipeline.text import (
    AUTO,
    get_tokenizer,
    hangul_share,
    resolve_tokenizer,
    tokenizer_version,
)
from kebab_mlflow.records import Answer, Hit, VersionSnapshot

if TYPE_CHECKING:  # each loads when a pipeline needs it
    import scipy.sparse as sp

    from kebab_mlflow.pipeline.backends.lexical import BM25Index
    from kebab_mlflow.pipeline.calibrator import Calibrator

PARSER_VERSION = "parser-v1"




def versions_for(config: Mapping[str, Any], embedding_id: str = "") -> VersionSnapshot:
    """The versions of ``config``; ``lexical.tokenizer`` should be resolved
    (:func:`resolved_config`) — an unresolved ``auto`` is taken as ``english``. The tokenizer
    is in the lexical ``embedding_version`` and, when it is not ``english`` (whose versions
    predate the key and stay as they were), in ``prompt_template_version``: the answerer's
    evidence uses it, so a calibrator fitted on a Korean run applies to Korean runs only."""
    ch, bm, hy, an = config["chunker"], config["bm25"], config["hybrid"], config["answer"]
    chunker = ("document-v1" if ch["mode"] == "document"
               else f"structure-v3-max{ch['max_chars']}-overlap{ch['overlap_chars']}")
    tokenizer = _tokenizer_name(config)
    tok = tokenizer_version(tokenizer)

    bm25 = f"bm25-k1={bm['k1']}-b={bm['b']}"
    backend = config["backend"]
    embedding, index = {
        "lexical": (tok, bm25),
        "dense": (embedding_id, "exact-ip-v1"),
        "hybrid": (f"{tok}+{embedding_id}",
                   f"rrf-k{hy['rrf_k']}-depth{hy['depth']}({bm25}+exact-ip-v1)"),
        "random": ("none", "sha256-random-v1"),
        "oracle": ("none", "oracle-v1"),
    }[backend]
    if config.get("top_k") is not None:
        index += f"-top{config['top_k']}"
    prompt = (f"{answerer_version(tokenizer)}-ctx{an['context_k']}-sent{an['max_sentences']}"
              f"-gate{refuse_below(config)}" + (f"-sim={embedding_id}" if an["similarity"] else "")
              + ("" if tokenizer == "english" else f"-tok={tokenizer}")
              + ("-calibrated" if an["calibrate"] else ""))
    return VersionSnapshot(parser_version=PARSER_VERSION, chunker_version=chunker,
                           embedding_version=embedding, index_version=index,
                           prompt_template_version=prompt)


def refuse_below(config: Mapping[str, Any]) -> float:
    """``answer.refuse_below``, or the tokenizer's gate when it is null."""
    gate = config["answer"]["refuse_below"]
    return REFUSE_BELOW[_tokenizer_name(config)] if gate is None else gate


def _tokenizer_name(config: Mapping[str, Any]) -> str:
    name = config.get("lexical", {}).get("tokenizer", "english")
    return "english" if name == AUTO else name


def resolved_config(config: Mapping[str, Any], corpus: Corpus) -> dict[str, Any]:
    """``config`` with ``lexical.tokenizer: auto`` replaced by the corpus's tokenizer
    (:func:`text.resolve_tokenizer`: multilingual for a mostly Korean corpus) and a null
    ``answer.refuse_below`` by that tokenizer's gate, so a run's params say what was used."""
    lexical = dict(config.get("lexical", {"tokenizer": AUTO}))
    # the scan reads every word of the corpus (SciFact: 0.2 s, 4× its queries): once per
    # corpus digest, kept with the index cache
    lexical["tokenizer"] = resolve_tokenizer(lexical["tokenizer"], lambda: cached_number(
        "script", corpus.digest, lambda: hangul_share(d.text for d in corpus.documents)))
    resolved = {**config, "lexical": lexical}
    return {**resolved, "answer": {**config["answer"], "refuse_below": refuse_below(resolved)}}


class ReferencePipeline:
    def __init__(self, config: Mapping[str, Any], corpus: Corpus, chunks: list[Chunk],
                 backend: Any, folder: Path, embedding_id: str = ""):
        self.config = config
        self.corpus = corpus
        self.chunks = chunks
        self.backend = backend
        self.folder = folder
        self._versions = versions_for(config, embedding_id)
        an = config["answer"]
        self.answer_config = AnswererConfig(context_k=an["context_k"],
                                            max_sentences=an["max_sentences"],
                                            refuse_below=refuse_below(config),
                                            gate=GATES.get(_tokenizer_name(config)))
        self.calibrator = _load_calibrator(folder, self._versions) if an["calibrate"] else None
        self._df: dict[str, int] | None = None  # chunk frequency per term, on first ask
        # what a run records of it (evaluation's PipelineSource), once reference_pipeline names it
        self.source: object = None
        self.similarity = QuerySimilarity(config["dense"]) if an["similarity"] else None
        self.tokenizer = _tokenizer_name(config)
        self.tokenize = get_tokenizer(self.tokenizer)
        if an["calibrate"]:
            # say whether a calibrator is in use, and which: without one, confidences are raw
            from kebab_mlflow.pipeline.calibrator import base_versions

            prompt = base_versions(self._versions)["prompt_template_version"]
            if self.calibrator is not None:
                prompt += f"-calibrated-{self.calibrator.digest()[:8]}"
            self._versions = dataclasses.replace(self._versions,
                                                 prompt_template_version=prompt)

    @property
    def versions(self) -> VersionSnapshot:
        return self._versions

    @property
    def chunk_ids(self) -> set[str]:
        return {c.chunk_id for c in self.chunks}

    @property
    def doc_ids(self) -> set[str]:
        return {c.doc_id for c in self.chunks}

    def warm_up(self) -> None:
        """Load what the first query would otherwise pay for: the tokenizer (Kiwi takes
        1–2.6 s, on the first Korean text) and, when answering, the chunk frequencies of the
        answerer's term weights and the similarity model."""
        self.tokenize("warm-up 준비")
        if getattr(self, "answers", True):
            self.idf("")
            if self.similarity is not None:
                self.similarity("warm-up", [])

    def chunk_spans(self) -> list[ChunkSpans]:
        """Each chunk's spans in its document's parsed text (evidence resolution): the
        chunker run again in memory — the index cache keeps texts, not offsets — and checked
        to give the very chunks the index holds."""
        spans = list(chunk_spans(self.corpus, _chunker_config(self.config)))
        if [s.chunk_id for s in spans] != [c.chunk_id for c in self.chunks]:
            raise RuntimeError("the chunker gave other chunks than the index cache holds: "
                               "clear the index cache (.kebab-cache/index)")
        return spans

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        cap = self.config.get("top_k")
        depth = min(k, cap) if cap is not None else k
        return [[self._hit(i, score, rank) for rank, (i, score) in enumerate(ranked, 1)]
                for ranked in self.backend.search_batch(queries, depth)]

    def ask(self, query: str, hits: Sequence[Hit]) -> Answer:
        return extractive_answer(query, hits, self.answer_config, self.calibrator, self.idf,
                                 self.similarity, self.tokenize)

    def idf(self, term: str) -> float:
        """BM25's idf of a (stemmed) term over the chunks, for the answerer's term weights."""
        if self._df is None:
            self._df = _document_frequencies(self.chunks, self.folder, self.tokenizer)
        n = len(self.chunks)
        df = self._df.get(term, 0)
        return math.log1p((n - df + 0.5) / (df + 0.5))

    def _hit(self, index: int, score: float, rank: int) -> Hit:
        chunk = self.chunks[index]
        return Hit(chunk_id=chunk.chunk_id, doc_id=chunk.doc_id, score=score, rank=rank,
                   text=chunk.text)


_TEXT_VECTORS: dict[int, dict[str, Any]] = {}  # per loaded model: text → unit vector


class QuerySimilarity:
    """``(query, texts) → cosines`` with the dense model, for ``answer.similarity``. Each text is
    embedded on its own (a batch pads to its longest text, which moves vectors in their last
    bits) and remembered for the process, so a sentence gets the same vector whichever query
    meets it first."""

    def __init__(self, dense_config: Mapping[str, Any]):
        from kebab_mlflow.pipeline.backends.dense import require_libraries

        require_libraries("answer.similarity")
        self.dense_config = dense_config
        self._model: Any = None  # loaded on the first answer

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        from kebab_mlflow.pipeline.backends.dense import encode, load_model

        if self._model is None:
            self._model = load_model(self.dense_config)
        vectors = _TEXT_VECTORS.setdefault(id(self._model), {})
        for text in dict.fromkeys([query, *texts]):
            if text not in vectors:
                vectors[text] = encode(self._model, [text], 1)[0]
        q = vectors[query]
        return [float(vectors[t] @ q) for t in texts]


def build_pipeline(config: Mapping[str, Any], corpus_path: str | Path,
                   truth: Mapping[str, tuple[Sequence[str], Mapping[str, int]]] | None = None
                   ) -> ReferencePipeline:
    """Load or build the index for ``config`` over the corpus. ``truth`` (query text →
    expected chunk ids, doc grades) is needed only by the oracle backend."""
    corpus = open_corpus(corpus_path)  # parsed only if the index is built
    config = resolved_config(config, corpus)
    backend_name = config["backend"]
    embedding_id = ""
    if backend_name in ("dense", "hybrid") or config["answer"]["similarity"]:
        from kebab_mlflow.pipeline.backends.dense import embedding_version

        embedding_id = embedding_version(config["dense"])
    versions = versions_for(config, embedding_id)
    folder = _index_folder(corpus, versions)
    if not (folder / "chunks.jsonl").is_file():
        corpus.documents  # noqa: B018 - a bad corpus fails before its index folder is made
    chunks = _load_or_build_chunks(folder, corpus, config)
    backend = _make_backend(backend_name, config, chunks, folder, truth or {})
    return ReferencePipeline(config, corpus, chunks, backend, folder, embedding_id)


def _index_folder(corpus: Corpus, versions: VersionSnapshot) -> Path:
    # the chunk list depends only on corpus + parser + chunker; backends add files beside it
    key = hashlib.sha256(json.dumps(
        [corpus.digest, versions.parser_version, versions.chunker_version]).encode())
    return cache_root() / "index" / key.hexdigest()[:24]


def _load_or_build_chunks(folder: Path, corpus: Corpus, config: Mapping[str, Any]) -> list[Chunk]:
    path = folder / "chunks.jsonl"

    def load() -> list[Chunk] | None:  # msgspec: SciFact's 5,183 chunks in 0.02 s, not 0.06
        if not path.is_file():
            return None
        return msgspec.json.Decoder(Chunk).decode_lines(path.read_bytes())

    return load_or_build_once(folder, "chunks", load,
                              lambda: _build_chunks(folder, corpus, config))


def _build_chunks(folder: Path, corpus: Corpus, config: Mapping[str, Any]) -> list[Chunk]:
    chunks = chunk_corpus(corpus, _chunker_config(config))
    with atomic_folder(folder) as tmp:
        with (tmp / "chunks.jsonl").open("w", encoding="utf-8") as fh:
            for c in chunks:
                fh.write(json.dumps({"chunk_id": c.chunk_id, "doc_id": c.doc_id,
                                     "text": c.text}) + "\n")
    return chunks








def _chunker_config(config: Mapping[str, Any]) -> ChunkerConfig:
    ch = config["chunker"]
    return ChunkerConfig(ch["mode"], ch["max_chars"], ch["overlap_chars"])


def _make_backend(name: str, config: Mapping[str, Any], chunks: list[Chunk], folder: Path,
                  truth: Mapping[str, tuple[Sequence[str], Mapping[str, int]]]) -> Any:
    from kebab_mlflow.pipeline.backends.floors import OracleBackend, RandomBackend

    ids = [c.chunk_id for c in chunks]
    if name == "random":
        return RandomBackend(ids)
    if name == "oracle":
        return OracleBackend(ids, [c.doc_id for c in chunks], truth)
    if name == "lexical":
        return _lexical(config, chunks, folder)
    from kebab_mlflow.pipeline.backends.dense import DenseBackend

    dense = DenseBackend.load_or_build(config["dense"], chunks, folder)
    if name == "dense":
        return dense
    from kebab_mlflow.pipeline.backends.hybrid import HybridBackend

    hy = config["hybrid"]
    return HybridBackend(_lexical(config, chunks, folder), dense, hy["rrf_k"], hy["depth"])


def _lexical(config: Mapping[str, Any], chunks: list[Chunk], folder: Path) -> BM25Index:
    """The BM25 index for these k1 and b; the term counts (the costly part, tokenizing every
    chunk) are cached once per chunk set, so each k1/b variant of a sweep only reweighs them."""
    from kebab_mlflow.pipeline.backends.lexical import BM25Index

    bm, tokenizer = config["bm25"], _tokenizer_name(config)
    sub = folder / f"bm25-{tokenizer_version(tokenizer)}-k1={bm['k1']}-b={bm['b']}"

    def load() -> BM25Index | None:  # both files: a worker may be moving them in one at a time
        cached = (sub / "bm25_weights.npz").is_file() and (sub / "bm25_vocabulary.json").is_file()
        return BM25Index.load(sub, tokenizer) if cached else None

    def build() -> BM25Index:
        index = BM25Index.from_counts(*_term_counts(chunks, folder, tokenizer), bm["k1"],
                                      bm["b"], tokenizer)
        with atomic_folder(sub) as tmp:
            index.save(tmp)
        return index

    return load_or_build_once(folder, sub.name, load, build)


def _term_counts(chunks: Sequence[Chunk], folder: Path, tokenizer: str = "english"
                 ) -> tuple[sp.csr_matrix, dict[str, int]]:
    """(chunks × terms) counts and the term → column map, cached beside the chunk list."""
    import scipy.sparse as sp

    from kebab_mlflow.pipeline.backends.lexical import term_counts

    version = tokenizer_version(tokenizer)
    counts = folder / f"term_counts-{version}.npz"
    vocabulary = folder / f"term_vocabulary-{version}.json"

    def load() -> tuple[sp.csr_matrix, dict[str, int]] | None:
        if not (counts.is_file() and vocabulary.is_file()):
            return None
        return sp.load_npz(counts), json.loads(vocabulary.read_text())

    def build() -> tuple[sp.csr_matrix, dict[str, int]]:
        with progress.task("counting terms", len(chunks), "chunks") as task:
            tf, vocab = term_counts([c.text for c in chunks], tokenizer, task.advance)
        with atomic_folder(folder) as tmp:
            sp.save_npz(tmp / counts.name, tf, compressed=False)  # a cache: speed over size
            (tmp / vocabulary.name).write_text(json.dumps(vocab))
        return tf, vocab

    return load_or_build_once(folder, counts.stem, load, build)


def _document_frequencies(chunks: Sequence[Chunk], folder: Path,
                          tokenizer: str = "english") -> dict[str, int]:
    """Number of chunks holding each term, from the cached term counts."""
    import numpy as np

    tf, vocabulary = _term_counts(chunks, folder, tokenizer)
    df = np.bincount(tf.tocsr().indices, minlength=len(vocabulary))
    return {t: int(df[i]) for t, i in vocabulary.items()}


def _load_calibrator(folder: Path, versions: VersionSnapshot | None = None
                     ) -> Calibrator | None:
    """The calibrator fitted by ``kebab-mlflow calibrate`` for this pipeline, or None.

    It lives in the index folder as ``calibrator-<key>.json``, ``key`` = a digest of the
    version snapshot without the ``-calibrated`` suffix (see calibration.calibrator_key): the
    index folder is shared by every backend and answerer setting over the same chunks, and a
    calibrator is only valid for the ones it was fitted with. Without ``versions`` there is no
    key, hence no calibrator."""
    if versions is None:
        return None
    from kebab_mlflow.pipeline.calibrator import Calibrator, calibrator_path

    path = calibrator_path(folder, versions)
    if path.is_file():
        return Calibrator.load(path)
    warning = no_calibrator_warning(folder, versions)
    if warning:
        progress.warn(warning)
    return None


def no_calibrator_warning(folder: Path, versions: VersionSnapshot) -> str | None:
    """Why a run with ``answer.calibrate`` reports raw confidences although ``calibrate`` was
    run over these chunks: its calibrators were fitted for another answerer or retrieval (the
    versions that differ are named). None when no calibrator was ever fitted here (the
    default: nothing to say on every uncalibrated run)."""
    from kebab_mlflow.pipeline.calibrator import base_versions

    mine = base_versions(versions)
    differences = []
    for other in sorted(folder.glob("calibrator-*.json")):
        try:
            fitted = json.loads(other.read_text(encoding="utf-8"))["info"]["versions"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: its own run says so when it is used
        changed = [f"{k} {fitted.get(k)} → {v}" for k, v in mine.items() if fitted.get(k) != v]
        differences.append(", ".join(changed))
    if not differences:
        return None
    return ("answer.calibrate is on but no calibrator was fitted for this answerer and "
            f"retrieval: the {len(differences)} calibrator(s) over these chunks were fitted "
            f"with {'; '.join(f'({d})' for d in differences[:3])}; confidences are "
            "uncalibrated (prompt_template_version has no -calibrated- digest): run "
            "`kebab-mlflow calibrate` with this configuration")
