"""Finding runs: by id, by name, ``@baseline`` or ``@latest``; marking the baseline.

A run id (32 hex digits) names one run in the whole store, so it resolves in any experiment;
names, ``@baseline`` and ``@latest`` are looked up in ``--experiment`` only (a name is unique
only there, and the baseline and the latest run are properties of an experiment). A 32-hex
string that is no run's id is then tried as a run name. A shorter hex string (8 to 31 digits,
as `runs` prints ids at 80 columns) that is no run's name is the prefix of one run's id in
``--experiment``; a prefix shared by several runs is refused, listing them.
"""

from __future__ import annotations

import re

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.errors import InputError, RunNotFoundError
from kebab_mlflow.golden import version_label
from kebab_mlflow.records import RunRecord
from kebab_mlflow.tracking.store import BASELINE_TAG, Tracker
from kebab_mlflow.vocabulary import RunStatus

_RUN_ID = re.compile(r"[0-9a-f]{32}")
_RUN_ID_PREFIX = re.compile(r"[0-9a-f]{8,31}")
PREFIX_SEARCH_LIMIT = 50_000  # runs of the experiment searched for an id prefix


def resolve_run(tracker: Tracker, experiment: str, ref: str) -> RunRecord:
    if _RUN_ID.fullmatch(ref):
        found = tracker.find_run(ref)
        if found is not None:
            return found
    exp = tracker.experiment_id(experiment, create=False)
    if ref == "@baseline":
        run_id = tracker.experiment_tag(exp, BASELINE_TAG)
        if not run_id:
            raise RunNotFoundError(f"experiment {experiment!r} has no baseline; mark one with "
                                   "`kebab-mlflow baseline set RUN`")
        return tracker.get_run(run_id)
    if ref == "@latest":
        runs = tracker.find_runs([exp], status=RunStatus.FINISHED,
                                 tags={vocab.KIND: vocab.RunKind.EVAL}, max_results=1)
        if not runs:
            raise RunNotFoundError(f"experiment {experiment!r} has no finished eval run")
        return runs[0]
    runs = tracker.find_runs([exp], run_name=ref, max_results=50)
    if not runs and _RUN_ID_PREFIX.fullmatch(ref):
        runs = [r for r in tracker.find_runs([exp], max_results=PREFIX_SEARCH_LIMIT)
                if r.run_id.startswith(ref)]
        if len(runs) > 1:
            listing = ", ".join(f"{r.run_id} ({r.run_name})" for r in runs[:10])
            raise RunNotFoundError(f"run id prefix {ref!r} matches {len(runs)} runs in "
                                   f"{experiment!r}: {listing}; give more digits")
    if not runs:
        raise RunNotFoundError(f"no run named or with id {ref!r} in experiment {experiment!r}")
    if len(runs) > 1:
        listing = ", ".join(f"{r.run_id} ({r.status})" for r in runs)
        raise RunNotFoundError(f"run name {ref!r} is ambiguous in {experiment!r}: {listing}")
    return runs[0]


def set_baseline(tracker: Tracker, experiment: str, ref: str, force: bool = False) -> RunRecord:
    """Mark ``ref`` as the baseline; a run of another golden version than the current
    baseline's needs ``force`` (compare would refuse the pair, or need --rescore)."""
    run = resolve_run(tracker, experiment, ref)
    if run.status != RunStatus.FINISHED:
        raise RunNotFoundError(f"run {run.run_id} is {run.status}; only a FINISHED "
                               "run can be the baseline")
    exp = tracker.experiment_id(experiment, create=False)
    if run.experiment_id != exp:  # a run id found in another experiment
        raise RunNotFoundError(f"run {run.run_id} is in experiment "
                               f"{tracker.experiment_name(run.experiment_id)!r}, not "
                               f"{experiment!r}; pass --experiment to mark it there")
    if not force:
        _check_same_golden(tracker, exp, run)
    tracker.set_experiment_tag(exp, BASELINE_TAG, run.run_id)
    return run


def _check_same_golden(tracker: Tracker, experiment_id: str, run: RunRecord) -> None:
    current_id = tracker.experiment_tag(experiment_id, BASELINE_TAG)
    current = tracker.find_run(current_id) if current_id else None
    if current is None or current.run_id == run.run_id:
        return
    old, new = (r.tags.get("kebab.golden_sha256", "unknown") for r in (current, run))
    if old != new:
        raise InputError(
            f"run {run.run_id} was scored on golden version {_version(run)}, the current "
            f"baseline {current.run_id} on {_version(current)}: pass --force to make it the "
            "baseline anyway (compare against it then needs --rescore or a rescored run: "
            f"`kebab-mlflow rescore {current.run_id} --golden ...`)")


def _version(run: RunRecord) -> str:
    name = run.params.get("golden_set", "?")
    return version_label(name, run.tags.get("kebab.golden_sha256", "unknown"))
