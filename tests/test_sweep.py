"""`kebab-mlflow sweep`: sweep-file validation, floor presets, parent + child runs, the gauge
on the parent, failed rows and --resume (issue 6)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.sweep.spec import SweepError, load_sweep
from tests.conftest import FIXTURES, GOLDEN, KB, mlflow_client, runs_in, write

runner = CliRunner()


def _sweep_file(tmp_path: Path, body: str, name: str = "sweep.yaml") -> Path:
    head = f"golden: {GOLDEN}\ncorpus: {KB}\nresamples: 500\n"
    return write(tmp_path / name, head + body)


SMALL = """\
name: small
description: a small sweep for the tests
primary: bm25
ceiling: oracle
gauge_metrics: [hit_at_5, mrr, ndcg_at_10_doc]
rows:
  - {name: bm25, preset: naive_baseline}
"""  # + implicit floor rows random_retrieval and single_chunk, implicit ceiling oracle


def _cli(args: list[str]) -> subprocess.CompletedProcess:
    # `python -m kebab_mlflow.cli` would run a second copy of cli.py as __main__, whose `app`
    # lacks the commands registered by the cli_* modules; call the console entry point
    return subprocess.run([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                           *args],
                          capture_output=True, text=True, timeout=300)


# ----------------------------------------------------------------------- sweep file


def test_shipped_sweep_file_is_valid():
    spec = load_sweep(FIXTURES / "sweep.yaml")
    roles = {r.name: r.role for r in spec.rows}
    assert roles["bm25"] == "primary"
    assert roles["random_retrieval"] == roles["single_chunk"] == "floor"
    assert roles["oracle"] == "ceiling"
    assert sum(r == "variant" for r in roles.values()) >= 2
    assert spec.gauge_metrics == ("hit_at_5", "mrr", "ndcg_at_10_doc")
    assert len(spec.query_ids) == 43
    assert Path(spec.golden) == GOLDEN and Path(spec.corpus) == KB  # relative to the file
    assert len(spec.sha256) == 64


def test_implicit_floor_rows_overrides_and_defaults(tmp_path):
    spec = load_sweep(_sweep_file(tmp_path, """\
set: {bm25.b: 0.5}
gauge_metrics: [hit_at_5]
rows:
  - {name: a, preset: naive_baseline}
  - {name: b, bm25.k1: 1.5, k: 5}
"""))
    assert [r.name for r in spec.rows] == ["a", "b", "random_retrieval", "single_chunk"]
    assert spec.primary == "a"  # the first row by default
    assert spec.floors == ("random_retrieval", "single_chunk") and spec.ceiling is None
    b = spec.row("b")
    assert (b.preset, b.k, dict(b.overrides)) == ("naive_baseline", 5, {"bm25.b": 0.5,
                                                                          "bm25.k1": 1.5})
    assert dict(spec.row("single_chunk").overrides) == {"bm25.b": 0.5}
    # a row that searches 5 deep cannot be gauged at a cut-off of 10
    with pytest.raises(SweepError, match="ndcg_at_10_doc needs retrieval depth >= 10"):
        load_sweep(_sweep_file(tmp_path, "gauge_metrics: [ndcg_at_10_doc]\nrows:\n"
                               "  - {name: b, k: 5}\n", "deep.yaml"))


def test_every_problem_reported_at_once_with_lines(tmp_path):
    path = _sweep_file(tmp_path, """\
colour: blue
floors: [random_retrieval, nowhere]
gauge_metrics: [hit_at_5, hit_at_7, no_hit_rate]
rows:
  - {name: bm25, preset: naive_baseline}
  - {name: typo, preset: naive_baselin}
  - {name: badkey, preset: naive_baseline, bm25.k9: 1}
  - {name: "bad name=1"}
  - {name: bm25, preset: nah}
