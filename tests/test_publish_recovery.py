"""Issue 28 item 1: publishing is idempotent at each step. A failure at any step of `publish`
(here an OSError "No space left on device" raised at the step's checkpoint, in process) keeps
the recovery folder; `upload` of it then finishes the same run exactly once: one FINISHED run,
one dataset link, one model link, one point per metric, every artifact, metrics equal to an
uninterrupted run's (to 12 significant digits: numpy sums across processes can differ in the
17th). SIGTERM/SIGKILL at these steps, a full tmpfs and a PostgreSQL-backed server are
bench/bench_publish.py."""

from __future__ import annotations

import errno
import math
from pathlib import Path

import pytest

from kebab_mlflow.app import run as log
from kebab_mlflow.app.run import RunOptions, execute, upload
from kebab_mlflow.errors import TrackingError
from tests.conftest import GOLDEN, KB, mlflow_client

# every checkpoint of `publish`, in order (kebab_mlflow/app/run.py)
PUBLISH_STEPS = ("dataset-logged", "model-linked", "metrics-logged", "artifacts-logged",
                 "table-logged", "traces-logged", "view-set")


def _options(store_uri: str, name: str) -> RunOptions:
    return RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                      experiment="publish", run_name=name, traces="failures")


def _fail_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    real = log.checkpoint

    def failing(name: str) -> None:
        if name == step:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(name)

    monkeypatch.setattr(log, "checkpoint", failing)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isfinite(a) and math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0))


def _published(store_uri: str, run_id: str) -> dict:
    client = mlflow_client(store_uri)
    run = client.get_run(run_id)
    history = {k: len(client.get_metric_history(run_id, k)) for k in run.data.metrics}
    return {"status": run.info.status, "metrics": run.data.metrics, "history": history,
            "artifacts": sorted(a.path for a in client.list_artifacts(run_id)),
            "datasets": len(run.inputs.dataset_inputs),
            "models": len(run.outputs.model_outputs) if run.outputs else 0,
            # the per_query.jsonl digest differs run to run (it holds each query's latency)
            "tags": {k: v for k, v in run.data.tags.items()
                     if k.startswith("kebab.") and k != "kebab.per_query_sha256"},
            "per_query_sha256": "kebab.per_query_sha256" in run.data.tags}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """An uninterrupted run of the same options: what every recovered run must equal."""
    where = tmp_path_factory.mktemp("reference")
    uri = f"sqlite:///{where / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(where)
        mp.setenv("KEBAB_CACHE_DIR", str(where / "cache"))
        result = execute(_options(uri, "uninterrupted"))
    return uri, _published(uri, result.run_id)


@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_a_failure_at_any_publishing_step_then_upload_finishes_the_run_once(
        tmp_path, store_uri, monkeypatch, reference, step):
    _fail_at(monkeypatch, step)
    with pytest.raises(TrackingError, match="results kept in") as failed:
        execute(_options(store_uri, "recovered"))
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    (folder,) = (tmp_path / "kebab-recovery").iterdir()
    assert str(folder.name) in str(failed.value)
    run_id = upload(folder)
    assert not folder.exists()
    client = mlflow_client(store_uri)
    runs = client.search_runs([client.get_experiment_by_name("publish").experiment_id])
    assert [(r.info.run_id, r.info.status) for r in runs] == [(run_id, "FINISHED")]
    got, want = _published(store_uri, run_id), reference[1]
    assert got["artifacts"] == want["artifacts"]
    assert set(got["metrics"]) == set(want["metrics"])
    wrong = {k: (v, want["metrics"][k]) for k, v in got["metrics"].items()
             if not _same(v, want["metrics"][k])}
    assert wrong == {}
    assert set(got["history"].values()) == {1}  # each metric logged once
    assert (got["datasets"], got["models"]) == (want["datasets"], want["models"]) == (1, 1)
    assert got["tags"] == want["tags"]


def test_upload_twice_after_a_failure_changes_nothing(tmp_path, store_uri, monkeypatch):
    """A recovery folder copied before `upload` and uploaded again: still one run, once."""
    import shutil

    _fail_at(monkeypatch, "artifacts-logged")
    with pytest.raises(TrackingError):
        execute(_options(store_uri, "twice"))
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    (folder,) = (tmp_path / "kebab-recovery").iterdir()
    copy = tmp_path / "copy" / folder.name
    shutil.copytree(folder, copy)
    run_id = upload(folder)
    first = _published(store_uri, run_id)
    assert upload(copy) == run_id
    assert _published(store_uri, run_id) == first
    assert Path(copy).exists() is False


def test_an_owned_artifact_is_linked_into_a_local_store_and_copied_where_it_cannot_be(
        tmp_path, store_uri, monkeypatch):
    """A run's recovery-folder files are hard-linked, not copied (a 1M-query per_query.jsonl
    is 8.3 GB): the stored bytes are the file's, publishing again keeps one file, a file
    that is not owned is copied, and a failed link (another file system) copies."""
    import os

    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(store_uri)
    run_id = tracker.start_run(tracker.experiment_id("links"), "r", {})
    root = tracker._local_root(run_id)
    assert root is not None
    work = tmp_path / "work"
    work.mkdir()
    owned, other, far = (work / n for n in ("per_query.jsonl", "note.md", "far.md"))
    for f in (owned, other, far):
        f.write_text(f"{f.name}\n")
    tracker.log_artifact(run_id, owned, owned=True)
    tracker.log_artifact(run_id, owned, owned=True)  # upload of a kept folder
    tracker.log_artifact(run_id, other)
    assert os.path.samefile(owned, root / owned.name)
    assert not os.path.samefile(other, root / other.name)

    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    tracker.log_artifact(run_id, far, "sub", owned=True)
    assert (root / "sub" / far.name).read_text() == "far.md\n"
    assert not os.path.samefile(far, root / "sub" / far.name)
    assert sorted(p.name for p in root.rglob("*")) == ["far.md", "note.md", "per_query.jsonl",
                                                      "sub"]
    tracker.end_run(run_id)
