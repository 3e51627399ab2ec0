"""Evaluate a pipeline on a golden set, in memory: no MLflow.

:func:`evaluate` takes anything that can answer a query — an object with ``search`` (and
``ask``), a plain function ``f(query, k) -> hits``, or a target spec (``python:…``,
``http://…``, ``cmd:…``) — and returns an :class:`EvalResult`: the aggregate blocks, the
per-query scores and ``per_query.jsonl``. :func:`kebab_mlflow.app.run.log_run` records
one as an MLflow run; :func:`kebab_mlflow.api.compare` compares two.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kebab_mlflow import names, progress
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.config import build_config, digest, flatten, redacted
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.evaluation.evidence import EvidenceRun, prepare_evidence
from kebab_mlflow.evaluation.per_query import PerQueryRow, read_per_query
from kebab_mlflow.evaluation.runner import check_expected_ids, run_queries
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.metrics.aggregate import Aggregate
from kebab_mlflow.metrics.scoring import run_cutoffs
from kebab_mlflow.names import DEFAULT_K
from kebab_mlflow.records import VersionSnapshot

if TYPE_CHECKING:  # built on demand: an in-memory evaluation of a target never loads it
    from kebab_mlflow.pipeline.reference import ReferencePipeline


@dataclass(frozen=True, kw_only=True)
class PipelineSource:
    """What produced the results, as it is recorded (params and tags of the run)."""

    preset: str  # a preset name, "target" for a --target, "python" for an object
    backend: str
    corpus: str | None = None
    config: Mapping[str, Any] | None = None  # the reference pipeline's full configuration
    target: str | None = None  # the target spec (credentials are stripped when recorded)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {vocab.PRESET: self.preset, vocab.BACKEND: self.backend}
        if self.target:
            from kebab_mlflow.targets.spec import logged_options, without_credentials

            params[vocab.TARGET] = without_credentials(self.target.split("?")[0])
            params.update({f"{vocab.TARGET_PREFIX}{k}": v
                           for k, v in logged_options(self.target).items()})
        if self.corpus is not None:
            params[vocab.CORPUS] = self.corpus
        if self.config is not None:
            params.update({f"{vocab.CONFIG_PREFIX}{k}": v
                           for k, v in redacted(flatten(dict(self.config))).items()})
        return params

    def config_digest(self) -> str:
        return digest(self.config if self.config is not None else self.params())


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """One evaluation, in memory. ``per_query_path`` is its ``per_query.jsonl``; when
    :func:`evaluate` chose the folder itself, the folder lives as long as this object."""

    golden: GoldenSet
    source: PipelineSource
    versions: VersionSnapshot
    k: int
    cutoffs: tuple[int, ...]
    seed: int
    aggregate: Aggregate
    scores: Mapping[str, np.ndarray]  # metric -> per-query values (NaN: does not count)
    per_query_path: Path
    per_query_sha256: str
    timings: Mapping[str, float] = field(default_factory=dict)
    ask: bool | None = None  # the run-wide --ask/--no-ask override, None: per query
    repeat: int = 1  # run --repeat N: every query N times (evaluation/repeats.py)
    # evidence_rule / evidence_tau when the golden set's evidence was resolved
    evidence_params: Mapping[str, Any] = field(default_factory=dict)
    # per query: <metric>_upper and unjudged_hits_at_<k>_doc (metrics/unjudged.py), in the
    # golden set's order; the aggregate's unjudged_bounds block holds their means
    bound_scores: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        """Every aggregate value that is not null, by its MLflow metric name."""
        return self.aggregate.flat_metrics()

    @property
    def overall(self) -> Mapping[str, float | None]:
        return self.aggregate.overall

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.golden.queries)

    def rows(self) -> tuple[PerQueryRow, ...]:
        """``per_query.jsonl`` read back."""
        return tuple(read_per_query(self.per_query_path))

    def params(self) -> dict[str, Any]:
        """The run's params: versions, pipeline, depth, cut-offs, golden set, seed."""
        pipeline = self.source.params()
        return {**self.versions.as_dict(), **_first(pipeline, vocab.PRESET, vocab.BACKEND),
                vocab.K: self.k, vocab.CUTOFFS: ",".join(map(str, self.cutoffs)),
                vocab.GOLDEN_SET: self.golden.name, vocab.N_QUERIES: len(self.golden),
                vocab.SEED: self.seed,
                **({} if self.ask is None else {vocab.ASK: "all" if self.ask else "none"}),
                **({} if self.repeat == 1 else {vocab.REPEAT: self.repeat}),
                **self.evidence_params,
                **_rest(pipeline, vocab.PRESET, vocab.BACKEND)}