""")
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    text = str(info.value)
    expected = [
        f"{path}:4: unknown top-level key 'colour'",
        f"{path}:5: 'floors' names 'nowhere', which is neither a row",
        "unknown metric 'hit_at_7'",
        "no_hit_rate is lower-is-better",
        "unknown preset 'naive_baselin'",
        f"{path}:10 row badkey: unknown config key 'bm25.k9'",
        "'name' must be 1-100 characters",
        "duplicate row name 'bm25'",
        "unknown preset 'nah'",  # a duplicate row's own problems are listed too
    ]
    # hit_at_7 is unknown, or (if another run in this process registered cut-off 7) not reported
    # at these rows' cut-offs; either way it is one problem
    if "hit_at_7 is not reported by every row (cut-offs: 1, 3, 5, 10)" in text:
        expected[2] = "hit_at_7 is not reported by every row (cut-offs: 1, 3, 5, 10)"
    for needle in expected:
        assert needle in text, needle
    assert isinstance(info.value, ConfigError) and len(info.value.problems) == len(expected)


def test_chunk_metric_on_doc_only_golden_set(tmp_path):
    golden = write(tmp_path / "docs.yaml", "queries:\n  - {id: q1, query: flood wall, "
                   "expected_doc_ids: [northbank-flood-wall]}\n")
    path = write(tmp_path / "s.yaml", f"golden: {golden}\ncorpus: {KB}\n"
                 "gauge_metrics: [hit_at_10]\nrows: [{name: bm25}]\n")
    with pytest.raises(SweepError, match="hit_at_10 is a chunk-level metric .* use "
                                         "hit_at_10_doc"):
        load_sweep(path)
    # without gauge_metrics the defaults follow the golden set's ground truth
    path.write_text(f"golden: {golden}\ncorpus: {KB}\nrows: [{{name: bm25}}]\n")
    assert load_sweep(path).gauge_metrics == ("hit_at_10_doc", "mrr_doc", "ndcg_at_10_doc")


def test_validation_error_exits_2_and_creates_no_run(tmp_path, store_uri):
    path = _sweep_file(tmp_path, "rows:\n  - {name: bm25, preset: nope}\n"
                       "  - {name: x, top_k: many}\n")
    res = _cli(["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert res.returncode == 2, res.stderr
    assert "unknown preset 'nope'" in res.stderr
    assert "top_k: expected int, got 'many'" in res.stderr
    assert res.stdout == ""
    assert not (tmp_path / "store").exists()  # the store was never even opened


# ----------------------------------------------------------------------- floor presets


def _pipeline(preset: str):
    from kebab_mlflow.config import build_config
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.reference import build_pipeline

    golden = load_golden_set(GOLDEN)
    truth = {q.query: (q.expected_chunk_ids, q.relevant_doc_grades) for q in golden.queries}
    return build_pipeline(build_config(preset), KB, truth), golden


def test_random_floor_returns_depth_hits_deterministically():
    from kebab_mlflow.pipeline.backends.floors import random_score

    pipeline, golden = _pipeline("random_retrieval")
    queries = [q.query for q in golden.queries[:5]]
    first = pipeline.search_batch(queries, 10)
    again = _pipeline("random_retrieval")[0].search_batch(queries, 10)
    assert [[h.chunk_id for h in hits] for hits in first] == \
           [[h.chunk_id for h in hits] for hits in again]
    for query, hits in zip(queries, first, strict=True):
        assert len(hits) == 10
        assert [h.rank for h in hits] == list(range(1, 11))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert all(h.score == random_score(query, h.chunk_id) for h in hits)
        # the top hit is the chunk with the largest hash score over the whole corpus
        assert hits[0].score == max(random_score(query, c) for c in pipeline.chunk_ids)
    assert len({tuple(h.chunk_id for h in hits) for hits in first}) == len(queries)


def test_single_chunk_floor_returns_one_hit_the_bm25_top_hit():
    single, golden = _pipeline("single_chunk")
    bm25, _ = _pipeline("naive_baseline")
    queries = [q.query for q in golden.queries]
    for s_hits, b_hits in zip(single.search_batch(queries, 10),
                              bm25.search_batch(queries, 10), strict=True):
        assert len(s_hits) == 1
        assert s_hits[0].chunk_id == b_hits[0].chunk_id


# ----------------------------------------------------------------------- runs


def _children(uri: str, parent_id: str):
    return [r for r in runs_in(uri) if r.data.tags.get("mlflow.parentRunId") == parent_id]


def test_full_sweep_parent_children_tags_gauge_and_json(tmp_path, store_uri):
    path = _sweep_file(tmp_path, SMALL)
    res = runner.invoke(app, ["sweep", str(path), "--jobs", "2", "--tracking-uri", store_uri,
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) >= {"parent_run_id", "rows", "gauge"}
    assert set(out["rows"]) == {"bm25", "random_retrieval", "single_chunk", "oracle"}
    assert set(out["gauge"]) == {"hit_at_5", "mrr", "ndcg_at_10_doc"}
    for block in out["gauge"].values():
        assert block["signal_state"] in ("alive", "uncertain", "dead", "n/a")
        assert set(block["floors"]) == {"random_retrieval", "single_chunk"}
    assert out["failed_rows"] == {} and out["status"] == "FINISHED"

    client = mlflow_client(store_uri)
    parent = client.get_run(out["parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["kebab.kind"] == "sweep"
    assert parent.data.tags["kebab.failed_rows"] == ""
    assert parent.data.tags["gauge/mrr/signal_state"] == out["gauge"]["mrr"]["signal_state"]
    children = _children(store_uri, out["parent_run_id"])
    assert {c.info.run_id for c in children} == set(out["rows"].values())
    by_row = {c.data.tags["kebab.sweep_row"]: c for c in children}
    assert set(by_row) == set(out["rows"])
    for name, child in by_row.items():
        assert child.info.status == "FINISHED"
        assert child.info.run_name == name
        assert child.data.tags["kebab.kind"] == "eval"  # a complete eval run, comparable
        assert "per_query.jsonl" in {a.path for a in client.list_artifacts(child.info.run_id)}
    assert by_row["single_chunk"].data.params["preset"] == "single_chunk"
    assert by_row["random_retrieval"].data.tags["kebab.sweep_role"] == "floor"

    # the gauge agrees with the children's own aggregate metrics (an independent path)
    child_mean = {n: c.data.metrics for n, c in by_row.items()}
    for metric, block in out["gauge"].items():
        assert block["primary"]["mean"] == pytest.approx(child_mean["bm25"][metric])
        assert block["ceiling"]["value"] == pytest.approx(child_mean["oracle"][metric])
        for floor, fb in block["floors"].items():
            gap = child_mean["bm25"][metric] - child_mean[floor][metric]
            assert fb["gap"] == pytest.approx(gap)
            assert fb["normalized"] == pytest.approx(
                gap / (child_mean["oracle"][metric] - child_mean[floor][metric]))
            assert parent.data.metrics[f"gauge/{metric}/{floor}/gap"] == pytest.approx(gap)
    # random ranking over 14 documents is far below BM25 on every gauged metric
    assert all(b["floors"]["random_retrieval"]["signal_state"] == "alive"
               for b in out["gauge"].values())

    artifacts = {a.path for a in client.list_artifacts(out["parent_run_id"])}
    assert {"distinguishing_power.json", "distinguishing_power.md", "leaderboard.md",
            "leaderboard.csv", "sweep.yaml", "gauge_mrr.png"} <= artifacts
    dp = json.loads(Path(client.download_artifacts(out["parent_run_id"],
                                                   "distinguishing_power.json",
                                                   str(tmp_path))).read_text())
    prov = dp["provenance"]
    assert prov["n_queries"] == 43 and prov["sweep_sha256"] == load_sweep(path).sha256
    assert set(prov) >= {"git_commit", "git_dirty", "bootstrap_seed", "bootstrap_resamples"}
    assert dp["gauge"] == out["gauge"]
    report = parent.data.tags["mlflow.note.content"]  # the file's description heads the report
    assert report.startswith(f"# Distinguishing power — {load_sweep(path).name}\n\n"
                             f"{load_sweep(path).description}\n")
    csv_lines = Path(client.download_artifacts(out["parent_run_id"], "leaderboard.csv",
                                               str(tmp_path))).read_text().splitlines()
    assert len(csv_lines) == 5 and csv_lines[1].split(",")[1] == "oracle"  # best first
    # issue 31: the tie group of the best contender and each row's rank interval
    board = {r["row"]: r for r in csv.DictReader(csv_lines)}
    assert board["bm25"]["tie_group"] == "best" and board["bm25"]["p_vs_best"] == ""
    assert board["random_retrieval"]["tie_group"] == "worse"
    assert float(board["random_retrieval"]["p_holm_vs_best"]) < 0.05
    assert all(int(r["rank_ci_low"]) <= int(r["rank"]) <= int(r["rank_ci_high"])
               for r in board.values())  # no two rows share a mean here


def test_failed_row_is_recorded_and_the_sweep_goes_on(tmp_path, store_uri):
    # one chunk per document changes the chunk ids: the golden set's expected ids are missing,
    # so this floor fails at run time (after validation) while the other rows finish
    path = _sweep_file(tmp_path, """\
