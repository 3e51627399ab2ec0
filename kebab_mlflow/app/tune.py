"""``kebab-mlflow tune``: a seeded Optuna TPE search over config ranges, scored on a train
golden set, each trial a nested child eval run of one parent run; then the best configuration
and the baseline are each evaluated once on a held-out test golden set and compared there with
the project's compare, so the verdict never rests on the queries the search was tuned on.

It lives in the sweep package because it is a sweep whose rows a sampler chooses: one parent
run (``kebab.kind=tune``), complete eval runs as children, the same file validation. The
parent run carries the search history plot (``tune_history.png``, matplotlib), the best
parameters (params ``best.<key>``, tags, ``best_params.json``), every trial (``trials.csv``)
and the test comparison (``compare/``), and its description is the report.

Children: ``<name>-trial-000`` … (role ``trial``, on train), ``<name>-train-baseline`` (the
baseline on train, for the history plot's reference line), ``<name>-test-baseline`` and
``<name>-test-best`` (on test; the verdict is recorded on the latter, as ``compare`` does).
Determinism: the sampler takes the file's ``seed``, each trial is a deterministic eval, so the
same file gives the same trials and the same best parameters.
"""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kebab_mlflow import progress
from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.app.lifecycle import Lifecycle, run_lifecycle
from kebab_mlflow.errors import TuneUnavailableError
from kebab_mlflow.interrupts import request_interrupt
from kebab_mlflow.sweep.tune_spec import SpaceParam, TuneSpec
from kebab_mlflow.vocabulary import RunStatus, TuneRole

if TYPE_CHECKING:  # each loads when a tune runs
    from kebab_mlflow.app.run import RunResult
    from kebab_mlflow.comparison.records import Comparison
    from kebab_mlflow.tracking.store import Tracker

# an objective of the search: an optuna trial (optuna is untyped) -> the value maximized
Objective = Callable[[Any], float]
# evaluate(golden, preset, overrides, name, role, tags) -> the finished child run
Evaluate = Callable[..., "RunResult"]

TUNE_KIND = vocab.RunKind.TUNE
ROLE_TAG = vocab.TUNE_ROLE
INSTALL_HINT = ("`kebab-mlflow tune` needs optuna: run `make setup`, or "
                "`pip install -e '.[tune]'` in the clone")


@dataclass(frozen=True, kw_only=True)
class Trial:
    number: int
    params: Mapping[str, Any]
    value: float
    run_id: str


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    parent_run_id: str
    experiment_id: str
    objective: str
    trials: tuple[Trial, ...]
    best: Trial
    train_baseline: float | None
    test_baseline_run_id: str
    test_best_run_id: str
    comparison: Comparison  # test-best against test-baseline
    ui_command: str
    wall_s: float

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def as_json(self) -> dict[str, Any]:
        return {"parent_run_id": self.parent_run_id, "experiment_id": self.experiment_id,
                "objective": self.objective, "best_trial": self.best.number,
                "best_params": dict(self.best.params), "best_value": self.best.value,
                "train_baseline_value": self.train_baseline,
                "trials": [{"number": t.number, "params": dict(t.params), "value": t.value,
                            "run_id": t.run_id} for t in self.trials],
                "test": {"baseline_run_id": self.test_baseline_run_id,
                         "best_run_id": self.test_best_run_id, "verdict": self.verdict,
                         "exit_code": self.comparison.exit_code},
                "wall_s": self.wall_s}


def require_optuna() -> Any:
    """The optuna module, or exit 2 with the install hint."""
    try:
        import optuna
    except ImportError:
        raise TuneUnavailableError(INSTALL_HINT) from None
    # our own events report each trial; a trial that raises ends the search with its error (an
    # interrupt too), so optuna's "trial failed" warnings with tracebacks would only repeat it
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna


def suggest(trial: Any, param: SpaceParam) -> Any:
    if param.kind == "choice":
        return trial.suggest_categorical(param.key, list(param.choices))
    if param.kind == "int":
        return trial.suggest_int(param.key, param.low, param.high, log=param.log)
    assert param.low is not None and param.high is not None  # a range: the reader set both
    return trial.suggest_float(param.key, float(param.low), float(param.high), log=param.log)


def run_tune(spec: TuneSpec, *, experiment: str | None = None,
             tracking_uri: str | None = None,
             on_event: Callable[[str], None] = lambda s: None) -> TuneResult:
    """Create the parent run, search on train, judge the best on test, publish on the parent.
    Ctrl-C/SIGTERM ends the parent and the running trial KILLED."""
    optuna = require_optuna()
    from kebab_mlflow.tracking.store import DEFAULT_EXPERIMENT, Tracker

    t0 = time.perf_counter()
    experiment = experiment or spec.experiment or DEFAULT_EXPERIMENT
    tracker = Tracker(tracking_uri)
    experiment_id = tracker.experiment_id(experiment)

    def start() -> str:
        return tracker.start_run(experiment_id, spec.name, _parent_tags(spec))

    # the one run lifecycle: created with signals held, KILLED / FAILED with its trials
    with run_lifecycle(tracker, start, Lifecycle(what="tune", end_children=True)) as parent, \
            progress.warnings_once():  # each warning once per tune, not once per trial
        parent_id = parent.run_id
        evaluate = _evaluator(spec, experiment, tracker.uri, parent_id)
        tracker.log_batch(parent_id, params=_parent_params(spec))
        on_event(f"tune {spec.name}: parent run {parent_id}; {spec.trials} trial(s) on "
                 f"{spec.n_train} train queries")
        trials = _search(optuna, spec, evaluate, on_event)
        best = max(trials, key=lambda t: t.value)  # the first of equals: deterministic
        on_event(f"best: trial {best.number} ({_params_text(best.params)}), "
                 f"{spec.objective} {best.value:.4f} on train; judging it on test")
        judged = _judge(spec, tracker, experiment, evaluate, best)
        hint = tracker.ui_command(experiment_id)
        train_baseline, base_run_id, best_run_id, comparison = judged
        result = TuneResult(parent_run_id=parent_id, experiment_id=experiment_id,
                            objective=spec.objective, trials=tuple(trials), best=best,
                            train_baseline=train_baseline, test_baseline_run_id=base_run_id,
                            test_best_run_id=best_run_id, comparison=comparison,
                            ui_command=hint, wall_s=time.perf_counter() - t0)
        _publish(tracker, spec, result)
    return result


def _evaluator(spec: TuneSpec, experiment: str, uri: str, parent_id: str) -> Evaluate:
    """evaluate(golden, preset, overrides, name, role, tags) -> the finished child RunResult."""
    from kebab_mlflow.app.run import RunOptions, execute

    def evaluate(golden: str, preset: str, overrides: Mapping[str, Any], name: str,
                 role: TuneRole, tags: Mapping[str, str] | None = None) -> RunResult:
        options = RunOptions(golden=golden, corpus=spec.corpus, preset=preset, k=spec.k,
                             overrides=dict(overrides), experiment=experiment, tracking_uri=uri,
                             run_name=f"{spec.name}-{name}", seed=spec.seed,
                             parent_run_id=parent_id,
                             extra_tags={ROLE_TAG: role, **dict(tags or {})})
        with progress.silenced():
            return execute(options)

    return evaluate


