"""The page the MLflow UI opens on: an experiment's runs, headline metrics as columns.

MLflow 3.17's UI decides two things in the browser, not from the experiment:

- **GenAI or model-training pages.** The ``workflowType`` URL parameter (``genai`` or
  ``machine_learning``), else the value the browser remembered in localStorage, else
  ``genai``. The experiment tag ``mlflow.experimentKind`` (which kebab sets too) is only read
  when the UI's workflow switch is off, and in 3.17.2 the flag for it returns true
  unconditionally. So every URL kebab prints carries ``workflowType=machine_learning``.
- **The runs table's columns.** A fresh browser shows Source, Models and Dataset and no
  metric. The UI's saved views ("Save view", the views menu above the runs table) keep a
  page's search facets and UI state (selected columns, their order and widths) in the
  experiment tag ``mlflow.sharedViewState.<key>`` as ``{"name", "createdAt", "updatedAt",
  "state"}``, ``state`` being the JSON of those settings; ``#/experiments/<id>/runs?
  viewStateShareKey=<key>`` opens one for anyone, whatever their browser holds.

So each run writes (through the store) the saved view :data:`VIEW_KEY`, named
:data:`VIEW_NAME`, whose columns are the golden set's headline metrics in display order,
right after the run name and date, then Models and Dataset; and :func:`runs_url` is the URL the
end-of-run hint and ``kebab-mlflow ui`` print. The view is kebab's: its metric columns are the
union over the experiment's runs (an experiment may hold golden sets with different headline
metrics); a person who wants other columns saves a view of their own in the UI. The settings
are plain JSON (the UI also reads its ``deflate;`` compressed form, which kebab never writes).
No mlflow import here: :class:`~kebab_mlflow.tracking.store.Tracker` reads and writes the tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from kebab_mlflow.metrics.registry import display_order

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the 3.17 UI's saved-view tag prefix
VIEW_KEY = "kebab-headline"
VIEW_TAG = SHARED_VIEW_TAG_PREFIX + VIEW_KEY
VIEW_NAME = "kebab: headline metrics"
# The runs table's column ids (AG Grid colId) in 3.17: "<type>.`<name>`", plus two of its own
RUN_NAME_COLUMN = "attributes.`Run Name`"
CREATED_COLUMN = "runDateAndNestInfo"
DURATION_COLUMN = "duration"
MODELS_COLUMN = "attributes.`Models`"
DATASET_COLUMN = "attributes.`Dataset`"
DATASET_WIDTH = 220  # px; the UI's default 300 leaves room for two metrics fewer
MAX_METRIC_COLUMNS = 60  # the UI refuses a saved view over 20,000 characters


def metric_column(name: str) -> str:
    return f"metrics.`{name}`"


def view_metrics(tag_value: str | None) -> list[str]:
    """The metric columns of a saved view's tag value; [] when absent or not readable (a
    compressed state, or a tag kebab did not write: rewritten)."""
    try:
        state = json.loads(json.loads(tag_value or "")["state"])
        columns = state["selectedColumns"]
    except (ValueError, KeyError, TypeError):
        return []
    prefix = "metrics.`"
    return [c[len(prefix):-1] for c in columns if isinstance(c, str)
            and c.startswith(prefix) and c.endswith("`") and len(c) > len(prefix) + 1]


def column_width(metric: str) -> int:
    """Pixels for a metric column whose header shows the whole name (the UI's 100 px cut
    ``precision_at_5_chunk`` to ``precision_at_5_``), within 100-180."""
    return min(180, max(100, round(6.8 * len(metric)) + 36))


def view_state(metrics: Iterable[str]) -> dict[str, Any]:
    """The runs page's settings: the metric columns first, then Models and Dataset."""
    metrics = list(metrics)
    shown = [metric_column(m) for m in metrics]
    widths = {metric_column(m): column_width(m) for m in metrics}
    return {"selectedColumns": [*shown, MODELS_COLUMN, DATASET_COLUMN],
            "columnOrder": [RUN_NAME_COLUMN, CREATED_COLUMN, *shown, MODELS_COLUMN,
                            DATASET_COLUMN, DURATION_COLUMN],
            "columnWidths": {**widths, DATASET_COLUMN: DATASET_WIDTH}}


def view_tag_value(metrics: Iterable[str], previous: str | None, now_ms: int) -> str | None:
    """The tag value of kebab's saved view once ``metrics`` (a run's headline metrics, MLflow
    names) are added to the columns ``previous`` has; None when that changes nothing."""
    before = view_metrics(previous)
    union = display_order(set(before) | set(metrics))[:MAX_METRIC_COLUMNS]
    if previous is not None and union == before:
        return None
    created = now_ms
    try:
        created = int(json.loads(previous or "")["createdAt"])
    except (ValueError, KeyError, TypeError):
        pass
    return json.dumps({"name": VIEW_NAME, "createdAt": created, "updatedAt": now_ms,
                       "state": json.dumps(view_state(union))})


def runs_url(base: str, experiment_id: str | None) -> str:
    """The UI page of the experiment's runs in kebab's saved view (the experiment list when
    there is no experiment yet), on the model-training pages whatever the browser
    remembers."""
    base = base.rstrip("/")
    if experiment_id is None:
        return f"{base}/#/experiments?{urlencode({'workflowType': 'machine_learning'})}"
    query = urlencode({"viewStateShareKey": VIEW_KEY, "workflowType": "machine_learning"})
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"
