"""compare's parse-error location (issue 28): the run and its artifact, never the temporary
folder the download lived in (deleted by the time the message is read)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlparse

from typer.testing import CliRunner

from kebab_mlflow.cli import app
from tests.conftest import GOLDEN, KB, mlflow_client

runner = CliRunner()


def run_id_of(store_uri: str, name: str) -> str:
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                              "--tracking-uri", store_uri, "--run-name", name, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])["run_id"]


def test_a_malformed_per_query_line_is_located_in_the_run_artifact(store_uri):
    baseline, candidate = run_id_of(store_uri, "base"), run_id_of(store_uri, "cand")
    client = mlflow_client(store_uri)
    artifact = Path(urlparse(client.get_run(candidate).info.artifact_uri).path) / \
        "per_query.jsonl"
    broken = artifact.read_bytes().split(b"\n", 1)[0] + b"\n{not json\n"
    artifact.write_bytes(broken)
    # the digest tag agrees with the file, so compare parses it (a mismatch is refused first)
    client.set_tag(candidate, "kebab.per_query_sha256", hashlib.sha256(broken).hexdigest())
    res = runner.invoke(app, ["compare", baseline, candidate, "--tracking-uri", store_uri])
    assert res.exit_code == 2, res.output
    output = res.output.replace("\n", "")
    assert f"run {candidate} (cand) artifact per_query.jsonl:2: not JSON" in output
    assert "kebab-compare-" not in output
