"""`kebab-mlflow judge RUN` writes the text of each unjudged hit (issue 30, item 4): the chunk
the run retrieved, rebuilt from the corpus with the run's chunker, or the document for a run
file's hits; `--corpus DIR` when the corpus has moved; cut at 1000 characters; never for a
private set. Expected passages come from the pipeline's own index (the chunks it searched) and
from the corpus files, not from the judge code."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.golden import load_golden_set
from tests.conftest import GOLDEN, KB

runner = CliRunner()
LIMIT = 1000


def _collapsed(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LIMIT else text[:LIMIT] + " …"


def _judge(store_uri: str, out: Path, *extra: str) -> tuple[list[dict], str]:
    res = runner.invoke(app, ["judge", "a", "--out", str(out), "--no-log",
                              "--tracking-uri", store_uri, *extra])
    assert res.exit_code == 0, res.output
    return yaml.safe_load(out.read_text())["items"], res.output


def _run(store_uri: str, corpus: Path, **options) -> None:
    from kebab_mlflow.app.run import RunOptions, execute

    execute(RunOptions(golden=str(GOLDEN), corpus=str(corpus), tracking_uri=store_uri,
                       run_name="a", **options))


def test_passages_are_the_retrieved_chunks_rebuilt_with_the_runs_chunker(store_uri, tmp_path):
    from kebab_mlflow.config import build_config
    from kebab_mlflow.pipeline.reference import build_pipeline

    overrides = {"chunker.max_chars": 300, "chunker.overlap_chars": 50}
    _run(store_uri, KB, overrides=overrides)
    items, _ = _judge(store_uri, tmp_path / "q.yaml")
    indexed = {c.chunk_id: c.text for c in
               build_pipeline(build_config("naive_baseline", overrides), str(KB), {}).chunks}
    assert len(items) > 50
    assert all(i["passage"] == _collapsed(indexed[i["chunk_id"]]) for i in items)
    # smaller chunks than the default: a default-chunker rebuild would give other text
    default = {c.chunk_id: c.text for c in
               build_pipeline(build_config("naive_baseline", {}), str(KB), {}).chunks}
    assert any(_collapsed(default.get(i["chunk_id"], "")) != i["passage"] for i in items)


def test_corpus_moved_no_passages_unless_corpus_is_given(store_uri, tmp_path):
    moved = tmp_path / "kb-then"
    shutil.copytree(KB, moved)
    _run(store_uri, moved)
    shutil.rmtree(moved)
    items, output = _judge(store_uri, tmp_path / "q.yaml")
    assert items and not any("passage" in i for i in items)
    assert "no passage text: the runs' corpus was not found (pass --corpus DIR)" in output
    now = tmp_path / "kb-now"
    shutil.copytree(KB, now)
    items, output = _judge(store_uri, tmp_path / "q2.yaml", "--corpus", str(now))
    assert all(i["passage"] for i in items) and "no passage text" not in output
    res = runner.invoke(app, ["judge", "a", "--out", str(tmp_path / "q3.yaml"), "--no-log",
                              "--tracking-uri", store_uri, "--corpus", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no such file or folder" in res.output


def test_run_file_hits_show_their_document_cut_at_1000_characters(store_uri, tmp_path):
    from kebab_mlflow.pipeline.corpus import load_corpus

    docs = {d.doc_id: d for d in load_corpus(KB).documents}
    queries = [q.id for q in load_golden_set(GOLDEN).queries]
    run_file = tmp_path / "run.trec"
    run_file.write_text("".join(f"{q} Q0 {d} {r} {20 - r} sys\n" for q in queries
                                for r, d in enumerate(sorted(docs), 1) if r <= 10))
    _run(store_uri, KB, target=f"run:{run_file}")
    items, output = _judge(store_uri, tmp_path / "q.yaml")
    assert items and not any("passage" in i for i in items)  # a target's run names no corpus
    items, _ = _judge(store_uri, tmp_path / "q2.yaml", "--corpus", str(KB))

    def document(doc_id: str) -> str:
        d = docs[doc_id]
        return _collapsed(f"{d.title}. {d.text}" if d.title else d.text)

    assert items and all(i["passage"] == document(i["doc_id"]) for i in items)
    long = [i["passage"] for i in items if len(docs[i["doc_id"]].text) > 2 * LIMIT]
    assert long and all(len(p) == LIMIT + 2 and p.endswith(" …") for p in long)


def test_private_set_never_gets_passages_even_with_corpus(store_uri, tmp_path):
    from kebab_mlflow.app.run import RunOptions, execute

    data = yaml.safe_load(GOLDEN.read_text())
    data["private"] = True
    golden = tmp_path / "private.yaml"
    golden.write_text(yaml.safe_dump(data, sort_keys=False))
    execute(RunOptions(golden=str(golden), corpus=str(KB), tracking_uri=store_uri,
                       run_name="a"))
    out = tmp_path / "q.yaml"
    res = runner.invoke(app, ["judge", "a", "--golden", str(golden), "--out", str(out),
                              "--corpus", str(KB), "--tracking-uri", store_uri])
    assert res.exit_code == 0, res.output
    items = yaml.safe_load(out.read_text())["items"]
    assert items and not any("passage" in i or "query" in i for i in items)
    assert "no passage text" not in res.output
