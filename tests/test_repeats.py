"""`run --repeat N` and flaky queries in `compare` (issue 27 item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.verdict import compare_runs
from kebab_mlflow.evaluation.evaluate import evaluate, reference_pipeline
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.evaluation.repeats import flip_rate, topk_churn
from kebab_mlflow.records import Hit, QueryResult
from tests.conftest import GOLDEN, KB, ROOT, mlflow_client, runs_in

runner = CliRunner()
NOISY = f"python:{ROOT / 'fixtures' / 'targets' / 'noisy_target.py'}:NoisyPipeline"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_flip_rate_and_churn_by_hand():
    assert flip_rate([("a",), ("a",), ("b",), ("a",), ("c",)]) == pytest.approx(0.4)
    assert flip_rate([("a",)] * 5) == 0.0
    hits = [QueryResult(query_id="q", hits=tuple(Hit(chunk_id=c, doc_id="d", score=1.0,
                                                     rank=i + 1) for i, c in enumerate(ids)))
            for ids in (("a", "b"), ("b", "a"), ("a", "c"))]
    assert topk_churn(hits) == pytest.approx((0 + 0.5) / 2)  # a reorder is not churn


def test_the_reference_pipeline_repeats_identically_flip_rate_0(tmp_path):
    pipeline = reference_pipeline("naive_baseline", KB)
    single = evaluate(pipeline, GOLDEN, per_query_path=tmp_path / "one.jsonl")
    repeated = evaluate(pipeline, GOLDEN, per_query_path=tmp_path / "rep.jsonl", repeat=3)
    lines = _lines(tmp_path / "rep.jsonl")
    assert all(len(line["repeats"]) == 3 and line["flip_rate"] == 0.0
               and line["topk_churn"] == 0.0 for line in lines)
    for line in lines:  # identical but for the timing
        first = {k: v for k, v in line["repeats"][0].items() if k != "latency_ms"}
        assert all({k: v for k, v in r.items() if k != "latency_ms"} == first
                   for r in line["repeats"])
    assert repeated.aggregate.repeats == {"n": 3.0, "flaky_queries": 0.0, "flaky_share": 0.0,
                                          "topk_churn": 0.0}
    assert repeated.overall.keys() == single.overall.keys()
    for name, value in single.overall.items():  # a mean of equal values, to rounding
        assert repeated.overall[name] == (None if value is None else pytest.approx(value))
    assert json.loads((tmp_path / "flaky_queries.json").read_text()) == []
    assert repeated.params()["repeat"] == 3 and "repeat" not in single.params()


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    root = tmp_path_factory.mktemp("noisy")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name, seed, repeat in (("a", "1", "5"), ("b", "2", "5"), ("a1", "1", "1"),
                                   ("b1", "2", "1")):
            mp.setenv("NOISY_SEED", seed)
            res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--target", NOISY,
                                      "--repeat", repeat, "--run-name", name,
                                      "--tracking-uri", uri])
            assert res.exit_code == 0, res.output
    return {"uri": uri, "root": root}


def test_noisy_repeats_are_kept_means_scored_and_flaky_queries_listed(noisy, tmp_path):
    client = mlflow_client(noisy["uri"])
    run = next(r for r in runs_in(noisy["uri"]) if r.info.run_name == "a")
    assert run.data.params["repeat"] == "5"
    lines = _lines(Path(client.download_artifacts(run.info.run_id, "per_query.jsonl",
                                                  str(tmp_path))))
    flaky = {line["id"] for line in lines if line["flip_rate"] > 0}
    assert flaky, "the noisy target should make some queries flaky"
    for line in lines:
        assert len(line["repeats"]) == 5
        values = [r["scores"]["contains_all"] for r in line["repeats"]]
        if all(v is not None for v in values):
            assert line["scores"]["contains_all"] == pytest.approx(np.mean(values))
    listed = json.loads(Path(client.download_artifacts(run.info.run_id, "flaky_queries.json",
                                                       str(tmp_path))).read_text())
    assert {e["id"] for e in listed} == flaky
    assert run.data.metrics["repeats/flaky_queries"] == len(flaky)
    assert 0 <= run.data.metrics["repeats/topk_churn"] <= 1


def _cli_compare(noisy, *args):
    res = runner.invoke(app, ["compare", *args, "--format", "json", "--no-log",
                              "--tracking-uri", noisy["uri"]])
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else None)


def test_compare_marks_flaky_queries_and_leaves_them_out_unless_counted(noisy):
    res, data = _cli_compare(noisy, "a", "b", "--max-regressions", "0")
    flaky_regressions = [q for q in data["queries"] if q["kind"] == "Regression" and q["flaky"]]
    assert data["flaky_regressions"] == len(flaky_regressions)
    steady = data["counts"]["Regression"] - len(flaky_regressions)
    assert not any("--max-regressions" in r for r in data["reasons"]) or steady > 0
    if flaky_regressions:
        counted, counted_data = _cli_compare(noisy, "a", "b", "--max-regressions", "0",
                                             "--count-flaky")
        assert counted.exit_code == 1
        assert any("> --max-regressions 0" in r for r in counted_data["reasons"])
    table = runner.invoke(app, ["compare", "a", "b", "--no-log", "--wide",
                                "--tracking-uri", noisy["uri"]])
    assert ("Regression (flaky)" in table.stdout) == bool(flaky_regressions)


def _row(qid: str, rank: int, flip: float | None) -> PerQueryRow:
    hits = (Hit(rank=1, chunk_id="d#0", doc_id="d", score=1.0),)
    return PerQueryRow(id=qid, query="q", hits=hits, answer=None,
                       scores={"mrr": 1 / rank if rank else 0.0}, latency_ms=1.0, error=None,
                       first_relevant_rank={"chunk": rank, "doc": rank}, flip_rate=flip)


def _side(run_id: str, rows) -> RunSide:
    tags = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": "g",
            "kebab.git_commit": "abc", "kebab.git_dirty": "false"}
    params = {k: "v1" for k in ("parser_version", "chunker_version", "embedding_version",
                                "index_version", "prompt_template_version")}
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=tags,
                   rows=tuple(rows), per_query_sha256="x")


def test_flaky_regressions_are_left_out_of_the_small_set_rule_and_the_cap():
    base = [_row(f"q{i}", 1, 0.0) for i in range(10)]
    cand = [_row(f"q{i}", 0 if i < 2 else 1, 0.4 if i < 2 else 0.0) for i in range(10)]
    result = compare_runs(_side("b", base), _side("c", cand),
                          CompareOptions(max_regressions=0, resamples=100))
    assert result.counts["Regression"] == 2 and result.flaky_regressions == 2
    assert all(q.flaky for q in result.queries if q.kind == "Regression")
    assert result.verdict == "Same"
    counted = compare_runs(_side("b", base), _side("c", cand),
                           CompareOptions(max_regressions=0, resamples=100, count_flaky=True))
    assert counted.verdict == "Regressed"
    assert any(r.startswith("small set: 10") for r in counted.reasons)
