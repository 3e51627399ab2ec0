"""Evidence spans: shape and corpus validation with file:line, the evidence-v1 rule, the
per-query audit, character metrics, and chunk metrics equal to expected_chunk_ids' on a set
anchored from the same chunking."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN, KB, SHARED, write

import kebab_mlflow as km
from kebab_mlflow.errors import GoldenSetError
from kebab_mlflow.evidence.anchor import anchor_chunk
from kebab_mlflow.evidence.locate import LocatedSpan
from kebab_mlflow.evidence.resolve import (
    ChunkIndex,
    IndexedChunk,
    char_counts,
    is_relevant,
    resolve_query,
)
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.pipeline.chunker import ChunkerConfig, chunk_spans
from kebab_mlflow.pipeline.corpus import Corpus, Document, load_corpus

DOC_TEXT = "alpha beta gamma. delta epsilon zeta. alpha beta again."


def golden_file(tmp_path: Path, body: str, private: bool = False) -> Path:
    head = f"name: ev\nprivate: {str(private).lower()}\nqueries:\n"
    return write(tmp_path / "g.yaml", head + textwrap.dedent(body))


def corpus_dir(tmp_path: Path, docs: dict[str, str]) -> Path:
    for doc_id, text in docs.items():
        write(tmp_path / "kb" / f"{doc_id}.md", text)
    return tmp_path / "kb"


# --- 1. shape, with file:line, all at once --------------------------------------------------

def test_shape_problems_are_all_reported_with_their_lines(tmp_path):
    path = golden_file(tmp_path, """\
        - id: q1
          query: one
          expected_doc_ids: [a]
          evidence:
            - {doc: a, quote: "x", start: 0, end: 1}
            - {doc: a, start: 5, end: 2}
            - {doc: a, quote: "y", grade: 0}
            - {doc: b, quote: "z"}
            - {doc: a, quote: "w", colour: red}
        """)
    with pytest.raises(GoldenSetError) as info:
        load_golden_set(path)
    shown = [str(p) for p in info.value.problems]
    assert any(s.startswith(f"{path}:8 [query q1]: evidence #1 needs either") for s in shown)
    assert any(s.startswith(f"{path}:9 [query q1]: evidence #2: offsets must") for s in shown)
    assert any(s.startswith(f"{path}:10 [query q1]: evidence #3: 'grade'") for s in shown)
    assert any("unknown key 'colour'" in s and s.startswith(f"{path}:12") for s in shown)
    assert any("evidence in doc 'b', which expected_doc_ids does not list" in s for s in shown)
    assert len(shown) == 5


def test_evidence_alone_is_chunk_truth(tmp_path):
    path = golden_file(tmp_path, """\
        - id: q1
          query: one
          evidence: [{doc: a, quote: "beta"}, {doc: a, start: 0, end: 5, grade: 2}]
        """)
    q = load_golden_set(path).queries[0]
    assert q.has_chunk_truth and not q.expected_chunk_ids
    assert [(e.doc, e.quote, e.start, e.grade) for e in q.evidence] == [
        ("a", "beta", None, 1), ("a", None, 0, 2)]


# --- 1. against the corpus ------------------------------------------------------------------

def test_a_quote_not_found_duplicated_or_offsets_out_of_range_fail_before_any_query(tmp_path):
    kb = corpus_dir(tmp_path, {"a": DOC_TEXT})
    path = golden_file(tmp_path, """\
        - id: q1
          query: alpha
          evidence:
            - {doc: a, quote: "alpha beta"}
            - {doc: a, quote: "omega"}
            - {doc: a, start: 0, end: 500}
            - {doc: a, quote: "alpha beta", occurrence: 3}
            - {doc: nowhere, quote: "alpha"}
        """)
    with pytest.raises(GoldenSetError) as info:
        km.evaluate(km.reference_pipeline("naive_baseline", kb), path)
    shown = [str(p) for p in info.value.problems]
    assert shown == [
        f"{path}:7 [query q1]: evidence #1: quote 'alpha beta' occurs 2 times in doc 'a' (at "
        "offsets 0, 38): add occurrence: N (1 to 2)",
        f"{path}:8 [query q1]: evidence #2: quote 'omega' is not in doc 'a' as parsed (edited "
        "document? re-anchor or fix the quote)",
        f"{path}:9 [query q1]: evidence #3: offsets 0..500 are out of range: doc 'a' has 55 "
        "characters as parsed",
        f"{path}:10 [query q1]: evidence #4: occurrence 3 of quote 'alpha beta', but doc 'a' "
        "holds it 2 time(s)",
        f"{path}:11 [query q1]: evidence #5: doc 'nowhere' is not in the corpus"]


def test_a_private_set_never_shows_its_quotes(tmp_path):
    kb = corpus_dir(tmp_path, {"a": DOC_TEXT})
    path = golden_file(tmp_path, """\
        - id: q1
          query: alpha
          evidence: [{doc: a, quote: "secret words"}]
        """, private=True)
    with pytest.raises(GoldenSetError) as info:
        km.evaluate(km.reference_pipeline("naive_baseline", kb), path)
    assert "secret" not in str(info.value)
    assert "the quote of 12 characters is not in doc 'a'" in str(info.value)


def test_an_edit_that_removes_a_quote_fails_validation(tmp_path):
    kb = corpus_dir(tmp_path, {"a": DOC_TEXT})
    path = golden_file(tmp_path, """\
        - id: q1
          query: zeta
          evidence: [{doc: a, quote: "delta epsilon"}]
        """)
    assert km.evaluate(km.reference_pipeline("naive_baseline", kb), path).metrics["hit_at_1"] == 1
    (kb / "a.md").write_text(DOC_TEXT.replace("epsilon", "eta"))
    with pytest.raises(GoldenSetError, match=r"g.yaml:6 \[query q1\]: evidence #1: quote "
                                             r"'delta epsilon' is not in doc 'a'"):
        km.evaluate(km.reference_pipeline("naive_baseline", kb), path)


# --- 2. the rule ----------------------------------------------------------------------------

@pytest.mark.parametrize("overlap, span, chunk, relevant", [
    (10, 10, 100, True),   # a short span inside the chunk
    (5, 10, 100, True),    # half of it: τ = 0.5 is inclusive
    (4, 10, 100, False),   # less than half of a short span
    (50, 1000, 100, True),  # half the chunk is that long span
    (49, 1000, 100, False),
    (0, 10, 100, False),   # no shared character
])
def test_evidence_v1_rule(overlap, span, chunk, relevant):
    assert is_relevant(overlap, span, chunk) is relevant


def index_of(*chunks: tuple[str, str, tuple[tuple[int, int], ...]]) -> ChunkIndex:
    return ChunkIndex(IndexedChunk(chunk_id=c, doc_id=d, spans=s) for c, d, s in chunks)


def test_a_span_split_across_overlapping_chunks_resolves_to_each_holding_enough():
    # chunks [0,100) and [80,180) overlap by 20; a span [90,130) of 40 characters
    index = index_of(("d#0", "d", ((0, 100),)), ("d#1", "d", ((80, 180),)),
                     ("d#2", "d", ((160, 260),)))
    resolution = resolve_query([LocatedSpan(doc="d", start=90, end=130, grade=2)], index)
    assert dict(resolution.grades) == {"d#1": 2}  # d#0 holds 10 of 40, d#1 all 40
    covers = {c.chunk_id: (c.span_share, c.chunk_share) for c in resolution.spans[0].covers}
    assert covers == {"d#0": (0.25, 0.1), "d#1": (1.0, 0.4)}


def test_character_metrics_by_hand():
    index = index_of(("d#0", "d", ((0, 100),)), ("d#1", "d", ((80, 180),)),
                     ("e#0", "e", ((0, 50),)))
    evidence = [LocatedSpan(doc="d", start=90, end=130), LocatedSpan(doc="d", start=120,
                                                                     end=140)]
    # E = [90,140): 50 characters. top 2 = d#0, d#1: read 200; evidence read 10 + 50 = 60;
    # found = |[0,180) ∩ E| = 50
    counts = char_counts(evidence, ["d#0", "d#1"], index)
    assert (counts.evidence_read, counts.read, counts.evidence_found, counts.evidence) == \
        (60, 200, 50, 50)
    counts = char_counts(evidence, ["e#0", "unknown#3"], index)
    assert (counts.evidence_read, counts.read, counts.evidence_found) == (0, 50, 0)


def test_whole_documents_do_not_beat_a_tight_chunk_on_evidence_precision():
    tight = index_of(("d#0", "d", ((0, 100),)), ("d#1", "d", ((100, 1000),)))
    whole = index_of(("d#0", "d", ((0, 1000),)))
    evidence = [LocatedSpan(doc="d", start=10, end=60)]
    t, w = char_counts(evidence, ["d#0"], tight), char_counts(evidence, ["d#0"], whole)
    assert t.evidence_found == w.evidence_found == 50
    assert t.evidence_read / t.read == 0.5 > w.evidence_read / w.read == 0.05


# --- 2. chunk spans are offsets into the parsed text -----------------------------------------

def test_chunk_spans_point_at_the_text_each_chunk_holds():
    corpus = load_corpus(KB)
    texts = {d.doc_id: d.text for d in corpus.documents}
    chunks = {c.chunk_id: c for c in km.reference_pipeline("naive_baseline", KB).chunks}
    for config in (ChunkerConfig(), ChunkerConfig("structure", 200, 100),
                   ChunkerConfig("structure", 800, 0),
                   ChunkerConfig("document", 800, 100)):
        for cs in chunk_spans(corpus, config):
            (body,) = cs.spans
            if config == ChunkerConfig():  # the index's chunking: same text
                assert " ".join(texts[cs.doc_id][slice(*body)].split()) in \
                    " ".join(chunks[cs.chunk_id].text.split())
            assert all(texts[cs.doc_id][s:e].strip() for s, e in cs.spans)


def test_offsets_are_into_the_beir_text_not_the_title(tmp_path):
    documents = (Document("p1", "First paragraph here.\n\nSecond one.", "A Title"),)
    corpus = Corpus(source="x", digest="0", read=lambda: documents)
    [spans] = list(chunk_spans(corpus, ChunkerConfig("document", 800, 100)))
    assert spans.spans == ((0, len(corpus.documents[0].text)),)


# --- must hold: anchored from the current chunking = the expected_chunk_ids metrics ---------

def anchored_copy(golden_path: Path, pipeline, out: Path) -> tuple[Path, int]:
    """The golden set with evidence from its expected_chunk_ids (the anchor's core), and how
    many queries were anchored."""
    import yaml

    data = yaml.safe_load(golden_path.read_text())
    texts = {d.doc_id: d.text for d in pipeline.corpus.documents}
    index = ChunkIndex(IndexedChunk(chunk_id=c.chunk_id, doc_id=c.doc_id, spans=c.spans)
                       for c in pipeline.chunk_spans())
    anchored = 0
    for q in data["queries"]:
        entries = [a.entry() for c in q.get("expected_chunk_ids") or ()
                   for a in anchor_chunk(c, index, texts)]
        if entries:
            q["evidence"] = entries
            anchored += 1
    out.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    return out, anchored


CHUNK_METRICS = ("hit_at_1", "hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_chunk",
                 "ndcg_at_10_chunk", "map_chunk", "r_precision_chunk")


def test_anchored_fixture_set_gives_the_expected_chunk_ids_metrics_exactly(tmp_path):
    pipeline = km.reference_pipeline("naive_baseline", KB)
    path, anchored = anchored_copy(GOLDEN, pipeline, tmp_path / "anchored.yaml")
    assert anchored == sum(1 for q in load_golden_set(GOLDEN).queries if q.expected_chunk_ids)
    by_ids = km.evaluate(pipeline, GOLDEN)
    by_evidence = km.evaluate(pipeline, path)
    for name in CHUNK_METRICS:
        np.testing.assert_array_equal(by_ids.scores[name], by_evidence.scores[name], name)
    assert by_evidence.params()["evidence_rule"] == "evidence-v1"
    assert by_evidence.params()["evidence_tau"] == 0.5
    rows = [json.loads(line) for line in by_evidence.per_query_path.read_text().splitlines()]
    audited = [r for r in rows if "evidence" in r]
    assert len(audited) == anchored
    for row in audited:
        relevant = {c["chunk_id"] for e in row["evidence"] for c in e["chunks"] if c["relevant"]}
        expected = set(next(q for q in load_golden_set(GOLDEN).queries
                            if q.id == row["id"]).expected_chunk_ids)
        assert relevant == expected
    recall = by_evidence.scores["evidence_recall_at_10"]
    assert np.nanmin(recall) >= 0 and np.nanmax(recall) <= 1


def test_private_set_writes_offsets_not_quotes(tmp_path):
    kb = corpus_dir(tmp_path, {"a": DOC_TEXT})
    path = golden_file(tmp_path, """\
        - id: q1
          query: zeta epsilon
          evidence: [{doc: a, quote: "delta epsilon zeta"}]
        """, private=True)
    result = km.evaluate(km.reference_pipeline("naive_baseline", kb), path)
    text = result.per_query_path.read_text()
    assert "delta epsilon" not in text and '"start": 18, "end": 36' in text
    assert "delta" not in json.dumps(result.params())


# --- 4. compare across chunkers ---------------------------------------------------------------

def test_compare_stays_at_chunk_level_across_chunkers_when_the_set_has_evidence(tmp_path):
    tight = km.reference_pipeline("naive_baseline", KB, chunker__max_chars=400)
    wide = km.reference_pipeline("naive_baseline", KB)
    path, _ = anchored_copy(GOLDEN, wide, tmp_path / "anchored.yaml")
    import yaml

    data = yaml.safe_load(path.read_text())
    for q in data["queries"]:
        q.pop("expected_chunk_ids", None)  # chunk truth from evidence only
    evidence_only = tmp_path / "evidence-only.yaml"
    evidence_only.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    comparison = km.compare(km.evaluate(wide, evidence_only), km.evaluate(tight, evidence_only))
    assert comparison.level.startswith("chunk")
    assert any("CHUNK-LEVEL comparison through the golden set's evidence spans (rule "
               "evidence-v1, tau 0.5)" in n for n in comparison.notes)
    assert {m.name for m in comparison.metrics} & {"mrr", "hit_at_5"}

    plain = km.compare(km.evaluate(wide, GOLDEN), km.evaluate(tight, GOLDEN))
    assert plain.level == "doc"
    assert any("DOC-LEVEL" in n and "the golden set has no evidence spans" in n
               for n in plain.notes)


# --- 5. golden anchor -------------------------------------------------------------------------

def run_cli(args: list[str]):
    from typer.testing import CliRunner

    from kebab_mlflow.cli import app

    return CliRunner().invoke(app, args)


def test_golden_anchor_keeps_comments_and_fields_and_reports_what_it_could_not(tmp_path):
    source = GOLDEN.read_text().replace('expected_chunk_ids: ["harbor-transit#2"]',
                                        'expected_chunk_ids: ["harbor-transit#2", "nope#9"]', 1)
    golden = write(tmp_path / "g.yaml", source)
    res = run_cli(["golden", "anchor", str(golden), "--corpus", str(KB), "--out",
                   str(tmp_path / "a.yaml")])
    assert res.exit_code == 0, res.output
    assert "anchored 44 chunk(s) of 38 queries" in res.output
    assert f"{golden}:24 [query g001]: chunk 'nope#9' is not in this chunking" in res.output
    anchored = (tmp_path / "a.yaml").read_text()
    removed = [line for line in source.splitlines() if line not in anchored.splitlines()]
    assert removed == []  # every line kept, comments included; evidence lines added
    assert golden.read_text() == source  # --out: the input is untouched
    first, second = load_golden_set(tmp_path / "a.yaml").queries[:2]
    assert not first.evidence  # one of its chunks could not be anchored
    evidence = second.evidence
    assert evidence[0].doc == "harbor-transit" and "48.5 million euros" in evidence[0].quote


def test_golden_anchor_writes_nothing_when_the_set_is_invalid(tmp_path):
    golden = write(tmp_path / "g.yaml", "queries:\n  - {id: q1}\n")
    res = run_cli(["golden", "anchor", str(golden), "--corpus", str(KB)])
    assert res.exit_code == 2 and "missing required key 'query'" in res.output
    assert golden.read_text() == "queries:\n  - {id: q1}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["g.yaml"]


class ChunkedRanker:
    """A pipeline over a real corpus and chunking whose rankings are seeded shuffles that hold
    each query's expected chunks at varied ranks (the metrics vary; the truth is the point)."""

    def __init__(self, corpus: Corpus, config: ChunkerConfig, truth: dict[str, list[str]]):
        from kebab_mlflow.pipeline.chunker import chunk_corpus

        self.corpus, self.config, self.truth = corpus, config, truth
        self.chunks = chunk_corpus(corpus, config)
        self.chunk_ids = {c.chunk_id for c in self.chunks}
        self.doc_of = {c.chunk_id: c.doc_id for c in self.chunks}
        self.doc_ids = {c.doc_id for c in self.chunks}
        self.versions = km.VersionSnapshot(chunker_version="test")

    def chunk_spans(self):
        return list(chunk_spans(self.corpus, self.config))

    def search(self, query: str, k: int):
        rng = np.random.default_rng(abs(hash(query)) % 2**32)
        picks = [self.chunks[i].chunk_id for i in rng.choice(len(self.chunks), k, replace=False)]
        for chunk_id in self.truth[query]:
            if rng.random() < 0.8 and chunk_id not in picks:
                picks[int(rng.integers(0, k))] = chunk_id
        ranked = dict.fromkeys(picks)
        return [km.Hit(chunk_id=c, doc_id=self.doc_of[c], score=1.0 / r, rank=r)
                for r, c in enumerate(ranked, 1)]

    def ask(self, query, hits):
        raise NotImplementedError


# ../shared beside the checkout (a worktree elsewhere: KEBAB_SHARED names the folder)
SCIFACT = Path(os.environ.get("KEBAB_SHARED", SHARED)) / "datasets" / "scifact"


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl.gz").is_file(),
                    reason="../shared/datasets/scifact is not here")