floors: [random_retrieval, whole_docs]
gauge_metrics: [mrr]
rows:
  - {name: bm25}
  - {name: whole_docs, chunker.mode: document}
""")
    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "FAILED"
    assert out["rows"]["whole_docs"] is None and out["rows"]["bm25"] is not None
    assert out["failed_rows"]["whole_docs"].startswith("CorpusError: ")
    assert "expected chunk id(s) not in the index" in out["failed_rows"]["whole_docs"]
    block = out["gauge"]["mrr"]
    assert block["floors"]["random_retrieval"]["signal_state"] == "alive"
    assert block["floors"]["whole_docs"]["signal_state"] == "n/a"
    assert block["floors"]["whole_docs"]["gap"] is None
    assert block["signal_state"] == "n/a"  # a floor is missing
    parent = mlflow_client(store_uri).get_run(out["parent_run_id"])
    assert parent.info.status == "FAILED"
    assert parent.data.tags["kebab.failed_rows"] == "whole_docs"
    assert parent.data.tags["kebab.signal_state"] == "n/a"
    assert "failed rows: whole_docs" in res.stderr


def test_resume_reruns_only_the_killed_row(tmp_path, store_uri):
    from kebab_mlflow.tracking.store import Tracker

    path = _sweep_file(tmp_path, SMALL)
    first = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert first.exit_code == 0, first.output
    before = json.loads(first.stdout)
    parent_id = before["parent_run_id"]
    killed = before["rows"]["single_chunk"]
    Tracker(store_uri).end_run(killed, "KILLED")

    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json",
                              "--resume", parent_id])
    assert res.exit_code == 0, res.output
    after = json.loads(res.stdout)
    assert after["parent_run_id"] == parent_id
    assert after["rows"]["single_chunk"] not in (None, killed)
    for name in ("bm25", "random_retrieval", "oracle"):
        assert after["rows"][name] == before["rows"][name]  # reused, not re-run
    # the same numbers: reused rows are read back from their per_query.jsonl
    assert after["gauge"] == before["gauge"]
    children = _children(store_uri, parent_id)
    assert len(children) == 5
    assert {c.info.status for c in children if c.info.run_id == killed} == {"KILLED"}
    assert mlflow_client(store_uri).get_run(parent_id).info.status == "FINISHED"

    # nothing left to do: a second resume re-runs nothing
    again = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json",
                                "--resume", parent_id])
    assert json.loads(again.stdout)["rows"] == after["rows"]
    assert len(_children(store_uri, parent_id)) == 5


BLOCKING_TARGET = """\
import os, pathlib, time
from kebab_mlflow.records import Hit