def _first(params: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: params[k] for k in keys if k in params}


def _rest(params: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in keys}


def with_ask(golden: GoldenSet, ask: bool | None) -> GoldenSet:
    """The golden set with every query's ``ask`` set to ``ask`` (``--ask``/``--no-ask``);
    unchanged for None. The file's digest stays: the queries are the same, the run records the
    override as its ``ask`` param."""
    if ask is None:
        return golden
    queries = tuple(dataclasses.replace(q, ask=ask) for q in golden.queries)
    return dataclasses.replace(golden, queries=queries)


def warn_unanswered(golden: GoldenSet) -> int:
    """One warning for the queries whose answer checks (must_contain/forbidden) will not run
    because they do not ask; their count."""
    n = sum(1 for q in golden.queries if (q.must_contain or q.forbidden) and not q.ask)
    if n:
        progress.warn(f"{n} of {len(golden)} queries have must_contain/forbidden but no ask: "
                      "their answers are not generated or scored (run --ask to answer every "
                      "query)")
    return n


def reference_pipeline(preset: str = "naive_baseline", corpus: str | Path = "fixtures/kb",
                       golden: GoldenSet | str | Path | None = None,
                       overrides: Mapping[str, Any] | None = None, **options: Any
                       ) -> ReferencePipeline:
    """The built-in pipeline for a preset over a corpus; ``overrides`` and ``options`` are
    config keys (``{"bm25.k1": 1.2}``, or ``bm25__k1=1.2``). ``golden`` is needed only by the
    oracle (it ranks the expected chunks first)."""
    from kebab_mlflow.pipeline.backends.floors import oracle_truth
    from kebab_mlflow.pipeline.reference import build_pipeline

    merged = {**dict(overrides or {}), **{k.replace("__", "."): v for k, v in options.items()}}
    config = build_config(preset, merged)
    truth = None
    if golden is not None:
        golden = golden if isinstance(golden, GoldenSet) else load_golden_set(golden)
        truth = oracle_truth(golden.queries)
    pipeline = build_pipeline(config, corpus, truth)
    # the pipeline's config: lexical.tokenizer and the gate resolved for this corpus
    pipeline.source = PipelineSource(preset=preset, backend=config["backend"], corpus=str(corpus),
                                     config=pipeline.config)
    return pipeline


def as_pipeline(pipeline: Any, concurrency: int = 1, golden: GoldenSet | None = None,
                loaded: Any = None) -> tuple[Any, PipelineSource]:
    """A pipeline object and what to record of it, from an object, a function or a spec.
    With ``golden``, a target that matches queries by id (a run file) reports its matching.
    ``loaded``: the spec's target, loaded already (a run file read beside the golden set)."""
    if isinstance(pipeline, str):
        from kebab_mlflow.targets import load_target

        target = loaded if loaded is not None else load_target(pipeline,
                                                               concurrency=concurrency)
        if golden is not None and hasattr(target, "match_golden"):
            target.match_golden(q.id for q in golden.queries)
        return target, PipelineSource(preset="target", backend="target", target=pipeline)
    source = getattr(pipeline, "source", None)
    if isinstance(source, PipelineSource):
        return pipeline, source
    if callable(getattr(pipeline, "search", None)):
        return pipeline, PipelineSource(preset="python", backend=type(pipeline).__name__)
    if callable(pipeline):
        from kebab_mlflow.targets.python import from_object

        name = getattr(pipeline, "__name__", type(pipeline).__name__)
        return from_object(pipeline, f"python:{name}", concurrency), \
            PipelineSource(preset="python", backend="function")
    raise ConfigError(f"cannot evaluate a {type(pipeline).__name__}: expected an object with "
                      "search(query, k), a function f(query, k) -> hits, or a target spec")


