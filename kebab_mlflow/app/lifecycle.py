"""One run lifecycle for every use case: ``run`` and ``log_run``, a sweep's parent and rows, a
tune's parent and trials.

:func:`run_lifecycle` creates the run with signals held (a Ctrl-C there would lose its id and
leave it RUNNING for good), turns SIGTERM into an interrupt while the use case works (its
checkpoints act on a signal a callback swallowed, :mod:`kebab_mlflow.interrupts`), and ends it
whatever happens, again with signals held: KILLED after an interrupt, FAILED after an error —
with the parent's children still RUNNING ended the same way — keeping the work folder for
``kebab-mlflow upload`` once its manifest is written. A run the use case already ended
FINISHED stays FINISHED. The use case ends its run FINISHED itself, when it has published.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from kebab_mlflow import names
from kebab_mlflow.errors import InputError, Problem, RunInterrupted
from kebab_mlflow.interrupts import signals_deferred, sigterm_as_interrupt
from kebab_mlflow.reading import Field, Messages, Reader, json_lines
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker

MANIFEST = "manifest.json"  # a work folder holding one is complete: `upload` publishes it


@dataclass(frozen=True, kw_only=True)
class LiveRun:
    """A run inside its lifecycle: its id and its work folder (None: the use case has none)."""

    run_id: str
    workdir: Path | None


@dataclass(frozen=True, kw_only=True)
class Lifecycle:
    """What a use case's run is and how it ends beyond the run itself."""

    what: str  # "run", "sweep", "tune": how messages name it
    workdir_root: Path | None = None  # a work folder <root>/<run id> is made when set
    end_children: bool = False  # a parent: its children still RUNNING end with it
    on_stop: Callable[[], None] = lambda: None  # before it ends: e.g. stop a sweep's rows
    resume_hint: Callable[[str], str] = lambda run_id: ""  # "; finish it with ..."


@contextlib.contextmanager
def run_lifecycle(tracker: Tracker, start: Callable[[], str],
                  lifecycle: Lifecycle) -> Iterator[LiveRun]:
    """The run ``start`` creates, from its creation to its end (module docstring)."""
    with sigterm_as_interrupt():
        with signals_deferred() as held:
            run_id = start()
        workdir = lifecycle.workdir_root / run_id if lifecycle.workdir_root else None
        try:
            if workdir is not None:
                workdir.mkdir(parents=True, exist_ok=True)
            if held.caught:
                raise KeyboardInterrupt
            yield LiveRun(run_id=run_id, workdir=workdir)
        except BaseException as exc:
            with signals_deferred():  # a second Ctrl-C must not cut the clean-up short
                replacement = _end_after(tracker, run_id, workdir, exc, lifecycle)
            if replacement is None:
                raise
            raise replacement from None


def _end_after(tracker: Tracker, run_id: str, workdir: Path | None, exc: BaseException,
               lifecycle: Lifecycle) -> BaseException | None:
    """End the run after ``exc`` and deal with its work folder; the error to raise instead
    (None: ``exc`` itself)."""
    with contextlib.suppress(Exception):  # best effort: the store may be what failed
        lifecycle.on_stop()
    signalled = isinstance(exc, KeyboardInterrupt) or (
        isinstance(exc, RunInterrupted) and lifecycle.end_children)  # a row's, a trial's
    if not signalled:
        if isinstance(exc, RunInterrupted):  # raised by a lifecycle inside: handled there
            _remove(workdir)
            return None
        if lifecycle.end_children:
            end_running_children(tracker, run_id, RunStatus.FAILED)
        if workdir is None or workdir.exists():  # else kept for recovery: its error says so
            tracker.end_run_quietly(run_id, RunStatus.FAILED)
            _remove(workdir)
        return None
    if lifecycle.end_children:
        end_running_children(tracker, run_id, RunStatus.KILLED)
    if not tracker.end_run_quietly(run_id, RunStatus.KILLED):
        _remove(workdir)
        return RunInterrupted(f"interrupted after {lifecycle.what} {run_id} had FINISHED")
    if workdir is not None and (workdir / MANIFEST).exists():
        return RunInterrupted(f"interrupted while publishing: {lifecycle.what} {run_id} ended "
                              f"as KILLED; results kept in {keep_for_recovery(workdir)}")
    _remove(workdir)
    return RunInterrupted(f"interrupted: {lifecycle.what} {run_id} ended as KILLED"
                          f"{lifecycle.resume_hint(run_id)}")


def _remove(workdir: Path | None) -> None:
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


def keep_for_recovery(workdir: Path) -> Path:
    """Move a work folder to ./kebab-recovery/<run id> (for ``upload``); its new path."""
    target = Path("kebab-recovery") / workdir.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(workdir), target)
    return target.resolve()