HERE = pathlib.Path(__file__).parent
DEADLINE = time.monotonic() + 120  # whatever happens, this process blocks 120 s at most

def search(query, k):
    # the first query writes this process's pid (the test's event); then it blocks until the
    # test writes `fast` (at most 120 s), so the row is certainly running when a signal comes
    if not (HERE / "fast").exists():
        started = HERE / "started"
        if not started.exists():
            started.write_text(str(os.getpid()))
        while not (HERE / "fast").exists() and time.monotonic() < DEADLINE:
            time.sleep(0.05)
    return [Hit("harbor-transit#0", "harbor-transit", 1.0, 1)]
"""


def _blocking_sweep(tmp_path: Path) -> Path:
    target = write(tmp_path / "blocking.py", BLOCKING_TARGET)
    return _sweep_file(tmp_path, f"""\
floors: [random_retrieval]
gauge_metrics: [hit_at_5]
rows:
  - {{name: slow, target: 'python:{target}:search'}}
""")


def _until(what: str, ready, timeout: float = 600.0, proc=None):
    """Wait for an event (a file, a process gone), polling; fail at once if ``proc`` (the
    process that should cause it) ended first, else after ``timeout`` — a bound on a hang,
    not a guess of how long the work takes (a loaded machine took over 120 s to start a
    Dask row)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := ready()):
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}: "
                                 f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _start_blocked_sweep(tmp_path: Path, store_uri: str) -> tuple[subprocess.Popen, int, list]:
    """`sweep --jobs 2` with the blocking row running in a worker and the floor finished."""
    path = _blocking_sweep(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "from kebab_mlflow.cli import main; main()",
                             "sweep", str(path), "--jobs", "2", "--tracking-uri", store_uri],
                            stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "row random_retrieval: FINISHED" in line:
            break
    worker = int(_until("the blocking row to start", lambda: (
        tmp_path / "started").exists() and (tmp_path / "started").read_text()))
    assert worker != proc.pid, "".join(seen)  # the row runs in a worker process
    return proc, worker, seen


