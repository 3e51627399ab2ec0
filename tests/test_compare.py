"""`kebab-mlflow compare` (issue 4): checks, per-query classes, statistics, verdict, logging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.cli import app
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.rendering import dumps, iter_dumps, to_json, to_markdown
from kebab_mlflow.comparison.verdict import ComparisonRefused, compare_runs, doc_variant
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.records import Answer, Hit
from tests.conftest import GOLDEN, KB, ROOT

runner = CliRunner()


# ---------------------------------------------------------------------------------------------
# real runs on the shipped fixtures, made once for the module


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    subset = root / "small.yaml"
    data = yaml.safe_load(GOLDEN.read_text())
    data["queries"] = [q for q in data["queries"] if q["id"] in ("g001", "g003", "g038")]
    subset.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEBAB_CACHE_DIR", str(root / "cache"))
        mp.chdir(root)

        def run(name, preset="naive_baseline", golden=GOLDEN, k=10, **overrides):
            return execute(RunOptions(golden=str(golden), corpus=str(KB), tracking_uri=uri,
                                      preset=preset, overrides=overrides, run_name=name,
                                      k=k)).run_id

        ids = {"base": run("base"), "same": run("same"), "rand": run("rand", "random_retrieval"),
               "rechunk": run("rechunk", **{"chunker.overlap_chars": 50}),
               "small_base": run("small_base", golden=subset),
               "small_top1": run("small_top1", golden=subset, top_k=1),
               "small_base_k5": run("small_base_k5", golden=subset, k=5),
               "small_rand_k5": run("small_rand_k5", "random_retrieval", golden=subset, k=5)}
    return {"uri": uri, "ids": ids, "subset": subset}


def _compare(store, *args):
    res = runner.invoke(app, ["compare", *args, "--tracking-uri", store["uri"]])
    return res, res.output


def _json(output: str) -> dict:
    return json.loads(output[output.index("{"): output.rindex("}") + 1])


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_identical_runs_are_same_with_zero_deltas_and_the_verdict_is_recorded(store):
    res, out = _compare(store, "base", "same", "--format", "json")
    assert res.exit_code == 0, out
    data = _json(out)
    assert data["verdict"] == "Same" and data["exit_code"] == 0
    assert {"verdict", "rule", "baseline", "candidate", "metrics", "queries"} <= set(data)
    # the primary (chunk-level truth: mrr) and, the set having abstention cases,
    # abstention_accuracy (issue 27); both unchanged, so out of the correction
    assert [(m["name"], m["role"]) for m in data["metrics"]] == [
        ("mrr", "primary"), ("abstention_accuracy", "gate")]
    assert data["settings"]["primary"] == "mrr" and data["settings"]["primary_source"] == \
        "default"
    for m in data["metrics"]:
        assert (m["delta"], m["ci_low"], m["ci_high"], m["p_value"]) == (0.0, 0.0, 0.0, 1.0)
        assert m["unchanged"] and m["p_holm"] is None and m["p_exact"]
    assert any("mrr is identical on all 39 queries" in r for r in data["reasons"])
    assert data["counts"] == {"Regression": 0, "Loss": 0, "Win": 0, "Draw": 43}
    # 39 with retrieval truth + the 4 abstention cases (issue 27: per-query evidence too)
    assert data["n"]["queries"] == 43 and data["n"]["with_ground_truth"] == 43
    assert "seed 0" in data["rule"] and data["settings"]["seed"] == 0
    client = _client(store["uri"])
    run = client.get_run(store["ids"]["same"])
    assert run.data.tags["kebab.verdict"] == "Same"
    assert run.data.tags["kebab.compared_to"] == store["ids"]["base"]
    assert {a.path for a in client.list_artifacts(run.info.run_id, "compare")} == {
        "compare/report.md", "compare/compare.json"}


def test_random_retrieval_candidate_is_regressed_exit_1(store):
    res, out = _compare(store, "base", "rand", "--no-log")
    assert res.exit_code == 1, out
    assert "Regressed" in out and "mrr is significantly worse" in out
    assert "kebab.verdict" not in _client(store["uri"]).get_run(store["ids"]["rand"]).data.tags


def test_improved_candidate_is_better(store, tmp_path):
    out_file = tmp_path / "report.md"
    res, out = _compare(store, "rand", "base", "--format", "md", "--out", str(out_file),
                        "--no-log")
    assert res.exit_code == 0, out
    text = out_file.read_text()
    assert text.startswith("# Compare: Better")
    assert "| mrr | primary | 39 |" in text and "better" in text and "**Rule.**" in text


def test_losing_one_hit_on_a_small_set_is_regressed(store):
    res, out = _compare(store, "small_base", "small_top1", "--format", "json", "--no-log")
    assert res.exit_code == 1, out
    data = _json(out)
    assert data["verdict"] == "Regressed"
    assert data["counts"]["Regression"] == 1 and data["n"]["with_ground_truth"] == 3
    assert any(r.startswith("small set: 3 queries with ground truth (< 30) and 1 Regression")
               for r in data["reasons"])
    assert not any(m["significant"] for m in data["metrics"])  # statistics alone say nothing
    first = data["queries"][0]
    assert (first["id"], first["kind"], first["baseline_rank"], first["candidate_rank"]) == (
        "g038", "Regression", 2, None)
    assert first["query"].startswith("Which agency is building the Greenway")


def test_runs_shallower_than_mrr_still_show_their_regressions(store):
    # at --k 5 there is no mrr; the ranks come from per_query.jsonl's first_relevant_rank
    res, out = _compare(store, "small_base_k5", "small_rand_k5", "--format", "json",
                        "--no-log", "--primary", "hit_at_5")
    assert res.exit_code == 1, out
    data = _json(out)
    assert data["verdict"] == "Regressed" and data["counts"]["Regression"] == 3
    assert {q["baseline_rank"] for q in data["queries"]} <= {1, 2, 3, 4, 5}


def test_first_relevant_rank_beyond_ten_is_a_miss_and_null_means_no_truth():
    def row(qid, rank):
        hits = tuple(Hit(rank=i + 1, chunk_id=f"d{i}#0", doc_id=f"d{i}", score=1.0)
                     for i in range(20))
        scores = {"hit_at_5": None if rank is None else float(0 < rank <= 5)}
        return PerQueryRow(id=qid, query=qid, hits=hits, answer=None, scores=scores, latency_ms=1.0,
                           error=None, first_relevant_rank={"chunk": rank, "doc": rank})

    b = _side("b", [row("a", 3), row("b", 2), row("c", None)])
    c = _side("c", [row("a", 12), row("b", 1), row("c", None)])
    kinds = [q.kind for q in compare_runs(b, c, CompareOptions(primary="hit_at_5",
                                                                 resamples=100)).queries]
    assert sorted(kinds) == ["Draw", "Regression", "Win"]


def test_an_old_per_query_file_without_first_relevant_rank_is_not_read_as_misses():
    # a --k 5 run has no mrr; if only one side has first_relevant_rank, both are read the old
    # way (no rank information), never "truth on one side only" = a miss on the other
    hits = (Hit(rank=1, chunk_id="d#0", doc_id="d", score=1.0),)
    new = [PerQueryRow(id=q, query=q, hits=hits, answer=None, scores={"hit_at_5": 1.0},
                       latency_ms=1.0, error=None, first_relevant_rank={"chunk": 1, "doc": 1})
           for q in "abc"]
    old = [PerQueryRow(id=q, query=q, hits=hits, answer=None, scores={"hit_at_5": 1.0},
                       latency_ms=1.0, error=None) for q in "abc"]
    for b, c in ((new, old), (old, new)):
        result = compare_runs(_side("b", b), _side("c", c),
                              CompareOptions(primary="hit_at_5", resamples=100))
        assert [q.kind for q in result.queries] == ["Draw"] * 3 and result.verdict == "Same"


def _truth_row(qid, chunk, doc, **scores):
    hits = (Hit(rank=1, chunk_id="d#0", doc_id="d", score=1.0),)
    return PerQueryRow(id=qid, query=qid, hits=hits, answer=None, scores=scores, latency_ms=1.0,
                       error=None, first_relevant_rank={"chunk": chunk, "doc": doc})


def test_default_primary_follows_the_ground_truth_and_named_gates_must_exist():
    both = {"mrr": 1.0, "mrr_doc": 1.0, "ndcg_at_10_doc": 1.0, "hit_at_5": 1.0,
            "contains_all": None}
    chunk = [_truth_row(q, 1, 1, **both) for q in "abc"]
    doc_only = [_truth_row(q, None, 1, **{**both, "mrr": None, "hit_at_5": None})
                for q in "abc"]
    answers = [_truth_row(q, None, None, **{**{k: None for k in both}, "contains_all": 1.0})
               for q in "abc"]
    for rows, primary, level in ((chunk, "mrr", "chunk"), (doc_only, "ndcg_at_10_doc", "doc"),
                                 (answers, "contains_all", "none")):
        result = compare_runs(_side("b", rows), _side("c", rows), CompareOptions(resamples=100))
        assert [(m.name, m.role) for m in result.metrics] == [(primary, "primary")]
        assert result.level == level and {q.level for q in result.queries} == {level}
    # the golden set's primary_metric (a run tag) beats the default; --primary beats both
    tagged = {"kebab.primary_metric": "hit_at_5"}
    result = compare_runs(_side("b", chunk, **tagged), _side("c", chunk, **tagged),
                          CompareOptions(resamples=100))
    assert result.primary.name == "hit_at_5" and result.primary_source == \
        "golden set primary_metric"
    result = compare_runs(_side("b", chunk, **tagged), _side("c", chunk, **tagged),
                          CompareOptions(primary="mrr_doc", resamples=100))
    assert result.primary.name == "mrr_doc" and result.primary_source == "--primary"
    with pytest.raises(ComparisonRefused, match="unknown gated metric 'recall_at_100_doc'"):
        compare_runs(_side("b", chunk), _side("c", chunk),
                     CompareOptions(gates=("recall_at_100_doc",), resamples=100))
    with pytest.raises(ComparisonRefused, match="default primary metric 'mrr' has no values"):
        shallow = [_truth_row(q, 1, 1, hit_at_5=1.0) for q in "abc"]
        compare_runs(_side("b", shallow), _side("c", shallow), CompareOptions(resamples=100))


def test_same_inputs_twice_give_identical_statistics(store):
    outs = [_json(_compare(store, "base", "rand", "--format", "json", "--no-log", "--seed",
                           "7")[1]) for _ in range(2)]
    assert outs[0]["metrics"] == outs[1]["metrics"]
    assert outs[0]["settings"]["seed"] == 7


def test_chunker_change_falls_back_to_doc_level_and_strict_refuses(store):
    res, out = _compare(store, "base", "rechunk", "--format", "md", "--no-log")
    assert res.exit_code == 0, out
    assert out.startswith("# Compare: Same\n\n> **chunk ids are not comparable (chunker_version "
                          "structure-v3-max800-overlap100 → structure-v3-max800-overlap50): "
                          "DOC-LEVEL")
    assert "| mrr_doc (gate mrr) | primary |" in out
    res, out = _compare(store, "base", "rechunk", "--gate", "hit_at_5", "--format", "md",
                        "--no-log")
    assert "| hit_at_5_doc (gate hit_at_5) | gate |" in out
    res, out = _compare(store, "base", "rechunk", "--strict", "--no-log")
    assert res.exit_code == 2
    assert "chunk ids are not comparable" in out and "(--strict refuses this)" in out


def test_strict_refuses_unknown_provenance(store):
    res, out = _compare(store, "base", "same", "--strict", "--no-log")
    # the test store's runs are made outside a git checkout: commit "unknown"
    assert res.exit_code == 2
    assert "provenance: git commit unknown (baseline unknown, candidate unknown) " \
           "(--strict refuses this)" in out


def test_golden_mismatch_refused_unless_allowed(store):
    res, out = _compare(store, "base", "small_base", "--no-log")
    assert res.exit_code == 2
    assert "different golden sets" in out and "--allow-golden-mismatch" in out
    res, out = _compare(store, "base", "small_base", "--allow-golden-mismatch", "--format",
                        "json", "--no-log")
    assert res.exit_code in (0, 1), out
    data = _json(out)
    assert data["n"] == {"queries": 3, "with_ground_truth": 3, "baseline_only": 40,
                         "candidate_only": 0}
    assert any("dropped 40 baseline-only and 0 candidate-only queries; 3 shared" in w
               for w in data["warnings"])


def test_unfinished_run_is_refused_naming_its_status(store):
    from kebab_mlflow.tracking.store import Tracker

    tracker = Tracker(store["uri"])
    run_id = tracker.start_run(tracker.experiment_id("kebab-eval"), "killed-run",
                               {"kebab.kind": "eval"})
    tracker.end_run(run_id, "KILLED")
    res, out = _compare(store, "base", run_id)
    assert res.exit_code == 2
    assert f"candidate: run {run_id} (killed-run) is KILLED; only FINISHED runs can be " \
           "compared" in out
    sweep_id = tracker.start_run(tracker.experiment_id("kebab-eval"), "a-sweep",
                                 {"kebab.kind": "sweep"})
    tracker.end_run(sweep_id, "FINISHED")
    res, out = _compare(store, sweep_id, "base")
    assert res.exit_code == 2
    assert f"baseline: run {sweep_id} (a-sweep) is a sweep parent, not an eval run" \
        in " ".join(out.split())


def test_tampered_per_query_is_refused(store, tmp_path):
    run_id = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store["uri"],
                                run_name="tampered")).run_id
    art = Path(urlparse(_client(store["uri"]).get_run(run_id).info.artifact_uri).path)
    pq = art / "per_query.jsonl"
    pq.write_bytes(pq.read_bytes()[:-200])  # truncated
    res, out = _compare(store, "base", run_id, "--no-log")
    assert res.exit_code == 2
    assert f"per_query.jsonl of run {run_id} does not match its kebab.per_query_sha256 tag" in out
    assert "tampered with or truncated" in out


def test_a_local_artifact_store_is_read_in_place_and_a_remote_one_downloaded(store,
                                                                           monkeypatch):
    """Two 1M-query per_query.jsonl are 17 GB: compare reads a local store's files where they
    are; a store it cannot read in place (a server's proxied artifacts) is downloaded."""
    from kebab_mlflow.tracking.store import Tracker

    expected, _ = _compare(store, "base", "same", "--no-log", "--format", "json")
    downloads = []
    real_download = Tracker.download_artifact
    monkeypatch.setattr(Tracker, "download_artifact",
                        lambda self, *a: downloads.append(a) or real_download(self, *a))
    res, out = _compare(store, "base", "same", "--no-log", "--format", "json")
    assert res.exit_code == 0 and downloads == []
    assert _json(out) == _json(expected.output)
    monkeypatch.setattr(Tracker, "_local_artifact", lambda self, run_id, path: None)
    res, out = _compare(store, "base", "same", "--no-log", "--format", "json")
    assert res.exit_code == 0 and [a[1] for a in downloads] == ["per_query.jsonl"] * 2
    assert _json(out) == _json(expected.output)


@pytest.mark.parametrize("args, message", [
    (["--gate", "hit_at_50", "--gate", "mrr"],
     "--gate: unknown gated metric 'hit_at_50' (not in the per-query scores of both runs); "
     "valid metrics: abstention_accuracy, ask_grounded_rate, citation_validity, contains_all, "
     "error_rate, hit_at_1,"),
    (["--resamples", "1000000000"], "--resamples must be in [1, 1,000,000], got 1,000,000,000"),
    (["--margin", "-0.1"], "--margin must be >= 0, got -0.1"),
    (["--max-regressions", "-1"], "--max-regressions must be >= 0, got -1"),
    (["--alpha", "1.5"], "--alpha must be in (0, 1), got 1.5"),
    (["--format", "xml"], "Invalid value for '--format'"),
])
def test_bad_options_exit_2(store, args, message):
    res, out = _compare(store, "base", "same", "--no-log", *args)
    assert res.exit_code == 2, out
    assert message in " ".join(out.split()) or message in out


def test_unknown_and_ambiguous_run_references_exit_2(store):
    res, out = _compare(store, "base", "nope", "--no-log")
    assert res.exit_code == 2 and "no run named or with id 'nope'" in out
    res, out = _compare(store, "@baseline", "base", "--no-log")
    assert res.exit_code == 2 and "has no baseline" in out


def test_compare_help_does_not_import_mlflow():
    code = ("import sys; sys.argv = ['kebab-mlflow', 'compare', '--help']\n"
            "from kebab_mlflow import cli\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "print('MLFLOW' if 'mlflow' in sys.modules else 'CLEAN')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert "--allow-golden-mismatch" in out and out.strip().endswith("CLEAN")


# ---------------------------------------------------------------------------------------------
# hand-made runs: the classification table, directions, privacy, JSON hygiene


def _row(qid, mrr, hits=1, contains=None, refused=None, score=1.0, **scores):
    answer = None if refused is None else Answer(text="t",
                                                 refusal_reason="gate" if refused else None)
    hit_list = tuple(Hit(rank=i + 1, chunk_id=f"d{i}#0", doc_id=f"d{i}", score=score)
                     for i in range(hits))
    return PerQueryRow(id=qid, query=f"query {qid}?", hits=hit_list, answer=answer,
                       scores={"mrr": mrr, "mrr_doc": mrr, "hit_at_5": None if mrr is None else
                        float(mrr >= 0.2), "contains_all": contains, **scores}, latency_ms=1.0,
                       error=None)


def _side(run_id, rows, **tags):
    base_tags = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": "g",
                 "kebab.git_commit": "abc", "kebab.git_dirty": "false", **tags}
    params = {"parser_version": "p1", "chunker_version": "c1", "embedding_version": "e",
              "index_version": "i", "prompt_template_version": "t"}
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=base_tags,
                   rows=tuple(rows), per_query_sha256="x")


