"""A stored run rescored from its ``per_query.jsonl`` a batch at a time (evaluation/replay.py,
issue 32: ``rescore`` at a million queries held every row and was killed at 21.3 GB).

The file path must give what the rows path gives — the same ``per_query.jsonl`` bytes, scores
and aggregate — whether a batch is replayed by doc codes (a run file's lines) or by Hits
(anything else), and hold far less while it runs.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.evaluation import runner as runner_module
from kebab_mlflow.evaluation.evaluate import evaluate
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.evaluation.replay import CodedReplayTarget, FileRecording
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import load_golden_set
from tests.conftest import mlflow_client

runner = CliRunner()
PARAMS = {"k": "20", "cutoffs": "1,3,5,10,20", "seed": "0"}


def _run_file(tmp: Path, n_queries: int = 30, hits: int = 20, seed: int = 4) -> tuple[Path, Path]:
    """A graded golden set and a TREC run file over it (float scores, ties, a query the run
    never answers, non-ASCII and quoted doc ids)."""
    rng = random.Random(seed)
    queries, lines = [], []
    for i in range(n_queries):
        docs = list(dict.fromkeys(f"d{rng.randrange(200)}" for _ in range(hits)))
        if i == 3:
            docs[0] = 'dé"x'
        queries.append({"id": f"q{i}", "query": f"text of q{i}",
                        "expected_doc_ids": {d: rng.choice((1, 2)) for d in
                                             rng.sample(docs, min(3, len(docs)))}})
        lines += [f"q{i} Q0 {d} {r} {rng.choice((1.0, 2.5, 3.25))} t"
                  for r, d in enumerate(docs, 1)]
    queries.append({"id": "q_absent", "query": "never answered",
                    "expected_doc_ids": ["d1"]})
    golden, run = tmp / "g.yaml", tmp / "r.trec"
    golden.write_text(yaml.safe_dump({"name": "s", "queries": queries}, allow_unicode=True),
                      encoding="utf-8")
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return golden, run


def _edited(golden: Path, out: Path) -> Path:
    """``golden`` with one query dropped and another's truth moved to other documents."""
    data = yaml.safe_load(golden.read_text(encoding="utf-8"))
    data["queries"] = [q for q in data["queries"] if q["id"] != "q2"]
    data["queries"][0]["expected_doc_ids"] = {"d7": 2, "d9": 1}
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return out


def _both(per_query: Path, golden: Path, tmp: Path, params=PARAMS):
    """(file rescore, rows rescore) of ``per_query`` under ``golden``, each with its file."""
    golden_set = load_golden_set(golden)
    by_file = RecordedRun(run_id="r", file=FileRecording.read(per_query), params=params)
    by_rows = RecordedRun(run_id="r", rows=tuple(read_per_query(per_query)), params=params)
    return tuple(rescore(run, golden_set, intersect=True, quiet=True,
                         per_query_path=tmp / f"{name}.jsonl").result
                 for name, run in (("file", by_file), ("rows", by_rows)))


def _assert_same(a, b) -> None:
    assert a.per_query_path.read_bytes() == b.per_query_path.read_bytes()
    assert list(a.scores) == list(b.scores)
    for name, values in b.scores.items():
        assert np.array_equal(a.scores[name], values, equal_nan=True), name
    assert a.aggregate == b.aggregate
    assert a.bound_scores.keys() == b.bound_scores.keys()


def test_a_run_file_run_is_replayed_by_codes_with_the_hit_paths_bytes(tmp_path, monkeypatch):
    golden, run = _run_file(tmp_path)
    source = evaluate(f"run:{run}", golden, k=20, per_query_path=tmp_path / "src.jsonl")

    def no_hits(*_):
        raise AssertionError("a plain run file's lines took the Hit path")

    monkeypatch.setattr(CodedReplayTarget, "replay", no_hits)
    texts: list = []
    real = CodedReplayTarget.recorded
    monkeypatch.setattr(CodedReplayTarget, "recorded",
                        lambda self, queries: texts.extend(real(self, queries)[1])
                        or real(self, queries))
    own = rescore(RecordedRun(run_id="r", file=FileRecording.read(source.per_query_path),
                              params=PARAMS), load_golden_set(golden), quiet=True,
                  per_query_path=tmp_path / "own.jsonl").result
    assert own.per_query_path.read_bytes() == source.per_query_path.read_bytes()
    assert own.metrics == source.metrics
    # every line's hits text was written back as recorded but q3's, whose quoted doc id is
    # escaped: written from the codes (31 lines: q_absent's hits are [])
    assert len(texts) == 31 and texts.count(None) == 1
    monkeypatch.undo()

    edited = _edited(golden, tmp_path / "edited.yaml")
    by_file, by_rows = _both(source.per_query_path, edited, tmp_path)
    _assert_same(by_file, by_rows)
    assert by_file.metrics != source.metrics  # the edit changed what was scored
    assert "q2" not in {r.id for r in read_per_query(by_file.per_query_path)}