def _search(optuna: Any, spec: TuneSpec, evaluate: Evaluate,
            on_event: Callable[[str], None]) -> list[Trial]:
    trials: list[Trial] = []

    def objective(trial: Any) -> float:
        params = {p.key: suggest(trial, p) for p in spec.space}
        run = evaluate(spec.train, spec.preset, {**spec.overrides, **params},
                       f"trial-{trial.number:03d}", TuneRole.TRIAL,
                       {vocab.TUNE_TRIAL: str(trial.number)})
        value = run.aggregate.overall[spec.objective]
        assert value is not None  # the reader checked that train has its ground truth
        trials.append(Trial(number=trial.number, params=params, value=float(value),
                            run_id=run.run_id))
        on_event(f"trial {trial.number}: {spec.objective} {value:.4f} "
                 f"({_params_text(params)})")
        return float(value)

    sampler = optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=spec.startup_trials)
    study = optuna.create_study(direction="maximize", sampler=sampler,
                                study_name=spec.name)
    # catch=(): a trial that raises (or an interrupt) ends the search; it is not a 0 score
    with _interrupts_inside_trials() as guarded:
        study.optimize(guarded(objective), n_trials=spec.trials, catch=())
    return trials


@contextlib.contextmanager
def _interrupts_inside_trials() -> Iterator[Callable[[Objective], Objective]]:
    """Ctrl-C/SIGTERM interrupt a running trial at once, but one that arrives while optuna
    records a finished trial is held until the next trial starts: optuna 5's own bookkeeping
    breaks (UnboundLocalError) when a KeyboardInterrupt lands inside it."""
    state = {"inside": False, "pending": False}

    def on_signal(signum: int, frame: Any) -> None:
        request_interrupt(signum)  # the shared flag: every later checkpoint acts on it
        if state["inside"]:
            raise KeyboardInterrupt
        state["pending"] = True

    def guarded(objective: Objective) -> Objective:
        def run(trial: Any) -> float:
            if state["pending"]:
                raise KeyboardInterrupt
            state["inside"] = True
            try:
                return objective(trial)
            finally:
                state["inside"] = False
        return run

    if threading.current_thread() is not threading.main_thread():  # no signals there
        yield lambda objective: objective
        return
    saved = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield guarded
        if state["pending"]:  # a signal after the last trial
            raise KeyboardInterrupt
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _judge(spec: TuneSpec, tracker: Tracker, experiment: str, evaluate: Evaluate,
           best: Trial) -> tuple[float | None, str, str, Comparison]:
    """(the baseline's objective on train, test-baseline run, test-best run, comparison)."""
    from kebab_mlflow import comparison as cmp

    train_base = evaluate(spec.train, spec.baseline_preset, spec.baseline_overrides,
                          "train-baseline", TuneRole.TRAIN_BASELINE)
    base = evaluate(spec.test, spec.baseline_preset, spec.baseline_overrides, "test-baseline",
                    TuneRole.TEST_BASELINE)
    best_run = evaluate(spec.test, spec.preset, {**spec.overrides, **best.params},
                        "test-best", TuneRole.TEST_BEST, {vocab.TUNE_TRIAL: str(best.number)})
    sides = cmp.load_pair(tracker, experiment, base.run_id, best_run.run_id)
    # the objective decides the verdict (compare's primary metric); gates share Holm with it
    options = cmp.CompareOptions(primary=spec.objective, seed=spec.seed,
                                 gates=tuple(g for g in spec.gates or () if g != spec.objective))
    comparison = cmp.compare_runs(*sides, options)
    from kebab_mlflow.app.compare import record

    record(tracker, comparison)
    return (train_base.aggregate.overall.get(spec.objective), base.run_id, best_run.run_id,
            comparison)


def _value_text(value: Any) -> str:
    from kebab_mlflow.formatting import number

    return number(value) if isinstance(value, float) else str(value)


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_value_text(v)}" for k, v in params.items())


def _parent_tags(spec: TuneSpec) -> dict[str, str]:
    from kebab_mlflow.tracking.provenance import provenance_tags

    return {**provenance_tags(TUNE_KIND), vocab.TUNE_SHA256: spec.sha256,
            vocab.TRAIN_SHA256: spec.train_sha256, vocab.TEST_SHA256: spec.test_sha256,
            vocab.CORPUS_SHA256: spec.corpus_sha256}


