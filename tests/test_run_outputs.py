"""`run --cutoffs/--ask`, metrics in reading order, `runs` at 80 columns, `show --metrics`,
`ui` on a taken port, the end-of-run hint (issue 22 items 4-6, issue 16 item 6)."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from tests.conftest import GOLDEN, KB, mlflow_client, runs_in, write

runner = CliRunner()


def run_cli(store_uri, *args, golden=GOLDEN, corpus=KB):
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(corpus),
                              "--tracking-uri", store_uri, *args])
    return res


def artifact(store_uri, run_id, path):
    from pathlib import Path

    return Path(mlflow_client(store_uri).download_artifacts(run_id, path)).read_text()


def doc_only_set(tmp_path):
    """A BEIR-like golden set: doc-level ground truth only, over a 6-document corpus."""
    corpus = write(tmp_path / "beir" / "corpus.jsonl", "".join(
        json.dumps({"_id": f"d{i}", "title": f"Title {i}", "text": f"document {i} about "
                    + ("cats" if i % 2 else "dogs")}) + "\n" for i in range(6)))
    golden = write(tmp_path / "docs.yaml", "name: docs\nqueries:\n"
                   "  - {id: a, query: cats, expected_doc_ids: [d1, d3]}\n"
                   "  - {id: b, query: dogs, expected_doc_ids: {d0: 2, d2: 0}}\n")
    return golden, corpus


def test_cutoffs_are_exactly_those_asked_and_checked_against_k(store_uri):
    res = run_cli(store_uri, "--k", "20", "--cutoffs", "20,1,10", "--json")
    assert res.exit_code == 0, res.output
    metrics = json.loads(res.stdout)["metrics"]
    ks = {int(n.split("_at_")[1].split("_")[0]) for n in metrics if "_at_" in n
          and "/" not in n}
    assert ks == {1, 10, 20}
    run = mlflow_client(store_uri).get_run(json.loads(res.stdout)["run_id"])
    assert run.data.params["cutoffs"] == "1,10,20"
    before = len(runs_in(store_uri))
    res = run_cli(store_uri, "--k", "10", "--cutoffs", "5,100")
    assert res.exit_code == 2
    assert "cut-off(s) 100 deeper than the retrieval depth --k 10" in res.output
    assert len(runs_in(store_uri)) == before  # refused before any run exists


def test_json_metrics_lead_with_the_headline_and_cutoffs_go_in_numeric_order(store_uri):
    res = run_cli(store_uri, "--k", "100", "--json")
    assert res.exit_code == 0, res.output
    names = list(json.loads(res.stdout)["metrics"])
    assert names[:3] == ["hit_at_1", "hit_at_5", "mrr"]
    assert names.index("hit_at_10") < names.index("hit_at_100")
    assert names.index("recall_at_10_doc") < names.index("recall_at_100_doc")
    breakdown = [i for i, n in enumerate(names) if "/" in n]
    assert breakdown and min(breakdown) > names.index("error_rate")  # overall first


def test_ask_and_no_ask_override_every_query_and_unanswered_checks_warn(store_uri):
    res = run_cli(store_uri, "--json")
    assert res.exit_code == 0
    assert res.stderr.count("warning: 2 of 43 queries have must_contain/forbidden but no "
                            "ask") == 1  # one warning with the count, not one per query
    default = json.loads(res.stdout)
    res = run_cli(store_uri, "--ask", "--json")
    assert res.exit_code == 0 and "no ask" not in res.stderr
    asked = json.loads(res.stdout)
    run = mlflow_client(store_uri).get_run(asked["run_id"])
    assert run.data.params["ask"] == "all"
    aggregate = json.loads(artifact(store_uri, asked["run_id"], "aggregate.json"))
    assert aggregate["counts"]["ask"] == 43
    assert asked["metrics"]["contains_all"] != default["metrics"]["contains_all"]
    res = run_cli(store_uri, "--no-ask", "--json")
    assert res.exit_code == 0
    silent = json.loads(res.stdout)
    assert "contains_all" not in silent["metrics"] and "refusal_rate" not in silent["metrics"]
    assert silent["metrics"]["hit_at_5"] == default["metrics"]["hit_at_5"]
    from kebab_mlflow.golden import load_golden_set

    checked = sum(bool(q.must_contain or q.forbidden) for q in load_golden_set(GOLDEN).queries)
    assert checked > 2
    assert res.stderr.count(f"warning: {checked} of 43 queries have must_contain/forbidden") == 1


def test_a_doc_only_set_shows_doc_metrics_and_no_rows_of_dashes(store_uri, tmp_path):
    golden, corpus = doc_only_set(tmp_path)
    res = run_cli(store_uri, "--set", "chunker.mode=document", golden=golden, corpus=corpus)
    assert res.exit_code == 0, res.output
    summary = res.stderr.split("summary")[1].split("run ")[0]
    assert "ndcg_at_10_doc" in summary and "map_doc" in summary
    assert "judged_at_10_doc" in summary
    assert "hit_at_5 " not in summary and "precision_at_5_chunk" not in summary
    assert "—" not in summary
    run = runs_in(store_uri)[0]
    report = artifact(store_uri, run.info.run_id, "report.md")
    summary_md = report.split("## Configuration")[0]
    assert "—" not in summary_md and "ndcg_at_10_doc" in summary_md
    assert "No value (no ground truth or no case in this golden set): hit_at_1," in report


def test_runs_columns_follow_the_metrics_that_exist_and_nothing_is_cut_in_a_pipe(
        store_uri, tmp_path):
    golden, corpus = doc_only_set(tmp_path)
    assert run_cli(store_uri, "--set", "chunker.mode=document", "--run-name",
                   "a-rather-long-run-name-for-the-doc-only-set", golden=golden,
                   corpus=corpus).exit_code == 0
    res = runner.invoke(app, ["runs", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    run_id = runs_in(store_uri)[0].info.run_id
    assert run_id in res.output  # not a terminal: full ids, nothing folded
    assert "a-rather-long-run-name-for-the-doc-only-set" in res.output
    header = res.output.splitlines()[1:3]
    assert "hit@5" not in " ".join(header) and "mrr" not in " ".join(header).split()
    assert "ndcg@10" in " ".join(header) and "map" in " ".join(header)


def test_runs_at_80_columns_keeps_ids_and_names_what_it_leaves_out():
    from kebab_mlflow.cli.runs import _fit, short_header

    metrics = ["hit_at_5", "mrr", "ndcg_at_10_doc", "map_doc", "recall_at_100_doc"]
    columns = ["name", "run id", "status", "preset", *map(short_header, metrics)]
    rows = [["naive_baseline-20261201-085330", "d73f5f60", "FINISHED", "naive_baseline",
             *["0.9487"] * len(metrics)]]
    shown, hidden = _fit(columns, rows, 80)
    assert shown[:4] == [0, 1, 2, 3] and hidden  # id, name, status, preset always stay
    assert sorted(shown + hidden) == list(range(len(columns)))  # every column accounted for
    assert hidden == list(range(min(hidden), len(columns)))  # the rightmost ones go first
    assert _fit(columns, rows, None) == (list(range(len(columns))), [])
    assert short_header("ndcg_at_10_doc") == "ndcg@10\ndoc"
    assert short_header("precision_at_5_chunk") == "precision@5"


def test_show_metrics_glob_and_numeric_cutoff_order(store_uri):
    assert run_cli(store_uri, "--k", "100", "--run-name", "deep").exit_code == 0
    res = runner.invoke(app, ["show", "deep", "--tracking-uri", store_uri,
                              "--metrics", "hit_at_*"])
    assert res.exit_code == 0, res.output
    names = [line.split("│")[1].strip() for line in res.output.splitlines()
             if line.startswith("│")]
    assert names[:5] == ["hit_at_1", "hit_at_3", "hit_at_5", "hit_at_10", "hit_at_100"]
    assert all(n.startswith("hit_at_") for n in names)
    assert "params" not in res.output


def test_ui_on_a_taken_port_exits_2_saying_so(store_uri):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["ui", "--tracking-uri", store_uri, "--port", str(port)])
    assert res.exit_code == 2
    assert f"cannot start the UI on 127.0.0.1:{port}: the port is in use" in res.output


def test_the_end_of_run_hint_names_the_store_and_a_command_that_works_anywhere(store_uri):
    import sys

    res = run_cli(store_uri)
    assert res.exit_code == 0
    hint = res.stderr.split("open the MLflow UI on this run's store (no venv to activate):\n")[1]
    command = hint.strip().splitlines()[0]
    assert command == f"{sys.executable} -m kebab_mlflow.cli ui --tracking-uri {store_uri}"


@pytest.mark.parametrize("script_name", ["kebab-mlflow"])
def test_the_hint_uses_the_console_script_when_that_is_what_runs(tmp_path, monkeypatch,
                                                                  script_name):
    from kebab_mlflow.tracking.store import cli_executable

    script = write(tmp_path / "venv" / "bin" / script_name, "#!/bin/sh\n")
    monkeypatch.setattr("sys.argv", [str(script), "run"])
    assert cli_executable() == str(script)
