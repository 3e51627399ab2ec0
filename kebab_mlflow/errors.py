"""The one exception tree of kebab-mlflow, and the one renderer of "N problem(s)" messages.

::

    KebabError                      exit 2 unless said otherwise
     ├── InputError                 bad user input; carries every Problem at once
     │    ├── GoldenSetError        golden-set YAML
     │    ├── ConfigError           preset, --set override, sweep file
     │    │    ├── SweepError       a sweep file
     │    │    ├── TuneError        a tune file
     │    │    ├── TuneUnavailableError    `tune` without optuna (the `tune` extra)
     │    │    └── DenseUnavailableError   the dense backend's model or libraries missing
     │    ├── CorpusError           corpus folder / BEIR file, ids missing from the index
     │    ├── PerQueryError         a per_query.jsonl that cannot be read back
     │    ├── TrecFileError         TREC qrels / topics for import-trec, with file:line
     │    └── CalibrationError      a calibrator that cannot be fitted or read
     ├── TrackingError              MLflow store or server unreachable, auth refused
     ├── RunNotFoundError           a run reference that matches nothing (or too much)
     ├── IncomparableRunsError      compare refuses the pair
     │    └── ComparisonRefused     ... with every reason at once
     ├── OutputError                the output cannot be written: broken pipe, unwritable --out
     ├── TargetError                a user pipeline target that cannot be loaded
     │    ├── TargetOptionsError    bad ``?key=value`` options of a target spec
     │    └── RunFileError          a ``run:`` file with bad lines (each with file:line)
     ├── QueryFailed                --fail-fast: a query raised (exit 1)
     └── RunInterrupted             Ctrl-C / SIGTERM: the run ended KILLED (exit 130)

    ReplyError (not a KebabError)   one target reply unusable: becomes that query's error
    YamlFallback (internal)         a YAML construct the one-pass composer leaves to PyYAML
    SettingsAfterQueries (internal) queries built before the settings they depend on, or not
                                    streamable: the golden file is parsed whole
    ArrowUnusable (internal)        a run file pyarrow cannot split: read line by line
    TooDeeplyNested (internal)      a ValueError: JSON nested past Python's parser's recursion
    ScoreNotKept (internal)         a KeyError: a score a compact read left out was read (a
                                    bug: the list of the scores compare reads is short)

The CLI maps every KebabError to its ``exit_code`` and prints ``str(error)``; no traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, with where it is."""

    message: str
    location: str = ""  # "file:line"
    query_id: str | None = None

    def __str__(self) -> str:
        where = self.location or "?"
        who = f" [query {self.query_id}]" if self.query_id else ""
        return f"{where}{who}: {self.message}"


def render_problems(summary: str, problems: Sequence[Problem], *, bare: bool = False) -> str:
    """``summary (N problem(s)):`` and one indented line per problem; ``bare``: a problem
    without a location is its message alone (no ``?:``)."""
    if not problems:
        return summary
    def line(p: Problem) -> str:
        return p.message if bare and not p.location and not p.query_id else str(p)
    return "\n".join([f"{summary} ({len(problems)} problem(s)):",
                      *(f"  - {line(p)}" for p in problems)])


class KebabError(Exception):
    exit_code = 2


class ProblemsMixin:
    """An error that carries every Problem found, not just the first."""

    bare = False

    def __init__(self, summary: str, problems: Sequence[Problem] = ()):
        self.summary = summary
        self.problems = tuple(problems)
        # a mixin: the next class in the MRO is the exception that takes the message
        super().__init__(render_problems(summary, self.problems, bare=self.bare))  # type: ignore[call-arg]


class InputError(ProblemsMixin, KebabError):
    """Bad input. ``problems`` lists every problem found, not just the first."""


class GoldenSetError(InputError):
    pass


class ConfigError(InputError):
    pass


class SweepError(ConfigError):
    """A sweep file with problems (every one, with file:line)."""


class TuneError(ConfigError):
    """A tune file with problems (every one, with file:line)."""


class TuneUnavailableError(ConfigError):
    """`kebab-mlflow tune` was asked for but optuna (the ``tune`` extra) is not installed."""


class DenseUnavailableError(ConfigError):
    """The dense backend was asked for but its model or libraries are not installed."""


class CorpusError(InputError):
    pass


class PerQueryError(InputError):
    pass


class TrecFileError(InputError):
    """TREC qrels or topics that cannot be read (every bad line, with file:line)."""


class CalibrationError(InputError):
    """A calibrator that cannot be fitted or read."""


class TrackingError(KebabError):
    pass


class StoreLockedError(TrackingError):
    """A SQLite store another process kept locked past ``KEBAB_STORE_LOCK_WAIT_S``."""


class RunNotFoundError(KebabError):
    pass


class IncomparableRunsError(KebabError):
    pass


class ComparisonRefused(ProblemsMixin, IncomparableRunsError):
    """The pair cannot be compared; ``problems`` lists every reason at once (exit 2)."""

    bare = True

    def __init__(self, problems: Sequence[Problem]):
        super().__init__("cannot compare these runs", problems)


class OutputError(KebabError):
    """The result could not be written (exit 2, never 1: 1 means Regressed)."""


class TargetError(KebabError):
    pass


class TargetOptionsError(ProblemsMixin, TargetError):
    """Bad ``?key=value`` options of a target spec; ``problems`` lists every one."""


class RunFileError(ProblemsMixin, TargetError):
    """A ``run:`` target's file that cannot be read; ``problems`` has each bad line."""


class QueryFailed(KebabError):
    """--fail-fast: a query raised."""

    exit_code = 1


class RunInterrupted(KebabError):
    exit_code = 130


class ReplyError(Exception):
    """A target's reply to one query is unusable; the message says why (a per-query error)."""


class YamlFallback(Exception):
    """Internal: a construct (anchor, alias, tag, merge key) that
    :mod:`kebab_mlflow.yaml_source`'s one-pass composer leaves to PyYAML's full safe load."""


class SettingsAfterQueries(Exception):
    """Internal: a golden set's queries were built as they were parsed, before a file setting
    they depend on (``metadata_fields``, ``case_insensitive``) that comes after ``queries:``
    — or, streamed (:func:`kebab_mlflow.golden.stream_golden_set`), under any setting that
    comes after them, from a bare list, or by PyYAML. ``golden.parse_golden_set`` then parses
    the file again whole; ``comparison/unjudged.py`` loads it whole and starts again."""


class ArrowUnusable(Exception):
    """Internal: pyarrow is missing or cannot split a run file on one delimiter; the line
    reader takes over (and names a malformed line)."""


class TooDeeplyNested(ValueError):
    """Internal: JSON nested deeper than Python's parser recurses (a RecursionError
    otherwise); :func:`kebab_mlflow.files.json_loads` raises it so a reader reports the line."""


class ScoreNotKept(KeyError):
    """A score ``read_compact(names=...)`` left out was read: the caller's list of the scores
    it reads is incomplete (evaluation/per_query.py, comparison/verdict.py compare_reads)."""
