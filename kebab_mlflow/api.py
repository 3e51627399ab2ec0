"""The Python API: evaluate in memory, record in MLflow when asked, compare, sweep.

Everything here but :func:`log_run`, a run reference given to :func:`compare` and
:func:`run_sweep` works without importing mlflow. See docs/api.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.app.run import log_run, run_tags
from kebab_mlflow.comparison.records import CompareOptions, Comparison, RunSide
from kebab_mlflow.evaluation.evaluate import EvalResult, evaluate, reference_pipeline
from kebab_mlflow.golden import GoldenSet, load_golden_set
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # the sweep layer loads only when a sweep or tune runs
    from kebab_mlflow.app.rescore import LoggedRescore
    from kebab_mlflow.app.tune import TuneResult
    from kebab_mlflow.sweep.spec import SweepResult

__all__ = ["compare", "evaluate", "load_golden_set", "log_run", "reference_pipeline",
           "rescore", "run_sweep", "tune"]


def compare(baseline: EvalResult | str, candidate: EvalResult | str, *,
            options: CompareOptions | None = None, experiment: str = "kebab-eval",
            tracking_uri: str | None = None, rescore: bool = False,
            golden: str | Path | None = None, **option_values: Any) -> Comparison:
    """Compare two evaluations: each an :class:`EvalResult` (in memory) or a run reference
    (id, name, ``@baseline``, ``@latest``) read from the tracking store. ``option_values``
    are :class:`CompareOptions` fields (``primary="ndcg_at_10_doc"``,
    ``gates=("recall_at_100_doc",)``, ``seed=1``, ...). ``rescore``: runs of different golden
    versions compare with the baseline rescored in memory under the candidate's golden set
    (``golden``: its file, default the path the candidate recorded)."""
    from kebab_mlflow.comparison.verdict import compare_runs

    options = options or CompareOptions(**option_values)
    sides = [_side(side, role, experiment, tracking_uri)
             for side, role in ((baseline, "baseline"), (candidate, "candidate"))]
    if rescore:
        from kebab_mlflow.comparison.rescoring import with_rescored_baseline

        if isinstance(candidate, EvalResult) and golden is None:
            golden = candidate.golden.path
        sides[0] = with_rescored_baseline(sides[0], sides[1], golden)
    return compare_runs(sides[0], sides[1], options)


def _side(side: EvalResult | str, role: str, experiment: str,
          tracking_uri: str | None) -> RunSide:
    if isinstance(side, EvalResult):
        return side_of_result(side, role)
    from kebab_mlflow.comparison.loading import load_side
    from kebab_mlflow.tracking.store import Tracker

    return load_side(Tracker(tracking_uri), experiment, side, role)


def side_of_result(result: EvalResult, name: str) -> RunSide:
    """An in-memory result as compare sees a run: its params, tags and per-query rows."""
    tags: Mapping[str, str] = {**run_tags(result.golden, result.source),
                               vocab.PER_QUERY_SHA256: result.per_query_sha256}
    params = {k: str(v) for k, v in result.params().items()}
    return RunSide(run_id=f"in-memory:{name}", name=name, status=RunStatus.FINISHED, params=params,
                   tags=dict(tags), rows=result.rows(),
                   per_query_sha256=result.per_query_sha256)


@overload
def rescore(run: EvalResult, golden: GoldenSet | str | Path, *, intersect: bool = False,
            experiment: str = "kebab-eval", tracking_uri: str | None = None,
            run_name: str | None = None) -> EvalResult: ...


@overload
def rescore(run: str, golden: GoldenSet | str | Path, *, intersect: bool = False,
            experiment: str = "kebab-eval", tracking_uri: str | None = None,
            run_name: str | None = None) -> LoggedRescore: ...


def rescore(run: EvalResult | str, golden: GoldenSet | str | Path, *, intersect: bool = False,
            experiment: str = "kebab-eval", tracking_uri: str | None = None,
            run_name: str | None = None) -> EvalResult | LoggedRescore:
    """Score a run's recorded hits and answers against another golden version, calling no
    pipeline. An :class:`EvalResult` is rescored in memory (an EvalResult back); a run
    reference is read from the tracking store and the derived run logged there (its
    :class:`~kebab_mlflow.app.rescore.LoggedRescore`). ``intersect``: score the shared
    queries when ``golden`` has queries the run never saw (else an InputError listing them)."""
    from kebab_mlflow.evaluation.rescore import rescore as rescore_recorded
    from kebab_mlflow.evaluation.rescore import run_of_result

    golden = golden if isinstance(golden, GoldenSet) else load_golden_set(golden)
    if isinstance(run, EvalResult):
        return rescore_recorded(run_of_result(run), golden, intersect=intersect).result
    from kebab_mlflow.app.rescore import rescore_run
    from kebab_mlflow.tracking.store import Tracker

    return rescore_run(Tracker(tracking_uri), experiment, run, golden, intersect=intersect,
                       run_name=run_name)


def run_sweep(path: str | Path, *, experiment: str | None = None,
              tracking_uri: str | None = None, jobs: int = 1, resume: str | None = None
              ) -> SweepResult:
    """Run the sweep file at ``path`` (a parent MLflow run with one child per row, and the
    gauge); its :class:`~kebab_mlflow.sweep.spec.SweepResult`."""
    from kebab_mlflow.app.sweep import run_sweep as run
    from kebab_mlflow.sweep.spec import load_sweep

    return run(load_sweep(path), experiment=experiment, tracking_uri=tracking_uri, jobs=jobs,
               resume=resume)


def tune(path: str | Path, *, trials: int | None = None, experiment: str | None = None,
         tracking_uri: str | None = None) -> TuneResult:
    """Run the tune file at ``path`` (a seeded TPE search on its train set, the best judged on
    its test set); its :class:`~kebab_mlflow.app.tune.TuneResult`. Needs optuna."""
    from kebab_mlflow.app.tune import require_optuna, run_tune
    from kebab_mlflow.sweep.tune_spec import load_tune

    require_optuna()
    return run_tune(load_tune(path).with_trials(trials), experiment=experiment,
                    tracking_uri=tracking_uri)
