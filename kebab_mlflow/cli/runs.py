"""CLI commands that read the store: runs, show, baseline, ui."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.cli.app import Experiment, TrackingUri, app, baseline_app
from kebab_mlflow.golden import version_label
from kebab_mlflow.vocabulary import RunStatus

if TYPE_CHECKING:  # each command imports what it uses: --help stays light
    from subprocess import Popen

    from rich.console import Console
    from rich.table import Table

    from kebab_mlflow.records import RunRecord
    from kebab_mlflow.tracking.store import Tracker

# The metrics `runs` can show, most telling first; a column appears only when a listed run
# has a value (a doc-level golden set has no hit_at_5: no column of dashes).
RUNS_METRICS = ("hit_at_5", "mrr", "ndcg_at_10_doc", "map_doc", "recall_at_10_doc",
                "recall_at_100_doc", "contains_all", "ece", "brier")
# compare's default primary by the ground truth a run has (comparison/records.DEFAULT_PRIMARY),
# read from the metrics it logged: mrr exists only with chunk truth, ndcg_at_10_doc with doc
DEFAULT_PRIMARIES = ("mrr", "ndcg_at_10_doc", "contains_all")
SHORT_ID = 8
FIXED = 5  # name, run id, status, preset, golden: the columns before the metrics
NAME_WIDTH = 18  # at a terminal, longer run names fold onto a second line


def short_header(name: str) -> str:
    """``ndcg_at_10_doc`` → ``ndcg@10 doc`` (two lines in the table: ``ndcg@10`` / ``doc``)."""
    base, level = (name[:-4], "doc") if name.endswith("_doc") else (name, "")
    base = base.removesuffix("_chunk").replace("_at_", "@")
    return f"{base}\n{level}" if level else base


@app.command()
def runs(
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    limit: Annotated[int, typer.Option(help="how many runs")] = 20,
    wide: Annotated[bool, typer.Option("--wide", help="every column, full run ids")] = False,
) -> None:
    """List recent runs with their status, preset and key metrics.

    At a terminal narrower than the table, the run id is cut to 8 characters (enough for
    `show`/`compare`: an id prefix is not accepted, so copy it from `--wide`) and metric
    columns that do not fit are named below the table; --wide, or output to a pipe or file,
    shows everything."""
    from kebab_mlflow.cli.console import out
    from kebab_mlflow.tracking.store import BASELINE_TAG, Tracker

    tracker = Tracker(tracking_uri)
    exp = tracker.experiment_id(experiment, create=False)
    baseline = tracker.experiment_tag(exp, BASELINE_TAG)
    found = tracker.find_runs([exp], max_results=limit)
    primaries = {p for r in found if (p := primary_metric(r.metrics, r.tags))}
    listed = [*RUNS_METRICS, *sorted(primaries - set(RUNS_METRICS))]
    metrics = [m for m in listed if any(r.metrics.get(m) is not None for r in found)]
    verdicts = any(r.tags.get(vocab.VERDICT) for r in found)  # else no column of blanks
    full = wide or not out.is_terminal
    rows = [_run_row(r, baseline, metrics, full)[:FIXED + len(metrics) + verdicts]
            for r in found]
    columns = ["name", "run id", "status", "preset", "golden", *map(short_header, metrics),
               *(["verdict"] if verdicts else [])]
    kept = {FIXED + metrics.index(m) for m in primaries if m in metrics}
    shown, hidden = _fit(columns, rows, None if full else out.width, kept)
    console = _unbounded_console(out.is_terminal) if full else out
    console.print(_runs_table(f"runs in {experiment} (* = baseline)", columns, rows, shown,
                              full))
    if hidden:
        names = [metrics[i - FIXED] for i in hidden]
        console.print(f"not shown at {out.width} columns: {', '.join(names)} "
                      "(--wide shows every column and full run ids)", highlight=False)


def primary_metric(metrics: Mapping[str, float], tags: Mapping[str, str]) -> str | None:
    """The metric compare decides on for a run's golden set: its ``primary_metric`` (tag),
    else the default by the ground truth the logged metrics show; None for a run without
    any (a sweep's parent, a comparison)."""
    named = tags.get(vocab.PRIMARY_METRIC)
    if named:
        return named
    return next((m for m in DEFAULT_PRIMARIES if metrics.get(m) is not None), None)


def _run_row(r: RunRecord, baseline: str | None, metrics: list[str], full: bool) -> list[str]:
    from kebab_mlflow.formatting import number

    kind = r.tags.get(vocab.KIND, "")
    preset = r.params.get(vocab.PRESET, "") if kind in ("", vocab.RunKind.EVAL) else kind
    return [("* " if r.run_id == baseline else "") + (r.run_name or ""),
            r.run_id if full else r.run_id[:SHORT_ID], r.status, preset, _golden_version(r),
            *(number(r.metrics.get(m)) for m in metrics), r.tags.get(vocab.VERDICT, "")]


def _golden_version(r: RunRecord) -> str:
    """The run's golden set as name@short digest (older runs: from the param and digest)."""
    if r.tags.get("kebab.golden_version"):
        return str(r.tags["kebab.golden_version"])
    digest = r.tags.get("kebab.golden_sha256", "")
    name = r.params.get("golden_set", "")
    return version_label(name, digest) if name and digest else name



def _fit(columns: list[str], rows: list[list[str]], width: int | None,
         kept: set[int] | frozenset[int] = frozenset()) -> tuple[list[int], list[int]]:
    """Indices of the columns to show within ``width`` (None: all) and of the metric columns
    left out, rightmost metrics first; name, id, status, preset, golden, verdict and the
    ``kept`` columns (each listed golden set's primary metric) always stay."""
    def size(i: int) -> int:
        cells = [line for c in [columns[i], *(r[i] for r in rows)] for line in c.split("\n")]
        widest = max(len(c) for c in cells)
        return (min(widest, NAME_WIDTH) if i == 0 else widest) + 2  # padding and separator

    keep = list(range(len(columns)))
    metric_cols = [i for i in range(FIXED, len(columns)) if columns[i] != "verdict"
                   and i not in kept]
    hidden: list[int] = []
    while width is not None and metric_cols and sum(map(size, keep)) + 2 > width:
        dropped = metric_cols.pop()
        keep.remove(dropped)
        hidden.insert(0, dropped)
    return keep, hidden


def _runs_table(title: str, columns: list[str], rows: list[list[str]], shown: list[int],
                full: bool) -> Table:
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              padding=(0, 1), collapse_padding=True, title_justify="left")
    for i in shown:
        left = i < FIXED or columns[i] == "verdict"
        t.add_column(columns[i], overflow="fold", justify="left" if left else "right",
                     no_wrap=i in (1, 2),
                     max_width=NAME_WIDTH if i == 0 and not full else None)
    for r in rows:
        t.add_row(*(r[i] for i in shown))
    return t