def test_sigterm_with_jobs_ends_runs_killed_without_idle_worker_tracebacks(tmp_path, store_uri):
    proc, worker, seen = _start_blocked_sweep(tmp_path, store_uri)
    with proc:
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=600) == 130, "".join(seen) + rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert "ended as KILLED" in rest
    statuses = {r.info.run_name: r.info.status for r in runs_in(store_uri)}
    assert "RUNNING" not in statuses.values(), statuses
    assert list(statuses.values()).count("KILLED") == 2  # the parent and the slow row
    _until("the worker to exit", lambda: not _alive(worker))


def test_sigkill_of_the_sweep_takes_its_workers_and_resume_ends_stale_children(tmp_path,
                                                                                store_uri):
    """Issue 18 item 7: workers die with their parent; --resume ends stale RUNNING children."""
    from kebab_mlflow.tracking.store import Tracker

    proc, worker, _ = _start_blocked_sweep(tmp_path, store_uri)
    with proc:
        proc.kill()
        proc.wait(timeout=60)
    _until("the orphaned worker to exit", lambda: not _alive(worker))
    runs = {r.info.run_name: r for r in runs_in(store_uri)}
    parent = runs["sweep"]
    assert parent.info.status == "RUNNING"  # SIGKILL: nobody could end it
    # the worker got SIGTERM when its parent died: its row ended KILLED on its own
    assert runs["slow"].info.status == "KILLED"
    # a child whose worker was SIGKILLed too stays RUNNING: --resume must end it
    tracker = Tracker(store_uri)
    stale = tracker.start_run(parent.info.experiment_id, "slow",
                              {"kebab.sweep_row": "slow"}, parent_run_id=parent.info.run_id)
    (tmp_path / "fast").write_text("")
    res = runner.invoke(app, ["sweep", str(tmp_path / "sweep.yaml"), "--tracking-uri",
                              store_uri, "--json", "--resume", parent.info.run_id])
    assert res.exit_code == 0, res.output
    assert mlflow_client(store_uri).get_run(stale).info.status == "KILLED"
    assert "1 child run(s) left RUNNING by an earlier sweep process ended KILLED" in res.stderr
    statuses = [r.info.status for r in runs_in(store_uri)]
    assert "RUNNING" not in statuses and statuses.count("FINISHED") == 3  # parent + 2 rows


