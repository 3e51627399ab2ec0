"""PNG plots where a person would rather look than read (matplotlib, headless).

A single ``kebab-mlflow run`` draws its plots in a second process (:class:`PlotProcess`),
started with the run: importing matplotlib (~0.65 s) and drawing then happen on the second
core while the run imports mlflow, scores and logs, instead of after the queries (issue 32: the
plot was 0.9 s of a cached run's 3.1 s). Should that process fail, the plots are drawn here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any


def _figure(**kwargs: Any) -> Any:
    """A figure on the Agg canvas without pyplot: importing pyplot (its backend machinery and
    global figure manager) cost a cached run ~0.4 s; a bare Figure needs neither, and nothing
    is left open to close."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> None:
    """The PNG written aside and renamed: a plot process killed mid-write (the run was
    interrupted) leaves no half PNG under the plot's name, only a dot file that publishing
    skips (app/run.py ``publish`` then draws the plot again)."""
    path = Path(path)
    aside = path.with_name(f".{path.name}.part")
    fig.savefig(aside, dpi=110, format="png")
    os.replace(aside, path)


_AT_K = re.compile(r"^(hit|precision|recall|ndcg)_at_(\d+)(?:_(chunk|doc))?$")


def metric_vs_k(overall: Mapping[str, float | None], path: Path, title: str) -> bool:
    """One line per metric family and level over the cut-offs; False when nothing to draw."""
    series: dict[str, list[tuple[int, float]]] = {}
    for name, value in overall.items():
        m = _AT_K.match(name)
        if m and value is not None:
            label = f"{m.group(1)}@k ({m.group(3) or 'chunk'})"
            series.setdefault(label, []).append((int(m.group(2)), value))
    if not series:
        return False
    fig = _figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([k for k, _ in points], [v for _, v in points], marker="o", label=label)
    ax.set_xscale("log")
    ks = sorted({k for pts in series.values() for k, _ in pts})
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("cut-off k")
    ax.set_ylabel("mean over queries")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    _save(fig, path)
    return True


def reliability_diagram(bins: Sequence[tuple[float, float | None, float | None, int]],
                        path: Path, title: str) -> None:
    """Accuracy vs confidence per fixed-width bin, with the count of each bin."""
    fig = _figure(figsize=(6, 6))
    ax, ax_n = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    width = 1 / len(bins)
    xs = [lo + width / 2 for lo, *_ in bins]
    acc = [a if a is not None else 0 for _, _, a, _ in bins]
    ax.bar(xs, acc, width=width * 0.9, alpha=0.7, label="accuracy")
    conf = [(lo + width / 2, c) for lo, c, _, _ in bins if c is not None]
    ax.plot([x for x, _ in conf], [c for _, c in conf], "o", color="black", label="mean conf.")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8)
    counts = [n for *_, n in bins]
    ax_n.bar(xs, counts, width=width * 0.9, color="grey")
    for x, n in zip(xs, counts, strict=True):
        if n:
            ax_n.text(x, n, str(n), ha="center", va="bottom", fontsize=7)
    ax_n.set_xlabel("confidence")
    ax_n.set_ylabel("cases")
    ax_n.set_xlim(0, 1)
    fig.tight_layout()
    _save(fig, path)


def bar_with_ci(rows: Sequence[tuple[str, float | None, float | None, float | None]],
                path: Path, title: str, ylabel: str) -> None:
    """One bar per row with its confidence interval (sweep leaderboards)."""
    fig = _figure(figsize=(max(5, len(rows) * 1.1), 4))
    ax = fig.subplots()
    names = [r[0] for r in rows]
    values = [r[1] or 0 for r in rows]
    lows = [max(0.0, (r[1] or 0) - (r[2] if r[2] is not None else (r[1] or 0))) for r in rows]
    highs = [max(0.0, (r[3] if r[3] is not None else (r[1] or 0)) - (r[1] or 0)) for r in rows]
    ax.bar(names, values, yerr=[lows, highs], capsize=4, color="#4c72b0")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, 1.05)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    _save(fig, path)


