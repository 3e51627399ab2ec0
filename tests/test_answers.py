"""Answer metrics and the extractive answerer (issue 5), and `kebab-mlflow import-squad`."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.config import build_config
from kebab_mlflow.errors import InputError
from kebab_mlflow.evaluation.runner import build_aggregate
from kebab_mlflow.golden import GoldenQuery, GoldenSet, load_golden_set, parse_golden_set
from kebab_mlflow.importers.squad import import_squad
from kebab_mlflow.metrics.answers import answer_scores, citation_validity, contains_all, grounded
from kebab_mlflow.pipeline.answerer import (
    AnswererConfig,
    answer_type,
    coverage,
    extractive_answer,
    has_answer_token,
    rank_sentences,
    term_weights,
)
from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_corpus
from kebab_mlflow.pipeline.corpus import load_corpus
from kebab_mlflow.pipeline.reference import _document_frequencies, build_pipeline
from kebab_mlflow.pipeline.text import tokenize
from kebab_mlflow.records import Answer, Hit
from tests.conftest import KB, SHARED, write

runner = CliRunner()


def _q(**kw) -> GoldenQuery:
    return GoldenQuery(**{"id": "q", "query": "q", "ask": True, **kw})


ANSWER = Answer(text="The Bayline budget is 48.5 Million Euros.", citations=("d#0",))


# --- contains_all -----------------------------------------------------------------------------

def test_contains_all_is_case_sensitive_by_default():
    assert contains_all(_q(must_contain=("48.5 Million Euros",)), ANSWER) == 1.0
    assert contains_all(_q(must_contain=("48.5 million euros",)), ANSWER) == 0.0
    assert contains_all(_q(must_contain=("48.5", "Bayline")), ANSWER) == 1.0
    assert contains_all(_q(must_contain=("48.5", "Saltmarsh")), ANSWER) == 0.0


def test_forbidden_strings_fail_the_answer_case_sensitively():
    assert contains_all(_q(must_contain=("48.5",), forbidden=("18.3",)), ANSWER) == 1.0
    assert contains_all(_q(must_contain=("48.5",), forbidden=("Bayline",)), ANSWER) == 0.0
    assert contains_all(_q(must_contain=("48.5",), forbidden=("bayline",)), ANSWER) == 1.0
    assert contains_all(_q(must_contain=("48.5",), forbidden=("bayline",),
                           case_insensitive=True), ANSWER) == 0.0


def test_case_insensitive_at_query_level():
    q = _q(must_contain=("48.5 MILLION euros",), case_insensitive=True)
    assert contains_all(q, ANSWER) == 1.0


def test_case_insensitive_at_file_level_and_query_override():
    text = b"""
case_insensitive: true
queries:
  - {id: a, query: x, ask: true, must_contain: ["48.5 million EUROS"]}
  - {id: b, query: x, ask: true, must_contain: ["48.5 million EUROS"], case_insensitive: false}
