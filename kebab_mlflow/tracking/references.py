"""Finding runs: by id, by name, ``@baseline`` or ``@latest``; marking the baseline."""

from __future__ import annotations

from typing import Any

from kebab_mlflow.errors import RunNotFoundError
from kebab_mlflow.tracking.store import BASELINE_TAG, Tracker


def resolve_run(tracker: Tracker, experiment: str, ref: str) -> Any:
    exp = tracker.experiment_id(experiment, create=False)
    if ref == "@baseline":
        run_id = tracker.experiment_tag(exp, BASELINE_TAG)
        if not run_id:
            raise RunNotFoundError(f"experiment {experiment!r} has no baseline; mark one with "
                                   "`kebab-mlflow baseline set RUN`")
        return tracker.get_run(run_id)
    if ref == "@latest":
        found = tracker.find_runs([exp], status="FINISHED", tags={"kebab.kind": "eval"},
                                  max_results=1)
        if not found:
            raise RunNotFoundError(f"experiment {experiment!r} has no finished eval run")
        return found[0]
    if len(ref) == 32 and all(c in "0123456789abcdef" for c in ref):
        return tracker.get_run(ref)
    found = tracker.find_runs([exp], run_name=ref, max_results=50)
    if not found:
        raise RunNotFoundError(f"no run named or with id {ref!r} in experiment {experiment!r}")
    if len(found) > 1:
        listing = ", ".join(f"{r.run_id} ({r.status})" for r in found)
        raise RunNotFoundError(f"run name {ref!r} is ambiguous in {experiment!r}: {listing}")
    return found[0]


def set_baseline(tracker: Tracker, experiment: str, ref: str) -> Any:
    run = resolve_run(tracker, experiment, ref)
    if run.status != "FINISHED":
        raise RunNotFoundError(f"run {run.run_id} is {run.status}; only a FINISHED "
                               "run can be the baseline")
    tracker.set_experiment_tag(tracker.experiment_id(experiment, create=False), BASELINE_TAG,
                               run.run_id)
    return run
