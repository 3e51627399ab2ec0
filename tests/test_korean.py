"""Korean and mixed-language knowledge bases (issue 20): the tokenizers, the markdown-aware
answerer, per-tokenizer versions and gates, import-squad's lang, on fixtures/kb_ko."""

from __future__ import annotations

import importlib.util
import json
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.config import build_config
from kebab_mlflow.errors import CalibrationError, ConfigError
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.importers.squad import detect_lang, import_squad
from kebab_mlflow.pipeline import text
from kebab_mlflow.pipeline.answerer import (
    GATES,
    AnswererConfig,
    GateFeatures,
    GateModel,
    answer_type,
    bigram_share,
    extractive_answer,
    gate_features,
    has_answer_token,
    rank_sentences,
    score_margin,
)
from kebab_mlflow.pipeline.calibrator import calibrator_key, fit_gate
from kebab_mlflow.pipeline.corpus import load_corpus
from kebab_mlflow.pipeline.reference import build_pipeline, versions_for
from kebab_mlflow.pipeline.text import (
    get_tokenizer,
    hangul_share,
    resolve_tokenizer,
    split_sentences,
    text_units,
    tokenize,
)
from kebab_mlflow.records import Hit
from tests.conftest import FIXTURES, KB, runs_in

KB_KO = FIXTURES / "kb_ko"
GOLDEN_KO = FIXTURES / "golden_ko.yaml"
runner = CliRunner()
needs_kiwi = pytest.mark.skipif(importlib.util.find_spec("kiwipiepy") is None,
                                reason="kiwipiepy (the korean extra) is not installed")


# --- tokenizers ---------------------------------------------------------------------------------

@needs_kiwi
def test_korean_drops_particles_and_endings():
    korean = get_tokenizer("korean")
    assert korean("임세영은") == korean("임세영이") == ["임세영"]
    assert korean("인덱스는") == korean("인덱스를")
    assert "인덱스" in korean("인덱스는")


def test_cjk_bigram_by_hand():
    # runs: 검색 → one bigram; 인덱스는 → three; 를 → a unigram; the rest by the English analyzer
    assert get_tokenizer("cjk-bigram")("검색 인덱스는 Running 를") == [
        "검색", "인덱", "덱스", "스는", "를", "run"]
    assert get_tokenizer("cjk-bigram")("Running dogs") == tokenize("Running dogs")


@needs_kiwi
def test_multilingual_tokenizes_latin_words_as_english_does():
    multi = get_tokenizer("multilingual")
    assert multi("Cargo workspace members") == tokenize("Cargo workspace members")
    mixed = multi("Cargo workspace 멤버를 추가하는 법")
    assert mixed[-2:] == tokenize("Cargo workspace")  # the rest's tokens come after the runs
    assert "멤버" in mixed and "멤버를" not in mixed
    assert [t for t in multi("bm25s를 썼다") if t.isascii()] == tokenize("bm25s")


@needs_kiwi
def test_kiwi_loads_once_per_process_whichever_thread_asks():
    with ThreadPoolExecutor(4) as pool:
        instances = list(pool.map(lambda _: text._kiwi(), range(8)))
    assert all(k is instances[0] for k in instances)


def _without_kiwi(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "kiwipiepy" else real(name, *a))
    monkeypatch.setattr(text, "_kiwi_instance", None)


@pytest.mark.parametrize("name", ["korean", "multilingual"])
def test_without_kiwipiepy_korean_is_a_config_error_with_the_install_hint(monkeypatch, name):
    _without_kiwi(monkeypatch)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[korean\]'"):
        build_config(overrides={"lexical.tokenizer": name})
    with pytest.raises(ConfigError, match="kiwipiepy"):
        text.tokenizer_version(name)
    build_config(overrides={"lexical.tokenizer": "cjk-bigram"})  # needs no model


