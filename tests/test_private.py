"""Private golden sets (`private: true`): no query, answer or chunk text anywhere in MLflow
(issue 8). Every stored byte of a private run is scanned — the database rows (the SQLite file's
bytes and a SELECT over every table; for PostgreSQL, a SELECT over every table) and every
artifact file — for every query string, every answer text and every chunk of the corpus.
`compare` of two private runs still works, and what it records is scanned too.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.evaluation.per_query import read_per_query
from tests.conftest import GOLDEN, KB, write

runner = CliRunner()
SECRET_DESCRIPTION = "kz-description-secret-4471 internal review set"


def marker(i: int) -> str:
    return f"kzq{i:03d}xvprivate"  # distinctive: found only if query text leaks


def private_golden(tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """The fixture set made private, each query carrying a unique marker token."""
    data = yaml.safe_load(GOLDEN.read_text())
    data["private"] = True
    data["description"] = SECRET_DESCRIPTION
    answers = []
    for i, q in enumerate(data["queries"]):
        q["query"] = f"{q['query']} {marker(i)}"
        answers += [s for s in q.get("must_contain", []) + q.get("forbidden", []) if len(s) >= 6]
    path = write(tmp_path / "private.yaml", yaml.safe_dump(data, sort_keys=False))
    return path, [q["query"] for q in data["queries"]], answers


def secrets(tmp_path: Path) -> list[str]:
    """Every text that must not be stored: queries, markers, expected answer strings, the
    answers the pipeline gives (from a non-private twin run in a separate store), every
    chunk and document of the corpus (whole and 40-character windows)."""
    from kebab_mlflow.config import build_config
    from kebab_mlflow.pipeline.reference import build_pipeline

    path, queries, expected = private_golden(tmp_path)
    twin = write(tmp_path / "twin.yaml", path.read_text().replace("private: true",
                                                                  "private: false"))
    twin_store = f"sqlite:///{tmp_path / 'twin-store' / 'mlflow.db'}"
    twin_run = execute(RunOptions(golden=str(twin), corpus=str(KB), tracking_uri=twin_store))
    from mlflow.tracking import MlflowClient

    local = MlflowClient(twin_store).download_artifacts(twin_run.run_id, "per_query.jsonl",
                                                        str(tmp_path / "twin-dl"))
    answers = [r.answer.text for r in read_per_query(Path(local)) if r.answer and r.answer.text]
    assert len(answers) >= 10  # the scan is only as good as what it looks for
    pipeline = build_pipeline(build_config("naive_baseline", {}), str(KB), {})
    texts = [c.text for c in pipeline.chunks] + [d.text for d in pipeline.corpus.documents]
    windows = []
    for t in texts:
        t = t.strip()
        windows.append(t)
        if len(t) >= 80:
            windows += [t[:40], t[len(t) // 2:len(t) // 2 + 40], t[-40:]]
    found = queries + [marker(i) for i in range(len(queries))] + expected + answers + windows
    found.append(SECRET_DESCRIPTION)
    return sorted({s for s in found if len(s.strip()) >= 10})


def encodings(secret: str) -> list[bytes]:
    """The raw UTF-8 text and its JSON-escaped form (json.dumps with ensure_ascii)."""
    return sorted({secret.encode(), json.dumps(secret)[1:-1].encode()})


def leaks(blobs: dict[str, bytes], needles: list[str]) -> list[str]:
    out = []
    for where, blob in blobs.items():
        for s in needles:
            if any(e in blob for e in encodings(s)):
                out.append(f"{where}: {s[:60]!r}")
    return out


def artifact_blobs(root: Path, run_ids: list[str] | None = None) -> dict[str, bytes]:
    files = [p for p in root.rglob("*") if p.is_file()]
    if run_ids is not None:
        files = [p for p in files if any(r in str(p) for r in run_ids)]
    return {str(p): p.read_bytes() for p in files}


def sqlite_blobs(db: Path) -> dict[str, bytes]:
    blobs = {f"{db} (file bytes)": db.read_bytes()}
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            rows = conn.execute(f'select * from "{table}"').fetchall()
            blobs[f"{db}:{table}"] = "\n".join(
                "\t".join(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                          for v in row) for row in rows).encode()
    return blobs


def run_private(golden: Path, uri: str, experiment: str, **kw) -> str:
    result = runner.invoke(app, ["run", "--golden", str(golden), "--corpus", str(KB),
                                 "--tracking-uri", uri, "--experiment", experiment, "--json",
                                 *[a for k, v in kw.items() for a in (f"--{k}", v)]])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])["run_id"]


def compare_private(uri: str, experiment: str, base: str, cand: str) -> dict:
    result = runner.invoke(app, ["compare", base, cand, "--tracking-uri", uri, "--experiment",
                                 experiment, "--format", "json", "--resamples", "300"])
    assert result.exit_code in (0, 1), result.output
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] in ("Better", "Same", "Regressed")
    assert len(verdict["queries"]) == 43
    return verdict


def test_private_run_and_compare_store_no_text_embedded_store(tmp_path):
    needles = secrets(tmp_path)
    golden = tmp_path / "private.yaml"
    store = tmp_path / "store"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    base = run_private(golden, uri, "private")
    cand = run_private(golden, uri, "private", preset="random_retrieval")
    compare_private(uri, "private", base, cand)
    from mlflow.tracking import MlflowClient

    run = MlflowClient(uri).get_run(base)
    assert run.data.tags["kebab.private"] == "true" and run.data.metrics["hit_at_5"] > 0
    rows = list(read_per_query(Path(MlflowClient(uri).download_artifacts(
        base, "per_query.jsonl", str(tmp_path / "dl")))))
    assert len(rows) == 43 and all(r.query is None for r in rows)
    assert sum(len(r.hits) for r in rows) > 0 and all(r.scores for r in rows)
    blobs = {**sqlite_blobs(store / "mlflow.db"), **artifact_blobs(store / "artifacts")}
    assert len([b for b in blobs if b.endswith(".jsonl")]) == 2  # the scan saw the artifacts
    assert leaks(blobs, needles) == []


def test_the_scan_finds_a_leak_when_there_is_one(tmp_path):
    """The same scan over a non-private run of the same set finds text (the test can fail)."""
    needles = secrets(tmp_path)
    store = tmp_path / "twin-store"
    blobs = {**sqlite_blobs(store / "mlflow.db"), **artifact_blobs(store / "artifacts")}
    found = leaks(blobs, needles)
    assert any("per_query.jsonl" in f for f in found)
    assert any(marker(0) in f for f in found)


def test_private_run_on_a_postgres_backed_server_stores_no_text(tmp_path, pg_server, postgres):
    needles = secrets(tmp_path)
    golden = tmp_path / "private.yaml"
    experiment = f"private-{tmp_path.name}"
    base = run_private(golden, pg_server.url, experiment)
    cand = run_private(golden, pg_server.url, experiment, preset="single_chunk")
    compare_private(pg_server.url, experiment, base, cand)
    run_ids = [base, cand]
    exp_id = pg_server.client().get_run(base).info.experiment_id
    blobs: dict[str, bytes] = {}
    with postgres.connect() as conn, conn.cursor() as cur:
        cur.execute("select table_name from information_schema.tables "
                    "where table_schema = 'public' and table_type = 'BASE TABLE'")
        for (table,) in cur.fetchall():
            cur.execute("select column_name from information_schema.columns "
                        "where table_schema = 'public' and table_name = %s", (table,))
            columns = {c for (c,) in cur.fetchall()}
            # other tests share this database: keep to this experiment's rows where a table
            # says whose rows they are; scan tables that do not say in full
            if "run_uuid" in columns:
                cur.execute(f'select t::text from "{table}" t where run_uuid = any(%s)',
                            (run_ids,))
            elif "experiment_id" in columns:
                cur.execute(f'select t::text from "{table}" t where experiment_id::text = %s',
                            (exp_id,))
            else:
                cur.execute(f'select t::text from "{table}" t')
            blobs[f"postgres:{table}"] = "\n".join(r[0] for r in cur.fetchall()).encode()
    assert b"FINISHED" in blobs["postgres:runs"] and blobs["postgres:params"]
    blobs.update(artifact_blobs(pg_server.artifacts_dir, run_ids))
    assert len([b for b in blobs if b.endswith("per_query.jsonl")]) == 2
    assert leaks(blobs, needles) == []
