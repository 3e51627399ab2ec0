"""Bad input (issue 8): property-based fuzzing of the golden-set loader, `per_query.jsonl`
reading and the sweep-file loader — only KebabError subclasses (with a location), never another
exception, never a hang; YAML is read with a safe loader; path-like inputs (run names,
experiment names) cannot escape their folders.
"""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_mlflow.app.run import RunOptions, execute
from kebab_mlflow.errors import GoldenSetError, InputError, KebabError, PerQueryError
from kebab_mlflow.evaluation.per_query import read_per_query
from kebab_mlflow.golden import QUERY_FIELDS, TOP_LEVEL_KEYS, parse_golden_set
from tests.conftest import GOLDEN, KB, write

# derandomize: the same examples on every run (a seed derived from each test), so a defect the
# fuzzer can find fails every run, not one CI run in N; database=None: nothing kept between runs
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOURCE = "fuzz.yaml"

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
query_keys = st.sampled_from(sorted(QUERY_FIELDS) + ["bogus", "", "id"])
queries = st.dictionaries(query_keys, values, max_size=8)
golden_docs = st.one_of(
    values,
    st.lists(queries, max_size=5),
    st.fixed_dictionaries({}, optional={
        **{k: values for k in sorted(TOP_LEVEL_KEYS - {"queries"})},
        "queries": st.one_of(values, st.lists(queries, max_size=5))}),
)


def check_kebab_error(exc: KebabError, source: str) -> None:
    assert str(exc)
    if isinstance(exc, InputError):
        assert exc.problems or source in str(exc)
        for p in exc.problems:  # the file itself, or a file it names beside it
            assert p.location.startswith((source, str(Path(source).parent))), p


def parse(raw: bytes) -> None:
    try:
        parse_golden_set(raw, SOURCE)
    except GoldenSetError as exc:  # the only error the loader may raise
        check_kebab_error(exc, SOURCE)


@FUZZ
@given(golden_docs)
def test_golden_loader_structured(doc):
    parse(yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(st.binary(max_size=400))
def test_golden_loader_random_bytes(raw):
    parse(raw)


FIXTURE_TEXT = GOLDEN.read_text()


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(FIXTURE_TEXT)), st.integers(0, 40),
                          st.text(alphabet=" :-[]{}'\"#&*!|>\n\tabc0é", max_size=6)),
                min_size=1, max_size=4))
def test_golden_loader_mutated_fixture(edits):
    text = FIXTURE_TEXT
    for pos, cut, insert in edits:
        text = text[:pos] + insert + text[pos + cut:]
    parse(text.encode())


def test_billion_laughs_does_not_hang():
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        laughs.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [" + ",".join(
            [f"*{prev}"] * 9) + "]")
    body = "\n".join(laughs) + "\nqueries: *i\n"
    # refused without expanding the aliases (9^8 = 43M items): a memory bound, not a clock
    tracemalloc.start()
    try:
        with pytest.raises(GoldenSetError):
            parse_golden_set(body.encode(), SOURCE)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_python_object_tag_is_refused_and_not_executed(tmp_path):
    flag = tmp_path / "pwned"
    body = f'name: !!python/object/apply:os.system ["touch {flag}"]\nqueries: []\n'
    with pytest.raises(GoldenSetError) as err:
        parse_golden_set(body.encode(), SOURCE)
    assert "python/object" in str(err.value) and not flag.exists()


# --------------------------------------------------------------------------- per_query.jsonl

hits = st.lists(st.fixed_dictionaries({}, optional={
    "rank": st.one_of(st.integers(-2, 5), st.booleans(), st.text(max_size=2)),
    "chunk_id": st.one_of(st.text(max_size=5), st.integers()),
    "doc_id": st.one_of(st.text(max_size=5), st.none()),
    "score": st.one_of(st.floats(), st.integers(), st.text(max_size=2), st.none())}),
    max_size=3)
records = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=5), st.integers(), st.none()),
    "query": st.one_of(st.text(max_size=5), st.none(), st.integers()),
    "hits": st.one_of(hits, values),
    "answer": st.one_of(st.none(), values),
    "scores": st.one_of(st.dictionaries(st.text(max_size=6), scalars, max_size=3), values),
    "latency_ms": st.one_of(st.floats(), st.integers(), st.booleans(), st.text(max_size=2)),
    "error": st.one_of(st.none(), st.text(max_size=5), st.integers()),
    "first_relevant_rank": st.one_of(values, st.dictionaries(
        st.sampled_from(["chunk", "doc"]), st.one_of(st.none(), st.integers(-2, 30), scalars)))})
