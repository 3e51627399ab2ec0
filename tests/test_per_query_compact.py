"""Compare reads ``per_query.jsonl`` compact (issue 32): the compact rows say what the whole
rows say, and every output of a comparison is the same from either."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import kebab_mlflow.comparison.unjudged as unjudged
from kebab_mlflow.api import side_of_result
from kebab_mlflow.comparison.pr_comment import to_pr_comment
from kebab_mlflow.comparison.records import CompareOptions, RowSource, RunSide
from kebab_mlflow.comparison.rendering import dumps, to_junit, to_markdown
from kebab_mlflow.comparison.unjudged import UnjudgedMode, with_unjudged_bounds
from kebab_mlflow.comparison.verdict import compare_reads, compare_runs
from kebab_mlflow.errors import ComparisonRefused, PerQueryError, ScoreNotKept
from kebab_mlflow.evaluation.bounds import optimistic_golden, unjudged_docs
from kebab_mlflow.evaluation.evaluate import evaluate, reference_pipeline
from kebab_mlflow.evaluation.per_query import (
    CompactRow,
    PerQueryRow,
    read_compact,
    read_per_query,
    read_rows_at,
)
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenFile, GoldenSet, load_golden_set
from tests.conftest import GOLDEN, KB


def _same(compact: CompactRow, whole: PerQueryRow) -> None:
    """Every field compare reads, checked against the whole row's own fields."""
    assert compact.id == whole.id and compact.query == whole.query
    assert list(compact.score_names) == list(whole.scores)
    assert compact.scores == whole.scores
    for name in [*whole.scores, "not_a_metric"]:
        assert compact.score(name) == whole.scores.get(name)
    assert compact.first_relevant_rank == whole.first_relevant_rank
    assert compact.abstention == whole.abstention and compact.flip_rate == whole.flip_rate
    assert compact.has_evidence == (whole.evidence is not None)
    assert compact.has_hits == bool(whole.hits)
    assert compact.top_score == (float(whole.hits[0].score) if whole.hits else None)
    answer = whole.answer
    assert compact.refused == (None if answer is None else answer.refusal_reason is not None)


def _check_file(path: Path) -> None:
    whole = list(read_per_query(path))
    compact = list(read_compact(path))
    assert len(compact) == len(whole)
    for c, w in zip(compact, whole, strict=True):
        _same(c, w)
    again = list(read_rows_at(path, [c.offset for c in reversed(compact)]))
    assert again == whole[::-1]  # the whole row back from its byte offset, in any order


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory):
    """Two real evaluations of the fixtures (BM25 and random retrieval), in memory."""
    root = tmp_path_factory.mktemp("compact")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEBAB_CACHE_DIR", str(root / "cache"))
        return {name: evaluate(reference_pipeline(preset, KB), GOLDEN,
                               per_query_path=root / f"{name}.jsonl")
                for name, preset in (("base", "naive_baseline"), ("rand", "random_retrieval"))}


def test_compact_rows_equal_the_whole_rows_of_real_runs(fixture_runs):
    for result in fixture_runs.values():
        _check_file(result.per_query_path)


HIT = {"rank": 1, "chunk_id": "d1#0", "doc_id": "d1", "score": 0.75}
EDGE_LINES = [
    # no hits, no answer, a null score, no first_relevant_rank (an old file)
    {"id": "q1", "query": None, "hits": [], "answer": None, "scores": {"mrr": None, "x": 1.0},
     "latency_ms": 1.0, "error": "TimeoutError"},
    # a refusal; a multi-byte query (byte offsets, not characters)
    {"id": "q2", "query": "서울의 인구는?", "hits": [HIT], "scores": {"mrr": 1.0, "x": 0.0},
     "answer": {"text": "", "citations": [], "refusal_reason": "gate", "confidence": 0.1,
                "raw_confidence": 0.1, "similarity": None},
     "latency_ms": 2, "error": None, "first_relevant_rank": {"chunk": 1, "doc": None},
     "abstention": "correct_refusal"},
    # an answer, repeats with a flip rate, evidence, truncated hits, other score names
    {"id": "q3", "query": "q?", "hits": [HIT, dict(HIT, rank=2, score=0.5)],
     "answer": {"text": "t", "citations": ["d1#0"], "refusal_reason": None, "confidence": 0.9,
                "raw_confidence": 0.9, "similarity": 0.5},
     "scores": {"hit_at_1": 0.0}, "latency_ms": 3.0, "error": None,
     "first_relevant_rank": {"chunk": 0, "doc": 2}, "repeats": [], "flip_rate": 0.5,
     "topk_churn": 0.0, "evidence": [{"doc": "d1", "start": 0, "end": 4}], "truncated_hits": 3},
]


