"""MLflow's rules for the names and values kebab-mlflow hands it, in one place, so golden-set
validation and ``prepare`` can check them before any run exists (no mlflow import here: the
checks run without it).

The rules are MLflow 3.17's ``mlflow/utils/validation.py`` (pinned in pyproject.toml):

- a metric, param or tag key matches ``^[/\\w.\\- :]*$`` (``validate_param_and_metric_name``)
  and is "path unique": ``posixpath.normpath(key) == key``, not ``.``, not starting with ``..``
  or ``/`` (``path_not_unique``) — so ``by_hardcase_category/../mrr`` is refused;
- keys are at most ``MAX_ENTITY_KEY_LENGTH`` = 250 characters; param values
  ``MAX_PARAM_VAL_LENGTH`` = 6000, tag values ``MAX_TAG_VAL_LENGTH`` = 8000;
- a dataset name at most ``MAX_DATASET_NAME_SIZE`` = 500, an input (dataset source) tag value
  ``MAX_INPUT_TAG_VALUE_SIZE`` = 500, an experiment name ``MAX_EXPERIMENT_NAME_LENGTH`` = 500.

Breakdown metric keys are ``<block>/<group>/<metric>``: a group (a ``hardcase_categories`` tag,
a ``metadata_fields`` entry) has its illegal characters replaced by ``_`` (as it always had),
and is then checked with the longest metric name the deepest ``--k`` allows.
"""

from __future__ import annotations

import posixpath
import re

MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_DATASET_NAME = 500
MAX_INPUT_TAG_VALUE = 500
MAX_EXPERIMENT_NAME = 500

#: The deepest retrieval depth (``--k``) accepted: per-query scores and hit lists are arrays of
#: this size; 3,000,000 ran out of memory (issue 18).
MAX_K = 10_000
#: The retrieval depth when none is given (a sweep's or tune file's ``k``).
DEFAULT_K = 10
#: The longest metric name any run logs: the cut-offs are 1, 3, 5, 10 and k ≤ MAX_K (a set with
#: evidence spans logs evidence_precision_at_k, kebab_mlflow/evidence/resolve.py).
LONGEST_METRIC = f"evidence_precision_at_{MAX_K}"
BREAKDOWN_BLOCKS = ("by_query_type", "by_hardcase_category", "by_metadata_field")

_LEGAL_KEY = re.compile(r"^[/\w.\- :]*$")
_ILLEGAL = re.compile(r"[^\w.\- :]")


def metric_key(*parts: str) -> str:
    """An MLflow metric key from its parts: illegal characters become '_', parts joined by
    '/' (a part's own slashes kept inside)."""
    cleaned = [_ILLEGAL.sub("_", p).strip(" ") or "_" for p in parts]
    return "/".join(c.strip("/") for c in cleaned)[:MAX_KEY]


def key_problem(key: str) -> str | None:
    """Why MLflow would refuse ``key`` as a metric/param/tag key (None: it would not)."""
    if len(key) > MAX_KEY:
        return f"{len(key)} characters, over MLflow's {MAX_KEY}"
    if not _LEGAL_KEY.match(key):
        return "characters other than letters, digits, _ - . : space and /"
    norm = posixpath.normpath(key)
    if norm != key or norm == "." or norm.startswith(("..", "/")):
        return f"MLflow reads it as the path {norm!r}"
    return None


def group_problem(block: str, group: str) -> str | None:
    """Why a breakdown group would make an unusable metric key (None: it would not)."""
    key = f"{block}/{group_segment(group)}/{LONGEST_METRIC}"
    if len(key) > MAX_KEY:
        longest = MAX_KEY - len(f"{block}//{LONGEST_METRIC}")
        return f"longer than the {longest} characters an MLflow metric key leaves for it"
    why = key_problem(key)
    return None if why is None else f"makes the metric key {key!r} that MLflow refuses: {why}"


def group_segment(group: str) -> str:
    """The key segment of a breakdown group (two groups with one segment would collide)."""
    return _ILLEGAL.sub("_", group).strip(" ").strip("/") or "_"


def length_problem(what: str, value: str, limit: int) -> str | None:
    if len(value) > limit:
        return f"{what} is {len(value):,} characters; MLflow takes at most {limit}"
    return None


def depth_problem(k: int) -> str | None:
    """Why ``--k`` cannot be a retrieval depth (None: it can)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        return (f"--k must be an integer from 1 to {MAX_K:,} (per-query hit lists and scores "
                f"are arrays of that size), got {k!r}")
    return None


def fit(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters from the left, keeping its informative end (a
    path's file name)."""
    return value if len(value) <= limit else "…" + value[-(limit - 1):]
