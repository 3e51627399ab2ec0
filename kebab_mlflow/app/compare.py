"""Write a comparison back onto the candidate run: verdict tags and report artifacts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import Comparison
from kebab_mlflow.comparison.rendering import dumps, to_markdown
from kebab_mlflow.interrupts import checkpoint, signals_deferred

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker


def record(tracker: Tracker, c: Comparison) -> None:
    """Tag the candidate run with the verdict and log compare/report.md + compare/compare.json,
    all or nothing as far as a signal goes: Ctrl-C/SIGTERM is held until the verdict tags
    (written last, so a reader never sees a verdict without its report) are in, then raised."""
    run_id = c.candidate["run_id"]
    with tempfile.TemporaryDirectory(prefix="kebab-compare-") as tmp:
        md, js = Path(tmp) / "report.md", Path(tmp) / "compare.json"
        md.write_text(to_markdown(c))
        js.write_text(dumps(c))
        with signals_deferred() as held:
            tracker.log_artifact(run_id, js, "compare")
            tracker.log_artifact(run_id, md, "compare")
            checkpoint("compare-artifacts-logged")
            tracker.set_tags(run_id, {vocab.VERDICT: c.verdict,
                                      vocab.COMPARED_TO: c.baseline["run_id"],
                                      vocab.COMPARE_SEED: str(c.options.seed),
                                      vocab.COMPARE_LEVEL: c.level,
                                      vocab.COMPARE_PRIMARY: c.primary.name})
    if held.caught:
        raise KeyboardInterrupt
