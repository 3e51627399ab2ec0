"""Run references: an id prefix as `runs` prints it resolves to its run (issue 22/16)."""

from __future__ import annotations

import pytest

from kebab_mlflow.errors import RunNotFoundError
from kebab_mlflow.tracking.references import resolve_run
from kebab_mlflow.tracking.store import Tracker


def test_an_id_prefix_names_its_run_and_an_unknown_one_is_refused(store_uri):
    tracker = Tracker(store_uri)
    exp = tracker.experiment_id("kebab-eval")
    ids = [tracker.start_run(exp, f"r{i}", {"kebab.kind": "eval"}) for i in range(3)]
    for run_id in ids:
        assert resolve_run(tracker, "kebab-eval", run_id[:8]).run_id == run_id
    unknown = next(p for p in (f"{i:08x}" for i in range(10**6))
                   if not any(r.startswith(p) for r in ids))
    with pytest.raises(RunNotFoundError, match="no run named or with id"):
        resolve_run(tracker, "kebab-eval", unknown)
    assert resolve_run(tracker, "kebab-eval", "r1").run_id == ids[1]  # names still win