def test_without_kiwipiepy_run_exits_2_before_any_run(monkeypatch, store_uri):
    _without_kiwi(monkeypatch)
    result = runner.invoke(app, ["run", "--golden", str(GOLDEN_KO), "--corpus", str(KB_KO),
                                 "--set", "lexical.tokenizer=korean",
                                 "--tracking-uri", store_uri])
    assert result.exit_code == 2, result.output
    assert "pip install -e '.[korean]'" in result.output
    assert runs_in(store_uri) == []


def test_unknown_tokenizer_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="cjk-bigram"):
        build_config(overrides={"lexical.tokenizer": "klingon"})


def test_auto_is_english_for_english_and_multilingual_for_korean_corpora():
    assert hangul_share(["가나 ab 다라"]) == pytest.approx(2 / 3)
    assert hangul_share(["no words in Hangul"]) == 0.0
    english = [d.text for d in load_corpus(KB).documents]
    korean = [d.text for d in load_corpus(KB_KO).documents]
    assert resolve_tokenizer("auto", lambda: hangul_share(english)) == "english"
    assert resolve_tokenizer("auto", lambda: hangul_share(korean)) == "multilingual"
    assert resolve_tokenizer("cjk-bigram", lambda: pytest.fail("scanned")) == "cjk-bigram"


def test_the_corpus_script_scan_is_cached_per_corpus_digest(tmp_path):
    from kebab_mlflow.pipeline.reference import resolved_config

    corpus = load_corpus(KB_KO)
    first = resolved_config(build_config(), corpus)["lexical"]["tokenizer"]
    (entry,) = (tmp_path / ".kebab-cache" / "script").iterdir()
    assert entry.name == corpus.digest
    assert float(entry.read_text()) == hangul_share(d.text for d in corpus.documents)
    entry.write_text("0.0")  # the cached share is what a second run uses: no rescan
    assert first == "multilingual"
    assert resolved_config(build_config(), corpus)["lexical"]["tokenizer"] == "english"


# --- versions and gates -------------------------------------------------------------------------

def test_english_versions_are_the_ones_before_the_key_existed():
    v = versions_for(build_config())
    assert v.embedding_version == "tok1-lower-sklearnstop-snowballen"
    # v4: the markdown units changed what it quotes from markdown (v3 before this issue)
    assert v.prompt_template_version == "extractive-v4-ctx3-sent1-gate0.5-calibrated"
    assert versions_for(build_config(overrides={"lexical.tokenizer": "english"})) == v


@needs_kiwi
def test_the_tokenizer_is_in_the_versions_so_calibrators_do_not_cross_languages():
    english = versions_for(build_config())
    korean = versions_for(build_config(overrides={"lexical.tokenizer": "korean"}))
    dense_ko = versions_for(build_config("dense", {"lexical.tokenizer": "korean"}), "m@1")
    assert "kiwi" in korean.embedding_version
    # v5: the answerability gate (english stays v4)
    assert korean.prompt_template_version == (
        "extractive-v5-ctx3-sent1-gate0.97-tok=korean-calibrated")
    assert "-tok=korean" in dense_ko.prompt_template_version  # the answerer uses it there too
    assert calibrator_key(english) != calibrator_key(korean)


@needs_kiwi
def test_a_corpus_resolves_auto_and_the_tokenizers_gate(tmp_path):
    pipeline = build_pipeline(build_config(), KB_KO)
    assert pipeline.tokenizer == "multilingual"
    assert "tok-multi" in pipeline.versions.embedding_version
    assert pipeline.answer_config.refuse_below == 0.97
    assert pipeline.answer_config.gate == GATES["multilingual"]
    explicit = build_pipeline(build_config(overrides={"answer.refuse_below": "0.7"}), KB_KO)
    assert explicit.answer_config.refuse_below == 0.7
    english = build_pipeline(build_config(), KB).answer_config
    assert english.refuse_below == 0.5 and english.gate is None


