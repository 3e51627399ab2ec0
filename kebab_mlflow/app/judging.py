"""``kebab-mlflow judge RUN...``: the judging queue of stored runs (golden_versions/queue.py),
written locally and copied to each run as the artifact ``judging/to_judge.yaml`` — the copy
never holds a private set's query or passage text.

Each item's passage is the text the run retrieved: the chunk, rebuilt from the corpus with the
chunker the run recorded (params ``config.chunker.*``), or the whole document when the hit is
a document (a run file's hits, a ``document``-mode chunk) or its chunk id is not one the
chunker makes (another system's target). The corpus is ``--corpus``, else the run's
``corpus`` param, else the golden set's ``corpus:``; none readable: no passages (said)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.app.rescore import load_recorded
from kebab_mlflow.errors import InputError
from kebab_mlflow.evaluation.rescore import RecordedRun
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.golden_versions.queue import JudgingQueue, judging_queue, with_passages

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.pipeline.chunker import ChunkerConfig
    from kebab_mlflow.tracking.store import Tracker

QUEUE_ARTIFACT_DIR = "judging"


@dataclass(frozen=True, kw_only=True)
class JudgeOutcome:
    queue: JudgingQueue
    out: Path
    logged_to: tuple[str, ...]  # runs the copy was logged on
    corpus: Path | None = None  # where the passages came from; None: no passages


def run_golden(runs: Sequence[RecordedRun], golden: str | Path | None) -> GoldenSet:
    """``--golden``, else the golden file the first run recorded."""
    where = golden or runs[0].tags.get("kebab.golden_path")
    if not where:
        raise InputError(f"run {runs[0].run_id} recorded no golden path (a private set or an "
                         "older run): pass --golden")
    return load_golden_set(where)


def corpus_of(runs: Sequence[RecordedRun], golden: GoldenSet,
              corpus: str | Path | None = None) -> Path | None:
    """The corpus to read passages from: ``corpus`` (``--corpus``, which must exist), else
    the first run's ``corpus`` param that exists, else the golden set's; None without one."""
    if corpus is not None:
        if not Path(corpus).exists():
            raise InputError(f"--corpus {corpus}: no such file or folder")
        return Path(corpus)
    named = [run.params.get(vocab.CORPUS) for run in runs] + [golden.corpus]
    return next((Path(c) for c in named if c and Path(c).exists()), None)


def _chunkers(runs: Sequence[RecordedRun]) -> list[ChunkerConfig]:
    """The distinct chunkers the runs recorded (a target's run records none)."""
    from kebab_mlflow.pipeline.chunker import ChunkerConfig

    found: list[ChunkerConfig] = []
    key = f"{vocab.CONFIG_PREFIX}chunker."
    for run in runs:
        p = run.params
        if f"{key}mode" not in p:
            continue
        try:
            config = ChunkerConfig(p[f"{key}mode"], int(p.get(f"{key}max_chars", "800")),
                                   int(p.get(f"{key}overlap_chars", "100")))
        except ValueError:
            continue
        if config not in found:
            found.append(config)
    return found


def hit_passages(queue: JudgingQueue, runs: Sequence[RecordedRun],
                 corpus: Path) -> dict[tuple[str, str], str]:
    """(doc id, chunk id) → the text of each queue item's hit: its chunk rebuilt with the
    runs' chunkers, else its document (title and text); items whose document the corpus does
    not hold have none."""
    from kebab_mlflow.pipeline.chunker import chunk_document
    from kebab_mlflow.pipeline.corpus import load_corpus

    wanted = {item.doc_id for item in queue.items}
    docs = {d.doc_id: d for d in load_corpus(corpus).documents if d.doc_id in wanted}
    chunkers = _chunkers(runs)
    chunks: dict[str, str] = {}
    for document in docs.values():
        for config in chunkers:
            chunks.update({c.chunk_id: c.text for c in chunk_document(document, config)})
    out: dict[tuple[str, str], str] = {}
    for item in queue.items:
        doc = docs.get(item.doc_id)
        if doc is None:
            continue
        text = chunks.get(item.chunk_id)
        out[(item.doc_id, item.chunk_id)] = text if text is not None else (
            f"{doc.title}. {doc.text}" if doc.title else doc.text)
    return out


def judge_runs(tracker: Tracker, experiment: str, refs: Sequence[str], *, k: int, out: Path,
               golden: str | Path | None = None, log_copy: bool = True,
               corpus: str | Path | None = None) -> JudgeOutcome:
    runs = [load_recorded(tracker, experiment, ref)[1] for ref in refs]
    golden_set = run_golden(runs, golden)
    queue = judging_queue(runs, golden_set, k)
    source = None if golden_set.private else corpus_of(runs, golden_set, corpus)
    if source is not None and queue.items:
        queue = with_passages(queue, hit_passages(queue, runs, source))
    from kebab_mlflow.golden_versions.merge import write_atomically

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, queue.to_yaml(with_text=not golden_set.private))
    logged: list[str] = []
    if log_copy:
        with tempfile.TemporaryDirectory(prefix="kebab-judge-") as tmp:
            copy = Path(tmp) / out.name
            copy.write_text(queue.to_yaml(with_text=not golden_set.private), encoding="utf-8")
            for run in runs:
                tracker.log_artifact(run.run_id, copy, QUEUE_ARTIFACT_DIR)
                logged.append(run.run_id)
    return JudgeOutcome(queue=queue, out=out, logged_to=tuple(logged), corpus=source)
