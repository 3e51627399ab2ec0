"""Finding runs: by id, by name, ``@baseline`` or ``@latest``; marking the baseline."""

from __future__ import annotations

from typing import Any

from kebab_mlflow.errors import RunNotFoundError
from kebab_mlflow.tracking import BASELINE_TAG, Tracker


def resolve_run(tracker: Tracker, experiment: str, ref: str) -> Any:
    exp = tracker.experiment_id(experiment, create=False)
    if ref == "@baseline":
        run_id = tracker.experiment_tag(exp, BASELINE_TAG)
        if not run_id:
            raise RunNotFoundError(f"experiment {experiment!r} has no baseline; mark one with "
                                   "`kebab-mlflow baseline set RUN`")
        return tracker.get_run(run_id)
    if ref == "@latest":
        found = tracker.search_runs([exp], "attributes.status = 'FINISHED' and "
                                    "tags.`kebab.kind` = 'eval'", max_results=1)
        if not found:
            raise RunNotFoundError(f"experiment {experiment!r} has no finished eval run")
        return found[0]
    if len(ref) == 32 and all(c in "0123456789abcdef" for c in ref):
        return tracker.get_run(ref)
    escaped = ref.replace("'", "\\'")
    found = tracker.search_runs([exp], f"attributes.run_name = '{escaped}'", max_results=50)
    if not found:
        raise RunNotFoundError(f"no run named or with id {ref!r} in experiment {experiment!r}")
    if len(found) > 1:
        listing = ", ".join(f"{r.info.run_id} ({r.info.status})" for r in found)
        raise RunNotFoundError(f"run name {ref!r} is ambiguous in {experiment!r}: {listing}")
    return found[0]


def set_baseline(tracker: Tracker, experiment: str, ref: str) -> Any:
    run = resolve_run(tracker, experiment, ref)
    if run.info.status != "FINISHED":
        raise RunNotFoundError(f"run {run.info.run_id} is {run.info.status}; only a FINISHED "
                               "run can be the baseline")
    tracker.set_experiment_tag(tracker.experiment_id(experiment, create=False), BASELINE_TAG,
                               run.info.run_id)
    return run
