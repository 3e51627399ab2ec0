"""What a pipeline is: records (Hit, Answer, VersionSnapshot) and the Pipeline protocol.

Any object with ``versions``, ``search`` and ``ask`` can be evaluated; the reference pipeline
(:mod:`kebab_mlflow.pipeline.reference`) is one such object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

VERSION_KEYS = ("parser_version", "chunker_version", "embedding_version", "index_version",
                "prompt_template_version")
UNKNOWN = "unknown"


@dataclass(frozen=True, kw_only=True)
class VersionSnapshot:
    parser_version: str = UNKNOWN
    chunker_version: str = UNKNOWN
    embedding_version: str = UNKNOWN
    index_version: str = UNKNOWN
    prompt_template_version: str = UNKNOWN

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Hit:
    chunk_id: str
    doc_id: str
    score: float
    rank: int  # 1-based
    text: str = ""

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"rank must be >= 1, got {self.rank}")


@dataclass(frozen=True, kw_only=True)
class Answer:
    text: str
    citations: tuple[str, ...] = ()
    refusal_reason: str | None = None
    confidence: float | None = None
    raw_confidence: float | None = None  # before calibration, when the pipeline has one
    # cosine similarity of the query and the answer text (a refusal: its closest candidate
    # sentence), when the answerer is configured to measure it; a second calibration signal
    similarity: float | None = None

    @property
    def refused(self) -> bool:
        return self.refusal_reason is not None


@runtime_checkable
class Pipeline(Protocol):
    """The contract every evaluated system meets (a Python target implements exactly this)."""

    @property
    def versions(self) -> VersionSnapshot: ...

    def search(self, query: str, k: int) -> Sequence[Hit]: ...

    def ask(self, query: str, hits: Sequence[Hit]) -> Answer: ...


@dataclass(frozen=True, kw_only=True)
class QueryResult:
    query_id: str
    hits: tuple[Hit, ...] = ()
    answer: Answer | None = None
    latency_ms: float = 0.0
    error: str | None = None
    truncated_hits: int = 0  # hits past the depth k that the pipeline returned, dropped
    # the query's stages as measured by the query loop (latency_ms = search_ms + answer_ms);
    # None when the target reports only one time per query (a run file, run_many)
    search_ms: float | None = None
    answer_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One tracked run as the rest of the project sees it (the tracking layer builds these from
    MLflow's own entities, which never leave it)."""

    run_id: str
    run_name: str
    experiment_id: str
    status: str  # RUNNING | FINISHED | FAILED | KILLED
    start_time: int | None = None  # ms since the epoch
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
