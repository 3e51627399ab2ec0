"""``kebab-mlflow judge RUN...``: the judging queue of stored runs (golden_versions/queue.py),
written locally and copied to each run as the artifact ``judging/to_judge.yaml`` — the copy
never holds a private set's query or passage text."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow.app.rescore import load_recorded
from kebab_mlflow.errors import InputError
from kebab_mlflow.evaluation.rescore import RecordedRun
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.golden_versions.queue import JudgingQueue, judging_queue

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker

QUEUE_ARTIFACT_DIR = "judging"


@dataclass(frozen=True, kw_only=True)
class JudgeOutcome:
    queue: JudgingQueue
    out: Path
    logged_to: tuple[str, ...]  # runs the copy was logged on


def run_golden(runs: Sequence[RecordedRun], golden: str | Path | None) -> GoldenSet:
    """``--golden``, else the golden file the first run recorded."""
    where = golden or runs[0].tags.get("kebab.golden_path")
    if not where:
        raise InputError(f"run {runs[0].run_id} recorded no golden path (a private set or an "
                         "older run): pass --golden")
    return load_golden_set(where)


def doc_passages(runs: Sequence[RecordedRun]) -> dict[str, str]:
    """Doc id → text, from the corpus the first run that names a readable one was run on;
    {} when none does (a target's run: the queue has ids and ranks only)."""
    from kebab_mlflow.errors import CorpusError
    from kebab_mlflow.pipeline.corpus import load_corpus

    for run in runs:
        corpus = run.params.get("corpus")
        if corpus and Path(corpus).exists():
            try:
                docs = load_corpus(corpus).documents
            except CorpusError:
                continue
            return {d.doc_id: f"{d.title}. {d.text}" if d.title else d.text for d in docs}
    return {}


def judge_runs(tracker: Tracker, experiment: str, refs: Sequence[str], *, k: int, out: Path,
               golden: str | Path | None = None, log_copy: bool = True) -> JudgeOutcome:
    runs = [load_recorded(tracker, experiment, ref)[1] for ref in refs]
    golden_set = run_golden(runs, golden)
    passages = {} if golden_set.private else doc_passages(runs)
    queue = judging_queue(runs, golden_set, k, passages)
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
    return JudgeOutcome(queue=queue, out=out, logged_to=tuple(logged))
