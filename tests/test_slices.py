"""compare --by (issue 27 item 5): the paired comparison per slice of the queries, Holm across
the slices, a slice table in every format and the regressed slices named in the headline."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats as sp
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.cli.compare_table import render_table
from kebab_mlflow.comparison import to_json, to_junit, to_markdown
from kebab_mlflow.comparison.pr_comment import to_pr_comment
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.slices import query_labels, with_slices
from kebab_mlflow.comparison.verdict import compare_runs
from kebab_mlflow.errors import InputError
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.golden import GoldenQuery, GoldenSet, SliceKey, load_golden_set
from tests.test_gate_abstention import answers_golden, run_refuser_then_answerer

runner = CliRunner()


def _row(qid: str, ndcg: float) -> PerQueryRow:
    scores = {"mrr": None, "mrr_doc": 1.0, "ndcg_at_10_doc": ndcg}
    return PerQueryRow(id=qid, query=f"claim {qid}", hits=(), answer=None, scores=scores,
                       latency_ms=1.0, error=None, first_relevant_rank={"chunk": None, "doc": 1})


def _side(run_id: str, rows: list[PerQueryRow]) -> RunSide:
    tags = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": "g",
            "kebab.git_commit": "abc", "kebab.git_dirty": "false"}
    params = {"parser_version": "p1", "chunker_version": "c1", "embedding_version": "e",
              "index_version": "i", "prompt_template_version": "t"}
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=tags,
                   rows=tuple(rows), per_query_sha256="x")


def _golden(langs: dict[str, str | None], categories: dict[str, tuple[str, ...]] | None = None
            ) -> GoldenSet:
    categories = categories or {}
    return GoldenSet(name="mixed", digest="d" * 64, queries=tuple(
        GoldenQuery(id=qid, query="q", expected_doc_ids={"d1": 1}, lang=lang,
                    hardcase_categories=categories.get(qid, ())) for qid, lang in langs.items()))


def _mixed() -> tuple[RunSide, RunSide, GoldenSet]:
    """200 English queries whose changes cancel out (110 × +0.5, 90 × −0.5: sum +10) and 40
    Korean ones that all lose 0.25 (sum −10): overall the mean delta is exactly 0."""
    base = [_row(f"en{i}", 0.5) for i in range(200)] + [_row(f"ko{i}", 0.75) for i in range(40)]
    cand = ([_row(f"en{i}", 1.0 if i < 110 else 0.0) for i in range(200)]
            + [_row(f"ko{i}", 0.5) for i in range(40)])
    langs = {f"en{i}": "en" for i in range(200)} | {f"ko{i}": "ko" for i in range(40)}
    return _side("base", base), _side("cand", cand), _golden(langs)


def test_a_loss_only_on_korean_queries_is_regressed_only_on_ko():
    base, cand, golden = _mixed()
    overall = compare_runs(base, cand, CompareOptions(resamples=2000))
    assert overall.verdict == "Same" and overall.primary.delta == pytest.approx(0.0, abs=1e-12)
    result = with_slices(overall, base, cand, golden, SliceKey.LANG)
    assert result.verdict == "Regressed" and result.exit_code == 1
    report = result.slices
    assert report is not None and report.tests == 2 and report.unlabelled == 0
    en, ko = report.slices
    assert (en.label, en.n, ko.label, ko.n) == ("en", 200, "ko", 40)
    # hand-computed exact sign-flip p: 40 concordant equal losses: 2^(1−40); the English
    # slice's ±0.5 deltas: P(|H − 100| ≥ 10) with H ~ Binomial(200, 1/2)
    p_ko, p_en = 2.0 ** -39, 2 * sp.binom.cdf(90, 200, 0.5)
    assert ko.metrics[0].p_value == pytest.approx(p_ko, rel=1e-9)
    assert en.metrics[0].p_value == pytest.approx(p_en, rel=1e-9)
    # Holm over the two slice tests: the smaller p doubled, the larger kept (monotone)
    assert ko.metrics[0].p_holm == pytest.approx(2 * p_ko, rel=1e-9)
    assert en.metrics[0].p_holm == pytest.approx(p_en, rel=1e-9)
    assert ko.metrics[0].delta == pytest.approx(-0.25) and ko.metrics[0].mde_alpha == 0.025
    assert (ko.verdict, en.verdict) == ("Regressed", "Same")
    headline = "Regressed only on ko (n=40)"
    assert to_markdown(result).startswith(f"# Compare: {headline}")
    assert headline in render_table(result, width=None, wide=True, color=False)
    assert result.reasons[0].startswith("slice regressed (--by lang, Holm over 2 slice tests): "
                                        "ko (n=40): ndcg_at_10_doc worse (delta -0.2500")
    data = json.loads(json.dumps(to_json(result)))
    assert data["slices"]["regressed"] == ["ko"] and data["slices"]["overall_verdict"] == "Same"
    assert [s["verdict"] for s in data["slices"]["slices"]] == ["Same", "Regressed"]
    assert "| ko | 40 | 40 | 0 | ndcg_at_10_doc (n=40) | -0.2500 |" in to_markdown(result)
    comment = to_pr_comment(result, base, cand)
    assert f"🔴 {headline}" in comment
    assert "- 🔴 `ko` (n=40): **ndcg_at_10_doc** 0.7500 → 0.5000 (Δ -0.2500" in comment
    assert "slice regressed" in to_junit(result)


def test_slices_without_a_regression_leave_the_verdict_and_say_so():
    base, _, golden = _mixed()
    result = with_slices(compare_runs(base, base, CompareOptions(resamples=500)), base, base,
                         golden, SliceKey.LANG)
    assert result.verdict == "Same" and result.slices is not None
    assert not result.slices.regressed and result.slices.tests == 0  # all unchanged
    assert to_markdown(result).startswith("# Compare: Same\n")
    assert "**Slices by lang**: none regressed (2 slices, 0 too small to carry a verdict)." \
        in to_pr_comment(result, base, base)


def test_a_small_slice_is_too_small_and_a_query_is_in_each_of_its_categories():
    base, cand, _ = _mixed()
    categories = {"en0": ("numeric",), "en1": ("numeric", "paraphrase"), "ko0": ("paraphrase",)}
    golden = _golden({r.id: None for r in base.rows}, categories)
    result = with_slices(compare_runs(base, cand, CompareOptions(resamples=500)), base, cand,
                         golden, SliceKey.HARDCASE_CATEGORY)
    report = result.slices
    assert report is not None
    assert [(s.label, s.n, s.verdict) for s in report.slices] == [
        ("numeric", 2, "too small"), ("paraphrase", 2, "too small")]
    assert report.unlabelled == 237 and result.verdict == "Same"
    assert "fewer than 30 judged queries is too small to carry a verdict" in to_markdown(result)


def test_no_labelled_query_is_refused_naming_the_golden_set():
    base, cand, _ = _mixed()
    golden = _golden({r.id: None for r in base.rows})
    with pytest.raises(InputError) as err:
        with_slices(compare_runs(base, cand, CompareOptions(resamples=200)), base, cand, golden,
                    SliceKey.LANG)
    assert "no compared query has a lang label" in str(err.value)


@pytest.mark.parametrize("by, labels", [
    (SliceKey.QUERY_TYPE, ("abstention",)), (SliceKey.LANG, ("ko",)),
    (SliceKey.METADATA_FIELD, ()), (SliceKey.HARDCASE_CATEGORY, ("a", "b")),
    (SliceKey.GROUP, ("p1",))])
def test_query_labels_read_the_golden_fields(by, labels):
    q = GoldenQuery(id="q", query="x", query_type="abstention", lang="ko",
                    hardcase_categories=("a", "b"), group="p1")
    assert query_labels(q, by) == labels


# --------------------------------------------------------------------------- the CLI, end to end


def test_cli_by_query_type_names_the_abstention_slice(tmp_path, store_uri):
    golden = answers_golden(tmp_path / "golden.yaml", answerable=40, unanswerable=14,
                            types=({"query_type": "single_doc"}, {"query_type": "abstention"}))
    run_refuser_then_answerer(tmp_path, golden, store_uri)
    res = runner.invoke(app, ["compare", "base", "cand", "--by", "query_type", "--format",
                              "json", "--no-log", "--tracking-uri", store_uri])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    slices = {s["label"]: s for s in data["slices"]["slices"]}
    assert data["slices"]["regressed"] == ["abstention"]
    acc = next(m for m in slices["abstention"]["metrics"] if m["name"] == "abstention_accuracy")
    # 14 correct refusals → answers: exact p 2^(1−14), the only slice test that changed
    assert (acc["n"], acc["delta"], acc["p_holm"]) == (14, -1.0, pytest.approx(2.0 ** -13))
    assert slices["single_doc"]["verdict"] == "too small"  # no per-query evidence: 0 judged
    assert data["slices"]["golden"] == f"answers@{load_golden_set(golden).digest[:8]}"
    table = runner.invoke(app, ["compare", "base", "cand", "--by", "query_type", "--no-log",
                                "--tracking-uri", store_uri])
    assert "Regressed, and on abstention (n=14)" in " ".join(table.stdout.split())
    bad = runner.invoke(app, ["compare", "base", "cand", "--by", "lang", "--no-log",
                              "--tracking-uri", store_uri])
    assert bad.exit_code == 2 and "no compared query has a lang label" in bad.output
    assert not math.isnan(acc["mde"])