"""
    a, b = parse_golden_set(text, "g.yaml").queries
    assert (a.case_insensitive, b.case_insensitive) == (True, False)
    assert contains_all(a, ANSWER) == 1.0 and contains_all(b, ANSWER) == 0.0


def test_conditional_semantics_on_refusals_and_answers():
    refused = Answer(text="", citations=(), refusal_reason="below gate")
    # a correct refusal does not count on answer quality: None, not a vacuous 1.0
    assert math.isnan(contains_all(_q(answerable=False, forbidden=("48.5",)), refused))
    # refusing an answerable question is a miss
    assert contains_all(_q(must_contain=("48.5",)), refused) == 0.0
    # answering an unanswerable question is wrong even with no forbidden string in it
    assert contains_all(_q(answerable=False, forbidden=("18.3",)), ANSWER) == 0.0
    # not asked / the pipeline failed
    assert math.isnan(contains_all(_q(ask=False, must_contain=("48.5",)), ANSWER))
    assert contains_all(_q(must_contain=("48.5",)), None) == 0.0


def test_a_correct_refusal_does_not_lift_answer_quality_in_the_aggregate():
    queries = (GoldenQuery(id="a", query="budget?", ask=True, must_contain=("48.5",)),
               GoldenQuery(id="b", query="mayor's shoe size?", ask=True, answerable=False,
                           query_type="abstention"))
    answers = [Answer(text="It is 18.3 million.", citations=("d#0",), refusal_reason=None,
                      confidence=0.8, raw_confidence=0.8),
               Answer(text="", citations=(), refusal_reason="below gate", confidence=0.9,
                      raw_confidence=0.1)]
    hits = [(Hit(chunk_id="d#0", doc_id="d", score=1.0, rank=1),),
            (Hit(chunk_id="e#0", doc_id="e", score=1.0, rank=1),)]
    scores = answer_scores(queries, answers, hits)
    assert scores["contains_all"][0] == 0.0 and math.isnan(scores["contains_all"][1])
    assert math.isnan(scores["citation_validity"][1])
    agg = build_aggregate(GoldenSet(name="g", queries=queries), scores, answers, np.ones(2))
    assert agg.overall["contains_all"] == 0.0  # not 0.5: the refusal is not an attempt
    assert agg.overall["refusal_rate"] == 0.5
    assert agg.overall["ask_grounded_rate"] == 0.5
    assert agg.overall["citation_validity"] == 1.0
    assert agg.abstention_outcomes["correct_refusal"] == 1
    assert agg.abstention_calibration["n"] == 2
    assert agg.by_query_type["abstention"]["contains_all"] is None


def test_grounded_and_citation_validity():
    hits = (Hit(chunk_id="d#0", doc_id="d", score=2.0, rank=1),
            Hit(chunk_id="d#1", doc_id="d", score=1.0, rank=2))
    assert grounded(_q(), ANSWER) == 1.0
    assert grounded(_q(), Answer(text="no citations")) == 0.0
    assert grounded(_q(), Answer(text="", citations=(), refusal_reason="refused")) == 0.0
    assert citation_validity(_q(), ANSWER, hits) == 1.0
    assert citation_validity(_q(), Answer(text="x", citations=("d#0", "zz#9")), hits) == 0.0
    assert math.isnan(citation_validity(_q(),
                                        Answer(text="", citations=(), refusal_reason="refused"),
                                        hits))
    assert math.isnan(citation_validity(_q(), Answer(text="uncited"), hits))


# --- the extractive answerer ------------------------------------------------------------------

HITS = (
    Hit(chunk_id="harbor#2", doc_id="harbor", score=3.0, rank=1,
        text="Budgets\n\nThe Bayline Tram Extension has a budget of 48.5 million euros. "
        "Service starts in 2026."),
    Hit(chunk_id="harbor#5", doc_id="harbor", score=2.0, rank=2,
        text="The ferry replacement has a budget of 18.3 million euros. The tram is green."),
)
CFG = AnswererConfig(context_k=3, max_sentences=1, refuse_below=0.5)


def test_answer_quotes_the_best_sentence_and_cites_its_chunk():
    a = extractive_answer("What is the budget of the Bayline Tram Extension?", HITS, CFG)
    # query tokens: budget, bayline, tram, extens (unit weights) -> the first sentence holds
    # all 4 (score 1); the runner-up is "The tram is green." : tram 1/4, plus carry-over 0.3 x
    # budget 1/4 from the ferry sentence before it = 0.325 (the ferry sentence: 1/4);
    # raw = 1 - 0.325 / 2
    assert a.text == "The Bayline Tram Extension has a budget of 48.5 million euros."
    assert a.citations == ("harbor#2",) and a.refusal_reason is None
    assert a.raw_confidence == pytest.approx(0.8375) and a.confidence == a.raw_confidence


def test_refusal_confidence_is_one_minus_the_context_coverage():
    a = extractive_answer("Who is the mayor of Saltmarsh harbor budget?", HITS, CFG)
    # tokens: mayor, saltmarsh, harbor, budget: the best sentence has 1/4, and "who" adds
    # 0.2 x 3/4 for the name "Bayline" in it: 0.4 < 0.5 -> refused;
    # the best chunk covers budget only (harbor is the doc id, not in the text): 1/4
    assert a.refused and a.text == "" and a.citations == ()
    assert a.raw_confidence == pytest.approx(0.25) and a.confidence == pytest.approx(0.75)
    assert coverage("Who is the mayor of Saltmarsh harbor budget?", HITS, 3) == 0.25


def test_headings_are_never_quoted_and_repeated_sentences_count_once():
    dup = (HITS[0], Hit(chunk_id="harbor#3", doc_id="harbor", score=1.0, rank=3, text=HITS[0].text))
    ranked = rank_sentences("Bayline budgets tram extension", dup, 3)
    assert [c.sentence for c in ranked].count(
        "The Bayline Tram Extension has a budget of 48.5 million euros.") == 1
    assert all(c.sentence != "Budgets" for c in ranked)


def test_no_hits_or_no_query_tokens_refuse():
    a = extractive_answer("budget?", (), CFG)
    assert a.refusal_reason == "no_hits" and a.raw_confidence == 0.0 and a.confidence == 1.0
    b = extractive_answer("what is it? Did it?", HITS, CFG)  # stop words and auxiliaries only
    assert b == Answer(text="", citations=(), refusal_reason="no_content_words", confidence=None,
                       raw_confidence=None)  # no confidence to calibrate


def test_a_calibrator_maps_the_raw_confidence():
    seen = []

    def calibrator(raw: float, refusal: bool, similarity: float | None) -> float:
        seen.append((raw, refusal, similarity))
        return 0.42

    a = extractive_answer("What is the budget of the Bayline Tram Extension?", HITS, CFG,
                          calibrator)
    assert a.confidence == 0.42 and a.raw_confidence == pytest.approx(0.8375)
    assert seen == [(pytest.approx(0.8375), False, None)]


def test_similarity_is_measured_for_the_calibrator_and_changes_no_answer():
    cosine = {"The Bayline Tram Extension has a budget of 48.5 million euros.": 0.8,
              "Service starts in 2026.": -0.2, "The tram is green.": 1.3}
    asked: list[tuple[str, tuple[str, ...]]] = []

    def similarity(query, texts):
        asked.append((query, tuple(texts)))
        return [cosine.get(t, 0.1) for t in texts]

    seen = []

    def calibrator(raw, refusal, sim):
        seen.append(sim)
        return 0.5

    question = "What is the budget of the Bayline Tram Extension?"
    plain = extractive_answer(question, HITS, CFG)
    a = extractive_answer(question, HITS, CFG, similarity=similarity)
    # the quote's cosine; text, citations and confidence as without it
    assert a.similarity == 0.8 and asked == [(question, (a.text,))]
    assert (a.text, a.citations, a.refusal_reason, a.confidence, a.raw_confidence) == \
        (plain.text, plain.citations, plain.refusal_reason, plain.confidence, plain.raw_confidence)
    assert extractive_answer(question, HITS, CFG, calibrator, similarity=similarity
                             ).confidence == 0.5 and seen == [0.8]
    # a refusal: the closest quotable sentence of the context, clipped to [0, 1]
    refusal = extractive_answer("Who is the mayor of Saltmarsh harbor budget?", HITS, CFG,
                                similarity=similarity)
    assert refusal.refused and refusal.similarity == 1.0
    assert set(asked[-1][1]) == {"The Bayline Tram Extension has a budget of 48.5 million euros.",
                                 "Service starts in 2026.", "The ferry replacement has a budget "
                                 "of 18.3 million euros.", "The tram is green."}
    assert extractive_answer("budget?", (), CFG, similarity=similarity).similarity == 0.0
    assert plain.similarity is None


def test_rare_query_terms_weigh_more_with_idf():
    hits = (Hit(chunk_id="b#0", doc_id="b", score=2.0, rank=1,
                text="The colour of the old bridge is grey."),
            Hit(chunk_id="b#1", doc_id="b", score=1.0, rank=2, text="The Nordvik bridge is red."))
    q = "What is the colour of the Nordvik bridge?"  # colour, nordvik, bridg

    def weight(t: str) -> float:  # nordvik is rare; the others weigh 1
        return 4.0 if t == "nordvik" else 1.0

    # unweighted both sentences hold 2 of 3 terms: the better-ranked hit wins, raw 2/3 - 1/3
    plain = extractive_answer(q, hits, CFG)
    assert plain.text == "The colour of the old bridge is grey."
    assert plain.raw_confidence == pytest.approx(1 / 3)
    # weighted: nordvik + bridg = 5 of 6 against colour + bridg = 2 of 6; raw 5/6 - (2/6)/2
    a = extractive_answer(q, hits, CFG, idf=weight)
    assert a.text == "The Nordvik bridge is red." and a.citations == ("b#1",)
    assert a.raw_confidence == pytest.approx(4 / 6)
    assert coverage(q, hits, 3, weight) == pytest.approx(5 / 6)
    assert coverage(q, hits, 3) == pytest.approx(2 / 3)


def test_a_question_auxiliary_is_no_evidence():
    hits = (Hit(chunk_id="s#0", doc_id="s", score=1.0, rank=1,
                text="Kawann Short leads the team in sacks."),)
    for q in ("Who does lead the team in sacks?", "Who DID lead the team in sacks?"):
        assert term_weights(q) == term_weights("Who leads the team in sacks?") == {
            "lead": 1.0, "team": 1.0, "sack": 1.0}
        a = extractive_answer(q, hits, CFG)  # every evidence term found: not refused
        assert not a.refused and a.raw_confidence == 1.0
    assert term_weights("What is a doing-word? Did it do?") == {"word": 1.0}


def test_a_sentence_carries_over_query_terms_of_the_one_before_within_a_hit():
    hits = (Hit(chunk_id="n#0", doc_id="n", score=2.0, rank=1,
                text="Nordvik has a bridge. It is painted red every spring."),
            Hit(chunk_id="n#1", doc_id="n", score=1.0, rank=2,
                text="The bridge was painted in 1990."))
    ranked = rank_sentences("What colour is the Nordvik bridge painted?", hits, 3)
    # colour, nordvik, bridg, paint: "Nordvik has a bridge." 2/4; "It is painted ..." paint
    # 1/4 + 0.3 x (nordvik, bridg) 2/4 = 0.4; hit 2's sentence 2/4, nothing carried across hits
    assert [(c.sentence, c.share) for c in ranked] == [
        ("Nordvik has a bridge.", pytest.approx(0.5)),
        ("The bridge was painted in 1990.", pytest.approx(0.5)),
        ("It is painted red every spring.", pytest.approx(0.4))]


def test_a_sentence_with_the_asked_for_kind_of_token_gets_the_type_bonus():
    hits = (Hit(chunk_id="s#0", doc_id="s", score=2.0, rank=1,
                text="The Nordvik bridge spans the fjord."),
            Hit(chunk_id="s#1", doc_id="s", score=1.0, rank=2,
                text="The Nordvik bridge has four spans."))
    a = extractive_answer("How many spans does the old Nordvik bridge have?", hits, CFG)
    # span, old, nordvik, bridg: both hold 3/4; only the second has a number:
    # 0.75 + 0.2 x 0.25 = 0.8; raw = 0.8 - 0.75 / 2
    assert a.text == "The Nordvik bridge has four spans." and a.citations == ("s#1",)
    assert a.raw_confidence == pytest.approx(0.425)
    when = "When did the 1990 flood end?"
    assert not has_answer_token(answer_type(when), when, "The 1990 flood ended.")
    assert has_answer_token(answer_type(when), when, "It ended in May.")
    who = "Who built the bridge?"
    assert has_answer_token(answer_type(who), who, "The bridge was built by Anna Berg.")
    assert not has_answer_token(answer_type(who), who, "Workers built the bridge.")
    assert answer_type("What is the colour of the bridge?") is None
    # a number or century the question already names is no answer (whole tokens compared)
    many = "How many people lived in Nordvik in 1990?"
    assert not has_answer_token(answer_type(many), many, "Nordvik grew a lot in 1990.")
    assert has_answer_token(answer_type(many), many, "In 1990 it had 4,500 people.")
    century = "In which century was the bridge built?"
    assert not has_answer_token(answer_type(century), century, "It is a 12th century bridge.")
    assert has_answer_token(answer_type(century), century, "It was built in 1150.")


def test_reference_pipeline_idf_is_bm25s_over_its_chunks():
    pipeline = build_pipeline(build_config(), KB)
    texts = [c.text for c in pipeline.chunks]
    n = len(texts)
    for term in ("tram", "budget", "notaword"):
        df = sum(term in tokenize(t) for t in texts)
        assert pipeline.idf(term) == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    # the cached term counts and a plain count over the chunks agree
    assert _document_frequencies(pipeline.chunks, pipeline.folder) == \
        dict(Counter(t for text in texts for t in set(tokenize(text))))


def test_answerer_is_deterministic():
    q = "How much is budgeted for the ferry replacement?"
    assert extractive_answer(q, HITS, CFG) == extractive_answer(q, HITS, CFG)


# --- import-squad -----------------------------------------------------------------------------

def _qa_file(tmp_path: Path) -> Path:
    rows = []
    for a in range(6):
        for p in range(4):
            ctx = (f"Article {a} paragraph {p} says the answer is value{a}x{p}. "
                   f"It also mentions colour{a}.")
            for n in range(2):
                rows.append({"id": f"q{a}-{p}-{n}", "question": f"What does {a} {p} say {n}?",
                             "title": f"Art_{a}", "passage_id": f"{a}_{p}", "context": ctx,
                             "answers": {"text": [f"value{a}x{p}" if n == 0 else f"colour{a}"],
                                         "answer_start": [0]}})
    return write(tmp_path / "src" / "qa.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def test_import_squad_writes_corpus_and_article_disjoint_splits(tmp_path):
    src = _qa_file(tmp_path)
    s = import_squad(src.parent, tmp_path / "out", abstain_share=0.25, test_share=0.5, seed=3)
    train, test = (load_golden_set(sp.path) for sp in s.splits)
    corpus = load_corpus(s.corpus)
    chunk_ids = {c.chunk_id for c in chunk_corpus(corpus, ChunkerConfig("document"))}
    kept = {d.doc_id for d in corpus.documents}
    assert len(kept) == s.paragraphs_kept == 24 - 2 * 3  # round(0.25 * 12) dropped per split
    articles = {}
    for g in (train, test):
        # 3 dropped paragraphs x 2 questions; the colour<a> ones are left out: that span is in
        # every paragraph of the article, so the corpus may still answer them
        assert len(g) == 24 - 3
        for q in g.queries:
            articles.setdefault(g.name, set()).add(q.id.split("-")[0])
            assert q.ask
            if q.answerable:
                (pid,) = q.expected_doc_ids
                assert pid in kept and q.expected_chunk_ids == (f"{pid}#0",)
                assert f"{pid}#0" in chunk_ids and q.must_contain[0] in corpus.documents[
                    [d.doc_id for d in corpus.documents].index(pid)].text
            else:
                assert q.query_type == "abstention" and not q.expected_doc_ids
                assert q.id.rsplit("-", 1)[0].replace("q", "", 1).replace("-", "_") not in kept
                assert "dropped_paragraph" in q.hardcase_categories
    assert not articles[train.name] & articles[test.name]
    abstentions = [q for q in test.queries if not q.answerable]
    assert len(abstentions) == s.splits[1].abstention == 3
    assert all(q.id.endswith("-0") for q in abstentions)  # value<a>x<p>: in no kept paragraph
    assert s.splits[1].left_out == 3
    text = s.splits[1].path.read_text()
    assert text.startswith("# test split of") and "seed=3 test_share=0.5 abstain_share=0.25" \
        in text and "3 questions of those paragraphs left out" in text
    assert yaml.safe_load(text)["description"].startswith("import-squad seed=3")


def test_import_squad_abstention_rules(tmp_path):
    src = _qa_file(tmp_path)
    fixed = import_squad(src, tmp_path / "fixed", abstain_share=0.25, seed=3)
    old = import_squad(src, tmp_path / "old", abstain_share=0.25, seed=3, abstention="dropped")
    # the same paragraphs dropped: the same corpus and answerable questions
    assert (fixed.corpus / "corpus.jsonl").read_bytes() == (old.corpus / "corpus.jsonl"
                                                            ).read_bytes()
    kept = "\n".join(d.text for d in load_corpus(fixed.corpus).documents)
    rows = {r["id"]: r for r in map(json.loads, src.read_text().splitlines())}
    for f, o in zip(fixed.splits, old.splits, strict=True):
        f_q, o_q = (load_golden_set(sp.path).queries for sp in (f, o))
        answerable = [[(q.id, q.must_contain, q.expected_doc_ids) for q in qs if q.answerable]
                      for qs in (f_q, o_q)]
        assert answerable[0] == answerable[1] and answerable[0]
        assert o.left_out == 0 and o.abstention == 6 == f.abstention + f.left_out
        old_abstentions = [q.id for q in o_q if not q.answerable]
        # every abstention case of the fixed rule has a span that no kept paragraph holds
        assert [q.id for q in f_q if not q.answerable] == [
            i for i in old_abstentions if rows[i]["answers"]["text"][0] not in kept]
    with pytest.raises(InputError, match="invalid import-squad options"):
        import_squad(src, tmp_path / "bad", abstention="maybe")


def test_import_squad_is_seeded(tmp_path):
    src = _qa_file(tmp_path)
    a = import_squad(src, tmp_path / "a", seed=1)
    b = import_squad(src, tmp_path / "b", seed=1)
    c = import_squad(src, tmp_path / "c", seed=2)
    def body(path: Path) -> str:  # the YAML without its header (which names the folder)
        return "".join(line for line in path.read_text().splitlines(True)
                       if not line.startswith("#"))

    assert body(a.splits[1].path) == body(b.splits[1].path)
    assert (a.corpus / "corpus.jsonl").read_bytes() == (b.corpus / "corpus.jsonl").read_bytes()
    assert {q.id for q in load_golden_set(a.splits[1].path).queries} != {
        q.id for q in load_golden_set(c.splits[1].path).queries}


def test_import_squad_orders_passages_naturally_with_mixed_ids(tmp_path):
    rows = [json.loads(line) for line in _qa_file(tmp_path).read_text().splitlines()]
    for r in rows:  # article 5's passages get ids that are not numbers
        if r["title"] == "Art_5":
            r["passage_id"] = "x_" + r["passage_id"]
    src = write(tmp_path / "mixed.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    s = import_squad(src, tmp_path / "out", abstain_share=0.0, seed=0)
    ids = [json.loads(line)["_id"] for line in
           (s.corpus / "corpus.jsonl").read_text().splitlines()]
    assert ids == sorted(ids, key=lambda i: (i.startswith("x"), i))  # numbers first
    assert ids[:4] == ["0_0", "0_1", "0_2", "0_3"] and ids[-1] == "x_5_3"


def test_cli_import_squad_and_bad_options(tmp_path):
    src = _qa_file(tmp_path)
    result = runner.invoke(app, ["import-squad", str(src), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "test: " in result.output and "--set chunker.mode=document" in result.output
    result = runner.invoke(app, ["import-squad", str(src), "--out", str(tmp_path / "o"),
                                 "--test-share", "1.5", "--abstain-share", "-0.1"])
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "--test-share: must be in (0, 1), got 1.5" in out
    assert "--abstain-share: must be in [0, 1), got -0.1" in out
    result = runner.invoke(app, ["import-squad", str(tmp_path / "nope"), "--out",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"error: {tmp_path / 'nope'} not found: expected a qa.jsonl file" in " ".join(
        result.output.split())


def test_import_squad_rejects_a_span_not_in_its_paragraph(tmp_path):
    row = {"id": "x", "question": "?", "title": "T", "passage_id": "0_0", "context": "abc",
           "answers": {"text": ["zzz"], "answer_start": [0]}}
    src = write(tmp_path / "qa.jsonl", json.dumps(row) + "\n")
    result = runner.invoke(app, ["import-squad", str(src), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "[query x]: the answer span is not in its paragraph" in " ".join(result.output.split())


@pytest.mark.skipif(not (SHARED / "datasets" / "xquad_en" / "qa.jsonl").is_file(),
                    reason="needs ../shared/datasets/xquad_en")
def test_import_real_xquad(tmp_path):
    s = import_squad(SHARED / "datasets" / "xquad_en", tmp_path / "xq")
    counts = [(sp.answerable, sp.abstention + sp.left_out, sp.paragraphs) for sp in s.splits]
    assert sum(a + b for a, b, _ in counts) == 1190
    assert sum(p for *_, p in counts) == 240 and s.paragraphs_kept == 240 - 24
    assert all(b > 0 for _, b, _ in counts)
