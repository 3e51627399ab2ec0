"""`compare` prints one line per version that differs (issue 27 item 6): terminal, markdown,
JSON ``version_changes``."""

from __future__ import annotations

import dataclasses
import json

from kebab_mlflow.cli.compare_table import render_table
from kebab_mlflow.comparison import dumps, to_markdown
from kebab_mlflow.comparison.records import RunSide
from kebab_mlflow.comparison.verdict import compare_runs
from tests.test_gate import _chunk_rows, _side


def _with(side: RunSide, **params: str) -> RunSide:
    return dataclasses.replace(side, params={**side.params, **params})


def test_each_differing_version_gets_one_line_everywhere():
    b, c = _chunk_rows([-0.25] * 2)
    base = _side("b", b)
    cand = _with(_side("c", c), index_version="bm25-k1[1.2]", embedding_version="unknown")
    result = compare_runs(base, cand)
    data = json.loads(dumps(result))
    assert data["version_changes"] == [
        {"key": "embedding_version", "baseline": "e", "candidate": "unknown",
         "line": "embedding_version: e → unknown"},
        {"key": "index_version", "baseline": "i", "candidate": "bm25-k1[1.2]",
         "line": "index_version: i → bm25-k1[1.2]"}]
    table = render_table(result, width=None, wide=True, color=False)
    assert "versions: 2 differ" in table
    assert "  index_version: i → bm25-k1[1.2]" in table.splitlines()  # no markup eaten
    md = to_markdown(result)
    assert "- embedding_version: e → unknown" in md and "- index_version: i → bm25-k1[1.2]" in md


def test_identical_versions_say_so_and_an_unknown_one_is_never_the_same():
    b, c = _chunk_rows([])
    same = compare_runs(_side("b", b), _side("c", c))
    assert json.loads(dumps(same))["version_changes"] == []
    assert "versions: the same" in render_table(same, width=None, wide=True, color=False)
    unknown = compare_runs(_with(_side("b", b), index_version="unknown"),
                           _with(_side("c", c), index_version="unknown"))
    assert json.loads(dumps(unknown))["version_changes"][0]["line"] == \
        "index_version: unknown (unknown: cannot tell if it changed)"
