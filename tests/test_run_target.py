"""``--target run:PATH``: TREC and JSON run files, scored as trec_eval (pytrec_eval) scores them."""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import TargetError
from kebab_mlflow.evaluation.evaluate import evaluate
from kebab_mlflow.golden import load_golden_set, parse_golden_set
from kebab_mlflow.targets import check_target, load_target
from tests.conftest import SHARED

pytrec_eval = pytest.importorskip("pytrec_eval")
runner = CliRunner()
CUTS = (1, 3, 5, 10)


def _golden_bytes(qrels: dict[str, dict[str, int]]) -> bytes:
    queries = [{"id": q, "query": f"text of {q}", "expected_doc_ids": rel}
               for q, rel in qrels.items()]
    return yaml.safe_dump({"name": "synthetic", "queries": queries}).encode()


def _synthetic(seed: int = 3, n_queries: int = 60):
    """A graded qrels set and a run with many score ties, its lines shuffled (trec_eval ignores
    line order and the rank column)."""
    rng = random.Random(seed)
    qrels, lines = {}, []
    for i in range(n_queries):
        qid = f"q{i}"
        docs = [f"d{rng.randrange(300)}" for _ in range(40)]
        docs = list(dict.fromkeys(docs))
        qrels[qid] = {d: rng.choice((1, 1, 2, 3)) for d in rng.sample(docs, 4)} | {
            f"unretrieved{i}": 1}
        for rank, doc in enumerate(docs, 1):
            score = rng.choice((1.0, 1.5, 2.0, 2.5, 3.0))  # ties on purpose
            lines.append(f"{qid} Q0 {doc} {rank} {score} synthetic")
    qrels["q_absent"] = {"d1": 1}  # in the golden set, not in the run
    lines.append("q_stray Q0 d1 1 9.0 synthetic")  # in the run, not in the golden set
    rng.shuffle(lines)
    return qrels, lines


def _pytrec(qrels, lines):
    run: dict[str, dict[str, float]] = {}
    for line in lines:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    measures = {"ndcg_cut." + ",".join(map(str, CUTS)), "recall." + ",".join(map(str, CUTS)),
                "P." + ",".join(map(str, CUTS)), "success." + ",".join(map(str, CUTS))}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def _compare(result, qrels, reference, absent=("q_absent",)):
    ids = list(result.query_ids)
    names = {"ndcg_at_{}_doc": "ndcg_cut_{}", "recall_at_{}_doc": "recall_{}",
             "precision_at_{}_doc": "P_{}", "hit_at_{}_doc": "success_{}"}
    checked = 0
    for ours, theirs in names.items():
        for k in CUTS:
            values = result.scores[ours.format(k)]
            for i, qid in enumerate(ids):
                if qid in absent:  # no hits: every score 0, as trec_eval -c would give
                    assert values[i] == 0.0
                    continue
                assert abs(values[i] - reference[qid][theirs.format(k)]) < 1e-9, (ours, k, qid)
                checked += 1
    assert checked == len(names) * len(CUTS) * (len(qrels) - len(absent))


@pytest.mark.parametrize("form", ["trec", "trec.gz", "tabs", "spaces", "json", "json.gz"])
def test_run_file_scores_equal_trec_eval(tmp_path, form, caplog):
    qrels, lines = _synthetic()
    golden = tmp_path / "g.yaml"
    golden.write_bytes(_golden_bytes(qrels))
    path = tmp_path / f"run.{form}"
    if form.startswith("json"):
        run: dict[str, dict[str, float]] = {}
        for line in lines:
            qid, _, doc, _, score, _ = line.split()
            run.setdefault(qid, {})[doc] = float(score)
        text = json.dumps(run)
    elif form == "tabs":
        text = "\n".join(line.replace(" ", "\t") for line in lines) + "\n"
    elif form == "spaces":  # runs of blanks: pyarrow cannot split it; the line reader can
        text = "\n".join(line.replace(" ", "   ") for line in lines) + "\n"
    else:
        text = "\n".join(lines) + "\n"
    path.write_bytes(gzip.compress(text.encode()) if form.endswith("gz") else text.encode())
    result = evaluate(f"run:{path}", golden, k=10)
    _compare(result, qrels, _pytrec(qrels, lines))
    err = caplog.text
    assert "1 query id(s) not in the golden set, ignored: q_stray" in err
    assert "1 golden query id(s) not in the file, scored as no hits: q_absent" in err
    assert result.overall["no_hit_rate"] == pytest.approx(1 / len(qrels))
    assert result.overall["error_rate"] == 0.0


