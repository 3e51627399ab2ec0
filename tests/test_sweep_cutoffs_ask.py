"""`cutoffs:` and `ask:` in sweep files reach each row's run (issue 22 items 4 and 6)."""

from __future__ import annotations

import pytest

from kebab_mlflow.app.sweep import row_options
from kebab_mlflow.sweep.spec import SweepError, load_sweep
from tests.conftest import GOLDEN, KB, write


def sweep_file(tmp_path, rows: str, top: str = "") -> str:
    return str(write(tmp_path / "sweep.yaml", f"golden: {GOLDEN}\ncorpus: {KB}\nk: 100\n"
                     f"gauge_metrics: [ndcg_at_10_doc]\n{top}rows:\n{rows}"))


def test_file_cutoffs_apply_to_every_row_a_row_may_set_its_own_and_ask(tmp_path):
    spec = load_sweep(sweep_file(
        tmp_path, "  - {name: bm25, preset: naive_baseline, ask: true}\n"
                  "  - {name: shallow, preset: naive_baseline, k: 10, cutoffs: [1, 10]}\n",
        top="cutoffs: 10,100\n"))
    rows = {r.name: r for r in spec.rows}
    assert rows["bm25"].cutoffs == (10, 100) and rows["bm25"].ask is True
    assert rows["shallow"].cutoffs == (1, 10) and rows["shallow"].ask is None
    assert rows["random_retrieval"].cutoffs == (10, 100)  # the implicit floor rows too
    options = row_options(spec, rows["bm25"], "e", "sqlite:///x.db", "parent")
    assert (options.cutoffs, options.ask) == ((10, 100), True)
    assert "ask" not in rows["bm25"].overrides  # not mistaken for a config key


def test_bad_cutoffs_and_ask_are_problems_with_their_rows(tmp_path):
    with pytest.raises(SweepError) as info:
        load_sweep(sweep_file(
            tmp_path, "  - {name: bm25, preset: naive_baseline, ask: maybe}\n"
                      "  - {name: shallow, preset: naive_baseline, k: 10}\n",
            top="cutoffs: [10, 100]\n"))
    text = "\n".join(map(str, info.value.problems))
    assert "row bm25: 'ask' must be true or false, got 'maybe'" in text
    assert "row shallow: 'cutoffs' must be cut-offs >= 1 within its k 10, got [10, 100]" in text
