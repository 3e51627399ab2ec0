"""The level said and chosen (issue 27 item 3): the rule names the effective one-sided level;
``--alternative less`` spends the whole alpha on the worse side."""

from __future__ import annotations

import numpy as np
import pytest

from kebab_mlflow.comparison.records import CompareOptions
from kebab_mlflow.comparison.verdict import compare_runs, rule_text
from kebab_mlflow.stats.alternative import Alternative
from kebab_mlflow.stats.resampling import (
    exact_signflip_p,
    one_sided_p,
    randomization_p,
)
from tests.test_gate import _chunk_rows, _side


def test_the_rule_says_the_effective_one_sided_level():
    assert "two-sided sign-flip p < 0.05 and a worse mean, i.e. a one-sided level of 0.025" \
        in rule_text(CompareOptions())
    less = rule_text(CompareOptions(alternative=Alternative.LESS))
    assert "one-sided sign-flip p < 0.05" in less and "Better never" in less


def _one_sided_by_enumeration(row: np.ndarray) -> float:
    """P(Σ s·d ≤ Σ d) over all 2^n sign vectors, by brute force."""
    n = row.size
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
    sums = signs @ row
    return float(np.mean(sums <= row.sum() + 1e-12))


@pytest.mark.parametrize("row", [
    np.array([-0.25] * 5),
    np.array([-0.5, -0.25, -0.25, 0.1, -1.0, -0.2, 0.3]),
    np.array([-1.0, 1.0, -1.0, -1.0, -0.5, -0.5, 0.25, -0.125, -0.75, 0.5]),
])
def test_one_sided_p_is_half_the_two_sided_one_when_enumerated(row):
    p_two = exact_signflip_p(row)
    assert one_sided_p(p_two, True, True, 100) == pytest.approx(_one_sided_by_enumeration(row))
    # the other way round it is never significant
    assert one_sided_p(p_two, False, True, 100) >= 0.5


def test_one_sided_p_by_resampling_keeps_the_plus_one():
    rng = np.random.default_rng(3)
    row = rng.normal(-0.05, 0.3, 400)  # too many distinct values to enumerate
    resamples = 2000
    p_two = float(randomization_p([row], resamples, seed=1)[0])
    p_one = one_sided_p(p_two, True, False, resamples)
    extreme = round(p_two * (1 + resamples)) - 1  # the two-sided count
    assert p_one == pytest.approx((1 + extreme / 2) / (1 + resamples))
    assert p_one > 1 / (1 + resamples)


def test_five_concordant_losses_regress_only_under_less():
    """Exact two-sided p = 2^(1-5) = 0.0625: Same at alpha 0.05; one-sided 0.03125 < 0.05."""
    b, c = _chunk_rows([-0.25] * 5)
    two = compare_runs(_side("b", b), _side("c", c), CompareOptions(resamples=100))
    assert two.verdict == "Same" and two.metrics[0].p_value == 2.0 ** -4
    less = compare_runs(_side("b", b), _side("c", c),
                        CompareOptions(resamples=100, alternative=Alternative.LESS))
    assert less.verdict == "Regressed" and less.metrics[0].p_value == 2.0 ** -5
    assert less.metrics[0].significant == "worse"
    # the MDE is smaller under less (a one-sided level of 0.05 vs 0.025)
    assert less.metrics[0].mde < two.metrics[0].mde


def test_less_never_concludes_better():
    b, c = _chunk_rows([0.25] * 8)
    assert compare_runs(_side("b", b), _side("c", c)).verdict == "Better"
    less = compare_runs(_side("b", b), _side("c", c),
                        CompareOptions(alternative=Alternative.LESS))
    assert less.verdict == "Same" and less.metrics[0].p_value > 0.5
