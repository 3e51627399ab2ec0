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
:data:`VIEW_NAME`, whose columns lead with what a reviewer reads first, right after the run
name and date: the verdict (``kebab.verdict``), the baseline it was compared to
(``kebab.baseline_name``), the golden set as name@short digest (``kebab.golden_version``);
then each golden set's primary metric (:func:`primary_of`: the metric compare decides on by
default), then the golden sets' other headline metrics in display order (those of the levels
they have ground truth at), then Models and Dataset. :func:`runs_url` is the URL the end-of-run
hint and ``kebab-mlflow ui`` print. The view is kebab's: its metric columns are the union over
the experiment's runs (an experiment may hold golden sets with different headline metrics), the
primaries kept in the envelope's ``kebabPrimaries`` so a later run keeps them in front; a
person who wants other columns saves a view of their own in the UI. The settings are plain
JSON (the UI also reads its ``deflate;`` compressed form, which kebab never writes).
No mlflow import here: :class:`~kebab_mlflow.tracking.store.Tracker` reads and writes the tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from kebab_mlflow import vocabulary as vocab
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
VERDICT_COLUMN = f"tags.`{vocab.VERDICT}`"  # compare's verdict on the candidate run
BASELINE_COLUMN = f"tags.`{vocab.BASELINE_NAME}`"  # the name of the run it was compared to
GOLDEN_VERSION_COLUMN = f"tags.`{vocab.GOLDEN_VERSION}`"  # golden name@short digest (issue 30)
LEADING_COLUMNS = (VERDICT_COLUMN, BASELINE_COLUMN, GOLDEN_VERSION_COLUMN)
# px: each header whole ("kebab.baseline_name"), a golden version whole ("kebab-fixtures@89671936")
LEADING_WIDTHS = {VERDICT_COLUMN: 110, BASELINE_COLUMN: 160, GOLDEN_VERSION_COLUMN: 190}
DATASET_WIDTH = 220  # px; the UI's default 300 leaves room for two metrics fewer
MAX_METRIC_COLUMNS = 60  # the UI refuses a saved view over 20,000 characters
PRIMARIES_KEY = "kebabPrimaries"  # kebab's own key in the envelope: the primary columns
# The metric compare decides on by default, by the ground truth a golden set has (chunk, doc,
# answer): comparison.records.DEFAULT_PRIMARY, the same rule as `runs` (tests check they agree)
DEFAULT_PRIMARIES = ("mrr", "ndcg_at_10_doc", "contains_all")


def metric_column(name: str) -> str:
    return f"metrics.`{name}`"


def primary_of(metrics: Iterable[str]) -> str | None:
    """A run's primary metric from its headline metrics: the first of
    :data:`DEFAULT_PRIMARIES` it has (the golden set's finest level with ground truth)."""
    present = set(metrics)
    return next((m for m in DEFAULT_PRIMARIES if m in present), None)


def view_metrics(tag_value: str | None) -> list[str]:
    """The metric columns of a saved view's tag value, in the view's order; [] when absent or
    not readable (a compressed state, or a tag kebab did not write: rewritten)."""
    try:
        state = json.loads(json.loads(tag_value or "")["state"])
        columns = state["selectedColumns"]
    except (ValueError, KeyError, TypeError):
        return []
    prefix = "metrics.`"
    return [c[len(prefix):-1] for c in columns if isinstance(c, str)
            and c.startswith(prefix) and c.endswith("`") and len(c) > len(prefix) + 1]


def view_primaries(tag_value: str | None) -> list[str]:
    """The primary metrics kebab's view puts first ([] for a view without them)."""
    try:
        primaries = json.loads(tag_value or "")[PRIMARIES_KEY]
    except (ValueError, KeyError, TypeError):
        return []
    return [p for p in primaries if isinstance(p, str)] if isinstance(primaries, list) else []


def column_width(metric: str) -> int:
    """Pixels for a metric column whose header shows the whole name (the UI's 100 px cut
    ``precision_at_5_chunk`` to ``precision_at_5_``), within 100-180."""
    return min(180, max(100, round(6.8 * len(metric)) + 36))


def view_state(metrics: Iterable[str], primaries: Iterable[str] = ()) -> dict[str, Any]:
    """The runs page's settings: verdict, compared-to and golden version first, then the
    primary metrics, the other metrics (as given), Models and Dataset."""
    first = list(dict.fromkeys(primaries))
    metrics = [*first, *(m for m in metrics if m not in first)]
    shown = [metric_column(m) for m in metrics]
    widths = {metric_column(m): column_width(m) for m in metrics}
    return {"selectedColumns": [*LEADING_COLUMNS, *shown, MODELS_COLUMN, DATASET_COLUMN],
            "columnOrder": [RUN_NAME_COLUMN, CREATED_COLUMN, *LEADING_COLUMNS, *shown,
                            MODELS_COLUMN, DATASET_COLUMN, DURATION_COLUMN],
            "columnWidths": {**LEADING_WIDTHS, **widths, DATASET_COLUMN: DATASET_WIDTH}}


def view_tag_value(metrics: Iterable[str], previous: str | None, now_ms: int,
                   primary: str | None = None) -> str | None:
    """The tag value of kebab's saved view once ``metrics`` (a run's headline metrics, MLflow
    names) are added to the columns ``previous`` has, the run's primary among the view's
    primaries: ``primary`` (its golden set's declared ``primary_metric``), else
    :func:`primary_of`; None when that changes nothing."""
    metrics = list(metrics)
    own = primary or primary_of(metrics)
    if own and own not in metrics:
        metrics.append(own)
    primaries = display_order({*view_primaries(previous), *([own] if own else [])})
    union = display_order(set(view_metrics(previous)) | set(metrics))
    kept = [*primaries, *(m for m in union if m not in primaries)][:MAX_METRIC_COLUMNS]
    state = view_state(kept, [p for p in primaries if p in kept])
    try:
        envelope = json.loads(previous or "")
        if json.loads(envelope["state"]) == state and envelope.get(PRIMARIES_KEY) == primaries:
            return None
        created = int(envelope["createdAt"])
    except (ValueError, KeyError, TypeError):
        created = now_ms
    return json.dumps({"name": VIEW_NAME, "createdAt": created, "updatedAt": now_ms,
                       "state": json.dumps(state), PRIMARIES_KEY: primaries})


def runs_url(base: str, experiment_id: str | None) -> str:
    """The UI page of the experiment's runs in kebab's saved view (the experiment list when
    there is no experiment yet), on the model-training pages whatever the browser
    remembers."""
    base = base.rstrip("/")
    if experiment_id is None:
        return f"{base}/#/experiments?{urlencode({'workflowType': 'machine_learning'})}"
    query = urlencode({"viewStateShareKey": VIEW_KEY, "workflowType": "machine_learning"})
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"
