"""The one exception tree of kebab-mlflow.

::

    KebabError                      exit 2 unless said otherwise
     ├── InputError                 bad user input; carries every Problem at once
     │    ├── GoldenSetError        golden-set YAML
     │    ├── ConfigError           preset, --set override, sweep file
     │    ├── CorpusError           corpus folder / BEIR file, ids missing from the index
     │    └── PerQueryError         a per_query.jsonl that cannot be read back
     ├── TrackingError              MLflow store or server unreachable, auth refused
     ├── RunNotFoundError           a run reference that matches nothing (or too much)
     ├── IncomparableRunsError      compare refuses the pair
     └── TargetError                a user pipeline target that cannot be loaded

The CLI maps every KebabError to its ``exit_code`` and prints ``str(error)``; no traceback.
"""

from __future__ import annotations

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


class KebabError(Exception):
    exit_code = 2


class InputError(KebabError):
    """Bad input. ``problems`` lists every problem found, not just the first."""

    def __init__(self, summary: str, problems: list[Problem] | tuple[Problem, ...] = ()):
        self.summary = summary
        self.problems = tuple(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.problems:
            return self.summary
        lines = [f"{self.summary} ({len(self.problems)} problem(s)):"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class GoldenSetError(InputError):
    pass


class ConfigError(InputError):
    pass


class CorpusError(InputError):
    pass


class PerQueryError(InputError):
    pass


class TrackingError(KebabError):
    pass


class RunNotFoundError(KebabError):
    pass


class IncomparableRunsError(KebabError):
    pass


class TargetError(KebabError):
    pass