def _mixed(per_query: Path, out: Path) -> Path:
    """``per_query`` with lines the code path must not take (an int hit score, a chunk hit,
    an answer, an error, ranks not 1..n) and one it must take with its recorded times kept."""
    rows = [json.loads(line) for line in per_query.read_text(encoding="utf-8").splitlines()]
    rows[1]["hits"][0]["score"] = 2
    rows[5]["hits"][1]["chunk_id"] = rows[5]["hits"][1]["doc_id"] + "#0"
    rows[9]["answer"] = {"text": "an answer", "citations": [], "refusal_reason": None,
                         "confidence": 0.5, "raw_confidence": 0.5, "similarity": None}
    rows[13]["error"], rows[13]["hits"] = "RuntimeError: boom", []
    for hit in rows[17]["hits"]:  # ranks a Python target may give: written back as they are
        hit["rank"] += 10
    rows[20].update(latency_ms=12.5, stage_ms={"search": 12.5}, truncated_hits=4)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
    return out


def test_batches_of_other_lines_take_the_hit_path_and_give_the_same_result(tmp_path,
                                                                           monkeypatch):
    golden, run = _run_file(tmp_path)
    source = evaluate(f"run:{run}", golden, k=20, per_query_path=tmp_path / "src.jsonl")
    mixed = _mixed(source.per_query_path, tmp_path / "mixed.jsonl")
    monkeypatch.setattr(runner_module, "CODED_BATCH", 4)
    handed: list[bool] = []
    real = CodedReplayTarget.coded

    def spy(self, query_ids, depth):
        coded = real(self, query_ids, depth)
        handed.append(coded is not None)
        return coded

    monkeypatch.setattr(CodedReplayTarget, "coded", spy)
    for golden_file in (golden, _edited(golden, tmp_path / "edited.yaml")):
        handed.clear()
        by_file, by_rows = _both(mixed, golden_file, tmp_path)
        _assert_same(by_file, by_rows)
        assert True in handed and False in handed  # both paths were taken
    line = next(r for r in map(json.loads, by_file.per_query_path.read_text(
        encoding="utf-8").splitlines()) if r["id"] == "q20")
    assert (line["latency_ms"], line["stage_ms"], line["truncated_hits"]) == \
        (12.5, {"search": 12.5}, 4)


def test_a_replayed_line_keeps_its_hits_text_only_when_it_is_what_the_codes_write():
    """evaluation/replay.py's _recorded_hits: the text as recorded, or None (written anew)."""
    from kebab_mlflow.evaluation.coded import hits_json
    from kebab_mlflow.evaluation.line_decoding import REPLAY
    from kebab_mlflow.evaluation.replay import _recorded_hits
    from kebab_mlflow.files import json_texts

    hits = [{"rank": r, "chunk_id": d, "doc_id": d, "score": s}
            for r, (d, s) in enumerate([("dé1", 2.5), ("d2", 1e-05), ("d3", 1.0)], 1)]

    def line(hit_list, **dumps):
        return (json.dumps({"id": "q", "query": "x", "hits": hit_list, "answer": None,
                            "scores": {}}, ensure_ascii=False, **dumps) + "\n").encode()

    def kept(raw, depth=20):
        return _recorded_hits(raw, REPLAY.decode(raw), depth)

    written = hits_json([0, 1, 2], [repr(h["score"]) for h in hits],
                        json_texts([h["doc_id"] for h in hits]))
    assert kept(line(hits)) == written  # this writer's text, as the codes write it
    assert kept(line([])) == "[]"
    assert kept(line(hits, separators=(",", ":"))) is None  # another writer's spacing
    assert kept(line([{**hits[0], "title": "t"}, *hits[1:]])) is None  # an extra field
    assert kept(line([{**hits[0], "chunk_id": 'd"q', "doc_id": 'd"q'}])) is None  # escaped
    assert kept(line(hits), depth=2) is None  # more hits than the depth replayed