def _unbounded_console(terminal: bool) -> Console:
    """--wide, or output to a pipe or file: lines as long as the table, nothing cut or folded
    (a terminal wraps them itself)."""
    from rich.console import Console

    return Console(width=10_000, soft_wrap=True, color_system="auto" if terminal else None)


@app.command()
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, name, @baseline, @latest")],
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", help="only metrics matching this glob, e.g. 'recall_*' or '*_doc'")] = None,
) -> None:
    """Show one run: metrics, then params (versions among them) and tags (metrics in reading
    order: overall ones by level and cut-off, ECE and Brier, then the breakdown blocks)."""
    from fnmatch import fnmatchcase

    from kebab_mlflow.cli.console import out, table
    from kebab_mlflow.metrics.registry import display_order
    from kebab_mlflow.tracking.references import resolve_run
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(tracking_uri)
    r = resolve_run(tracker, experiment, run_ref)
    names = display_order(n for n in r.metrics if metrics is None or fnmatchcase(n, metrics))
    if metrics is not None:
        out.print(_metrics_table(f"metrics matching {metrics!r}: {len(names)} of "
                                 f"{len(r.metrics)}", r.metrics, names))
        return
    out.print(f"[bold]{r.run_name}[/] {r.run_id} — {r.status}")
    out.print(_metrics_table("metrics", r.metrics, names))
    out.print(table("params", ["param", "value"], sorted(r.params.items())))
    out.print(table("tags", ["tag", "value"], sorted(
        (k, v) for k, v in r.tags.items() if not k.startswith("mlflow.note"))))


def _metrics_table(title: str, logged: Mapping[str, float], names: list[str]) -> Table:
    """``metric | value``, and the column of bounds for unjudged hits when the run logged
    some: ``<metric>_upper`` beside its metric (shown among the rows only when the metric
    itself is not)."""
    from kebab_mlflow.cli.console import metrics_table
    from kebab_mlflow.metrics.registry import UPPER_SUFFIX

    shown = set(names)
    rows = [n for n in names if not (n.endswith(UPPER_SUFFIX)
                                     and n.removesuffix(UPPER_SUFFIX) in shown)]
    return metrics_table(title, {n: logged[n] for n in rows},
                         {n: logged.get(f"{n}{UPPER_SUFFIX}") for n in rows})


@baseline_app.command("set")
def baseline_set(
    run_ref: Annotated[str, typer.Argument(metavar="RUN")],
    experiment: Experiment = "kebab-eval",
    tracking_uri: TrackingUri = None,
    force: Annotated[bool, typer.Option(
        help="mark RUN even if it was scored on another golden version than the current "
        "baseline")] = False,
) -> None:
    """Mark RUN as the experiment's baseline (what @baseline resolves to); a run of another
    golden version than the current baseline's needs --force (exit 2 without)."""
    from kebab_mlflow.tracking.references import set_baseline
    from kebab_mlflow.tracking.store import Tracker

    r = set_baseline(Tracker(tracking_uri), experiment, run_ref, force=force)
    typer.echo(f"baseline of {experiment} is now {r.run_id} ({r.run_name})")