@pytest.mark.parametrize("base_mrr, cand_mrr, base_hits, cand_hits, kind", [
    (0.0, 1.0, 10, 10, "Win"),            # miss -> hit
    (1.0, 0.0, 10, 10, "Regression"),     # hit -> miss, ground truth
    (None, None, 10, 0, "Loss"),          # results -> none, no ground truth
    (None, None, 0, 10, "Win"),
    (0.5, 1.0, 10, 10, "Win"),            # rank 2 -> 1
    (1 / 3, 1 / 7, 10, 10, "Loss"),       # rank 3 -> 7
    (0.25, 0.25, 10, 10, "Draw"),
    (0.0, 0.0, 10, 10, "Draw"),
    (None, None, 10, 10, "Draw"),
])
def test_classification_table(base_mrr, cand_mrr, base_hits, cand_hits, kind):
    b = _side("b", [_row("q", base_mrr, base_hits)])
    c = _side("c", [_row("q", cand_mrr, cand_hits)])
    (q,) = compare_runs(b, c, CompareOptions(primary="mrr_doc", resamples=100)).queries
    assert q.kind == kind


def test_flips_and_top_score_delta():
    b = _side("b", [_row("q", 1.0, contains=1.0, refused=False, score=2.0)])
    c = _side("c", [_row("q", 1.0, contains=0.0, refused=True, score=1.25)])
    (q,) = compare_runs(b, c, CompareOptions(gates=("mrr",), resamples=100)).queries
    assert (q.kind, q.contains_all, q.refusal, q.top_score_delta) == ("Draw", "lost", "started",
                                                                      -0.75)