def test_a_signal_after_the_rows_ends_the_parent_killed(tmp_path, store_uri, monkeypatch):
    """Issue 18 item 1: between the last row and the publication (the gauge) a Ctrl-C or a
    SIGTERM must end the parent KILLED too, not leave it RUNNING."""
    import signal as signals

    from kebab_mlflow.app import sweep as execution
    from kebab_mlflow.errors import RunInterrupted

    spec = load_sweep(_sweep_file(tmp_path, "floors: [random_retrieval]\n"
                                  "gauge_metrics: [mrr]\nrows: [{name: bm25}]\n"))

    def sigterm_while_gauging(*args):
        # SIGTERM must be an interrupt here, not the default action (which would end pytest)
        assert signals.getsignal(signals.SIGTERM) not in (signals.SIG_DFL, None)
        signals.raise_signal(signals.SIGTERM)

    def ctrl_c_while_gauging(*args):
        raise KeyboardInterrupt

    for fault in (ctrl_c_while_gauging, sigterm_while_gauging):
        monkeypatch.setattr(execution, "compute_gauge", fault)
        with pytest.raises(RunInterrupted, match="ended as KILLED"):
            execution.run_sweep(spec, tracking_uri=store_uri)
    statuses = [r.info.status for r in runs_in(store_uri)]
    assert len(statuses) == 6 and "RUNNING" not in statuses, statuses
    assert statuses.count("KILLED") == 2  # the two parents; their rows had finished


def test_resume_refuses_a_changed_sweep_file_or_a_non_sweep_run(tmp_path, store_uri):
    from kebab_mlflow.app.sweep import run_sweep
    from kebab_mlflow.tracking.store import Tracker

    spec = load_sweep(_sweep_file(tmp_path, SMALL))
    tracker = Tracker(store_uri)
    exp = tracker.experiment_id("kebab-eval")
    old_parent = tracker.start_run(exp, "old", {"kebab.kind": "sweep",
                                                "kebab.sweep_sha256": "0" * 64})
    eval_run = tracker.start_run(exp, "eval", {"kebab.kind": "eval"})
    with pytest.raises(SweepError, match="changed since run"):
        run_sweep(spec, tracking_uri=store_uri, resume=old_parent)
    # same sweep file, but the golden set or the corpus it names changed since
    assert len(spec.golden_sha256) == len(spec.corpus_sha256) == 64
    for key, what in (("kebab.golden_sha256", "golden set"), ("kebab.corpus_sha256", "corpus")):
        tags = {"kebab.kind": "sweep", "kebab.sweep_sha256": spec.sha256,
                "kebab.golden_sha256": spec.golden_sha256,
                "kebab.corpus_sha256": spec.corpus_sha256, key: "1" * 64}
        stale = tracker.start_run(exp, f"stale-{what}", tags)
        with pytest.raises(SweepError, match=f"the {what} changed since run {stale}"):
            run_sweep(spec, tracking_uri=store_uri, resume=stale)
    with pytest.raises(SweepError, match="is not a sweep parent \\(kind 'eval'\\)"):
        run_sweep(spec, tracking_uri=store_uri, resume=eval_run)
    assert SweepError.exit_code == 2
    assert len(runs_in(store_uri)) == 4  # nothing was run


def test_a_row_can_evaluate_a_target(tmp_path, store_uri):
    """Issue 9: `target:` in a sweep row runs that system instead of the reference pipeline."""
    target = f"python:{FIXTURES / 'targets' / 'python_target.py'}:TinyPipeline"
    path = _sweep_file(tmp_path, SMALL.replace(
        "  - {name: bm25, preset: naive_baseline}\n",
        f"  - {{name: bm25, preset: naive_baseline}}\n"
        f"  - {{name: tiny, target: '{target}', concurrency: 2}}\n"))
    assert load_sweep(path).row("tiny").target == target
    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    tiny = mlflow_client(store_uri).get_run(out["rows"]["tiny"])
    assert tiny.info.status == "FINISHED"
    assert tiny.data.params["backend"] == "target" and tiny.data.params["target"] == target
    parent = mlflow_client(store_uri).get_run(out["parent_run_id"])
    assert tiny.data.params["preset"] == "target" and \
        parent.data.params["row.tiny"].startswith("target k=")  # not the unused preset
    bad = _sweep_file(tmp_path, SMALL.replace(
        "  - {name: bm25, preset: naive_baseline}\n",
        "  - {name: bm25, preset: naive_baseline}\n  - {name: t, target: 3, concurrency: 0}\n"
        f"  - {{name: nofile, target: 'python:{tmp_path}/none.py:f'}}\n"
        "  - {name: noprog, target: 'cmd:no-such-program-kebab {query}'}\n"
        "  - {name: nohost, target: 'http:///search'}\n"
        "  - {name: hyb0, preset: hybrid, hybrid.depth: 0}\n"),
        name="bad.yaml")
    with pytest.raises(SweepError) as info:
        load_sweep(bad)
    text = str(info.value)  # all found before anything runs, as `run` would refuse them
    assert "row t: 'target' must be a target spec string" in text
    assert "row t: 'concurrency' must be an integer >= 1" in text
    assert f"row nofile: --target 'python:{tmp_path}/none.py:f': no such file" in text
    assert "row noprog: --target 'cmd:no-such-program-kebab {query}': program " \
        "'no-such-program-kebab' not found" in text
    assert "row nohost: --target 'http:///search': the URL has no host" in text
    assert "hybrid.depth must be >= 1 and <= 10,000, got 0" in text


