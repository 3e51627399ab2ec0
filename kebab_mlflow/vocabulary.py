"""Every MLflow tag key and param name kebab-mlflow writes or reads, in one place.

The names are the product's contract with the MLflow UI, CI scripts and saved searches: add
new names here, never rename one. Values are plain ``str`` constants (``Final``), so a search
filter such as ``tags."kebab.kind" = 'eval'`` and every stored run keep the same bytes.
Run kinds and tune roles, the closed sets these tags take, are :class:`RunKind` and
:class:`TuneRole`.
"""

from __future__ import annotations

import enum
from typing import Final

# --- tags on every run (provenance) ------------------------------------------------------
KIND: Final = "kebab.kind"  # a RunKind
GIT_COMMIT: Final = "kebab.git_commit"
GIT_DIRTY: Final = "kebab.git_dirty"  # "true" | "false"
TOOL_VERSION: Final = "kebab.tool_version"

# --- tags on an eval run ------------------------------------------------------------------
GOLDEN_SHA256: Final = "kebab.golden_sha256"
CORPUS_SHA256: Final = "kebab.corpus_sha256"
CONFIG_SHA256: Final = "kebab.config_sha256"
PER_QUERY_SHA256: Final = "kebab.per_query_sha256"
TRACES: Final = "kebab.traces"  # how many per-query traces the run logged (absent: none)
VERSIONS_SHA256: Final = "kebab.versions_sha256"  # the logged model's digest of the versions
PRESET_TAG: Final = "kebab.preset"
BACKEND_TAG: Final = "kebab.backend"
PRIVATE: Final = "kebab.private"  # "true": no golden-set text in any output
PRIMARY_METRIC: Final = "kebab.primary_metric"
BASELINE_RUN_ID: Final = "kebab.baseline_run_id"  # on the experiment: `baseline` marks it
GOLDEN_PATH: Final = "kebab.golden_path"  # the golden file read (never a private set's)
GOLDEN_VERSION: Final = "kebab.golden_version"  # golden name@short digest (runs, the UI)

# --- tags of a rescore run (kind rescore: a stored run under another golden version) -------
RESCORED_FROM: Final = "kebab.rescored_from"  # the source run's id
RESCORED_FROM_GOLDEN_SHA256: Final = "kebab.rescored_from_golden_sha256"
RESCORE_DROPPED_QUERIES: Final = "kebab.rescore_dropped_queries"  # with --intersect

# --- tags compare writes on the candidate run --------------------------------------------
VERDICT: Final = "kebab.verdict"
COMPARED_TO: Final = "kebab.compared_to"
BASELINE_NAME: Final = "kebab.baseline_name"  # the compared-to run's name (the UI's column)
COMPARE_SEED: Final = "kebab.compare_seed"
COMPARE_LEVEL: Final = "kebab.compare_level"
COMPARE_PRIMARY: Final = "kebab.compare_primary"

# --- tags of a sweep ------------------------------------------------------------------------
SWEEP_SHA256: Final = "kebab.sweep_sha256"
SWEEP_PRIMARY: Final = "kebab.sweep_primary"
SWEEP_ROW: Final = "kebab.sweep_row"
SWEEP_ROW_LOST: Final = "kebab.sweep_row_lost"
SWEEP_ROLE: Final = "kebab.sweep_role"
SWEEP_GRID: Final = "kebab.sweep_grid"
SIGNAL_STATE: Final = "kebab.signal_state"
FAILED_ROWS: Final = "kebab.failed_rows"

# --- tags of a tune -------------------------------------------------------------------------
TUNE_SHA256: Final = "kebab.tune_sha256"
TRAIN_SHA256: Final = "kebab.train_sha256"
TEST_SHA256: Final = "kebab.test_sha256"
TUNE_ROLE: Final = "kebab.tune_role"  # a TuneRole
TUNE_TRIAL: Final = "kebab.tune_trial"
TUNE_BEST_TRIAL: Final = "kebab.tune_best_trial"
TUNE_BEST_RUN_ID: Final = "kebab.tune_best_run_id"
TUNE_TEST_BEST_RUN_ID: Final = "kebab.tune_test_best_run_id"

# --- tags on a per-query trace ------------------------------------------------------------
TRACE_QUERY_ID: Final = "kebab.query_id"
TRACE_FAILURE: Final = "kebab.failure"
TRACE_STAGE_TIMES: Final = "kebab.stage_times"  # a StageTimes: are the spans' times measured

# --- params of an eval run (the five versions are records.VERSION_KEYS) --------------------
PRESET: Final = "preset"
BACKEND: Final = "backend"
K: Final = "k"
CUTOFFS: Final = "cutoffs"
GOLDEN_SET: Final = "golden_set"
N_QUERIES: Final = "n_queries"
SEED: Final = "seed"
ASK: Final = "ask"  # "all" | "none", only when --ask/--no-ask overrode the golden set
REPEAT: Final = "repeat"  # only with run --repeat N > 1 (evaluation/repeats.py)
TARGET: Final = "target"
CORPUS: Final = "corpus"
EVIDENCE_RULE: Final = "evidence_rule"  # the rule that made evidence spans chunk truth
EVIDENCE_TAU: Final = "evidence_tau"  # its share τ (kebab_mlflow/evidence/resolve.py)
CONFIG_PREFIX: Final = "config."  # config.<key>: the flattened, redacted configuration
TARGET_PREFIX: Final = "target."  # target.<option>: the target's logged options


class RunKind(enum.StrEnum):
    """The value of the ``kebab.kind`` tag."""

    EVAL = "eval"
    SWEEP = "sweep"
    TUNE = "tune"
    RESCORE = "rescore"  # a stored run rescored under another golden version


class TuneRole(enum.StrEnum):
    """The value of the ``kebab.tune_role`` tag on a tune's child runs."""

    TRIAL = "trial"
    TRAIN_BASELINE = "train-baseline"
    TEST_BASELINE = "test-baseline"
    TEST_BEST = "test-best"


class StageTimes(enum.StrEnum):
    """The value of the ``kebab.stage_times`` tag on a per-query trace."""

    MEASURED = "measured"  # retrieve and answer spans last the times measured for them
    # the target reports one time per query (a run file, run_many): the child spans last
    # the whole query, no stage time is made up
    NOT_MEASURED = "not_measured"


class RunStatus(enum.StrEnum):
    """An MLflow run's status, as MLflow spells it (``RunStatus.to_string``)."""

    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