def _parent_params(spec: TuneSpec) -> dict[str, Any]:
    return {"tune_file": spec.path, "train": spec.train, "test": spec.test,
            "corpus": spec.corpus, "preset": spec.preset, "k": spec.k,
            "objective": spec.objective, "trials": spec.trials,
            "startup_trials": spec.startup_trials, "seed": spec.seed,
            "sampler": "optuna.TPESampler", "n_train": spec.n_train, "n_test": spec.n_test,
            "baseline_preset": spec.baseline_preset,
            **{f"set.{k}": v for k, v in spec.overrides.items()},
            **{f"baseline.{k}": v for k, v in spec.baseline_overrides.items()},
            **{f"space.{p.key}": p.describe() for p in spec.space}}


def _publish(tracker: Tracker, spec: TuneSpec, result: TuneResult) -> None:
    """The parent's outputs (best params, history plot, trials, report), then FINISHED."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.evaluation.plots import optimization_history

    best, c = result.best, result.comparison
    with tempfile.TemporaryDirectory(prefix="kebab-tune-") as tmp:
        folder = Path(tmp)
        (folder / "best_params.json").write_text(json.dumps(
            {"trial": best.number, "params": dict(best.params), "objective": spec.objective,
             "train_value": best.value, "run_id": best.run_id}, indent=1, allow_nan=False))
        optimization_history([t.value for t in result.trials], folder / "tune_history.png",
                             f"{spec.name}: {spec.objective} on train", spec.objective,
                             result.train_baseline)
        _write_trials_csv(folder / "trials.csv", spec, result.trials)
        (folder / "compare.md").write_text(cmp.to_markdown(c))
        for name in ("best_params.json", "tune_history.png", "trials.csv", "compare.md"):
            tracker.log_artifact(result.parent_run_id, folder / name)
        tracker.log_artifact(result.parent_run_id, Path(spec.path))
    metrics = {f"best/{spec.objective}": best.value, "best/trial": best.number}
    if result.train_baseline is not None:
        metrics[f"train_baseline/{spec.objective}"] = result.train_baseline
    tracker.log_batch(result.parent_run_id,
                      params={f"best.{k}": v for k, v in best.params.items()},
                      metrics=metrics, tags={
                          vocab.VERDICT: c.verdict, vocab.TUNE_BEST_TRIAL: str(best.number),
                          vocab.TUNE_BEST_RUN_ID: best.run_id,
                          vocab.TUNE_TEST_BEST_RUN_ID: result.test_best_run_id,
                          vocab.COMPARED_TO: result.test_baseline_run_id,
                          "mlflow.note.content": report(spec, result)})
    tracker.end_run(result.parent_run_id, RunStatus.FINISHED)


def _write_trials_csv(path: Path, spec: TuneSpec, trials: tuple[Trial, ...]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["trial", *[p.key for p in spec.space], spec.objective, "run_id"])
        for t in trials:
            writer.writerow([t.number, *[t.params[p.key] for p in spec.space], repr(t.value),
                             t.run_id])


def report(spec: TuneSpec, result: TuneResult) -> str:
    """The parent run's description: the search, the best parameters, the test verdict."""
    from kebab_mlflow import comparison as cmp
    from kebab_mlflow.formatting import number

    best = result.best
    lines = [f"# Tune — {spec.name}", "", *([spec.description, ""] if spec.description else []),
             f"{len(result.trials)} trials of a TPE search (seed {spec.seed}, "
             f"{spec.startup_trials} random first) maximizing **{spec.objective}** on "
             f"{spec.n_train} train queries; the best judged once on {spec.n_test} held-out "
             "test queries against the baseline.", "",
             "| key | space | best |", "|---|---|---|"]
    lines += [f"| {p.key} | {p.describe()} | {_value_text(best.params[p.key])} |"
              for p in spec.space]
    lines += ["", f"Best: trial {best.number}, {spec.objective} {number(best.value)} on train "
              f"(baseline {number(result.train_baseline)}).", "",
              f"**Test verdict: {result.verdict}** — {cmp.headline(result.comparison)}"]
    return "\n".join(lines) + "\n"