# --- sentences and units ------------------------------------------------------------------------

def test_korean_sentence_endings_split():
    assert split_sentences("임종석은 검거되었다. 그 뒤 조사를 받았다! 왜? Then he left.") == [
        "임종석은 검거되었다.", "그 뒤 조사를 받았다!", "왜?", "Then he left."]


def test_units_keep_code_headings_and_list_items_apart():
    units = text_units("Guide > 멤버 추가\n\n# 순서\n\n따른다.\n\n- 첫째 항목\n- 둘째. 이어서\n"
                       "  계속\n\n```bash\n# Cargo workspace 멤버 추가하는 법.\n\ncargo new x\n```")
    assert [(u.kind, u.text) for u in units] == [
        ("heading", "Guide > 멤버 추가"), ("heading", "순서"), ("sentence", "따른다."),
        ("item", "첫째 항목"), ("sentence", "둘째."), ("item", "이어서 계속"),
        ("code", "# Cargo workspace 멤버 추가하는 법.\n\ncargo new x")]
    assert [u.quotable for u in units] == [False, False, True, True, True, True, False]


def test_a_chunks_question_heading_is_not_quoted():
    units = text_units("FAQ > 빌드가 느린 이유는?\n\n처음에는 5분 걸린다.")
    assert [u.kind for u in units] == ["heading", "sentence"]
    assert [u.kind for u in text_units("Is it? Yes it is.")] == ["sentence", "sentence"]


def test_plain_prose_gives_exactly_split_sentences():
    prose = "Title\n\nMichael E. Mann wrote it. 1. FC Köln won. They did."
    assert [u.text for u in text_units(prose)] == split_sentences(prose)


# --- the answerer on fixtures/kb_ko -------------------------------------------------------------

def test_korean_question_types_and_words():
    q = "연차는 1년에 며칠인가?"
    assert has_answer_token(answer_type(q), q, "연차는 15일이다.")
    assert not has_answer_token(answer_type(q), q, "휴가를 쓰려면 알린다.")
    assert answer_type("chunk는 최대 몇 자인가?").search("800자")


@needs_kiwi
def test_korean_question_words_are_no_evidence():
    from kebab_mlflow.pipeline.answerer import term_weights

    weights = term_weights("개포아파트가 세워진 연도는?", tokenize=get_tokenizer("korean"))
    assert "연도" not in weights and "아파트" in weights


@needs_kiwi
def test_the_fixture_never_quotes_code_and_beats_the_english_tokenizer():
    import kebab_mlflow as km

    golden = load_golden_set(GOLDEN_KO)
    results = {tok: km.evaluate(km.reference_pipeline("naive_baseline", KB_KO,
                                                      **{"lexical.tokenizer": tok}), golden)
               for tok in ("english", "multilingual")}
    multi, english = results["multilingual"].overall, results["english"].overall
    assert multi["mrr"] > english["mrr"] and multi["contains_all"] > english["contains_all"]
    assert multi["refusal_rate"] < english["refusal_rate"]
    rows = {r.id: r for r in results["multilingual"].rows()}
    assert rows["k001"].hits[0].chunk_id == "cargo-workspace#1"
    first = rows["k001"].answer.text
    assert first and "```" not in first and "cargo new" not in first
    assert rows["k012"].answer.refused  # the abstention case
    assert rows["k003"].answer.text == (  # one list item, not the list
        "한 chunk는 최대 800자이며, 문단을 중간에서 자르지 않는다.")


@needs_kiwi
def test_a_bullet_list_is_quoted_one_item_at_a_time():
    pipeline = build_pipeline(build_config(overrides={"lexical.tokenizer": "multilingual"}),
                              KB_KO)
    [hits] = pipeline.search_batch(["chunk 겹치는 길이"], 3)
    quotes = [c.sentence for c in rank_sentences("chunk 겹치는 길이", hits, 3,
                                                 idf=pipeline.idf, tokenize=pipeline.tokenize)]
    listed = "다음 chunk는 앞 chunk의 마지막 100자를 겹쳐서 시작한다."
    assert listed in quotes
    assert not any("800자이며" in q and "100자" in q for q in quotes)  # never two items as one