def test_resume_runs_a_tampered_row_again(tmp_path, store_uri):
    """Issue 18 item 6: a reused row's per_query.jsonl must match its kebab.per_query_sha256
    tag, as compare checks it; a tampered one is not reused but run again."""
    from urllib.parse import urlsplit

    from kebab_mlflow.tracking.store import Tracker

    path = _sweep_file(tmp_path, SMALL)
    first = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json"])
    assert first.exit_code == 0, first.output
    before = json.loads(first.stdout)
    bm25 = before["rows"]["bm25"]
    artifacts = Path(urlsplit(mlflow_client(store_uri).get_run(bm25).info.artifact_uri).path)
    per_query = artifacts / "per_query.jsonl"
    records = [json.loads(line) for line in per_query.read_text().splitlines()]
    for rec in records:  # every query a miss: the gauge would change
        rec["scores"] = {k: (0.0 if isinstance(v, float | int) else v)
                         for k, v in rec["scores"].items()}
    per_query.write_text("".join(json.dumps(r) + "\n" for r in records))
    Tracker(store_uri).end_run(before["rows"]["oracle"], "KILLED")  # a row to resume

    res = runner.invoke(app, ["sweep", str(path), "--tracking-uri", store_uri, "--json",
                              "--resume", before["parent_run_id"]])
    assert res.exit_code == 0, res.output
    after = json.loads(res.stdout)
    assert after["rows"]["bm25"] != bm25  # run again, not reused
    assert after["rows"]["random_retrieval"] == before["rows"]["random_retrieval"]
    assert f"per_query.jsonl of row bm25 (run {bm25}) does not match its " \
           "kebab.per_query_sha256 tag" in res.stderr
    assert after["gauge"] == before["gauge"]  # the honest numbers, computed again


@pytest.mark.parametrize(("executor", "shown"), [('"dask:"', "'dask:'"),
                                                 ('"dask:  "', "'dask:  '"),
                                                 ("yarn", "'yarn'"), ("3", "3")])
def test_a_sweep_files_executor_follows_the_flags_rule_at_load_time(tmp_path, executor, shown):
    """Issue 26: `executor: "dask:"` passed validation and then failed naming --executor, a
    flag the user never passed; the file's value is refused at load time, with its line."""
    path = _sweep_file(tmp_path, f"executor: {executor}\n" + SMALL)
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}:4: 'executor' must be local, dask or dask:ADDRESS, got {shown}"]


def test_a_sweep_files_dask_address_is_kept(tmp_path):
    path = _sweep_file(tmp_path, "executor: dask:tcp://scheduler:8786\n" + SMALL)
    assert load_sweep(path).executor == "dask:tcp://scheduler:8786"


