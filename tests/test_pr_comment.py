"""`compare --format pr-comment` (issue 31): the verdict line, the primary metric's change with
CI, p and MDE, the worst per-query changes with what took their place, queries in one run
only, versions that differ, links, never private text, within GitHub's comment limit."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kebab_mlflow.comparison.pr_comment import (
    GITHUB_COMMENT_LIMIT,
    MARKER,
    run_link,
    to_pr_comment,
    worst_changes,
)
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.verdict import compare_runs
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.records import Hit

N = 40
OPTIONS = CompareOptions(resamples=2000, seed=1)


def _row(qid: str, first_rank: int, text: str) -> PerQueryRow:
    """A doc-level query whose only relevant document, ``rel-<qid>``, is at ``first_rank``
    (0 = a miss: not in the 10 hits)."""
    hits = tuple(Hit(rank=r, chunk_id=f"{qid}-d{r}#0", doc_id=f"{qid}-d{r}",
                     score=10.0 - r) for r in range(1, 11))
    if first_rank:
        hits = tuple(replace(h, doc_id=f"rel-{qid}") if h.rank == first_rank else h
                     for h in hits)
    ndcg = 1.0 / __import__("math").log2(first_rank + 1) if first_rank else 0.0
    return PerQueryRow(id=qid, query=text, hits=hits, answer=None,
                       scores={"ndcg_at_10_doc": ndcg}, latency_ms=1.0, error=None,
                       first_relevant_rank={"chunk": None, "doc": first_rank})


def _side(run_id: str, ranks: dict[str, int], private: bool = False,
          index_version: str = "bm25-k1=0.9", golden: str = "0123456789abcdef") -> RunSide:
    params = {"parser_version": "p1", "chunker_version": "c1", "embedding_version": "e",
              "index_version": index_version, "prompt_template_version": "t",
              "golden_set": "tiny-docs"}
    tags = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": golden,
            "kebab.git_commit": "abc", "kebab.git_dirty": "false",
            "kebab.private": "true" if private else "false"}
    rows = tuple(_row(q, r, f"what about topic {q}?") for q, r in ranks.items())
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=tags,
                   rows=rows, per_query_sha256="x")


BASE = {f"q{i:02d}": 1 + i % 3 for i in range(N)}  # ranks 1, 2, 3, 1, 2, 3, ...
# the candidate loses twelve hits (q00..q11) and moves q12..q15 down by two ranks
CAND = {q: (0 if i < 12 else r + 2 if i < 16 else r) for i, (q, r) in enumerate(BASE.items())}


def _comment(private: bool = False, **kw):
    base = _side("base", {**BASE, "only-base": 1}, private)
    # one query more on each side: another revision of the golden set, compared on the shared
    cand = _side("cand", {**CAND, "only-cand": 1}, private, index_version="bm25-k1=1.5",
                 golden="fedcba9876543210")
    c = compare_runs(base, cand, CompareOptions(resamples=2000, seed=1,
                                                allow_golden_mismatch=True))
    return c, to_pr_comment(c, base, cand, **kw)


def test_the_comment_leads_with_the_verdict_and_the_primary_change():
    c, text = _comment()
    lines = text.splitlines()
    assert lines[0] == MARKER and lines[1].startswith("### 🔴 Regressed: `cand` vs baseline "
                                                      "`base` on tiny-docs (fedcba987654)")
    # the mean paired delta, computed here from the ranks: 1/log2(rank+1) per query
    import math
    delta = sum((1 / math.log2(CAND[q] + 1) if CAND[q] else 0) - 1 / math.log2(BASE[q] + 1)
                for q in BASE) / N
    primary = next(line for line in lines if line.startswith("**ndcg"))
    assert primary.startswith("**ndcg_at_10_doc**") and f"Δ {delta:+.4f}" in primary
    m = c.primary
    assert f"95% CI [{m.ci_low:+.4f}, {m.ci_high:+.4f}]" in primary and f"p {m.p_value:.4f}" in (
        primary)
    assert f"could not have detected a drop below **{m.mde:.4f}**" in lines[
        lines.index(primary) + 1]
    assert "> ⚠️ different golden sets" in text


def test_the_ten_worst_queries_regressions_first_with_what_took_their_place():
    _, text = _comment()
    table = [line for line in text.splitlines() if line.startswith(("| q0", "| q1"))]
    assert len(table) == 10
    # Regressions (a hit lost) first, the best rank lost first: rank-1 losses are q00, q03,
    # q06, q09, then the rank-2 ones q01, q04, q07, q10, then rank 3: q02, q05
    ids = [line.split(":")[0].removeprefix("| ") for line in table]
    assert ids == ["q00", "q03", "q06", "q09", "q01", "q04", "q07", "q10", "q02", "q05"]
    assert table[0] == ("| q00: what about topic q00? | 1 → miss | `q00-d1` (score 9.000) |")
    assert "10 worst of 16 queries that got worse" in text


def test_losses_are_ordered_by_their_drop_in_reciprocal_rank():
    c, _ = _comment()
    losses = [q for q in worst_changes(c.queries) if q.kind == "Loss"]
    assert [(q.id, q.baseline_rank, q.candidate_rank) for q in losses] == [
        ("q12", 1, 3), ("q15", 1, 3), ("q13", 2, 4), ("q14", 3, 5)]


def test_one_run_only_versions_and_links():
    _, text = _comment()
    assert "- 1 queries only in the baseline run: only-base" in text
    assert "- 1 queries only in the candidate run: only-cand" in text
    assert "| index_version | `bm25-k1=0.9` | `bm25-k1=1.5` |" in text
    assert "parser_version" not in text  # only the versions that differ
    assert "pass --ui-url for links" in text
    links = (run_link("http://ui:5000/", "7", "base", traces=True),
             run_link("http://ui:5000", "7", "cand", traces=False))
    _, linked = _comment(links=links)
    assert ("- baseline: [base](http://ui:5000/#/experiments/7/runs/base) · "
            "[traces](http://ui:5000/#/experiments/7/runs/base/traces)") in linked
    assert "- candidate: [cand](http://ui:5000/#/experiments/7/runs/cand)\n" in linked


def test_a_private_golden_set_shows_ids_never_query_text():
    _, text = _comment(private=True)
    assert "what about topic" not in text
    assert "| q00 | 1 → miss |" in text


@pytest.mark.parametrize("limit", [GITHUB_COMMENT_LIMIT, 3000, 1500])
def test_the_comment_fits_the_limit_keeping_the_marker(limit):
    long = {f"q{i:03d}": 1 for i in range(300)}
    base = _side("base", long)
    base = RunSide(**{**base.__dict__, "rows": tuple(
        PerQueryRow(**{**r.__dict__, "query": "x" * 5000}) for r in base.rows)})
    cand = _side("cand", {q: 0 for q in long})
    c = compare_runs(base, cand, OPTIONS)
    text = to_pr_comment(c, base, cand, limit=limit)
    assert len(text) <= limit and text.startswith(MARKER)
    assert re.search(r"x{159}…", text) or limit < 3000  # a long query is cut, not dropped


def test_compare_format_pr_comment_from_the_cli(store_uri, tmp_path):
    from typer.testing import CliRunner

    from kebab_mlflow.cli import app
    from tests.conftest import GOLDEN, KB, runs_in

    runner = CliRunner()
    for name, extra in (("bm25", ["--traces", "failures"]),
                        ("random", ["--preset", "random_retrieval"])):
        res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--corpus", str(KB),
                                  "--tracking-uri", store_uri, "--run-name", name, *extra])
        assert res.exit_code == 0, res.output
    out = tmp_path / "comment.md"
    res = runner.invoke(app, ["compare", "bm25", "random", "--tracking-uri", store_uri,
                              "--format", "pr-comment", "--ui-url", "http://mlflow.test",
                              "--out", str(out), "--no-log"])
    assert res.exit_code == 1, res.output  # the verdict's exit code, as for every format
    text = out.read_text()
    assert text.startswith(MARKER + "\n### 🔴 Regressed: `random` vs baseline `bm25`")
    runs = {r.info.run_name: r for r in runs_in(store_uri)}
    bm25, exp = runs["bm25"].info.run_id, runs["bm25"].info.experiment_id
    assert (f"[bm25](http://mlflow.test/#/experiments/{exp}/runs/{bm25}) · [traces]"
            f"(http://mlflow.test/#/experiments/{exp}/runs/{bm25}/traces)") in text
    assert f"/runs/{runs['random'].info.run_id})\n" in text  # no traces: no traces link
    assert "| index_version |" in text