# --- import-squad -------------------------------------------------------------------------------

def _squad(tmp_path):
    def article(title, contexts_and_questions):
        return {"title": title, "paragraphs": [
            {"context": ctx, "qas": [{"id": f"{title}-{i}", "question": q,
                                      "answers": [{"text": a, "answer_start": ctx.index(a)}]}]}
            for i, (ctx, q, a) in enumerate(contexts_and_questions)]}
    data = {"version": "test", "data": [
        article("임종석", [("임종석은 1989년에 검거되었다.", "임종석이 검거된 해는?", "1989년"),
                        ("그는 서울에서 태어났다.", "태어난 곳은?", "서울")]),
        article("Tram", [("The tram opened in 2026.", "When did it open?", "2026")]),
        article("혼합", [("kebab은 Cargo workspace를 쓴다.", "무엇을 쓰나?", "Cargo workspace")])]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_import_squad_sets_lang_from_the_text_or_the_option(tmp_path):
    assert detect_lang("임종석은 1989년에 검거되었다.") == "ko"
    assert detect_lang("The tram opened in 2026.") == "en"
    s = import_squad(_squad(tmp_path), tmp_path / "out", abstain_share=0.0, seed=0)
    langs = {q["id"]: q["lang"] for sp in s.splits
             for q in yaml.safe_load(sp.path.read_text(encoding="utf-8"))["queries"]}
    assert langs == {"임종석-0": "ko", "임종석-1": "ko", "Tram-0": "en", "혼합-0": "ko"}
    result = runner.invoke(app, ["import-squad", str(_squad(tmp_path)), "--out",
                                 str(tmp_path / "forced"), "--abstain-share", "0",
                                 "--lang", "de"])
    assert result.exit_code == 0, result.output
    forced = [q["lang"] for name in ("train", "test") for q in yaml.safe_load(
        (tmp_path / "forced" / f"{name}.yaml").read_text(encoding="utf-8"))["queries"]]
    assert forced == ["de"] * 4


def test_import_squad_reads_korean_qa_jsonl(tmp_path):
    rows = [{"id": f"q{i}", "question": "언제 열렸나?", "title": f"t{i % 2}",
             "passage_id": f"{i % 2}_{i}", "context": "전차는 2026년에 열렸다.",
             "answers": {"text": ["2026년"], "answer_start": [4]}} for i in range(4)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False)
                                                 for r in rows), encoding="utf-8")
    s = import_squad(tmp_path, tmp_path / "out", abstain_share=0.0)
    assert {q["lang"] for sp in s.splits
            for q in yaml.safe_load(sp.path.read_text(encoding="utf-8"))["queries"]} == {"ko"}


def test_the_tokenizer_is_logged_not_redacted_as_a_secret():
    from kebab_mlflow.config import flatten, redacted

    flat = redacted({**flatten(build_config(overrides={"lexical.tokenizer": "cjk-bigram"})),
                     "target.api_token": "s3cret", "auth_token": "x"})
    assert flat["lexical.tokenizer"] == "cjk-bigram"
    assert flat["target.api_token"] == flat["auth_token"] == "***"


# --- the answerability gate (extractive-v5) -----------------------------------------------------

def test_bigram_share_by_hand():
    # the query's bigrams: 임세 세영 영은 (임세영은) and 누구; the sentence holds the first three
    assert bigram_share("임세영은 누구?", "임세영은 배우다.") == 3 / 4
    assert bigram_share("Who?", "who is it") == 2 / 2  # lowercased: wh ho
    assert bigram_share("? !", "anything") == 0.0  # no word of two letters