def test_compact_rows_equal_the_whole_rows_on_edge_cases(tmp_path):
    path = tmp_path / "edge.jsonl"
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in EDGE_LINES)
    path.write_text(text.replace("\n", "\n\n", 1) + "\n", encoding="utf-8")  # a blank line
    _check_file(path)
    q1, q2, q3 = read_compact(path)
    assert (q1.has_hits, q1.top_score, q1.refused, q1.score("mrr")) == (False, None, None, None)
    assert (q2.refused, q2.top_score, q2.abstention) == (True, 0.75, "correct_refusal")
    assert (q3.refused, q3.flip_rate, q3.has_evidence, q3.score("mrr")) == (False, 0.5, True, None)
    # rows with the same score names (and the same first ranks) share one copy
    assert q1._layout is next(read_compact(path))._layout


def test_a_malformed_line_is_the_same_error_as_the_whole_reader(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(EDGE_LINES[0]) + "\n" + '{"id": 3, "hits": "no"}\n')
    with pytest.raises(PerQueryError) as whole:
        list(read_per_query(path, "run r artifact per_query.jsonl"))
    with pytest.raises(PerQueryError) as compact:
        list(read_compact(path, "run r artifact per_query.jsonl"))
    assert str(compact.value) == str(whole.value) and ":2" in str(whole.value)


def _compact_side(side: RunSide, path: Path) -> RunSide:
    return replace(side, rows=tuple(read_compact(path)),
                   source=RowSource(path=path, shown_as=str(path)))


def _outputs(c, baseline: RunSide, candidate: RunSide) -> list[str]:
    return [dumps(c), to_markdown(c), to_junit(c), to_pr_comment(c, baseline, candidate)]


def _pairs(fixture_runs):
    sides = {name: side_of_result(r, name) for name, r in fixture_runs.items()}
    compact = {name: _compact_side(s, fixture_runs[name].per_query_path)
               for name, s in sides.items()}
    return sides, compact


@pytest.mark.parametrize("base, cand", [("base", "rand"), ("rand", "base"), ("base", "base")])
def test_a_comparison_is_the_same_from_compact_rows_in_every_format(fixture_runs, base, cand):
    sides, compact = _pairs(fixture_runs)
    options = CompareOptions(resamples=500)
    whole = compare_runs(sides[base], sides[cand], options)
    small = compare_runs(compact[base], compact[cand], options)
    assert whole.queries  # a real comparison, some of it Regressions when rand is the candidate
    assert _outputs(small, compact[base], compact[cand]) == _outputs(whole, sides[base],
                                                                      sides[cand])


def test_missing_queries_compare_the_same_from_compact_rows(fixture_runs, tmp_path):
    sides, compact = _pairs(fixture_runs)
    lines = fixture_runs["rand"].per_query_path.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[3:]))  # the candidate lacks three queries
    cand_whole = replace(sides["rand"], rows=tuple(read_per_query(cut)))
    cand = _compact_side(sides["rand"], cut)
    options = CompareOptions(resamples=500, allow_golden_mismatch=True)
    whole = compare_runs(sides["base"], cand_whole, options)
    small = compare_runs(compact["base"], cand, options)
    assert whole.dropped == {"baseline_only": 3, "candidate_only": 0}
    assert _outputs(small, compact["base"], cand) == _outputs(whole, sides["base"], cand_whole)