def optimization_history(values: Sequence[float | None], path: Path, title: str,
                         ylabel: str, baseline: float | None = None) -> None:
    """A search's history: each trial's objective (dots) and the best so far (a step line);
    ``baseline`` as a dashed line. Plain matplotlib (optuna's own plots need plotly)."""
    fig = _figure(figsize=(7, 4.5))
    ax = fig.subplots()
    trials = [i for i, v in enumerate(values) if v is not None]
    scores = [v for v in values if v is not None]  # in the order of ``trials``
    best: list[float] = []
    running = float("-inf")
    for v in scores:
        running = max(running, v)
        best.append(running)
    ax.scatter(trials, scores, s=18, color="#4c72b0", label="trial", zorder=3)
    ax.step(trials, best, where="post", color="#dd8452", label="best so far")
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", linewidth=1, label="baseline")
    ax.set_xlabel("trial")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="best")
    fig.tight_layout()
    _save(fig, path)


PLOT_TIMEOUT_S = 300  # a plot process not done by then is killed and the plots drawn here


class PlotProcess:
    """A second Python process that imports matplotlib at once, then draws the jobs handed to
    it (:meth:`draw`, :meth:`start`) and exits. Its stdin closing unanswered (the run failed
    or was killed) ends it too."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._jobs: list[tuple[str, dict[str, Any]]] = []
        self._started = False
        try:
            # -P: not the working folder first on sys.path (it may hold another kebab_mlflow)
            # os._exit once drawn: the interpreter's shutdown (matplotlib's and numpy's
            # teardown, ~0.1 s) is not waited for; the PNGs are whole files by then (_save)
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-c",
                 "import os; from kebab_mlflow.evaluation.plots import serve; serve(); "
                 "os._exit(0)"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:  # no process to be had (a process limit, no memory): drawn here
            pass

    def draw(self, kind: str, **args: Any) -> None:
        """Queue the plot ``kind`` (:func:`draw`'s) of ``args`` (JSON values; paths as str)."""
        self._jobs.append((kind, args))

    def start(self) -> None:
        """Hand the queued jobs over: the process draws them while the caller goes on."""
        self._started = True
        if self._proc is not None and not _handed_over(self._proc, self._jobs):
            self.close()  # died before reading (a broken pipe): finish() draws them here

    def finish(self) -> None:
        """Wait for the PNGs of the jobs (handed over now if :meth:`start` was not called);
        draw here those the process did not (it failed, hung or never started)."""
        if not self._started:
            self.start()
        proc, jobs, self._proc, self._jobs = self._proc, self._jobs, None, []
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(PLOT_TIMEOUT_S)
            _ended(proc)
        draw_missing(jobs)

    def close(self) -> None:
        """End the process, drawn or not (the run ended another way, or it died)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _ended(proc)


def _handed_over(proc: subprocess.Popen[bytes], jobs: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether ``jobs`` were written to ``proc``'s stdin (then closed: the process draws them
    and exits)."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(jobs).encode())
        proc.stdin.close()
        return True
    except OSError:  # it died before reading (a broken pipe)
        return False


def _ended(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


@contextlib.contextmanager
def plot_process(enabled: bool = True) -> Iterator[PlotProcess | None]:
    """A :class:`PlotProcess` for the block (None when not ``enabled``), ended with it."""
    if not enabled:
        yield None
        return
    plotter = PlotProcess()
    try:
        yield plotter
    finally:
        plotter.close()


def serve(stdin: IO[bytes] | None = None) -> None:
    """The PlotProcess's side: import matplotlib, then draw each job read from stdin."""
    _figure()  # the imports, while the run is busy elsewhere
    raw = (stdin or sys.stdin.buffer).read()
    if not raw:
        raise SystemExit(1)  # the run ended without plots
    for kind, args in json.loads(raw):
        draw(kind, args)


def draw(kind: str, args: Mapping[str, Any]) -> None:
    """Draw the plot ``kind`` ("metric_vs_k", "reliability_diagram") of JSON ``args``."""
    _PLOTS[kind](**args)


def draw_missing(jobs: Iterable[Sequence[Any]]) -> None:
    """:func:`draw` each (kind, args) job whose PNG (``args["path"]``) does not exist."""
    for kind, args in jobs:
        if not Path(args["path"]).is_file():
            draw(kind, args)


def _metric_vs_k(overall: Mapping[str, float | None], path: str, title: str) -> None:
    metric_vs_k(overall, Path(path), title)


def _reliability(bins: Sequence[Sequence[Any]], path: str, title: str) -> None:
    reliability_diagram([(lo, conf, acc, n) for lo, conf, acc, n in bins], Path(path), title)


_PLOTS: dict[str, Callable[..., None]] = {"metric_vs_k": _metric_vs_k,
                                          "reliability_diagram": _reliability}