def test_score_margin_by_hand():
    hits = [Hit(chunk_id="a#0", doc_id="a", score=10.0, rank=1),
            Hit(chunk_id="b#0", doc_id="b", score=6.0, rank=2),
            Hit(chunk_id="c#0", doc_id="c", score=1.0, rank=3)]
    assert score_margin(hits) == pytest.approx(0.4)
    assert score_margin(hits[:1]) == 1.0
    assert score_margin([]) == 0.0 and score_margin([Hit(chunk_id="a#0", doc_id="a", score=0.0,
                                                         rank=1)]) == 0.0


def test_gate_model_is_a_logistic_over_the_three_features():
    model = GateModel((1.0, 2.0, 3.0), -1.0)
    z = 1.0 * 0.5 + 2.0 * 0.25 + 3.0 * 0.5 - 1.0
    assert model(GateFeatures(0.5, 0.25, 0.5)) == pytest.approx(1 / (1 + math.exp(-z)))


KO_HITS = (Hit(chunk_id="p#0", doc_id="p", score=8.0, rank=1,
               text="임세영은 서울에서 태어난 배우이다. 그는 2001년에 데뷔했다."),
           Hit(chunk_id="q#0", doc_id="q", score=2.0, rank=2, text="서울은 한국의 수도이다."))


def test_the_gate_decides_on_answerability_and_says_so():
    query, bigrams = "임세영은 어디에서 태어났나?", get_tokenizer("cjk-bigram")
    answered = extractive_answer(query, KO_HITS, AnswererConfig(refuse_below=0.5),
                                 tokenize=bigrams)
    assert not answered.refused and answered.text.startswith("임세영은 서울")
    candidates = rank_sentences(query, KO_HITS, 3, tokenize=bigrams)
    features = gate_features(query, KO_HITS, candidates)
    assert features.evidence == candidates[0].share
    assert features.margin == pytest.approx(0.75)
    assert features.bigram_share == bigram_share(query, candidates[0].sentence)
    strict = GateModel((0.0, 0.0, 0.0), -5.0)  # answerability sigmoid(-5) ≈ 0.007
    refused = extractive_answer(query, KO_HITS, AnswererConfig(refuse_below=0.5, gate=strict),
                                tokenize=bigrams)
    assert refused.refused and refused.refusal_reason == "answerability 0.01 below gate 0.5"
    lenient = GateModel((0.0, 0.0, 0.0), 5.0)
    again = extractive_answer(query, KO_HITS, AnswererConfig(refuse_below=0.5, gate=lenient),
                              tokenize=bigrams)
    assert again.text == answered.text and again.raw_confidence == answered.raw_confidence


def test_fit_gate_takes_the_highest_gate_within_the_refusal_budget():
    rng = np.random.default_rng(0)
    answerable = np.array([True] * 80 + [False] * 20)
    features = np.column_stack([np.where(answerable, 0.7, 0.4) + rng.normal(0, 0.15, 100),
                                rng.uniform(0, 1, 100), rng.uniform(0, 1, 100)])
    fit = fit_gate(features, answerable, always_refused=4, max_refused=0.2)
    score = np.array([fit.model(GateFeatures(*row)) for row in features])

    def refused_share(gate):  # the 4 without a quotable sentence count as refused
        return ((score[answerable] < gate).sum() + 4) / 84

    assert refused_share(fit.refuse_below) == pytest.approx(fit.answerable_refused)
    assert fit.answerable_refused <= 0.2
    assert refused_share(round(fit.refuse_below + 0.01, 2)) > 0.2
    assert fit.abstention_refused == pytest.approx((score[~answerable] < fit.refuse_below).mean())
    assert fit.abstention_refused > 0.5  # the evidence feature separates them
    assert fit_gate(features, answerable, 4) == fit  # deterministic
    with pytest.raises(CalibrationError):
        fit_gate(features[:10], answerable[:10])  # answerable only
