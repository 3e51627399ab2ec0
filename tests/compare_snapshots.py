"""Snapshots of `kebab-mlflow compare` outputs, to check that a change to how compare reads
``per_query.jsonl`` leaves every byte of its output alone (issue 32).

    PYTHONPATH=. .venv/bin/python tests/compare_snapshots.py make STORE
    PYTHONPATH=. .venv/bin/python tests/compare_snapshots.py compare STORE OUT [CHUNK]

``make`` logs run pairs into a fresh SQLite store under STORE (the shipped fixtures: identical,
random, re-chunked (doc level: bounds for unjudged hits), shallow and small-set runs; two golden
versions (``--rescore``, ``--allow-golden-mismatch``); a private set; refusing vs answering
runs with abstention cases (``--by query_type``); a repeated run; synthetic doc-level run
files of 400 queries, 100 hits each). ``compare`` writes each pair's output in every format
(table, json, md, junit, pr-comment; ``--no-log``, so the store is never changed) into OUT,
one file each, and the exit code. Run ``compare`` before and after a change against the same
store and ``diff -r`` the two folders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FORMATS = ("table", "json", "md", "junit", "pr-comment")
GOLDEN = ROOT / "fixtures" / "golden_queries.yaml"
KB = ROOT / "fixtures" / "kb"

# (name, experiment, baseline, candidate, extra options)
PAIRS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("same", "fx", "base", "same", ()),
    ("rand", "fx", "base", "rand", ()),
    ("rand-rev", "fx", "rand", "base", ()),
    ("rechunk", "fx", "base", "rechunk", ()),
    ("rechunk-off", "fx", "base", "rechunk", ("--unjudged", "off")),
    ("rechunk-gate", "fx", "rand", "rechunk", ("--unjudged", "gate")),
    ("small", "fx", "small_base", "small_top1", ()),
    ("shallow", "fx", "small_base_k5", "small_rand_k5", ("--primary", "recall_at_5_doc")),
    ("bytype", "fx", "base", "rand", ("--by", "query_type")),
    ("repeat", "fx", "base", "repeat", ()),
    ("versions-rescore", "gv", "a", "b", ("--rescore",)),
    ("versions-mismatch", "gv", "a", "b", ("--allow-golden-mismatch",)),
    ("private", "pv", "a", "b", ()),
    ("abstention", "ab", "base", "cand", ("--by", "query_type")),
    ("runfile", "rf", "r0", "r1", ()),
    ("runfile-gate", "rf", "r1", "r0", ("--unjudged", "gate", "--gate", "recall_at_100_doc")),
    ("runfile-mismatch", "rf", "r0", "r2", ("--allow-golden-mismatch",)),
]


def _uri(store: Path) -> str:
    return f"sqlite:///{store / 'mlflow.db'}"


def make(store: Path) -> None:
    import os

    from bench_scale import synthetic_run_file, synthetic_set

    from kebab_mlflow.app.run import RunOptions, execute
    from tests.test_gate_abstention import answers_golden, run_refuser_then_answerer

    store.mkdir(parents=True, exist_ok=True)
    os.environ["KEBAB_CACHE_DIR"] = str(store / "cache")
    os.chdir(store)
    uri = _uri(store)

    def run(name: str, experiment: str, golden: Path = GOLDEN, preset: str = "naive_baseline",
            k: int = 10, **kw: object) -> None:
        execute(RunOptions(golden=str(golden), corpus=str(KB), tracking_uri=uri, preset=preset,
                           run_name=name, k=k, experiment=experiment, **kw))  # type: ignore[arg-type]

    data = yaml.safe_load(GOLDEN.read_text())
    subset = store / "small.yaml"
    small = dict(data, queries=[q for q in data["queries"] if q["id"] in ("g001", "g003", "g038")])
    subset.write_text(yaml.safe_dump(small, sort_keys=False))
    run("base", "fx")
    run("same", "fx")
    run("rand", "fx", preset="random_retrieval")
    run("rechunk", "fx", overrides={"chunker.overlap_chars": 50})
    run("small_base", "fx", golden=subset)
    run("small_top1", "fx", golden=subset, overrides={"top_k": 1})
    run("small_base_k5", "fx", golden=subset, k=5)
    run("small_rand_k5", "fx", golden=subset, preset="random_retrieval", k=5)
    run("repeat", "fx", preset="random_retrieval", repeat=2)
    # two golden versions: the second drops one query's doc truth and adds a judged doc
    g2 = store / "golden_v2.yaml"
    edited = json.loads(json.dumps(data))
    edited["queries"][0]["expected_doc_ids"] = edited["queries"][0].get("expected_doc_ids", [])
    edited["queries"][1].pop("expected_chunk_ids", None)
    edited["queries"] = edited["queries"][:-2]
    g2.write_text(yaml.safe_dump(edited, sort_keys=False))
    run("a", "gv", overrides={"bm25.k1": 1.2})
    run("b", "gv", golden=g2, overrides={"bm25.k1": 0.4})
    private = store / "private.yaml"
    private.write_text(yaml.safe_dump(dict(data, private=True), sort_keys=False))
    run("a", "pv", golden=private)
    run("b", "pv", golden=private, preset="random_retrieval")
    answers = answers_golden(store / "answers.yaml", types=({"query_type": "single_doc"},
                                                            {"query_type": "abstention"}))
    ab = store / "ab"
    ab.mkdir(exist_ok=True)
    run_refuser_then_answerer(ab, answers, uri.replace("mlflow.db", "mlflow.db"))
    # the abstention runs went to kebab-eval; move them by running into their own experiment
    # is not possible through the helper, so "ab" compares use --experiment kebab-eval
    n = 400
    golden_rf = synthetic_set(n, 0, store / "rf.yaml")
    golden_rf2 = synthetic_set(n - 20, 1, store / "rf2.yaml")
    for name, seed, g in (("r0", 0, golden_rf), ("r1", 1, golden_rf), ("r2", 2, golden_rf2)):
        trec = synthetic_run_file(n, seed, store / f"{name}.trec")
        execute(RunOptions(golden=str(g), target=f"run:{trec}", tracking_uri=uri, k=100,
                           run_name=name, experiment="rf"))


def compare(store: Path, out: Path) -> None:
    from kebab_mlflow.cli import app

    runner = CliRunner()
    out.mkdir(parents=True, exist_ok=True)
    for name, experiment, base, cand, extra in PAIRS:
        exp = "kebab-eval" if experiment == "ab" else experiment
        for fmt in FORMATS:
            res = runner.invoke(app, ["compare", base, cand, "--format", fmt, "--no-log",
                                      "--experiment", exp, *extra, "--tracking-uri",
                                      _uri(store)])
            text = res.stdout if hasattr(res, "stdout") else res.output
            (out / f"{name}.{fmt}").write_text(f"exit {res.exit_code}\n{text}")
            if res.exit_code not in (0, 1):
                print(f"{name} {fmt}: exit {res.exit_code}: {res.output[-400:]}",
                      file=sys.stderr)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if len(rest) == 3:  # compare STORE OUT CHUNK: the bounds' rescore CHUNK queries at a time
        import kebab_mlflow.comparison.unjudged as unjudged

        unjudged.CHUNK = int(rest.pop())
    if command == "make":
        make(Path(rest[0]).resolve())
    else:
        compare(Path(rest[0]).resolve(), Path(rest[1]).resolve())