def test_names_mlflow_refuses_and_unbounded_resamples_fail_before_anything_runs(tmp_path,
                                                                                 store_uri):
    """Issue 18 item 3: a row named '.' or '..' (metric keys gauge/<m>/./mean are not plain
    paths to MLflow) and resamples: 1000000000 fail at load time, with their lines."""
    path = write(tmp_path / "sweep.yaml", f"""\
golden: {GOLDEN}
corpus: {KB}
resamples: 1000000000
executor: yarn
gauge_metrics: [mrr]
floors: [random_retrieval]
rows:
  - {{name: bm25}}
  - {{name: .}}
  - {{name: ..}}
""")
    res = _cli(["sweep", str(path), "--tracking-uri", store_uri])
    assert res.returncode == 2, res.stderr
    text = res.stderr
    assert f"{path}:3: 'resamples' must be at most 100,000, got 1,000,000,000" in text
    assert f"{path}:4: 'executor' must be local, dask or dask:ADDRESS, got 'yarn'" in text
    assert f"{path}:9: row '.': the MLflow key 'gauge/mrr/./mean' it names is refused by " \
           "MLflow: MLflow reads it as the path 'gauge/mrr/mean'" in text
    assert f"{path}:10: row '..': the MLflow key 'gauge/mrr/../mean' it names" in text
    assert not (tmp_path / "store").exists()  # nothing ran, the store was never opened
    res = _cli(["sweep", str(FIXTURES / "sweep.yaml"), "--executor", "ray",
                "--tracking-uri", store_uri])
    assert res.returncode == 2 and "--executor must be local, dask or dask:ADDRESS" in res.stderr


def test_terminal_tables_fit_80_columns_and_pipes_get_everything(tmp_path, store_uri):
    """Issue 16 item 6: the gauge and the rows with their headline metrics within 80 columns
    on a terminal; on a pipe nothing is cut (no `random_r|etrieval`)."""
    path = _sweep_file(tmp_path, SMALL)
    res = _cli(["sweep", str(path), "--tracking-uri", store_uri])  # stdout is a pipe here
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(map(len, lines)) <= 80, res.stdout
    assert any(line.split()[:1] == ["random_retrieval"] for line in lines)
    rows = next(i for i, line in enumerate(lines) if line.startswith("row "))
    assert lines[rows].split() == ["row", "#", "rank", "CI", "vs", "best", "role", "hit_at_5",
                                   "mrr", "ndcg_at_10_doc"]  # issue 31: the leaderboard
    bm25 = next(line.split() for line in lines[rows:] if line.startswith("bm25 "))
    assert bm25[3:5] == ["best", "primary"]
    client = mlflow_client(store_uri)
    child = client.get_run(next(r.info.run_id for r in runs_in(store_uri)
                                if r.info.run_name == "bm25"))
    assert bm25[5:] == [f"{child.data.metrics[m]:.4f}" for m in ("hit_at_5", "mrr",
                                                                 "ndcg_at_10_doc")]
    assert "row bm25: FINISHED" in res.stderr and " hit_at_5 " in res.stderr  # per-row lines
    wide = _cli(["sweep", str(path), "--tracking-uri", store_uri, "--wide"])
    assert "primary [95% CI]" in wide.stdout and max(map(len, wide.stdout.splitlines())) > 80


def test_headline_metrics_are_those_with_ground_truth_in_the_golden_set():
    """Issue 22: on a doc-level-only (BEIR) set the chunk-level metrics are null in every row,
    so the rows table and the leaderboard show the doc-level ones, not columns of dashes."""
    from types import SimpleNamespace

    from kebab_mlflow.sweep.outputs import headline_metrics
    from kebab_mlflow.sweep.spec import RowOutcome

    spec = SimpleNamespace(gauge_metrics=("mrr_doc", "ndcg_at_10_doc"))
    doc_only = {"hit_at_5": None, "mrr": None, "precision_at_5_chunk": None,
                "recall_at_10_doc": 0.8, "mrr_doc": 0.6, "ndcg_at_10_doc": 0.7}
    rows = {n: RowOutcome(name=n, role="variant", run_id=n, status="FINISHED",
                          overall=doc_only) for n in "ab"}
    shown = headline_metrics(spec, rows)
    assert shown[:2] == ["mrr_doc", "ndcg_at_10_doc"] and "recall_at_10_doc" in shown
    assert not {"hit_at_5", "mrr", "precision_at_5_chunk"} & set(shown)
