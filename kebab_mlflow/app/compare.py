"""Write a comparison back onto the candidate run: verdict tags, the verdict line at the top of
its description, and report artifacts."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import Comparison
from kebab_mlflow.comparison.rendering import iter_dumps, to_markdown
from kebab_mlflow.comparison.slices import verdict_text
from kebab_mlflow.formatting import number
from kebab_mlflow.interrupts import checkpoint, signals_deferred

if TYPE_CHECKING:  # the caller opens the store
    from kebab_mlflow.tracking.store import Tracker

DESCRIPTION_TAG = "mlflow.note.content"  # MLflow's run description (the run page shows it)
# the line compare puts first in the description, and the blank line after it
_VERDICT_LINE = re.compile(r"\A\*\*Compare: [^\n]*\n(\n)?")


def verdict_line(c: Comparison) -> str:
    """One markdown line: the verdict, the baseline, the golden set and the primary metric's
    change with its interval — ``**Compare: Better** vs baseline `base` …``."""
    b, d, m = c.baseline, c.candidate, c.primary
    golden = d.get("golden_set") or b.get("golden_set") or "the golden set"
    digest = (d.get("golden_sha256") or "")[:8]
    ci = (f", {round(c.options.confidence * 100)}% CI [{number(m.ci_low)}, {number(m.ci_high)}]"
          if m.ci_low is not None and m.ci_high is not None else "")
    p = f", p {number(m.p_value)}" if m.p_value is not None else ""
    return (f"**Compare: {verdict_text(c)}** vs baseline `{b['name']}` ({b['run_id'][:8]}) on "
            f"{golden}" + (f"@{digest}" if digest else "")
            + f", {c.n_queries} queries, {c.level} level: {m.name} {number(m.baseline)} → "
            f"{number(m.candidate)} (Δ {number(m.delta, signed=True)}{ci}{p})")


def with_verdict_line(description: str | None, line: str) -> str:
    """``description`` with ``line`` first: an earlier compare's verdict line is replaced,
    not stacked."""
    rest = _VERDICT_LINE.sub("", description or "", count=1)
    return f"{line}\n\n{rest}" if rest else f"{line}\n"


def record(tracker: Tracker, c: Comparison) -> None:
    """Tag the candidate run with the verdict, put the verdict line first in its description
    and log compare/report.md + compare/compare.json, all or nothing as far as a signal goes:
    Ctrl-C/SIGTERM is held until the verdict tags (written last, so a reader never sees a
    verdict without its report) are in, then raised."""
    run_id = c.candidate["run_id"]
    description = with_verdict_line(tracker.get_run(run_id).tags.get(DESCRIPTION_TAG),
                                     verdict_line(c))
    with tempfile.TemporaryDirectory(prefix="kebab-compare-") as tmp:
        md, js = Path(tmp) / "report.md", Path(tmp) / "compare.json"
        md.write_text(to_markdown(c))
        with js.open("w") as f:
            f.writelines(iter_dumps(c))
        with signals_deferred() as held:
            tracker.log_artifact(run_id, js, "compare")
            tracker.log_artifact(run_id, md, "compare")
            checkpoint("compare-artifacts-logged")
            tracker.set_tags(run_id, {DESCRIPTION_TAG: description,
                                      vocab.VERDICT: c.verdict,
                                      vocab.COMPARED_TO: c.baseline["run_id"],
                                      vocab.BASELINE_NAME: c.baseline["name"],
                                      vocab.COMPARE_SEED: str(c.options.seed),
                                      vocab.COMPARE_LEVEL: c.level,
                                      vocab.COMPARE_PRIMARY: c.primary.name})
    if held.caught:
        raise KeyboardInterrupt
