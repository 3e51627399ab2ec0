"""CLI commands: answers — ``calibrate`` and ``import-squad`` (registered on kebab_mlflow.cli.app).

Heavy modules (numpy-heavy calibration, sklearn, the pipeline) are imported inside the commands
so ``kebab-mlflow --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kebab_mlflow.cli.app import app
from kebab_mlflow.names import DEFAULT_K


@app.command()
def calibrate(
    golden: Annotated[Path, typer.Option(help="golden-set YAML to fit on (ask queries)")],
    corpus: Annotated[Path, typer.Option(help="folder of .md/.txt or BEIR corpus.jsonl[.gz]")],
    preset: Annotated[str, typer.Option(help="pipeline preset (see `presets`)")]
    = "naive_baseline",
    set_: Annotated[list[str] | None, typer.Option("--set", help="config override KEY=VALUE")]
    = None,
    method: Annotated[str, typer.Option(help="isotonic | platt")] = "platt",
    k: Annotated[int, typer.Option("--k", help="retrieval depth")] = DEFAULT_K,
) -> None:
    """Fit the answer-confidence calibrator on a golden set and store it with the index.

    Runs the pipeline with calibration off over GOLDEN (no MLflow run), fits P(response
    correct) from the raw confidence (separately for answers and refusals) and stores it in
    the index cache as calibrator-<key>.json, key = digest of the pipeline versions. Later
    runs with the same corpus, preset and overrides (and answer.calibrate=true, the default)
    use it and report abstention_calibration (with it) next to abstention_calibration_raw.
    """
    from kebab_mlflow.cli.console import err, out, table
    from kebab_mlflow.config import parse_overrides
    from kebab_mlflow.evaluation.calibrate import fit_on_golden_set

    err.print(f"… running {golden} with calibration off")
    fit = fit_on_golden_set(golden, corpus, preset, parse_overrides(set_ or []), k, method)
    rows = [(label, block["ece"], block["brier"], block["n"]) if block else (label, None, None, 0)
            for label, block in (("raw (before)", fit.before), ("calibrated (after)", fit.after))]
    inputs = ("raw confidence + similarity" if fit.calibrator.answered.similarity_slope is not None
              or fit.calibrator.refused.similarity_slope is not None else "raw confidence")
    out.print(table(f"{method} calibration of the {inputs} on {golden} (in-sample: "
                    f"{fit.n_answered} answers, "
                    f"{fit.n_refused} refusals)", ["confidence", "ECE", "Brier", "n"], rows))
    typer.echo(f"calibrator stored at {fit.path}")


@app.command("import-squad")
def import_squad_cmd(
    source: Annotated[Path, typer.Argument(help="qa.jsonl (or a folder holding it, e.g. "
                                           "../shared/datasets/xquad_en) or SQuAD v1.1 JSON")],
    out: Annotated[Path, typer.Option("--out", help="output folder")],
    abstain_share: Annotated[float, typer.Option(
        help="share of each split's paragraphs dropped from the corpus; their questions become "
        "abstention cases")] = 0.1,
    test_share: Annotated[float, typer.Option(help="share of the articles in test.yaml")] = 0.5,
    seed: Annotated[int, typer.Option(help="seed of the split and the dropped paragraphs")] = 0,
    lang: Annotated[str | None, typer.Option(
        help="every question's lang; default: ko when >= 30% of its words hold Hangul, "
        "else en")] = None,
) -> None:
    """Turn SQuAD-style QA into an answer benchmark: OUT/corpus + OUT/train.yaml + OUT/test.yaml.

    must_contain = the gold answer span; expected ids = its paragraph (run with
    --set chunker.mode=document); abstention cases: unanswerable from the kept corpus;
    train/test split by article, seeded. SOURCE: a qa.jsonl, a folder holding one, or a
    SQuAD v1.1 JSON file (KorQuAD 1.0 as published).
    """
    from kebab_mlflow.importers.squad import import_squad

    s = import_squad(source, out, abstain_share=abstain_share, test_share=test_share, seed=seed,
                     lang=lang)
    typer.echo(f"corpus: {s.corpus} ({s.paragraphs_kept} paragraphs)")
    for sp in s.splits:
        typer.echo(f"{sp.name}: {sp.path} — {sp.answerable} answerable + {sp.abstention} "
                   f"abstention questions over {sp.paragraphs} paragraphs "
                   f"({sp.dropped_paragraphs} dropped; {sp.left_out} of their questions left "
                   f"out: their answer is still in the corpus); seed {s.seed}")
    typer.echo(f"run: kebab-mlflow run --golden {out / 'test.yaml'} --corpus {s.corpus} "
               "--set chunker.mode=document")