def test_anchored_scifact_size_set_gives_the_expected_chunk_ids_metrics_exactly(tmp_path):
    corpus = load_corpus(SCIFACT)
    config = ChunkerConfig("structure", 400, 100)
    pipeline = ChunkedRanker(corpus, config, {})
    chunks = {c.chunk_id: c for c in pipeline.chunks}
    rng = np.random.default_rng(7)
    ids = sorted(chunks)
    queries, truth = [], {}
    for n, i in enumerate(rng.choice(len(ids), 300, replace=False)):
        picked = [ids[i]] + ([ids[i + 1]] if n % 3 == 0 and i + 1 < len(ids) else [])
        text = f"q{n} " + " ".join(chunks[ids[i]].text.split()[:6])
        truth[text] = picked
        queries.append({"id": f"q{n}", "query": text, "expected_chunk_ids": picked})
    import yaml

    golden = write(tmp_path / "g.yaml", yaml.safe_dump({"name": "scifact-chunks",
                                                        "queries": queries}))
    from kebab_mlflow.evaluation.anchoring import anchor_golden_set

    report = anchor_golden_set(golden, SCIFACT, out=tmp_path / "a.yaml",
                               overrides={"chunker.max_chars": 400})
    assert report.queries_anchored == 300 and not report.not_anchored
    pipeline.truth = truth
    by_ids, by_evidence = km.evaluate(pipeline, golden), km.evaluate(pipeline, report.out)
    for name in CHUNK_METRICS:
        np.testing.assert_array_equal(by_ids.scores[name], by_evidence.scores[name], name)
    assert 0 < np.nanmean(by_ids.scores["mrr"]) < 1