def evaluate(pipeline: Any, golden: GoldenSet | str | Path, *, k: int = DEFAULT_K,
             cutoffs: Sequence[int] | None = None, seed: int = 0, fail_fast: bool = False,
             concurrency: int = 1, per_query_path: Path | None = None,
             ask: bool | None = None, repeat: int = 1) -> EvalResult:
    """Run every query of ``golden`` through ``pipeline`` and score it (no MLflow).

    ``k`` is the retrieval depth; metrics are reported at ``cutoffs`` (each ≤ ``k``, else a
    ConfigError), by default at 1, 3, 5, 10 and ``k`` (those ≤ ``k``). ``ask``: True/False
    answers every/no query, None follows each query's ``ask``. ``per_query_path``: where to
    stream ``per_query.jsonl`` (default: a temporary folder kept alive by the result)."""
    if depth_problem := names.depth_problem(k):
        raise ConfigError(depth_problem)
    golden = golden if isinstance(golden, GoldenSet) else load_golden_set(golden)
    golden = with_ask(golden, ask)
    ks = tuple(run_cutoffs(k, cutoffs))
    t0 = time.perf_counter()
    pipeline, source = as_pipeline(pipeline, concurrency, golden)
    if hasattr(pipeline, "chunk_ids") and hasattr(pipeline, "doc_ids"):
        check_expected_ids(golden, pipeline.chunk_ids, pipeline.doc_ids)
    golden, evidence = prepare_evidence(golden, pipeline)
    index_s = time.perf_counter() - t0
    return evaluate_prepared(pipeline, source, golden, k, ks, seed=seed, fail_fast=fail_fast,
                             per_query_path=per_query_path, index_s=index_s, ask=ask,
                             repeat=repeat, evidence=evidence)


def evaluate_prepared(pipeline: Any, source: PipelineSource, golden: GoldenSet, k: int,
                      cutoffs: Sequence[int], *, seed: int = 0, fail_fast: bool = False,
                      per_query_path: Path | None = None, index_s: float = 0.0,
                      ask: bool | None = None, repeat: int = 1,
                      evidence: EvidenceRun | None = None) -> EvalResult:
    """:func:`evaluate` for a pipeline already built and checked against the golden set
    (``ask`` already applied to it: :func:`with_ask`; here it is only recorded). ``evidence``:
    from :func:`kebab_mlflow.evaluation.evidence.prepare_evidence`, which gave ``golden``."""
    warn_unanswered(golden)
    keep: tempfile.TemporaryDirectory[str] | None = None
    if per_query_path is None:
        keep = tempfile.TemporaryDirectory(prefix="kebab-eval-")
        per_query_path = Path(keep.name) / "per_query.jsonl"
    if repeat < 1:
        raise ConfigError(f"--repeat must be >= 1, got {repeat}")
    outcome = run_queries(pipeline, golden, k, cutoffs, per_query_path, fail_fast=fail_fast,
                          repeat=repeat, evidence=evidence)
    versions = getattr(pipeline, "versions", None)
    evidence_timing = {} if evidence is None else {"evidence_s": evidence.seconds}
    known = versions if isinstance(versions, VersionSnapshot) else VersionSnapshot()
    result = EvalResult(golden=golden, source=source, versions=known,
                        k=k, cutoffs=tuple(cutoffs), seed=seed, aggregate=outcome.aggregate,
                        scores=outcome.scores,
                        per_query_path=per_query_path, per_query_sha256=outcome.per_query_sha256,
                        timings={"index_s": index_s, **evidence_timing, **outcome.timings},
                        ask=ask, repeat=repeat,
                        evidence_params={} if evidence is None else evidence.params(),
                        bound_scores=outcome.bound_scores)
    if keep is not None:
        weakref.finalize(result, keep.cleanup)
    return result