def _bounds_notes_in_one_rescore(result, baseline, candidate, golden, options, k=10):
    """The notes as the bounds made them before issue 32: the whole rows of both sides, one
    rescore each under the optimistic golden set."""
    counts = {role: unjudged_docs(golden, side.rows, k)
              for role, side in (("baseline", baseline), ("candidate", candidate))}
    union: dict[str, list[str]] = {}
    for docs in counts.values():
        for qid, ids in docs.items():
            union[qid] = list(dict.fromkeys([*union.get(qid, []), *ids]))
    optimistic = optimistic_golden(golden, union)

    def side(s):
        run = RecordedRun(run_id=s.run_id, rows=s.rows, params=s.params, tags=s.tags)
        r = rescore(run, optimistic, intersect=True, quiet=True).result
        return replace(s, rows=r.rows(), per_query_sha256=r.per_query_sha256,
                       tags={**s.tags, "kebab.golden_sha256": golden.digest,
                             "kebab.per_query_sha256": r.per_query_sha256})

    upper = compare_runs(side(baseline), side(candidate), options)
    per_query = {role: sum(map(len, d.values())) / max(len(d), 1) for role, d in counts.items()}
    m, u = result.primary, upper.primary
    return [f"unjudged hits in the top {k}: " + ", ".join(
        f"{role} {sum(map(len, d.values()))} ({per_query[role]:.1f}/query)"
        for role, d in counts.items()),
        f"{m.name} with unjudged counted relevant: baseline {m.baseline:.4f} .. "
        f"{u.baseline:.4f}, candidate {m.candidate:.4f} .. {u.candidate:.4f}; verdict "
        f"{upper.verdict} (" + ("holds" if upper.verdict == result.verdict else
                               f"{result.verdict} does not hold") + " within the bounds)"]


def _golden_source(kind: str, tmp_path: Path) -> GoldenSet | GoldenFile:
    """The golden set as the bounds take it: loaded, its file streamed, or a file whose
    settings come after its queries (streamed, refused, then loaded whole)."""
    if kind == "loaded":
        return load_golden_set(GOLDEN)
    if kind == "file":
        return GoldenFile.of(GOLDEN)
    text = GOLDEN.read_text()
    start = text.index("queries:")
    path = tmp_path / "settings-after.yaml"
    path.write_text(text[start:] + text[:start])
    def lineless(g: GoldenSet) -> list:
        return [replace(q, line=0) for q in g.queries]

    assert lineless(load_golden_set(path)) == lineless(load_golden_set(GOLDEN))
    return GoldenFile.of(path)


@pytest.mark.parametrize("source", ["loaded", "file", "settings-after"])
@pytest.mark.parametrize("chunk", [1, 7, 10_000])
@pytest.mark.parametrize("base, cand", [("base", "rand"), ("rand", "base")])
def test_the_bounds_for_unjudged_hits_are_the_same_a_chunk_at_a_time(fixture_runs, base, cand,
                                                                     chunk, source, tmp_path,
                                                                     monkeypatch):
    """The bounds rescore a chunk of the golden set at a time, reading whole rows back from
    the compact sides: any chunk size, from the loaded set or its file streamed, gives what
    one rescore of all the whole rows gives."""
    sides, compact = _pairs(fixture_runs)
    golden = load_golden_set(GOLDEN)
    options = CompareOptions(resamples=500)
    result = compare_runs(sides[base], sides[cand], options)
    expected = _bounds_notes_in_one_rescore(result, sides[base], sides[cand], golden, options)
    monkeypatch.setattr(unjudged, "CHUNK", chunk)
    small = with_unjudged_bounds(compare_runs(compact[base], compact[cand], options),
                                 compact[base], compact[cand], _golden_source(source, tmp_path),
                                 options, UnjudgedMode.REPORT)
    assert list(small.notes[-2:]) == expected
    assert "unjudged hits in the top 10: baseline " in expected[0]


def _raw_lines(path: Path) -> list[bytes]:
    return [raw for raw in path.read_bytes().splitlines(keepends=True) if raw.strip()]


