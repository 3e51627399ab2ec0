"""Abstention in the gate (issue 27 item 1): a correct refusal is NaN for contains_all, so the
verdict gates abstention_accuracy, classes abstention outcome changes per query and counts
abstention cases in the small-set rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.comparison.verdict import abstention_kind, compare_runs
from kebab_mlflow.errors import PerQueryError
from kebab_mlflow.evaluation.per_query import PerQueryRow, read_per_query
from kebab_mlflow.golden import GoldenQuery
from kebab_mlflow.metrics.answers import abstention_accuracy, abstention_outcome
from kebab_mlflow.records import Answer, Hit

runner = CliRunner()

REFUSAL = Answer(text="", refusal_reason="no evidence", confidence=0.2)
CITED = Answer(text="It is 12 euros.", citations=("c1",), confidence=0.9)


def _query(answerable: bool) -> GoldenQuery:
    return GoldenQuery(id="q", query="text?", ask=True, answerable=answerable,
                       must_contain=("12 euros",) if answerable else ())


@pytest.mark.parametrize("answerable, answer, accuracy, outcome", [
    (False, REFUSAL, 1.0, "correct_refusal"),
    (False, CITED, 0.0, "incorrect_answer"),
    (False, Answer(text="12", confidence=0.5), 0.0, "boundary_partial"),  # uncited answer
    (False, None, None, "boundary_partial"),  # the query raised: error_rate's, not accuracy's
    (True, CITED, None, None),  # answered: contains_all's to judge
    (True, REFUSAL, 0.0, None),
])
def test_abstention_accuracy_scores_the_refusal_decision(answerable, answer, accuracy, outcome):
    query = _query(answerable)
    value = abstention_accuracy(query, answer)
    assert (np.isnan(value) if accuracy is None else value == accuracy)
    assert abstention_outcome(query, answer) == outcome


@pytest.mark.parametrize("before, after, kind", [
    ("correct_refusal", "incorrect_answer", "Regression"),
    ("incorrect_answer", "correct_refusal", "Win"),
    ("correct_refusal", "boundary_partial", "Loss"),
    ("boundary_partial", "correct_refusal", "Win"),
    ("boundary_partial", "incorrect_answer", "Loss"),
    ("correct_refusal", "correct_refusal", "Draw"),
    (None, "correct_refusal", None),
])
def test_abstention_outcome_changes_are_classed(before, after, kind):
    assert abstention_kind(before, after) == kind


def _row(qid: str, answerable: bool, refused: bool) -> PerQueryRow:
    answer = Answer(text="" if refused else "an answer", citations=() if refused else ("c1",),
                    refusal_reason="no evidence" if refused else None)
    contains = (None if refused else 0.0) if not answerable else (0.0 if refused else 1.0)
    accuracy = None if answerable and not refused else float(refused and not answerable)
    scores = {"contains_all": contains, "abstention_accuracy": accuracy,
              "refusal_rate": float(refused), "mrr": None, "mrr_doc": None}
    outcome = None if answerable else ("correct_refusal" if refused else "incorrect_answer")
    return PerQueryRow(id=qid, query=None,
                       hits=(Hit(rank=1, chunk_id="c1", doc_id="d1", score=1.0),),
                       answer=answer, scores=scores, latency_ms=1.0, error=None,
                       first_relevant_rank={"chunk": None, "doc": None}, abstention=outcome)


def _side(run_id: str, rows: list[PerQueryRow]) -> RunSide:
    tags = {"kebab.per_query_sha256": "x", "kebab.golden_sha256": "g",
            "kebab.git_commit": "abc", "kebab.git_dirty": "false"}
    params = {k: "v1" for k in ("parser_version", "chunker_version", "embedding_version",
                                "index_version", "prompt_template_version")}
    return RunSide(run_id=run_id, name=run_id, status="FINISHED", params=params, tags=tags,
                   rows=tuple(rows), per_query_sha256="x")


def _answer_set(n_answerable: int, n_unanswerable: int, candidate_refuses: bool
                ) -> tuple[RunSide, RunSide]:
    base = [_row(f"a{i}", True, False) for i in range(n_answerable)]
    base += [_row(f"u{i}", False, True) for i in range(n_unanswerable)]
    cand = [_row(f"a{i}", True, False) for i in range(n_answerable)]
    cand += [_row(f"u{i}", False, candidate_refuses) for i in range(n_unanswerable)]
    return _side("base", base), _side("cand", cand)


def test_a_candidate_that_stops_refusing_regresses_on_abstention_accuracy():
    base, cand = _answer_set(20, 20, candidate_refuses=False)
    result = compare_runs(base, cand, CompareOptions(seed=1))
    assert result.verdict == "Regressed" and result.exit_code == 1
    assert [(m.name, m.role) for m in result.metrics] == [("contains_all", "primary"),
                                                          ("abstention_accuracy", "gate")]
    acc = result.metrics[1]
    # hand-computed: the 20 unanswerable drop from 1 to 0 (the answered answerable: NaN)
    assert (acc.n, acc.baseline, acc.candidate, acc.delta) == (20, 1.0, 0.0, -1.0)
    assert acc.significant == "worse"
    # contains_all: unanswerable correctly refused is NaN, so only the answerable 20 pair up
    assert result.primary.n == 20 and result.primary.unchanged
    # the 20 abstention cases are the judged ones (the answerable have no retrieval truth)
    assert result.counts["Regression"] == 20 and result.n_with_truth == 20
    assert result.level == "abstention"
    regressed = [q for q in result.queries if q.kind == "Regression"]
    assert {q.abstention for q in regressed} == {"correct_refusal → incorrect_answer"}


def test_the_reverse_is_a_win_and_the_gate_can_be_left_out():
    cand, base = _answer_set(20, 20, candidate_refuses=False)
    result = compare_runs(base, cand)
    assert result.verdict == "Better" and result.counts["Win"] == 20
    left_out = compare_runs(cand, base, CompareOptions(abstention_gate=False))
    assert [m.name for m in left_out.metrics] == ["contains_all"]
    # without the gate only the small-set rule sees the 20 per-query Regressions
    assert left_out.verdict == "Regressed" and left_out.reasons[0].startswith("small set: 20")


def test_the_small_set_rule_counts_abstention_cases():
    base, cand = _answer_set(5, 5, candidate_refuses=True)
    cand_rows = list(cand.rows)
    cand_rows[-1] = _row("u4", False, False)  # one correct refusal becomes an answer
    result = compare_runs(base, _side("cand", cand_rows), CompareOptions(abstention_gate=False))
    assert result.verdict == "Regressed"
    assert result.reasons == ("small set: 5 queries with ground truth (< 30, 5 of them "
                              "abstention cases) and 1 Regression query(ies) at abstention "
                              "level",)


def test_an_unknown_abstention_outcome_is_refused_naming_the_line(tmp_path: Path):
    path = tmp_path / "per_query.jsonl"
    line = {"id": "q", "hits": [], "scores": {}, "abstention": "maybe"}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(PerQueryError) as err:
        list(read_per_query(path))
    assert f"{path}:1" in str(err.value.problems[0])


# --------------------------------------------------------------------------- the CLI, end to end

TARGET = '''
from kebab_mlflow.records import Answer, Hit, VersionSnapshot


class Refuser:
    """Answers what it knows, refuses questions about Atlantis (the KB lacks them)."""

    versions = VersionSnapshot(parser_version="p1", chunker_version="c1",
                               embedding_version="e1", index_version="i1",
                               prompt_template_version="refuses-v1")
    refuses = True

    def search(self, query, k):
        return [Hit(chunk_id="c1", doc_id="d1", score=1.0, rank=1, text="facts")]

    def ask(self, query, hits):
        if self.refuses and "Atlantis" in query:
            return Answer(text="", refusal_reason="no evidence", confidence=0.1)
        return Answer(text="The figure is 12 euros.", citations=("c1",), confidence=0.9)


class Answerer(Refuser):
    """The same, but it answers everything: its Atlantis answers are made up."""

    versions = VersionSnapshot(parser_version="p1", chunker_version="c1",
                               embedding_version="e1", index_version="i1",
                               prompt_template_version="answers-v2")
    refuses = False
'''


def answers_golden(path: Path, answerable: int = 20, unanswerable: int = 20,
                   types: tuple[dict[str, str], dict[str, str]] = ({}, {})) -> Path:
    """An answer set: ``answerable`` priced items, then ``unanswerable`` Atlantis ones (the
    ``types`` dicts add fields to each kind, e.g. a query_type)."""
    queries = [{"id": f"a{i:02d}", "query": f"What does item {i} cost?", "ask": True,
                **types[0], "must_contain": ["12 euros"]} for i in range(answerable)]
    queries += [{"id": f"u{i:02d}", "query": f"What does Atlantis item {i} cost?", "ask": True,
                 "answerable": False, **types[1], "forbidden": ["12 euros"]}
                for i in range(unanswerable)]
    path.write_text(json.dumps({"name": "answers", "queries": queries}))
    return path


def run_refuser_then_answerer(tmp_path: Path, golden: Path, store_uri: str) -> None:
    """Two runs of TARGET on ``golden``: ``base`` refuses every query, ``cand`` answers all."""
    target = tmp_path / "target.py"
    target.write_text(TARGET)
    for name, cls in (("base", "Refuser"), ("cand", "Answerer")):
        res = runner.invoke(app, ["run", "--golden", str(golden), "--target",
                                  f"python:{target}:{cls}", "--run-name", name,
                                  "--tracking-uri", store_uri])
        assert res.exit_code == 0, res.output


def test_cli_a_candidate_that_stops_refusing_is_regressed_exit_1(tmp_path, store_uri):
    run_refuser_then_answerer(tmp_path, answers_golden(tmp_path / "golden.yaml"), store_uri)
    res = runner.invoke(app, ["compare", "base", "cand", "--format", "json", "--no-log",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "Regressed"
    acc = next(m for m in data["metrics"] if m["name"] == "abstention_accuracy")
    assert (acc["baseline"], acc["candidate"], acc["significant"]) == (1.0, 0.0, "worse")
    assert data["counts"]["Regression"] == 20
    table = runner.invoke(app, ["compare", "base", "cand", "--no-log", "--wide",
                                "--tracking-uri", store_uri])
    assert table.exit_code == 1 and "correct_refusal → incorrect_answer" in table.stdout
