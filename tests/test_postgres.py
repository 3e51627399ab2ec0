"""The team set-up: an `mlflow server` whose backend store is PostgreSQL (issue 8).

``scripts/postgres.sh`` installs the distribution's PostgreSQL if it is missing and starts a
throwaway cluster on loopback; the tracking server uses ``postgresql+psycopg2://``. If apt-get
truly cannot provide PostgreSQL these tests are skipped with a loud reason.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kebab_mlflow.cli import app
from tests.conftest import GOLDEN, KB
from tests.test_server import check_sweep, experiment_name, run_cli, run_json, small_sweep

runner = CliRunner()


def test_backend_store_is_postgresql(pg_server, postgres):
    assert pg_server.backend_uri == f"postgresql+psycopg2://postgres@127.0.0.1:{postgres.port}" \
        "/postgres"
    with postgres.connect() as conn, conn.cursor() as cur:
        cur.execute("select version()")
        assert cur.fetchone()[0].startswith("PostgreSQL")


def test_run_and_compare_on_postgres(pg_server, postgres):
    exp = experiment_name()
    base = run_json(run_cli(pg_server.url, exp, "--run-name", "pg-base"))
    cand = run_json(run_cli(pg_server.url, exp, "--run-name", "pg-cand",
                            "--set", "bm25.k1=1.5"))
    # the rows are in PostgreSQL itself, with the same numbers the tool printed
    with postgres.connect() as conn, conn.cursor() as cur:
        cur.execute("select status, name from runs where run_uuid = %s", (base["run_id"],))
        assert cur.fetchone() == ("FINISHED", "pg-base")
        cur.execute("select value from latest_metrics where run_uuid = %s and key = 'mrr'",
                    (base["run_id"],))
        assert cur.fetchone()[0] == base["metrics"]["mrr"]
        cur.execute("select count(*) from params where run_uuid = %s", (cand["run_id"],))
        assert cur.fetchone()[0] >= 10
    result = runner.invoke(app, ["compare", base["run_id"], cand["run_id"], "--tracking-uri",
                                 pg_server.url, "--experiment", exp, "--format", "json",
                                 "--resamples", "500"])
    assert result.exit_code in (0, 1), result.output
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] in ("Better", "Same", "Regressed")
    assert (result.exit_code == 1) == (verdict["verdict"] == "Regressed")
    assert pg_server.client().get_run(cand["run_id"]).data.tags["kebab.verdict"] == \
        verdict["verdict"]


def test_sweep_with_parallel_rows_on_postgres(pg_server, tmp_path):
    result = runner.invoke(app, ["sweep", str(small_sweep(tmp_path)), "--jobs", "2",
                                 "--tracking-uri", pg_server.url,
                                 "--experiment", experiment_name(), "--json"])
    assert result.exit_code == 0, result.output
    check_sweep(pg_server, json.loads(result.stdout.strip().splitlines()[-1]))


def test_golden_and_corpus_paths_used(pg_server):
    """The params on the PostgreSQL-backed server keep what the run used."""
    exp = experiment_name()
    reply = run_json(run_cli(pg_server.url, exp))
    params = pg_server.client().get_run(reply["run_id"]).data.params
    assert params["corpus"] == str(KB) and params["golden_set"] == "kebab-fixtures"
    assert params["n_queries"] == str(len(GOLDEN.read_text().split("\n  - id: ")) - 1)