def test_the_msgspec_decoder_reads_every_good_line_as_the_checked_reader(fixture_runs,
                                                                         tmp_path):
    """The fast path (evaluation/line_decoding.py) takes every line of real runs and of the
    edge cases — it is not falling back — and gives the checked reader's row, value and type,
    with the top hit only (read_compact) or every hit (read_rows_at)."""
    from kebab_mlflow.evaluation.per_query import _fast_row, _row, read_rows_at

    edge = tmp_path / "edge.jsonl"
    edge.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n"
                            for line in EDGE_LINES), encoding="utf-8")
    for path in (*(r.per_query_path for r in fixture_runs.values()), edge):
        for top_hit_only in (True, False):
            for raw in _raw_lines(path):
                fast, checked = _fast_row(raw, top_hit_only), _row(raw, "x", top_hit_only)
                assert fast == checked
                assert [type(h.score) for h in fast.hits] == [type(h.score)
                                                              for h in checked.hits]
        offsets = [r.offset for r in read_compact(path)][::-1]
        assert list(read_rows_at(path, offsets)) == list(read_per_query(path))[::-1]


BROKEN = [  # (key, value) put into a good line: each breaks one of per_query's _FIELDS rules
    ("id", 5), ("id", None), ("hits", "no"), ("hits", [dict(HIT, rank=0)]),
    ("hits", [dict(HIT, rank=True)]), ("hits", [dict(HIT, rank=1.0)]),
    ("hits", [dict(HIT, score=True)]), ("hits", [dict(HIT, score=None)]),
    ("hits", [{k: v for k, v in HIT.items() if k != "doc_id"}]), ("hits", [3]),
    ("scores", {"mrr": True}), ("scores", {"mrr": "1"}), ("scores", []),
    ("answer", []), ("answer", {"citations": [1]}), ("answer", {"confidence": True}),
    ("latency_ms", None), ("latency_ms", True), ("error", 3), ("query", 3),
    ("first_relevant_rank", {"doc": -1}), ("first_relevant_rank", {"doc": 1.5}),
    ("first_relevant_rank", []), ("abstention", "maybe"), ("flip_rate", 1.5),
    ("flip_rate", True), ("evidence", [1]), ("evidence", {}), ("truncated_hits", -1),
    ("truncated_hits", True), ("stage_ms", {"search": True}), ("stage_ms", []),
]


@pytest.mark.parametrize("key, value", BROKEN)
def test_a_line_the_checked_reader_refuses_the_fast_one_refuses_too(tmp_path, key, value):
    """Never more lenient: each broken line is refused by the msgspec structs (so the checked
    path reads it) and read_compact reports what read_per_query reports."""
    from kebab_mlflow.evaluation.per_query import _fast_row

    raw = json.dumps({**EDGE_LINES[2], key: value}).encode() + b"\n"
    assert _fast_row(raw) is None and _fast_row(raw, top_hit_only=True) is None
    path = tmp_path / "bad.jsonl"
    path.write_bytes(raw)
    with pytest.raises(PerQueryError) as whole:
        list(read_per_query(path))
    with pytest.raises(PerQueryError) as compact:
        list(read_compact(path))
    assert str(compact.value) == str(whole.value) and f"'{key}'" in str(whole.value)


@pytest.mark.parametrize("raw", [b"\xff\xfe{}\n", b"[1, 2]\n", b"{\"id\": \"q\"\n",
                                 b"[" * 100_000 + b"\n"])
def test_undecodable_lines_fall_back_to_the_checked_errors(tmp_path, raw):
    from kebab_mlflow.evaluation.per_query import _fast_row

    assert _fast_row(raw) is None
    path = tmp_path / "bad.jsonl"
    path.write_bytes(raw)
    with pytest.raises(PerQueryError) as compact:
        list(read_compact(path))
    assert "bad.jsonl:1" in str(compact.value)