def test_lower_is_better_metric_counts_an_increase_as_worse():
    rows_b = [_row(f"q{i}", 1.0, no_hit_rate=0.0) for i in range(40)]
    rows_c = [_row(f"q{i}", 1.0, no_hit_rate=1.0 if i < 20 else 0.0) for i in range(40)]
    result = compare_runs(_side("b", rows_b), _side("c", rows_c),
                          CompareOptions(primary="no_hit_rate", resamples=2000))
    (m,) = result.metrics
    assert (m.higher_is_better, m.delta, m.significant, result.verdict) == (
        False, 0.5, "worse", "Regressed")


def test_large_set_single_regression_is_not_regressed_by_the_small_set_rule():
    rows_b = [_row(f"q{i}", 1.0) for i in range(30)]
    rows_c = [_row(f"q{i}", 0.0 if i == 0 else 1.0) for i in range(30)]
    result = compare_runs(_side("b", rows_b), _side("c", rows_c),
                          CompareOptions(gates=("mrr",), resamples=2000))
    assert result.counts["Regression"] == 1 and result.verdict == "Same"


def test_private_sets_keep_query_text_out_and_json_has_no_nan():
    b = _side("b", [_row("q1", 1.0), _row("q2", None)], **{"kebab.private": "true"})
    c = _side("c", [_row("q1", 0.0), _row("q2", None)])
    result = compare_runs(b, c, CompareOptions(gates=("mrr", "contains_all"), resamples=200))
    assert "query q1?" not in to_markdown(result) and "query q1?" not in dumps(result)
    assert "(private)" in to_markdown(result)
    data = to_json(result)
    contains = data["metrics"][1]
    assert contains["n"] == 0 and contains["delta"] is None and contains["p_holm"] is None
    json.dumps(data, allow_nan=False)
    assert any("contains_all has no query scored by both runs" in w for w in result.warnings)


