"""Write a comparison back onto the candidate run: verdict tags and report artifacts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import Comparison
from kebab_mlflow.comparison.rendering import dumps, to_markdown


def record(tracker: Any, c: Comparison) -> None:
    """Tag the candidate run with the verdict and log compare/report.md + compare/compare.json."""
    run_id = c.candidate["run_id"]
    with tempfile.TemporaryDirectory(prefix="kebab-compare-") as tmp:
        md, js = Path(tmp) / "report.md", Path(tmp) / "compare.json"
        md.write_text(to_markdown(c))
        js.write_text(dumps(c))
        tracker.log_artifact(run_id, md, "compare")
        tracker.log_artifact(run_id, js, "compare")
    tracker.set_tags(run_id, {vocab.VERDICT: c.verdict,
                              vocab.COMPARED_TO: c.baseline["run_id"],
                              vocab.COMPARE_SEED: str(c.options.seed),
                              vocab.COMPARE_LEVEL: c.level,
                              vocab.COMPARE_PRIMARY: c.primary.name})
