"""Latency measures the queries only (issue 27 item 6): a pipeline's one-time loads run in its
``warm_up()``, timed apart as ``latency/load_ms``. A fake clock, not wall time, shows it."""

from __future__ import annotations

import types
from collections.abc import Sequence

import pytest

from kebab_mlflow.evaluation import runner
from kebab_mlflow.golden import GoldenQuery, GoldenSet
from kebab_mlflow.records import Answer, Hit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class SlowToLoad:
    """Its first query would pay 5 s of loading without warm_up; each query costs 2 ms."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.loaded = clock, False

    def warm_up(self) -> None:
        self.clock.now += 5.0
        self.loaded = True

    def search(self, query: str, k: int) -> list[Hit]:
        if not self.loaded:
            self.warm_up()
        self.clock.now += 0.002
        return [Hit(chunk_id="c1", doc_id="d1", score=1.0, rank=1)]

    def ask(self, query: str, hits: Sequence[Hit]) -> Answer:
        return Answer(text="x")


def _golden(n: int) -> GoldenSet:
    return GoldenSet(name="mem", queries=tuple(GoldenQuery(id=f"q{i}", query=f"query {i}")
                                               for i in range(n)))


def test_the_warm_up_is_timed_apart_and_never_charged_to_a_query(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    outcome = runner.run_queries(SlowToLoad(clock), _golden(5), 10, (1,),
                                 tmp_path / "per_query.jsonl")
    latency = outcome.aggregate.latency
    assert latency["load_ms"] == pytest.approx(5000.0)
    assert latency["p50_ms"] == pytest.approx(2.0) and latency["p95_ms"] == pytest.approx(2.0)


def test_without_warm_up_there_is_no_load_ms(tmp_path):
    class Plain:
        def search(self, query: str, k: int) -> list[Hit]:
            return [Hit(chunk_id="c1", doc_id="d1", score=1.0, rank=1)]

    outcome = runner.run_queries(Plain(), _golden(3), 10, (1,), tmp_path / "per_query.jsonl")
    assert "load_ms" not in outcome.aggregate.latency


def test_the_reference_pipelines_warm_up_loads_kiwi(monkeypatch, tmp_path):
    pytest.importorskip("kiwipiepy")
    from kebab_mlflow.evaluation.evaluate import reference_pipeline
    from kebab_mlflow.pipeline import text
    from tests.conftest import FIXTURES

    pipeline = reference_pipeline("naive_baseline", FIXTURES / "kb_ko",
                                  overrides={"lexical.tokenizer": "korean"})
    monkeypatch.setattr(text, "_kiwi_instance", None)  # as in a process that has not loaded it
    pipeline.warm_up()
    assert text._kiwi_instance is not None