def test_ties_break_by_doc_id_descending_as_trec_eval(tmp_path):
    # a9 > a10 > a1 in byte order: trec_eval ranks a9 first among equal scores
    path = tmp_path / "r.trec"
    path.write_text("q Q0 a1 1 1.0 t\nq Q0 a10 2 1.0 t\nq Q0 a9 3 1.0 t\nq Q0 b 4 0.5 t\n")
    hits = load_target(f"run:{path}").run.hits("q", 10)
    assert [h.doc_id for h in hits] == ["a9", "a10", "a1", "b"]
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    qrels = {"q": {"a10": 1}}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
        {"q": {"a1": 1.0, "a10": 1.0, "a9": 1.0, "b": 0.5}})
    assert ref["q"]["recip_rank"] == 1 / 2  # pytrec_eval agrees: a10 is second
    assert load_target(f"run:{path}").run.hits("q", 2)[-1].doc_id == "a10"  # cut at k


def test_versions_come_from_the_file_unless_the_spec_gives_them(tmp_path):
    import hashlib

    path = tmp_path / "bm25.trec"
    path.write_text("q Q0 d 1 1 t\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    target = load_target(f"run:{path}")
    assert set(target.versions.as_dict().values()) == {f"bm25.trec@{digest}"}
    target = load_target(f"run:{path}?index_version=bm25-v3")
    assert target.versions.index_version == "bm25-v3"
    assert target.versions.parser_version == f"bm25.trec@{digest}"


@pytest.mark.parametrize("content, message", [
    ("q Q0 d 1 1.0\n", r"r.trec:1: expected 6 fields"),
    ("q Q0 d 1 1.0 t\nq Q0 e 2 high t\n", r"r.trec:2: score 'high' is not a number"),
    ("q Q0 d 1 nan t\n", r"r.trec:1: score 'nan' is not finite"),
    ('{"q": {"d": "x"}}', r"score 'x' is not a finite number"),
    ('{"q": [1]}', r"must map doc ids to scores"),
])
def test_bad_run_files_name_the_line(tmp_path, content, message):
    path = tmp_path / "r.trec"
    path.write_text(content)
    with pytest.raises(TargetError, match=message):
        load_target(f"run:{path}")


def test_bad_specs(tmp_path):
    with pytest.raises(TargetError, match="not found"):
        load_target(f"run:{tmp_path / 'nope.trec'}")
    with pytest.raises(TargetError, match="expected run:PATH"):
        load_target("run:")
    path = tmp_path / "r.trec"
    path.write_text("q Q0 d 1 1 t\n")
    with pytest.raises(TargetError, match="run targets accept"):
        load_target(f"run:{path}?timeout=3")
    check_target(f"run:{path}")  # a sweep's up-front check: the file exists
    with pytest.raises(TargetError, match="not found"):
        check_target("run:missing.trec")


def test_duplicate_doc_in_a_query_is_that_querys_error(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q Q0 d 1 2 t\nq Q0 d 2 1 t\nz Q0 d 1 1 t\n")
    golden = parse_golden_set(_golden_bytes({"q": {"d": 1}, "z": {"d": 1}}), "g.yaml")
    result = evaluate(f"run:{path}", golden, k=10)
    rows = result.rows()
    assert "duplicate chunk id 'd'" in rows[0].error and rows[1].error is None
    assert result.overall["error_rate"] == 0.5


def test_cli_run_records_a_run_file_as_a_target(tmp_path, store_uri):
    from tests.conftest import mlflow_client

    qrels, lines = _synthetic(n_queries=12)
    golden = tmp_path / "g.yaml"
    golden.write_bytes(_golden_bytes(qrels))
    path = tmp_path / "system.trec"
    path.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["run", "--golden", str(golden), "--target", f"run:{path}",
                              "--k", "10", "--tracking-uri", store_uri, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    run = mlflow_client(store_uri).get_run(out["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["target"] == f"run:{path}"
    assert run.data.params["index_version"].startswith("system.trec@")
    reference = _pytrec(qrels, lines)
    present = [q for q in qrels if q != "q_absent"]
    expected = sum(reference[q]["ndcg_cut_10"] for q in present) / len(qrels)
    assert abs(out["metrics"]["ndcg_at_10_doc"] - expected) < 1e-9
    assert "not in the golden set, ignored: q_stray" in res.stderr


SCIFACT = SHARED / "datasets" / "scifact"


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl.gz").exists(),
                    reason="needs ../shared/datasets/scifact (BEIR SciFact)")
def test_scifact_bm25s_run_file_equals_trec_eval(tmp_path):
    """A run written by an independent tool (bm25s) for SciFact's test queries: nDCG@10,
    recall@100 and P@10 equal pytrec_eval's on the same file, query by query."""
    bm25s = pytest.importorskip("bm25s")
    from kebab_mlflow.importers.beir import import_beir

    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt") as fh:
        corpus = [json.loads(line) for line in fh]
    with open(SCIFACT / "queries.jsonl") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    import_beir(SCIFACT, "test", tmp_path / "scifact.yaml", None)
    golden = load_golden_set(tmp_path / "scifact.yaml")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{d['title']} {d['text']}" for d in corpus],
                                   stopwords="en", show_progress=False), show_progress=False)
    ids = [q.id for q in golden.queries]
    docs, scores = retriever.retrieve(bm25s.tokenize([queries[i] for i in ids], stopwords="en",
                                                     show_progress=False),
                                      k=100, show_progress=False)
    lines = [f"{qid} Q0 {corpus[d]['_id']} {r + 1} {s:.6f} bm25s"
             for qid, row, srow in zip(ids, docs, scores, strict=True)
             for r, (d, s) in enumerate(zip(row, srow, strict=True))]
    path = tmp_path / "bm25s.trec"
    path.write_text("\n".join(lines) + "\n")
    result = evaluate(f"run:{path}", golden, k=100)
    qrels = {q.id: dict(q.relevant_doc_grades) for q in golden.queries}
    run: dict[str, dict[str, float]] = {}
    for line in lines:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    reference = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.100"}).evaluate(run)
    for ours, theirs in (("ndcg_at_10_doc", "ndcg_cut_10"), ("recall_at_100_doc", "recall_100"),
                         ("precision_at_10_doc", "P_10")):
        mine = result.scores[ours]
        ref = np.array([reference[q][theirs] for q in ids])
        assert np.abs(mine - ref).max() < 1e-9, ours
        assert abs(result.overall[ours] - ref.mean()) < 1e-9
    if "map_doc" in result.scores:  # the MAP metric, where it exists
        ref = np.array([reference[q]["map_cut_100"] for q in ids])
        assert np.abs(result.scores["map_doc"] - ref).max() < 1e-9
    assert 0.6 < result.overall["ndcg_at_10_doc"] < 0.75  # bm25s on SciFact: about 0.66


def _without_latency(path):
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        assert row.pop("latency_ms") >= 0
    return rows


@pytest.mark.parametrize("private", [False, True])
def test_the_code_path_writes_what_the_hit_path_writes(tmp_path, monkeypatch, private):
    """A run file is scored from integer codes (evaluation/coded.py); the Hit path (any other
    target's) must give the same per_query.jsonl lines, scores and aggregate. Grades, chunk
    ids, doc ids not in the run, a query absent from the run, non-ASCII ids, ask queries."""
    from kebab_mlflow.targets.run import RunFileTarget

    qrels, lines = _synthetic(seed=5, n_queries=40)
    lines += ["q1 Q0 dé\"x 1 0.125 t", "q2 Q0 d7 1 -3.5e-07 t"]
    queries = [{"id": q, "query": f"text é of {q}", "expected_doc_ids": rel,
                **({"expected_chunk_ids": list(rel)[:2]} if i % 3 else {}),
                **({"ask": True} if i % 5 == 0 else {})}
               for i, (q, rel) in enumerate(qrels.items())]
    golden = tmp_path / "g.yaml"
    golden.write_text(yaml.safe_dump({"name": "s", "private": private, "queries": queries},
                                     allow_unicode=True), encoding="utf-8")
    run = tmp_path / "r.trec"
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from kebab_mlflow.evaluation import runner as runner_module

    used = []
    real = runner_module.timed_coded_hits

    def spy(pipeline, batch, depth):
        coded, seconds = real(pipeline, batch, depth)
        used.append(int(((coded[0] >= 0).sum(axis=1) == 0).sum()))
        return coded, seconds

    monkeypatch.setattr(runner_module, "timed_coded_hits", spy)
    kinds = {}
    for kind in ("codes", "hits"):
        if kind == "hits":
            monkeypatch.delattr(RunFileTarget, "coded")
        out = tmp_path / f"{kind}.jsonl"
        kinds[kind] = (evaluate(f"run:{run}", golden, k=10, per_query_path=out), out)
    (by_codes, codes_path), (by_hits, hits_path) = kinds["codes"], kinds["hits"]
    assert _without_latency(codes_path) == _without_latency(hits_path)
    assert len(_without_latency(codes_path)) == len(qrels)
    assert list(by_codes.scores) == list(by_hits.scores)  # same keys, same order
    for name, values in by_hits.scores.items():
        assert np.array_equal(by_codes.scores[name], values, equal_nan=True), name
    assert {k: v for k, v in by_codes.metrics.items() if not k.startswith("latency")} == \
        {k: v for k, v in by_hits.metrics.items() if not k.startswith("latency")}
    # and byte for byte, once the latencies are the same
    assert _latency_zeroed(codes_path) == _latency_zeroed(hits_path)
    assert used == [1]  # the code path scored the codes run (one batch; q_absent has no hits)


def _latency_zeroed(path) -> bytes:
    import re

    return re.sub(rb'"latency_ms": [-0-9.e+]+', b'"latency_ms": 0', path.read_bytes())


def test_a_file_already_in_trec_order_is_not_sorted_again_and_reads_the_same(tmp_path,
                                                                             monkeypatch):
    from kebab_mlflow.targets import run as run_module

    qrels, lines = _synthetic(seed=8, n_queries=30)
    shuffled = tmp_path / "shuffled.trec"
    shuffled.write_text("\n".join(lines) + "\n")
    loaded = load_target(f"run:{shuffled}").run
    ordered = tmp_path / "ordered.trec"
    ordered.write_text("".join(f"{q} Q0 {h.doc_id} {h.rank} {h.score} t\n"
                               for q in loaded.query_ids for h in loaded.hits(q, 1000)))
    sorts = []
    real = run_module._trec_order

    def spy(*args):
        sorts.append(real(*args))
        return sorts[-1]

    monkeypatch.setattr(run_module, "_trec_order", spy)
    again = load_target(f"run:{ordered}").run
    load_target(f"run:{shuffled}")
    assert sorts[0] is None and sorts[1] is not None  # ordered: no sort; shuffled: sorted
    for q in loaded.query_ids:
        assert again.hits(q, 1000) == loaded.hits(q, 1000)


@pytest.fixture(scope="module")
def many_blocks(tmp_path_factory):
    """A run file of three 8 MiB read blocks at least, ties and all; its line count; and
    the run as the plain line reader reads it."""
    from kebab_mlflow.targets.run import RankedRun, _read_trec_lines

    rng = np.random.default_rng(5)
    n = 800_000  # ~21 MiB
    queries = np.sort(rng.integers(0, 6_000, n))
    docs = rng.integers(0, 50_000, n)
    scores = np.round(rng.random(n), 2)  # many ties: trec_eval's doc-id order decides
    path = tmp_path_factory.mktemp("blocks") / "big.trec"
    path.write_text("".join(f"q{q} Q0 d{d} 0 {s} tag\n" for q, d, s in zip(
        queries.tolist(), docs.tolist(), scores.tolist(), strict=True)))
    assert path.stat().st_size > 2 << 23
    return path, n, RankedRun(_read_trec_lines(path, False))


@pytest.mark.parametrize(("group", "lines"), [(16, "exact"), (1, "exact"), (2, None),
                                              (1, "too few")])
def test_a_run_file_of_many_read_blocks_is_coded_as_the_line_reader_codes_it(
        many_blocks, monkeypatch, group, lines):
    """pyarrow streams a file past its 8 MiB block in pieces, each with its own dictionary of
    ids, unified a group of blocks at a time after the ids seen before (targets/run.py): the
    hits, and the ids in first-seen order, must be what the plain line reader gives — with
    one group or several, columns made for the line count or grown from parts (a gzipped
    file's; more hits than the count said)."""
    from kebab_mlflow.targets import run as run_module

    path, n, plain = many_blocks
    monkeypatch.setattr(run_module, "DRAIN_GROUP", group)
    count = {"exact": n, None: None, "too few": n // 2}[lines]
    arrow = run_module.RankedRun(run_module._read_trec_arrow(
        path, False, path.read_bytes()[:4096], count))
    assert arrow.query_ids == plain.query_ids and arrow.docs == plain.docs
    assert np.array_equal(arrow.doc_codes, plain.doc_codes)
    assert np.array_equal(arrow.scores, plain.scores)
    assert np.array_equal(arrow.bounds, plain.bounds)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 22])
def test_the_trec_order_check_in_blocks_agrees_with_the_whole_array_check(monkeypatch, block):
    """_in_trec_order compares a block of hits at a time (its temporaries stay small): a run
    out of order anywhere — across a block's edge too — must be found, as the check over
    whole arrays finds it."""
    from kebab_mlflow.targets import run as run_module

    monkeypatch.setattr(run_module, "ORDER_BLOCK", block)
    rng = np.random.default_rng(block)
    doc_order = -rng.permutation(6).astype(np.int32)
    for _ in range(300):
        n = int(rng.integers(0, 12))
        queries = np.sort(rng.integers(0, 3, n)) if rng.random() < 0.7 else rng.integers(0, 3, n)
        scores = rng.integers(0, 3, n).astype(float)
        docs = rng.integers(0, 6, n).astype(np.int32)
        keys = doc_order[docs]
        same = queries[1:] == queries[:-1]
        whole = bool(np.all(queries[1:] >= queries[:-1])
                     and not np.any(same & (scores[1:] > scores[:-1]))
                     and not np.any(same & (scores[1:] == scores[:-1]) & (keys[1:] < keys[:-1])))
        assert run_module._in_trec_order(queries, scores, docs, doc_order) is whole


def test_a_files_digest_and_line_count_come_from_one_read(tmp_path):
    from kebab_mlflow.files import digest_and_lines, file_digest

    for text, lines in ((b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\n\nb\n", 3),
                        (b"x" * (3 << 20) + b"\n" + b"y", 2)):
        path = tmp_path / "f"
        path.write_bytes(text)
        assert digest_and_lines(path) == (file_digest(path), lines)


def test_a_run_file_is_read_beside_the_golden_set_and_the_golden_sets_error_comes_first(
        tmp_path, monkeypatch):
    """prepare reads a ``run:`` file on a second thread while the golden set is parsed
    (pyarrow leaves the GIL): the same target as read after it; a bad golden set is still
    the error reported when the file is bad too, and a bad file's error is its own."""
    import threading

    import kebab_mlflow.targets as targets
    from kebab_mlflow.app.run import RunOptions, prepare
    from kebab_mlflow.errors import GoldenSetError

    qrels, lines = _synthetic(n_queries=12)
    golden = tmp_path / "g.yaml"
    golden.write_bytes(_golden_bytes(qrels))
    path = tmp_path / "system.trec"
    path.write_text("\n".join(lines) + "\n")
    readers = []
    real = targets.load_run
    monkeypatch.setattr(targets, "load_run",
                        lambda spec: readers.append(threading.current_thread().name) or real(spec))
    prepared = prepare(RunOptions(golden=str(golden), target=f"run:{path}", k=10))
    assert readers == ["kebab-run-file"]
    beside = prepared.pipeline.coded([q.id for q in prepared.golden.queries], 10)
    after = load_target(f"run:{path}").coded([q.id for q in prepared.golden.queries], 10)
    assert all(np.array_equal(a, b) for a, b in zip(beside, after, strict=True))

    bad_file = tmp_path / "bad.trec"
    bad_file.write_text("q1 Q0 d1 1\n")
    bad_golden = tmp_path / "bad.yaml"
    bad_golden.write_text("queries:\n  - id: q1\n")
    with pytest.raises(GoldenSetError, match="invalid golden set"):
        prepare(RunOptions(golden=str(bad_golden), target=f"run:{bad_file}", k=10))
    with pytest.raises(TargetError, match="bad.trec"):
        prepare(RunOptions(golden=str(golden), target=f"run:{bad_file}", k=10))