lines = st.one_of(
    records.map(lambda r: json.dumps(r).encode()),
    values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60).filter(lambda b: b"\n" not in b))


@FUZZ
@given(st.lists(lines, max_size=6))
def test_per_query_reader(raw_lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "per_query.jsonl"
        path.write_bytes(b"\n".join(raw_lines) + b"\n")
        try:
            rows = list(read_per_query(path))
        except PerQueryError as exc:
            check_kebab_error(exc, str(path))
            return
        for row in rows:  # what it accepts, compare can use
            assert isinstance(row.id, str) and isinstance(row.scores, dict)
            for h in row.hits:
                assert isinstance(h.rank, int) and h.rank >= 1 and isinstance(h.chunk_id, str)
            for rank in (row.first_relevant_rank or {}).values():
                assert rank is None or (type(rank) is int and rank >= 0)


# --------------------------------------------------------------------------- sweep files

sweep_keys = st.sampled_from(["name", "description", "golden", "corpus", "k", "primary",
                              "floors", "ceiling", "gauge_metrics", "resamples", "seed",
                              "rows", "experiment", "bogus"])
sweep_rows = st.lists(st.dictionaries(
    st.sampled_from(["name", "preset", "set", "top_k", "k", "bogus"]),
    st.one_of(values, st.sampled_from(["naive_baseline", "random_retrieval", "single_chunk",
                                       "oracle", "bm25"])), max_size=4), max_size=4)
sweep_docs = st.one_of(values, st.dictionaries(sweep_keys, st.one_of(values, sweep_rows),
                                               max_size=10))


def load_sweep_text(raw: bytes) -> None:
    from kebab_mlflow.sweep.spec import load_sweep

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.yaml"
        path.write_bytes(raw)
        write(Path(tmp) / "golden_queries.yaml", FIXTURE_TEXT)
        try:
            load_sweep(path)
        except KebabError as exc:
            check_kebab_error(exc, str(path))


@FUZZ
@given(sweep_docs)
def test_sweep_loader_structured(doc):
    load_sweep_text(yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(st.binary(max_size=300))
def test_sweep_loader_random_bytes(raw):
    load_sweep_text(raw)


def test_sweep_python_object_tag_is_refused_and_not_executed(tmp_path):
    from kebab_mlflow.sweep.spec import SweepError, load_sweep

    flag = tmp_path / "pwned"
    path = write(tmp_path / "s.yaml",
                 f'name: !!python/object/apply:os.system ["touch {flag}"]\nrows: []\n')
    with pytest.raises(SweepError):
        load_sweep(path)
    assert not flag.exists()


# --------------------------------------------------------------------------- path-like input


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_run_names_cannot_escape_the_store(tmp_path):
    from mlflow.tracking import MlflowClient

    box = tmp_path / "box"
    store = box / "store"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    names = ["../../x", "/etc/passwd", "..", "a/../../b", "x\\..\\y"]
    before = files_under(tmp_path)
    ids = [execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=uri,
                              run_name=name)).run_id for name in names]
    assert [MlflowClient(uri).get_run(i).info.run_name for i in ids] == names
    created = files_under(tmp_path) - files_under(box) - before - {box}
    # only the index cache may appear outside the store
    assert all(".kebab-cache" in p.parts for p in created), sorted(created)[:5]
    artifacts = [p for p in store.rglob("per_query.jsonl")]
    assert len(artifacts) == len(names)
    assert all((store / "artifacts") in p.parents for p in artifacts)


def test_experiment_names_cannot_escape_the_artifact_folder(tmp_path):
    """Each experiment's artifacts live in its own folder under <store>/artifacts."""
    store = tmp_path / "store"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    for experiment in ["../../evil", "a/b", "..", "."]:
        result = execute(RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=uri,
                                    experiment=experiment))
        files = [p for p in tmp_path.rglob("*") if p.is_file() and result.run_id in str(p)]
        assert files and all((store / "artifacts") in p.parents for p in files), \
            (experiment, files)
        # <store>/artifacts/<experiment folder>/<run id>/...: not the artifact root itself
        assert all(p.relative_to(store / "artifacts").parts[1] == result.run_id
                   for p in files), (experiment, files)


def test_evidence_beside_a_non_list_of_chunk_ids_is_reported_not_a_crash():
    """The example hypothesis found (a TypeError in golden.py's evidence check)."""
    text = "- evidence: []\n  expected_chunk_ids: 1\n"
    with pytest.raises(GoldenSetError) as bad:
        parse_golden_set(text.encode(), SOURCE)
    assert f"{SOURCE}:2: 'expected_chunk_ids' must be a list of strings, got int" in str(bad.value)
