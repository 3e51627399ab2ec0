"""KorQuAD 1.0 dev benchmark (issue 20): each lexical tokenizer side by side with bm25s over the
same tokens, answers with a calibrator fitted on the train split, and each tokenizer's speed.

    .venv/bin/python bench/bench_korquad.py [--seed 0] [--tokenizers english,cjk-bigram,...]

KorQuAD's license (CC BY-ND 2.0 KR) forbids sharing converted copies, so the dev file is
converted at run time, into a temporary folder, by `import-squad` (defaults: split by article,
seed 0, 10% of each split's paragraphs dropped), twice: with the abstention rule of issue 20's
fix (a question of a dropped paragraph is an abstention case only when its gold span is in no
kept paragraph; the others are left out) and with the rule before it (every question of a
dropped paragraph, ``abstention="dropped"``). Both have the same corpus and answerable questions.

- Retrieval: question → its paragraph on the test split (answerable questions), top 10,
  ``chunker.mode=document``; our BM25 and bm25s (``method="lucene"``, k1 0.9, b 0.4) are fed the
  same token lists of the same tokenizer; nDCG@10 by pytrec_eval over rank-derived scores (so
  both keep their own order), hit@1 and hit@10.
- Answers: the reference pipeline on each test split (``runner.run_queries``, as ``run`` does)
  with a Platt calibrator fitted on the same import's train split (``fit_with_pipeline``, the
  code behind ``kebab-mlflow calibrate``), by two answerers: extractive-v4 (the evidence gate,
  :data:`V4_GATES`) and extractive-v5 (the answerability gate, ``calibrator.fit_gate`` fitted on
  that train split; on the fixed split's train it gives ``answerer.GATES``, which the bench
  checks; ``v5-sh``: the shipped ``answerer.GATES`` on the old split). english has no v5 (its
  answerer is v4).
- Speed: characters and tokens per second of each tokenizer over the corpus (no memo), one
  process, one thread; Kiwi's load time is its first call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from common import KORQUAD_DEV, emit  # noqa: E402 - bench/ is the script's folder

from kebab_mlflow.pipeline.answerer import GATES, REFUSE_BELOW  # noqa: E402

KORQUAD = KORQUAD_DEV
TOKENIZERS = ("english", "cjk-bigram", "korean", "multilingual")
K1, B, DEPTH = 0.9, 0.4, 10
V4_GATES = {"english": 0.5, "cjk-bigram": 0.45, "korean": 0.55, "multilingual": 0.55}
SPLITS = ("fixed", "old")
# (english?, split) → answerers: v4; v5 with the gate fitted on that train split; v5 as shipped
# (answerer.GATES, fitted on the fixed train split) — on the old split too, the same answerer
ANSWERERS = {(True, "fixed"): ("v4",), (True, "old"): ("v4",),
             (False, "fixed"): ("v4", "v5"), (False, "old"): ("v4", "v5", "v5-sh")}


def overrides(tokenizer: str) -> dict:
    return {"chunker.mode": "document", "lexical.tokenizer": tokenizer}


def retrieval(tokenizer: str, corpus: Path, test: Path) -> dict:
    """Our BM25 and bm25s over the same tokens: nDCG@10, hit@1, hit@10 of both."""
    import bm25s

    from kebab_mlflow.config import build_config
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.pipeline.reference import build_pipeline
    from kebab_mlflow.pipeline.text import get_analyzer

    pipeline = build_pipeline(build_config(overrides=overrides(tokenizer)), corpus)
    queries = [q for q in load_golden_set(test).queries if q.expected_doc_ids]
    qtexts = [q.query for q in queries]
    doc_ids = [c.doc_id for c in pipeline.chunks]
    analyze = get_analyzer(tokenizer)
    model = bm25s.BM25(k1=K1, b=B, method="lucene")
    model.index([analyze(c.text) for c in pipeline.chunks], show_progress=False)
    ours = [[h.doc_id for h in hits] for hits in pipeline.search_batch(qtexts, DEPTH)]
    # bm25s refuses a query none of whose tokens it knows: give it an empty ranking then
    vocab = model.vocab_dict
    tokens = [[t for t in analyze(q) if t in vocab] for q in qtexts]
    known = [i for i, t in enumerate(tokens) if t]
    theirs = [[] for _ in qtexts]
    docs, scores = model.retrieve([tokens[i] for i in known], k=DEPTH, show_progress=False,
                                  n_threads=1)
    for row, i in enumerate(known):
        theirs[i] = [doc_ids[d] for d, s in zip(docs[row], scores[row], strict=True) if s > 0]
    qrels = {q.id: {d: 1 for d in q.expected_doc_ids} for q in queries}
    return {"ours": scores_of(queries, ours, qrels), "bm25s": scores_of(queries, theirs, qrels),
            "version": pipeline.versions.embedding_version}


def scores_of(queries, ranked: list[list[str]], qrels: dict) -> dict:
    import pytrec_eval

    run = {q.id: {d: float(DEPTH - r) for r, d in enumerate(docs)} or {"none": 0.0}
           for q, docs in zip(queries, ranked, strict=True)}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run)
    first = [next((r for r, d in enumerate(docs, 1) if d in qrels[q.id]), 0)
             for q, docs in zip(queries, ranked, strict=True)]
    return {"ndcg_at_10": float(np.mean([v["ndcg_cut_10"] for v in per_query.values()])),
            "hit_at_1": float(np.mean([r == 1 for r in first])),
            "hit_at_10": float(np.mean([0 < r <= DEPTH for r in first]))}


def answers(tokenizer: str, corpus: Path, train: Path, test: Path, answerer: str) -> dict:
    """The test split answered by ``answerer`` (v4 / v5) with a Platt calibrator, the v5 gate
    and the calibrator both fitted on train."""
    import dataclasses

    from kebab_mlflow.config import build_config
    from kebab_mlflow.evaluation import runner
    from kebab_mlflow.evaluation.calibrate import fit_with_pipeline, gate_cases
    from kebab_mlflow.golden import load_golden_set
    from kebab_mlflow.metrics.scoring import cutoffs_for
    from kebab_mlflow.pipeline.calibrator import fit_gate
    from kebab_mlflow.pipeline.reference import build_pipeline

    pipeline = build_pipeline(build_config(overrides={**overrides(tokenizer),
                                                      "answer.calibrate": False}), corpus)
    train_golden, golden = load_golden_set(train), load_golden_set(test)
    gate = None
    if answerer == "v4":
        pipeline.answer_config = dataclasses.replace(
            pipeline.answer_config, gate=None, refuse_below=V4_GATES[tokenizer])
    elif answerer == "v5":
        gate = fit_gate(*gate_cases(pipeline, train_golden, DEPTH))
        pipeline.answer_config = dataclasses.replace(
            pipeline.answer_config, gate=gate.model, refuse_below=gate.refuse_below)
    fit = fit_with_pipeline(pipeline, train_golden, {"corpus": str(corpus)}, DEPTH,
                            "platt", save=False)
    pipeline.calibrator = fit.calibrator
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        outcome = runner.run_queries(pipeline, golden, DEPTH, cutoffs_for(DEPTH),
                                     Path(tmp) / "per_query.jsonl")
        run_s = time.perf_counter() - t0
    agg = outcome.aggregate
    return {"contains_all": agg.overall["contains_all"],
            "answerable_contains_all": agg.by_query_type["single_doc"]["contains_all"],
            "answerable_refused": agg.by_query_type["single_doc"]["refusal_rate"],
            "correct_refusals": agg.abstention_outcomes["correct_refusal_share"],
            "ece": agg.abstention_calibration["ece"],
            "ece_raw": agg.abstention_calibration_raw["ece"],
            "brier": agg.abstention_calibration["brier"],
            "gate": pipeline.answer_config.refuse_below, "fitted_gate": gate,
            "ms_per_query": 1000 * run_s / len(golden)}


def speed(tokenizer: str, texts: list[str]) -> dict:
    from kebab_mlflow.pipeline import text

    t0 = time.perf_counter()
    if tokenizer in ("korean", "multilingual"):
        text._kiwi()  # the first call loads the model; the bench process loads it once
    load_s = time.perf_counter() - t0
    analyze = text.get_analyzer(tokenizer)
    t0 = time.perf_counter()
    n_tokens = sum(len(analyze(t)) for t in texts)
    seconds = time.perf_counter() - t0
    return {"chars_s": sum(map(len, texts)) / seconds, "tokens_s": n_tokens / seconds,
            "load_s": load_s, "tokens": n_tokens}


def render(rows: dict, imports: dict, wall: float) -> str:
    fixed, old = imports["fixed"].splits[1], imports["old"].splits[1]
    lines = [
        f"KorQuAD 1.0 dev ({KORQUAD.name}, converted at run time), import-squad seed "
        f"{imports['fixed'].seed}: corpus {imports['fixed'].paragraphs_kept} paragraphs; "
        "chunker.mode=document; test split:",
        f"  fixed (issue 20): {fixed.answerable} answerable + {fixed.abstention} abstention "
        f"questions ({fixed.left_out} questions of dropped paragraphs left out: their gold span "
        "is in a kept paragraph)",
        f"  old (abstention='dropped'): {old.answerable} answerable + {old.abstention} "
        "abstention questions (every question of a dropped paragraph)",
        "",
        "retrieval, question -> its paragraph (answerable test questions), k1 0.9 b 0.4, "
        "bm25s fed the same tokens:",
        f"{'tokenizer':14}{'nDCG@10':>9}{'bm25s':>8}{'diff':>8}{'hit@1':>8}{'bm25s':>8}"
        f"{'hit@10':>8}{'bm25s':>8}",
    ]
    for tok, r in rows.items():
        o, t = r["retrieval"]["ours"], r["retrieval"]["bm25s"]
        lines.append(f"{tok:14}{o['ndcg_at_10']:9.4f}{t['ndcg_at_10']:8.4f}"
                     f"{o['ndcg_at_10'] - t['ndcg_at_10']:+8.4f}{o['hit_at_1']:8.4f}"
                     f"{t['hit_at_1']:8.4f}{o['hit_at_10']:8.4f}{t['hit_at_10']:8.4f}")
    lines += ["", "answers on the test split (contains_all over ask queries; refused = share of "
              "answerable questions refused; abst.ok = share of abstention cases refused), Platt "
              "calibrator and v5 gate fitted on the train split of the same import:",
              f"{'tokenizer':13}{'split':6}{'ans.':>6}{'gate':>5}{'contains':>9}{'answ.':>7}"
              f"{'refused':>8}{'abst.ok':>8}{'ECE raw':>8}{'ECE cal':>8}{'Brier':>7}"
              f"{'ms/q':>6}"]
    for tok, r in rows.items():
        for (split, answerer), a in r["answers"].items():
            lines.append(f"{tok:13}{split:6}{answerer:>6}{a['gate']:5.2f}{a['contains_all']:9.4f}"
                         f"{a['answerable_contains_all']:7.4f}{a['answerable_refused']:8.3f}"
                         f"{a['correct_refusals']:8.3f}{a['ece_raw']:8.4f}{a['ece']:8.4f}"
                         f"{a['brier']:7.4f}{a['ms_per_query']:6.1f}")
    lines += ["", "v5 gates fitted on each train split (answerable refused / abstention "
              "refused there):"]
    for tok, r in rows.items():
        for (split, _answerer), a in r["answers"].items():
            g = a["fitted_gate"]
            if g is not None:
                shipped = ("= answerer.GATES" if split == "fixed" and GATES.get(tok) == g.model
                           and REFUSE_BELOW[tok] == g.refuse_below else "")
                lines.append(f"  {tok} {split}: weights {g.model.weights} intercept "
                             f"{g.model.intercept} gate {g.refuse_below:.2f} "
                             f"({g.answerable_refused:.3f} / {g.abstention_refused:.3f}) {shipped}")
    lines += ["", "tokenizer speed over the corpus (one thread, no memo):",
              f"{'tokenizer':14}{'chars/s':>12}{'tokens/s':>12}{'tokens':>10}{'load s':>8}"]
    for tok, r in rows.items():
        s = r["speed"]
        lines.append(f"{tok:14}{s['chars_s']:12,.0f}{s['tokens_s']:12,.0f}{s['tokens']:10,}"
                     f"{s['load_s']:8.2f}")
    lines.append(f"\nwall {wall:.0f} s; tokenizer versions: " + "; ".join(
        f"{tok}={r['retrieval']['version']}" for tok, r in rows.items()))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    args = ap.parse_args()
    if not KORQUAD.is_file():
        print(f"KorQuAD dev not found at {KORQUAD}; see ../shared/datasets/README.md")
        return 2
    from kebab_mlflow.importers.squad import import_squad

    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-korquad-") as tmp:
        os.environ["KEBAB_CACHE_DIR"] = str(Path(tmp) / "cache")
        t0 = time.perf_counter()
        imports = {"fixed": import_squad(KORQUAD, Path(tmp) / "fixed", seed=args.seed),
                   "old": import_squad(KORQUAD, Path(tmp) / "old", seed=args.seed,
                                       abstention="dropped")}
        corpus = imports["fixed"].corpus
        assert (corpus / "corpus.jsonl").read_bytes() == (
            imports["old"].corpus / "corpus.jsonl").read_bytes()
        texts = [json.loads(line)["text"] for line in
                 (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
        for tok in args.tokenizers.split(","):
            rows[tok] = {"speed": speed(tok, texts),
                         "retrieval": retrieval(tok, corpus, imports["fixed"].splits[1].path),
                         "answers": {}}
            for split in SPLITS:
                train, test = (sp.path for sp in imports[split].splits)
                for answerer in ANSWERERS[tok == "english", split]:
                    rows[tok]["answers"][split, answerer] = answers(tok, corpus, train, test,
                                                                    answerer)
        wall = time.perf_counter() - t0
    emit("bench_korquad", render(rows, imports, wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