def test_a_file_of_another_writer_is_replayed_to_the_hit_paths_bytes(tmp_path):
    """Lines written with other separators and key order: every hits text is written anew,
    and the bytes are those of the Hit path's rescore."""
    golden, run = _run_file(tmp_path)
    source = evaluate(f"run:{run}", golden, k=20, per_query_path=tmp_path / "src.jsonl")
    other = tmp_path / "other.jsonl"
    rows = [json.loads(raw) for raw in source.per_query_path.read_text(
        encoding="utf-8").splitlines()]
    for row in rows:
        row["hits"] = [dict(reversed(list(h.items()))) for h in row["hits"]]
    other.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                             for r in rows), encoding="utf-8")
    by_file, by_rows = _both(other, _edited(golden, tmp_path / "edited.yaml"), tmp_path)
    _assert_same(by_file, by_rows)


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_recording_holds_a_batch_not_the_run(tmp_path, monkeypatch):
    """1,500 queries of 100 hits in batches of 64: the rows path holds every hit as a
    record; the file path one batch of decoded lines (and the offsets)."""
    monkeypatch.setattr(runner_module, "CODED_BATCH", 64)
    golden, run = _run_file(tmp_path, n_queries=1500, hits=100)
    source = evaluate(f"run:{run}", golden, k=100, per_query_path=tmp_path / "src.jsonl")
    golden_set = load_golden_set(golden)
    params = {"k": "100", "seed": "0"}

    def by(recorded):
        return lambda: rescore(recorded(), golden_set, quiet=True,
                               per_query_path=tmp_path / "out.jsonl")

    rows = _peak(by(lambda: RecordedRun(run_id="r", params=params,
                                        rows=tuple(read_per_query(source.per_query_path)))))
    file = _peak(by(lambda: RecordedRun(run_id="r", params=params,
                                        file=FileRecording.read(source.per_query_path))))
    print(f'peaks: file {file:,} B, rows {rows:,} B')
    assert file < rows / 3, (file, rows)


def test_cli_rescore_of_a_stored_run_file_run_streams_its_file(tmp_path, store_uri):
    golden, run = _run_file(tmp_path)
    res = runner.invoke(app, ["run", "--golden", str(golden), "--target", f"run:{run}",
                              "--k", "20", "--run-name", "src", "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    edited = _edited(golden, tmp_path / "edited.yaml")
    res = runner.invoke(app, ["rescore", "src", "--golden", str(edited), "--json",
                              "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # each step before the progress bar says what it does, in order, on stderr
    steps = [line for line in res.stderr.splitlines() if line.startswith("… ")]
    assert [s.split()[1] for s in steps] == ["reading", "checking", "reading", "logging"]
    assert str(edited) in steps[0] and "per_query.jsonl" in steps[1] and "MiB" in steps[2]
    client = mlflow_client(store_uri)
    src = client.search_runs([client.get_run(out["run_id"]).info.experiment_id],
                             "attributes.run_name = 'src'")[0]
    stored = Path(client.download_artifacts(src.info.run_id, "per_query.jsonl",
                                            str(tmp_path / "a")))
    derived = Path(client.download_artifacts(out["run_id"], "per_query.jsonl",
                                             str(tmp_path / "b")))
    params = dict(src.data.params)
    by_rows = rescore(RecordedRun(run_id="r", rows=tuple(read_per_query(stored)),
                                  params=params), load_golden_set(edited), quiet=True,
                      per_query_path=tmp_path / "rows.jsonl").result
    assert derived.read_bytes() == by_rows.per_query_path.read_bytes()
    assert out["removed_queries"] == 1


@pytest.mark.parametrize("broken", ["{not json\n", '{"id": "q0", "hits": 3}\n'])
def test_a_malformed_line_is_refused_with_its_file_and_line(tmp_path, broken):
    golden, run = _run_file(tmp_path, n_queries=4)
    source = evaluate(f"run:{run}", golden, k=20, per_query_path=tmp_path / "src.jsonl")
    lines = source.per_query_path.read_text(encoding="utf-8").splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:2]) + broken + "".join(lines[2:]), encoding="utf-8")
    from kebab_mlflow.errors import PerQueryError

    with pytest.raises(PerQueryError) as caught:
        FileRecording.read(bad, "run r's per_query.jsonl")
    assert "run r's per_query.jsonl:3" in str(caught.value.problems[0])