# --- 5. import-squad writes evidence from the answer spans ------------------------------------

def test_import_squad_writes_each_answer_span_as_evidence(tmp_path):
    from kebab_mlflow.importers.squad import import_squad

    rows = []
    for a in range(4):
        ctx = f"In {a}0 BC the tally was 7. Later, in year {a}1, the tally was 7 again."
        rows += [  # the answer "7" at its second place, and a unique span with a wrong start
            {"id": f"q{a}", "question": f"What was the later tally {a}?", "title": f"T{a}",
             "passage_id": f"{a}_0", "context": ctx,
             "answers": {"text": ["7"], "answer_start": [ctx.rindex("7")]}},
            {"id": f"r{a}", "question": f"When was it later {a}?", "title": f"T{a}",
             "passage_id": f"{a}_0", "context": ctx,
             "answers": {"text": [f"year {a}1"], "answer_start": [999]}}]  # off: unique text
    src = write(tmp_path / "src" / "qa.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    s = import_squad(src, tmp_path / "out", abstain_share=0.0, test_share=0.5, seed=0)
    corpus = load_corpus(s.corpus)
    texts = {d.doc_id: d.text for d in corpus.documents}
    for split in s.splits:
        for q in load_golden_set(split.path).queries:
            (entry,) = q.evidence
            assert entry.doc in q.expected_doc_ids
            assert entry.quote == q.must_contain[0]
            if q.id.startswith("q"):
                assert entry.occurrence == 2  # answer_start picked the second "7"
            else:
                assert entry.occurrence is None and texts[entry.doc].count(entry.quote) == 1
        result = km.evaluate(km.reference_pipeline("naive_baseline", s.corpus,
                                                   chunker__max_chars=40,
                                                   chunker__overlap_chars=0), split.path,
                             ask=False)
        rows_out = [json.loads(line) for line in result.per_query_path.read_text().splitlines()]
        late = [r for r in rows_out if r["id"].startswith("q")]
        # the second "7" lies in the paragraph's second sentence: its chunk, not the first
        assert all([c["chunk_id"] for c in r["evidence"][0]["chunks"]] == [f"{r['id'][1]}_0#1"]
                   for r in late)


@pytest.mark.parametrize("config", [ChunkerConfig("structure", 200, 0),
                                    ChunkerConfig("structure", 200, 100),
                                    ChunkerConfig("structure", 800, 100),
                                    ChunkerConfig("document", 800, 100)])
def test_every_span_of_chunked_text_makes_some_chunk_relevant(config):
    """The guarantee τ = 0.5 buys (docs/evidence.md): seeded random spans of 1 to 1,500
    characters over the fixture documents, each holding some chunked character."""
    corpus = load_corpus(KB)
    index = ChunkIndex(IndexedChunk(chunk_id=c.chunk_id, doc_id=c.doc_id, spans=c.spans)
                       for c in chunk_spans(corpus, config))
    rng = np.random.default_rng(29)
    tried = 0
    for _ in range(3000):
        doc = corpus.documents[int(rng.integers(len(corpus.documents)))]
        start = int(rng.integers(len(doc.text)))
        end = min(len(doc.text), start + int(rng.integers(1, 1500)))
        if end <= start or not index.chunked(doc.doc_id) or \
                not any(s < end and start < e for s, e in index.chunked(doc.doc_id)):
            continue
        tried += 1
        resolution = resolve_query([LocatedSpan(doc=doc.doc_id, start=start, end=end)], index)
        assert resolution.grades, (doc.doc_id, start, end)
    assert tried > 2000