def end_running_children(tracker: Tracker, parent_id: str, status: str, *,
                         keep: frozenset[str] = frozenset(),
                         tags: Mapping[str, str] | None = None,
                         where: Mapping[str, str] | None = None) -> list[str]:
    """End the parent's children still RUNNING (but those in ``keep``; only those whose tags
    match ``where``), tagging them with ``tags`` first: a row or trial interrupted outside its
    own lifecycle, or whose worker died. Best effort on the way out; the ids ended."""
    ended: list[str] = []
    try:
        parent = tracker.get_run(parent_id)
        for child in tracker.find_runs([parent.experiment_id], status=RunStatus.RUNNING,
                                       tags={"mlflow.parentRunId": parent_id,
                                             **dict(where or {})}):
            if child.run_id in keep:
                continue
            if tags:
                tracker.set_tags(child.run_id, tags)
            tracker.end_run(child.run_id, status)
            ended.append(child.run_id)
    except Exception:  # noqa: BLE001 - the store may be what failed
        pass
    return ended


class Manifest(TypedDict):
    """``manifest.json`` of a work folder: what ``app.run.publish`` logs (:func:`read_manifest`
    checks it against :data:`MANIFEST_FIELDS`)."""

    run_id: str
    experiment_id: str
    tracking_uri: str
    metrics: dict[str, float]
    tags: dict[str, str]
    description: str
    dataset: dict[str, Any]  # tracking.layout.golden_dataset
    model: NotRequired[dict[str, Any] | None]  # tracking.layout.pipeline_model; older: absent
    traces: NotRequired[int]
    # [kind, args] of each plot, its "path" a file name in the folder: publishing draws one
    # whose PNG is missing (the plot process was still drawing when the run was stopped)
    plots: NotRequired[list[list[Any]]]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _plots_ok(value: list[Any]) -> bool:
    return all(isinstance(job, list) and len(job) == 2 and isinstance(job[0], str)
               and isinstance(job[1], dict) and isinstance(path := job[1].get("path"), str)
               and path == Path(path).name and path.endswith(".png") for job in value)


def _dataset_ok(value: dict[str, Any]) -> bool:
    return all(isinstance(value.get(k), str) for k in ("name", "digest")) and isinstance(
        value.get("tags"), dict)


# every manifest problem reads "'<key>' must <what>", whether the key is missing or bad
_SAY = "'{name}' must {what}"
MANIFEST_MESSAGES = Messages(bad=_SAY, missing=_SAY)
MANIFEST_FIELDS = (
    *(Field(name=key, what="be a non-empty string", types=(str,), required=True,
            nonempty=True, help=text) for key, text in (
                ("run_id", "the run it publishes"), ("experiment_id", "the run's experiment"),
                ("tracking_uri", "the store, without credentials"))),
    Field(name="description", what="be a non-empty string", types=(str,), required=True,
          help="the run's note (may be empty)"),
    Field(name="metrics", what="map names to finite numbers", types=(dict,), required=True,
          check=lambda v: all(map(_finite, v.values())), help="the headline metrics"),
    Field(name="tags", what="map names to strings", types=(dict,), required=True,
          items=(str,), help="the run's tags"),
    Field(name="plots", what="list [kind, args] pairs, each path a .png file name",
          types=(list,), check=_plots_ok, help="the plots the folder should hold"),
    Field(name="dataset", what="hold 'name', 'digest' and 'tags'", types=(dict,),
          required=True, check=_dataset_ok, help="the golden set as an MLflow dataset"),
)


def read_manifest(folder: Path) -> Manifest:
    """A recovery folder's manifest, checked: every problem at once, each at its line."""
    path = folder / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise InputError(f"{folder} is not a recovery folder (cannot read {MANIFEST}: "
                         f"{exc.strerror})") from None
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(f"{path} is not a recovery manifest",
                         [Problem(f"not JSON: {why}", str(path))]) from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a usable recovery manifest",
                         [Problem("not a JSON object", str(path))])
    r = Reader(data, json_lines(text), str(path), MANIFEST_MESSAGES)
    *fields, dataset_field = MANIFEST_FIELDS
    got = r.values(fields)
    metrics, tags = got["metrics"] or {}, got["tags"] or {}
    for key in (*metrics, *tags):
        if bad_key := names.key_problem(key):
            r.problem(f"key {key!r}: {bad_key}", "metrics" if key in metrics else "tags")
    dataset = r.value(dataset_field)
    if dataset is not None and (too_long := names.length_problem(
            "the dataset name", dataset["name"], names.MAX_DATASET_NAME)):
        r.problem(too_long, "dataset")
    r.raise_problems(InputError, f"{path} is not a usable recovery manifest")
    return cast(Manifest, data)  # json.loads gives Any; MANIFEST_FIELDS checked the shape
