"""coded.json_floats writes every float as ``json.dumps`` does (``repr``; NaN as null, as
per_query.record writes a score without ground truth): the oracle here is ``json.dumps``
itself, over random bit patterns (every magnitude, sign and the subnormals), the decimals a
ranker prints, the edges of msgspec's notation and the values it writes otherwise."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kebab_mlflow.evaluation.coded import json_floats


def _reprs(matrix: np.ndarray) -> list[list[str]]:
    """json.dumps of each value, as per_query.record writes a score (NaN: None)."""
    return [[json.dumps(None if math.isnan(v) else v, allow_nan=False) for v in row]
            for row in matrix.tolist()]


def test_random_bit_patterns_are_written_as_repr_writes_them():
    rng = np.random.default_rng(20261204)
    bits = rng.integers(0, 2**64, size=400_000, dtype=np.uint64, endpoint=False)
    values = bits.view(np.float64)
    values = values[np.isfinite(values)]
    values = values[: len(values) // 100 * 100].reshape(-1, 100)
    assert json_floats(values) == _reprs(values)


def _needs_repr(row: list[float]) -> bool:
    return any(abs(v) >= 1e16 or (v != 0 and abs(v) < 1e-4) for v in row)


def test_scores_as_rankers_give_them_are_written_as_repr_writes_them(monkeypatch):
    import kebab_mlflow.evaluation.coded as coded

    rows_by_repr = []
    one_at_a_time = coded._json_float
    monkeypatch.setattr(coded, "_json_float", lambda v: rows_by_repr.append(v) or one_at_a_time(v))
    rng = np.random.default_rng(7)
    bm25_like = rng.uniform(0, 40, size=(2000, 100))
    cosine_like = rng.uniform(-1, 1, size=(2000, 100))
    decimals = np.round(rng.uniform(0, 100, size=(2000, 100)), 3)
    integers = rng.integers(-10**6, 10**6, size=(2000, 100)).astype(np.float64)
    for matrix in (bm25_like, cosine_like, decimals, integers):
        rows_by_repr.clear()
        assert json_floats(matrix) == _reprs(matrix)
        # only the rows msgspec would write in another notation took repr
        assert len(rows_by_repr) == 100 * sum(map(_needs_repr, matrix.tolist()))
    assert 0 < sum(map(_needs_repr, cosine_like.tolist())) < 100  # a few cosines near 0


@pytest.mark.parametrize("edge", [
    1e-4, math.nextafter(1e-4, 0), -1e-4, 1e16, math.nextafter(1e16, 0), -1e16, 1e-5, 5e-324,
    1.7976931348623157e308, 0.0, -0.0, 2.0**53, 2.0**53 + 2, 0.1 + 0.2, math.nan])
def test_edges_of_the_notation_and_nan(edge):
    row = np.array([[1.5, edge, 0.25]])
    assert json_floats(row) == _reprs(row)


@pytest.mark.parametrize("infinite", [math.inf, -math.inf])
def test_an_infinite_value_is_refused_as_json_dumps_refuses_it(infinite):
    with pytest.raises(ValueError, match="not JSON compliant"):
        json.dumps(infinite, allow_nan=False)
    with pytest.raises(ValueError, match="not JSON compliant"):
        json_floats(np.array([[1.5, infinite]]))


def test_rows_are_independent_and_shapes_are_kept():
    matrix = np.array([[1e-5, 2.0], [3.0, 4.5], [math.nan, 0.0]])
    assert json_floats(matrix) == [["1e-05", "2.0"], ["3.0", "4.5"], ["null", "0.0"]]
    assert json_floats(np.zeros((3, 0))) == [[], [], []]
