"""The page the MLflow UI opens on (tracking/ui_view.py): kebab's saved runs view in the
experiment tag the 3.17 UI reads, the URL that opens it, and who writes it (issue 16).
``make ui-check`` is the real-browser test of the same thing."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.tracking import ui_view
from tests.conftest import GOLDEN, KB, mlflow_client

runner = CliRunner()
VIEW_TAG = "mlflow.sharedViewState.kebab-headline"  # the UI's prefix + kebab's key, by hand


def decoded(tag_value: str) -> tuple[dict, dict]:
    """(envelope, state) as the UI's loader reads them: the envelope's ``state`` is a JSON
    string itself."""
    envelope = json.loads(tag_value)
    return envelope, json.loads(envelope["state"])


LEADING = ["tags.`kebab.verdict`", "tags.`kebab.baseline_name`", "tags.`kebab.golden_version`"]


def test_the_view_tag_is_the_envelope_the_ui_reads_with_metrics_as_columns():
    value = ui_view.view_tag_value(["mrr", "hit_at_1", "hit_at_5"], None, 1_700_000_000_000)
    envelope, state = decoded(value)
    assert ui_view.VIEW_TAG == VIEW_TAG
    assert envelope == {"name": "kebab: headline metrics", "createdAt": 1_700_000_000_000,
                        "updatedAt": 1_700_000_000_000, "state": envelope["state"],
                        "kebabPrimaries": ["mrr"]}
    # verdict, compared-to, golden version; then the primary (mrr: chunk truth), then the
    # rest in display order (hit_at_1, hit_at_5), not the order given; Models and Dataset after
    assert state["selectedColumns"] == [*LEADING, "metrics.`mrr`", "metrics.`hit_at_1`",
                                        "metrics.`hit_at_5`", "attributes.`Models`",
                                        "attributes.`Dataset`"]
    # all of it right after the run name and its date, before the attributes
    assert state["columnOrder"] == ["attributes.`Run Name`", "runDateAndNestInfo", *LEADING,
                                    "metrics.`mrr`", "metrics.`hit_at_1`", "metrics.`hit_at_5`",
                                    "attributes.`Models`", "attributes.`Dataset`", "duration"]
    assert set(state) <= {"selectedColumns", "columnOrder", "columnWidths"}
    assert state["columnWidths"]["metrics.`mrr`"] == 100  # the UI's default, for short names
    assert 100 < ui_view.column_width("ndcg_at_10_doc") < ui_view.column_width(
        "precision_at_5_chunk") <= 180
    assert len(value) < 20_000  # the UI refuses to open bigger saved views


def test_a_new_run_adds_its_metrics_and_keeps_the_views_creation_time():
    first = ui_view.view_tag_value(["hit_at_1_doc", "mrr_doc"], None, 1000)
    assert ui_view.view_tag_value(["mrr_doc"], first, 2000) is None  # nothing new: no write
    second = ui_view.view_tag_value(["hit_at_1", "mrr_doc"], first, 3000)
    envelope, state = decoded(second)
    assert (envelope["createdAt"], envelope["updatedAt"]) == (1000, 3000)
    # no golden set here has mrr, ndcg_at_10_doc or contains_all: no primary column
    assert ui_view.view_metrics(second) == ["hit_at_1", "hit_at_1_doc", "mrr_doc"]
    assert [c for c in state["columnOrder"] if c.startswith("metrics.")] == [
        "metrics.`hit_at_1`", "metrics.`hit_at_1_doc`", "metrics.`mrr_doc`"]


def test_each_golden_sets_primary_leads_the_metrics_and_stays_in_front():
    # a fixture-like set (chunk, doc and answer truth: mrr decides), then a SciFact-like one
    # (doc truth only: ndcg_at_10_doc decides), then the fixture set again
    fixture = ["hit_at_1", "hit_at_5", "mrr", "ndcg_at_10_doc", "recall_at_10_doc",
               "contains_all"]
    scifact = ["hit_at_1_doc", "mrr_doc", "ndcg_at_10_doc", "recall_at_100_doc"]
    first = ui_view.view_tag_value(fixture, None, 1)
    assert ui_view.view_metrics(first)[:2] == ["mrr", "hit_at_1"]
    second = ui_view.view_tag_value(scifact, first, 2)
    third = ui_view.view_tag_value(fixture, second, 3)
    assert third is None  # the fixture set adds nothing: its primary is already in front
    # primaries (display order: chunk before doc), then every other metric in display order
    assert ui_view.view_metrics(second) == [
        "mrr", "ndcg_at_10_doc", "hit_at_1", "hit_at_5", "hit_at_1_doc", "mrr_doc",
        "recall_at_10_doc", "recall_at_100_doc", "contains_all"]
    assert json.loads(second)["kebabPrimaries"] == ["mrr", "ndcg_at_10_doc"]
    _, state = decoded(second)
    assert state["columnOrder"][2:5] == LEADING  # right after the run name and date


def test_a_golden_sets_declared_primary_leads_instead_of_the_default():
    fixture = ["hit_at_1", "hit_at_5", "mrr", "ndcg_at_10_doc", "recall_at_10_doc"]
    declared = ui_view.view_tag_value(fixture, None, 1, primary="recall_at_10_doc")
    assert ui_view.view_metrics(declared)[0] == "recall_at_10_doc"
    assert json.loads(declared)["kebabPrimaries"] == ["recall_at_10_doc"]


def test_a_run_of_a_set_declaring_its_primary_puts_that_metric_first(store_uri, tmp_path):
    golden = tmp_path / "declared.yaml"
    golden.write_text(GOLDEN.read_text().replace("queries:", "primary_metric: map_doc\nqueries:",
                                                 1))
    res = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(KB),
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    tags = mlflow_client(store_uri).get_experiment_by_name("kebab-eval").tags
    assert ui_view.view_metrics(tags[VIEW_TAG])[0] == "map_doc"


def test_an_older_view_without_the_leading_columns_is_rewritten():
    old_state = {"selectedColumns": ["metrics.`mrr`", "attributes.`Models`"],
                 "columnOrder": [], "columnWidths": {}}
    old = json.dumps({"name": "kebab: headline metrics", "createdAt": 7, "updatedAt": 7,
                      "state": json.dumps(old_state)})
    value = ui_view.view_tag_value(["mrr"], old, 9)
    envelope, state = decoded(value)
    assert envelope["createdAt"] == 7 and state["selectedColumns"][:4] == [*LEADING,
                                                                           "metrics.`mrr`"]


def test_the_views_default_primaries_are_compares():
    from kebab_mlflow.comparison.records import DEFAULT_PRIMARY

    assert ui_view.DEFAULT_PRIMARIES == tuple(DEFAULT_PRIMARY[lv]
                                              for lv in ("chunk", "doc", "answer"))
    assert ui_view.primary_of(["hit_at_1_doc", "ndcg_at_10_doc", "contains_all"]) == (
        "ndcg_at_10_doc")
    assert ui_view.primary_of(["latency"]) is None


def test_a_tag_kebab_cannot_read_is_rewritten():
    assert ui_view.view_metrics(None) == []
    assert ui_view.view_metrics("deflate;eJyrVkrLz1eyUkrKz0ktLlGqBQA") == []  # compressed
    assert ui_view.view_metrics(json.dumps({"name": "x", "state": "[1]"})) == []
    value = ui_view.view_tag_value(["mrr"], "not json", 5)
    assert ui_view.view_metrics(value) == ["mrr"] and json.loads(value)["createdAt"] == 5


def test_the_url_opens_the_runs_in_the_view_on_the_model_training_pages():
    url = ui_view.runs_url("http://127.0.0.1:5000/", "7")
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == "http://127.0.0.1:5000/"
    route, _, query = parts.fragment.partition("?")
    assert route == "/experiments/7/runs"
    assert parse_qs(query) == {"viewStateShareKey": ["kebab-headline"],
                               "workflowType": ["machine_learning"]}
    assert ui_view.runs_url("https://mlflow.example.org", None) == (
        "https://mlflow.example.org/#/experiments?workflowType=machine_learning")


def run_fixtures(store_uri, *args):
    return runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                               "--tracking-uri", store_uri, *args])


def test_a_run_writes_the_view_with_its_summary_metrics_and_the_hint_opens_it(store_uri):
    res = run_fixtures(store_uri)
    assert res.exit_code == 0, res.output
    summary = [line.split("│")[1].strip() for line in res.stderr.splitlines()
               if line.startswith("│")]  # the terminal's summary table, metric per row
    client = mlflow_client(store_uri)
    exp = client.get_experiment_by_name("kebab-eval")
    columns = ui_view.view_metrics(exp.tags[VIEW_TAG])
    # the same metrics; the view orders ECE/Brier among the headline ones (tracking/ui_view.py)
    assert sorted(columns) == sorted(summary) and len(columns) > 10
    assert {"hit_at_1", "hit_at_5", "mrr", "ndcg_at_10_doc", "contains_all"} <= set(columns)
    hint = res.stderr.split("no venv to activate):\n")[1].strip().splitlines()
    url = ui_view.runs_url("http://127.0.0.1:5000", exp.experiment_id)
    assert hint[1].strip() == f"then open {url}"


def test_ui_prints_the_runs_url_and_backfills_the_view_of_an_older_experiment(store_uri,
                                                                            monkeypatch):
    res = run_fixtures(store_uri, "--json", "--experiment", "older")
    assert res.exit_code == 0, res.output
    experiment_id = json.loads(res.stdout)["experiment_id"]
    client = mlflow_client(store_uri)
    written = ui_view.view_metrics(client.get_experiment(experiment_id).tags[VIEW_TAG])
    client.delete_experiment_tag(experiment_id, VIEW_TAG)  # as an older kebab-mlflow left it
    started = []

    def serve(cmd: list, env: dict, health_url: str, announce: str) -> int:
        # the server itself is tests/test_terminal.py's (serve_ui): here only what ui asks
        from kebab_mlflow.cli.console import err

        started.append(cmd)
        err.print(announce, highlight=False, soft_wrap=True)
        return 0

    monkeypatch.setattr("kebab_mlflow.cli.runs.serve_ui", serve)
    res = runner.invoke(app, ["ui", "--tracking-uri", store_uri, "--experiment", "older",
                              "--port", "5077"])
    assert res.exit_code == 0, res.output
    assert ui_view.runs_url("http://127.0.0.1:5077", experiment_id) in res.stderr
    assert started and started[0][-6:] == ["--port", "5077", "--host", "127.0.0.1",
                                           "--workers", "1"]
    tags = client.get_experiment(experiment_id).tags
    assert ui_view.view_metrics(tags[VIEW_TAG]) == written  # from the run's logged metrics

    res = runner.invoke(app, ["ui", "--tracking-uri", store_uri, "--experiment", "nothing",
                              "--port", "5077"])
    assert "no experiment nothing yet" in res.stderr
    assert ui_view.runs_url("http://127.0.0.1:5077", None) in res.stderr


def test_against_a_server_the_hint_and_ui_print_the_servers_runs_url():
    import uuid

    from tests import servers

    server = servers.shared_mlflow_server()
    experiment = f"view-{uuid.uuid4().hex[:10]}"
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                              "--tracking-uri", server.url, "--experiment", experiment])
    assert res.exit_code == 0, res.output
    exp = server.client().get_experiment_by_name(experiment)
    assert "mrr" in ui_view.view_metrics(exp.tags[VIEW_TAG])
    url = ui_view.runs_url(server.url, exp.experiment_id)
    hint = res.stderr.split("no venv to activate):\n")[1].strip().splitlines()
    assert hint[0].strip() == f"open {url}"
    res = runner.invoke(app, ["ui", "--tracking-uri", server.url, "--experiment", experiment])
    assert res.exit_code == 0 and url in res.stdout


def test_the_verdict_line_replaces_an_earlier_one_and_keeps_the_summary():
    from kebab_mlflow.app.compare import with_verdict_line

    summary = "**candidate**\n\n| metric | value |\n|---|---|\n| mrr | 0.9 |\n"
    once = with_verdict_line(summary, "**Compare: Same** vs baseline `b`")
    assert once == "**Compare: Same** vs baseline `b`\n\n" + summary
    twice = with_verdict_line(once, "**Compare: Better** vs baseline `c`")
    assert twice == "**Compare: Better** vs baseline `c`\n\n" + summary  # replaced, not stacked
    assert with_verdict_line(None, "**Compare: Same** x") == "**Compare: Same** x\n"
    # a description that merely mentions a comparison further down is left whole
    other = "notes\n**Compare: Better** in a quote\n"
    assert with_verdict_line(other, "**Compare: Same** y") == "**Compare: Same** y\n\n" + other


def test_compare_writes_the_baselines_name_and_puts_its_verdict_line_first(store_uri):
    for args in ([], ["--set", "bm25.k1=1.5"]):
        name = "cand" if args else "base"
        assert run_fixtures(store_uri, "--run-name", name, "--experiment", "verdicts",
                            *args).exit_code == 0
    for _ in range(2):
        res = runner.invoke(app, ["compare", "base", "cand", "--tracking-uri", store_uri,
                                  "--experiment", "verdicts", "--format", "json"])
        assert res.exit_code in (0, 1), res.output
    result = json.loads(res.stdout)
    client = mlflow_client(store_uri)
    exp = client.get_experiment_by_name("verdicts")
    (cand,) = client.search_runs([exp.experiment_id], "attributes.run_name = 'cand'")
    tags = cand.data.tags
    assert tags["kebab.baseline_name"] == "base"
    assert tags["kebab.verdict"] == result["verdict"]
    description = tags["mlflow.note.content"]
    lines = description.splitlines()
    assert lines[0].startswith(f"**Compare: {result['verdict']}** vs baseline `base` (")
    assert description.count("**Compare: ") == 1  # two compares, one line
    primary = result["metrics"][0]
    assert f"{primary['name']} {primary['baseline']:.4f} → {primary['candidate']:.4f}" in lines[0]
    assert lines[1] == "" and lines[2] == "**cand**"  # the run's own summary follows
    # the experiment's view leads with the verdict and compared-to columns
    _, state = decoded(exp.tags[VIEW_TAG])
    assert state["selectedColumns"][:4] == [*LEADING, "metrics.`mrr`"]