def test_streamed_json_is_the_whole_tree_dump_byte_for_byte():
    """dumps/iter_dumps render the query diffs one at a time; the reference is json.dumps of
    the whole to_json tree (what compare printed before), on ranks, flips, a NaN top-score
    delta (→ null), non-ASCII and newlines in the query text."""
    b = [_row("q1", 1.0), _row("q2", 0.5, score=float("nan")), _row("q3", None, hits=0),
         _row("é\n", 0.0, contains=1.0), _row("q5", 0.25, refused=False)]
    c = [_row("q1", 0.0), _row("q2", 1.0), _row("q3", None, hits=2), _row("é\n", 1.0,
         contains=0.0), _row("q5", 0.25, refused=True)]
    result = compare_runs(_side("b", b), _side("c", c),
                          CompareOptions(gates=("mrr",), resamples=200))
    whole = json.dumps(to_json(result), indent=1, allow_nan=False, ensure_ascii=False)
    assert dumps(result) == "".join(iter_dumps(result)) == whole
    queries = json.loads(whole)["queries"]
    assert len(queries) == 5 and {q["kind"] for q in queries} >= {"Regression", "Win"}
    assert next(q for q in queries if q["id"] == "q2")["top_score_delta"] is None


def test_every_refusal_is_listed_at_once():
    b = _side("b", [_row("q", 1.0)], **{"kebab.git_dirty": "true"})
    c = RunSide(run_id="c", name="c", status="FINISHED", params={"chunker_version": "c2"},
                tags={"kebab.golden_sha256": "other", "kebab.per_query_sha256": "y",
                 "kebab.git_commit": "def"}, rows=(_row("q", 1.0), _row("q", 1.0)),
                per_query_sha256="z")
    with pytest.raises(ComparisonRefused) as info:
        compare_runs(b, c, CompareOptions(strict=True, resamples=100))
    text = str(info.value)
    for part in ("does not match its kebab.per_query_sha256 tag", "repeats query ids: q",
                 "different golden sets", "chunk ids are not comparable",
                 "different git commits (baseline abc, candidate def)",
                 "the baseline run was made from a dirty working tree"):
        assert part in text, part
    assert info.value.exit_code == 2