def test_the_candidate_and_the_bounds_rows_hold_the_baselines_strings(fixture_runs, tmp_path):
    """Both sides carry the same query ids and texts: the candidate's compact rows hold the
    baseline's string objects (a 1M-query compare: ~170 MB), and the rows the bounds rescore
    hold their side's ids; a text that differs stays the candidate's own."""
    path = fixture_runs["base"].per_query_path
    baseline = {r.id: r for r in read_compact(path)}
    lines = path.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["query"] = first["query"] + " (edited)"
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(json.dumps(first).encode() + b"\n" + b"".join(lines[1:]))
    candidate = list(read_compact(edited, twins=baseline))
    assert [r.id for r in candidate] == list(baseline)
    assert all(r.id is baseline[r.id].id for r in candidate)
    assert candidate[0].query == baseline[first["id"]].query + " (edited)"
    assert all(r.query is baseline[r.id].query for r in candidate[1:])
    for row, twin in zip(candidate[1:], list(baseline.values())[1:], strict=True):
        assert row.scores == twin.scores and row.top_score == twin.top_score

    _, compact = _pairs(fixture_runs)
    counts, upper_b, upper_c = unjudged._optimistic_sides(
        compact["base"], compact["rand"], load_golden_set(GOLDEN), 10, {"ndcg_at_10_doc"})
    for side, upper in ((compact["base"], upper_b), (compact["rand"], upper_c)):
        assert upper.rows and all(r.id is side.by_id[r.id].id for r in upper.rows)


def test_a_narrowed_read_keeps_only_the_scores_it_is_asked_for(fixture_runs):
    """``names``: only those values are kept, yet every score's name and whether it has a
    value stay known (compare's valid-metric lists and "metrics with values"); reading one
    left out is a bug, raised, never a silent None."""
    names = {"mrr", "ndcg_at_10_doc", "not_in_the_file"}
    for result in fixture_runs.values():
        whole = list(read_per_query(result.per_query_path))
        narrow = list(read_compact(result.per_query_path, names=names))
        assert len(narrow) == len(whole)
        for c, w in zip(narrow, whole, strict=True):
            assert list(c.score_names) == list(w.scores)
            assert c.scores == {n: v for n, v in w.scores.items() if n in names}
            assert all(c.has_value(n) == (v is not None) for n, v in w.scores.items())
            assert c.score("not_in_the_file") is None and not c.has_value("not_in_the_file")
            left_out = next(n for n in w.scores if n not in names)
            with pytest.raises(ScoreNotKept):
                c.score(left_out)
        assert any(c.has_value("mrr_doc") for c in narrow)  # a left-out score with values


@pytest.mark.parametrize("options", [
    CompareOptions(resamples=500),
    CompareOptions(resamples=500, primary="recall_at_10_chunk", gates=("ndcg_at_10_chunk",
                                                                   "map_doc")),
    CompareOptions(resamples=500, gates=("not_a_metric",)),
], ids=["default", "named", "unknown-gate"])
def test_a_comparison_is_the_same_from_the_scores_it_reads(fixture_runs, options):
    """Sides read with only :func:`compare_reads`' scores compare as whole rows do, in every
    format, with the bounds, and refuse an unknown metric with the same valid-metric list."""
    sides, _ = _pairs(fixture_runs)
    names = compare_reads(options, [sides["base"].tags, sides["rand"].tags])
    assert len(names) < len(next(iter(sides["base"].rows)).scores) / 2
    narrow = {name: replace(s, rows=tuple(read_compact(fixture_runs[name].per_query_path,
                                                       names=names)),
                            source=RowSource(path=fixture_runs[name].per_query_path,
                                             shown_as=str(fixture_runs[name].per_query_path)))
              for name, s in sides.items()}

    def compared(base: RunSide, cand: RunSide) -> list[str]:
        try:
            c = compare_runs(base, cand, options)
        except ComparisonRefused as refused:
            return [str(refused)]
        c = with_unjudged_bounds(c, base, cand, load_golden_set(GOLDEN), options,
                                 UnjudgedMode.REPORT)
        return _outputs(c, base, cand)

    expected = compared(sides["base"], sides["rand"])
    assert compared(narrow["base"], narrow["rand"]) == expected
    if options.gates == ("not_a_metric",):
        assert "valid metrics: " in expected[0] and "map_doc" in expected[0]
    else:
        assert len(expected) == 4 and "unjudged hits in the top" in expected[0]