@baseline_app.command("show")
def baseline_show(experiment: Experiment = "kebab-eval", tracking_uri: TrackingUri = None) -> None:
    """Print the baseline run id."""
    from kebab_mlflow.tracking.references import resolve_run
    from kebab_mlflow.tracking.store import Tracker

    r = resolve_run(Tracker(tracking_uri), experiment, "@baseline")
    typer.echo(f"{r.run_id} {r.run_name}")


@app.command()
def ui(
    tracking_uri: TrackingUri = None,
    experiment: Experiment = "kebab-eval",
    port: Annotated[int, typer.Option(help="port")] = 5000,
    host: Annotated[str, typer.Option(help="interface")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured store (--tracking-uri, $MLFLOW_TRACKING_URI or
    ./mlruns) and print the URL of EXPERIMENT's runs with their headline metrics as columns;
    a port already in use is an error (exit 2), not a UI that never starts."""
    import os

    from kebab_mlflow.tracking.store import Tracker, describe_uri, resolve_uri
    from kebab_mlflow.tracking.ui_view import runs_url

    uri = resolve_uri(tracking_uri)
    if uri.startswith(("http://", "https://")):
        experiment_id = _runs_view_experiment(Tracker(uri), experiment)
        typer.echo(f"{describe_uri(uri)} is a server, its UI runs there; open:\n"
                   f"  {runs_url(describe_uri(uri), experiment_id)}")
        return
    if not uri.startswith(("sqlite:", "postgresql", "mysql", "file:")):
        typer.echo(f"{describe_uri(uri)} is a server: open it in a browser.")
        return
    _check_port_free(host, port)
    experiment_id = _runs_view_experiment(Tracker(uri), experiment)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--port", str(port),
           "--host", host, "--workers", "1"]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"
    what = f"the runs of {experiment}" if experiment_id else f"no experiment {experiment} yet"
    announce = (f"MLflow UI for {describe_uri(uri)} (Ctrl-C to stop); {what}:\n"
                f"  {runs_url(base, experiment_id)}")
    raise typer.Exit(serve_ui(cmd, env, f"{base}/health", announce))


def serve_ui(cmd: list[str], env: dict[str, str], health_url: str, announce: str) -> int:
    """Start the UI server and print ``announce`` (its URL) once ``health_url`` answers — a
    spinner until then: the URL printed at once opened a page that did not load for ~30 s.
    Returns the server's exit status; if it exits before answering, nothing is announced."""
    import subprocess

    from kebab_mlflow.cli.console import err

    server = subprocess.Popen(cmd, env=env)
    try:
        with err.status("starting the MLflow UI …", spinner="dots"):
            serving = _wait_until_serving(server, health_url)
        if serving:
            err.print(announce, highlight=False, soft_wrap=True)
        return server.wait()
    except KeyboardInterrupt:  # the terminal's Ctrl-C reached the server too: let it stop
        return _stop(server)


def _wait_until_serving(server: Popen[bytes], health_url: str) -> bool:
    """Poll ``health_url`` until it answers 200 (True) or the server exits (False)."""
    import time
    import urllib.error
    import urllib.request

    while server.poll() is None:
        try:
            with urllib.request.urlopen(health_url, timeout=2) as reply:  # noqa: S310 - ours
                if reply.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    return False


def _stop(server: Popen[bytes]) -> int:
    import subprocess

    try:
        return int(server.wait(timeout=10))
    except subprocess.TimeoutExpired:
        server.terminate()
        return int(server.wait())


def _runs_view_experiment(tracker: Tracker, name: str) -> str | None:
    """The experiment's id (None: no such experiment), its saved runs view made first if an
    older kebab-mlflow made its runs: columns from the headline metrics of its newest runs."""
    from kebab_mlflow.errors import RunNotFoundError
    from kebab_mlflow.evaluation.report import headline
    from kebab_mlflow.metrics.registry import CALIBRATION_METRICS

    try:
        experiment_id = tracker.experiment_id(name, create=False)
    except RunNotFoundError:
        return None
    if tracker.runs_view_metrics(experiment_id) is None:
        runs = tracker.find_runs([experiment_id], status=RunStatus.FINISHED,
                                 tags={vocab.KIND: vocab.RunKind.EVAL}, max_results=50)
        metrics = {n for r in runs for n in [*headline(r.metrics), *CALIBRATION_METRICS]
                   if n in r.metrics}
        tracker.set_runs_view(experiment_id, metrics)
    return experiment_id


def _check_port_free(host: str, port: int) -> None:
    """Bind the port once: taken (or not ours to bind) → InputError, exit 2."""
    import socket

    from kebab_mlflow.errors import InputError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"cannot start the UI on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind(address)
        except OSError as exc:
            raise InputError(f"cannot start the UI on {host}:{port}: the port is in use "
                             f"({exc.strerror}); pick another with --port") from None