def test_doc_variants():
    assert [doc_variant(n) for n in ("hit_at_5", "mrr", "precision_at_5_chunk",
                                     "recall_at_10_doc", "contains_all")] == [
        "hit_at_5_doc", "mrr_doc", "precision_at_5_doc", "recall_at_10_doc", "contains_all"]


def test_on_a_terminal_compare_says_its_steps_and_in_a_log_it_does_not(store, monkeypatch):
    import io

    from rich.console import Console

    from kebab_mlflow.cli import console

    res, out = _compare(store, "base", "rechunk", "--no-log")
    assert res.exit_code == 0 and "… " not in out  # CliRunner's stderr is no terminal
    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=True, width=80))
    res, _ = _compare(store, "base", "rechunk", "--no-log")
    assert res.exit_code == 0
    steps = [line for line in screen.getvalue().splitlines() if line.startswith("… ")]
    # a chunker change: doc level, so the bounds for unjudged hits run after the reading
    assert [s.split()[1] for s in steps] == ["reading", "bounds"]
    assert "base and rechunk" in steps[0] and "--unjudged off" in steps[1]


def test_bounds_that_cannot_be_had_are_a_reports_note_and_the_gates_refusal(store, tmp_path,
                                                                             monkeypatch):
    from kebab_mlflow.errors import GoldenSetError
    from kebab_mlflow.golden import GoldenFile

    gone = tmp_path / "gone.yaml"
    res, out = _compare(store, "base", "rechunk", "--no-log", "--format", "json",
                        "--golden", str(gone))
    assert res.exit_code == 0, out
    [note] = [n for n in _json(out)["notes"] if n.startswith("no bounds for unjudged hits")]
    assert "gone.yaml" in note
    res, out = _compare(store, "base", "rechunk", "--no-log", "--unjudged", "gate",
                        "--golden", str(gone))
    assert res.exit_code == 2 and "gone.yaml" in out

    def changed(self, size, sink):  # the file changed after its digest was checked
        raise GoldenSetError(f"golden set {self.path} changed while it was being read")

    monkeypatch.setattr(GoldenFile, "stream", changed)
    res, out = _compare(store, "base", "rechunk", "--no-log", "--format", "json")
    assert res.exit_code == 0, out
    assert "no bounds for unjudged hits: golden set" in " ".join(_json(out)["notes"])
    assert "changed while it was being read" in " ".join(_json(out)["notes"])
