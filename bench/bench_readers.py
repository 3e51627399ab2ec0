"""bench_readers — the input readers' own layer (kebab_mlflow/reading.py) against pydantic v2.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python bench/bench_readers.py

Three measurements, the same on every side (alternating sides, 1 untimed warm-up, median of
the repeats, :func:`common.alternate`):

1. start-up: a fresh process imports ``kebab_mlflow.golden`` (which holds our field tables and
   imports reading.py); the pydantic side also imports pydantic and defines a model of the same
   golden-set schema. The difference is what pydantic would add to every command's start-up.
2. field checks: the parsed fixture golden set and a 10,000-query synthetic set
   (bench_scale.synthetic_set) checked field by field — ours: one :class:`Reader` over the top
   level and one over each query (unknown keys, required keys, types); pydantic: the model's
   ``model_validate`` (strict, extra keys forbidden). The YAML parse is done once, untimed, on
   both sides; pydantic's errors would still have to be mapped back to lines through the node
   tree (not timed: the sets are valid).
3. whole load: ``parse_golden_set`` (parse, every check, records) of this checkout against
   the same function of the commit before the readers moved to reading.py (the hand-written
   golden reader, extracted with ``git archive``), so the declarative layer's cost is seen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, alternate, emit, load_line  # noqa: E402 - bench/ is the script's folder

BEFORE = "e29d390"  # main before the readers moved to kebab_mlflow/reading.py
FIXTURE = ROOT / "fixtures" / "golden_queries.yaml"
REPEATS = 7
STARTUP_REPEATS = 9

PYDANTIC_MODEL = textwrap.dedent('''
    from typing import Any
    from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

    class Query(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        id: StrictStr | StrictInt
        query: StrictStr
        expected_chunk_ids: list[StrictStr] | None = None
        expected_doc_ids: list[StrictStr | StrictInt] | dict[str, StrictInt] | None = None
        must_contain: list[StrictStr] | None = None
        forbidden: list[StrictStr] | None = None
        ask: StrictBool | None = None
        answerable: StrictBool | None = None
        case_insensitive: StrictBool | None = None
        query_type: StrictStr | None = None
        hardcase_categories: list[StrictStr] | None = None
        metadata_field: StrictStr | None = None
        group: StrictStr | StrictInt | None = None
        difficulty: StrictStr | StrictInt | None = None
        lang: StrictStr | None = None
        evidence: list[dict[str, Any]] | None = None

    class GoldenFile(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        name: StrictStr | None = None
        private: StrictBool = False
        metadata_fields: list[StrictStr] = ["agency", "project", "budget", "deadline"]
        case_insensitive: StrictBool = False
        description: StrictStr = ""
        primary_metric: StrictStr | None = None
        queries: list[Query]
        corpus: StrictStr = ""
''')


def startup(code: str, pythonpath: str) -> float:
    """Seconds a fresh process spends running ``code`` (timed inside the child)."""
    child = ("import time; _t = time.perf_counter()\n" + code +
             "\nprint(time.perf_counter() - _t)")
    env = dict(os.environ, PYTHONPATH=pythonpath)
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                          text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def ours_checks(data: dict[str, Any], node: Any, source: str) -> int:
    from kebab_mlflow import golden
    from kebab_mlflow.reading import Reader
    from kebab_mlflow.yaml_source import sequence_items

    problems: list[Any] = []
    top = Reader(data, node, source, golden.TOP_MESSAGES, problems=problems)
    top.unknown_keys(golden.TOP_LEVEL_KEYS)
    top.values(golden.TOP_FIELDS)
    fields = golden.QUERY_FIELDS
    items = sequence_items(node.keys["queries"])
    for item, item_node in zip(data["queries"], items, strict=True):
        r = Reader(item, item_node, source, golden.QUERY_MESSAGES, problems=problems)
        r.unknown_keys(fields)
        r.values(fields, required_first=True)
    assert not problems, problems[:3]
    return len(items)


def pydantic_checks(model: Any, data: dict[str, Any]) -> int:
    return len(model.model_validate(data).queries)


def before_tree() -> Path:
    """The package as it was at BEFORE, extracted into a temporary folder."""
    out = Path(tempfile.mkdtemp(prefix="kebab-bench-readers-"))
    archive = out / "before.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "kebab_mlflow"], stdout=fh,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    return out


def whole_load(pythonpath: Path, path: Path) -> float:
    """Median seconds of parse_golden_set in a fresh process of that checkout's package."""
    code = textwrap.dedent(f'''
        import statistics, time
        from kebab_mlflow.golden import parse_golden_set
        raw = open({str(path)!r}, "rb").read()
        parse_golden_set(raw, "g.yaml")
        ts = []
        for _ in range({REPEATS}):
            t = time.perf_counter(); parse_golden_set(raw, "g.yaml")
            ts.append(time.perf_counter() - t)
        print(statistics.median(ts))
    ''')
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import statistics

    import pydantic
    from bench_scale import synthetic_set

    from kebab_mlflow.errors import GoldenSetError
    from kebab_mlflow.yaml_source import parse

    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="kebab-bench-readers-"))
    synthetic = synthetic_set(10_000, 0, tmp / "g10k.yaml")
    here = str(ROOT)
    namespace: dict[str, Any] = {}
    # dont_inherit: this module's `from __future__ import annotations` would leave the
    # model's annotations as strings pydantic cannot resolve here
    exec(compile(PYDANTIC_MODEL, "<model>", "exec", dont_inherit=True), namespace)  # noqa: S102
    model = namespace["GoldenFile"]

    lines = [f"bench_readers — our field tables (kebab_mlflow/reading.py) vs pydantic "
             f"{pydantic.VERSION}; median of {REPEATS} after 1 warm-up, sides alternating",
             ""]
    starts: dict[str, list[float]] = {"ours": [], "pydantic": []}
    startup("import kebab_mlflow.golden", here)  # warm-up: the file system cache
    for _ in range(STARTUP_REPEATS):
        starts["ours"].append(startup("import kebab_mlflow.golden", here))
        starts["pydantic"].append(startup("import kebab_mlflow.golden\n" + PYDANTIC_MODEL, here))
    ours_s, pyd_s = (statistics.median(starts[k]) for k in ("ours", "pydantic"))
    lines += [f"1. start-up, fresh process, median of {STARTUP_REPEATS}:",
              f"   import kebab_mlflow.golden                      {ours_s * 1e3:8.1f} ms",
              f"   ... + import pydantic + the golden-set model     {pyd_s * 1e3:8.1f} ms "
              f"(+{(pyd_s - ours_s) * 1e3:.1f} ms)", ""]

    lines.append("2. field checks of a parsed golden set (YAML parse untimed, the same data):")
    for label, path in (("fixture", FIXTURE), ("synthetic 10k", synthetic)):
        data, node = parse(path.read_bytes(), str(path), GoldenSetError, "golden set")
        t = alternate({"ours": lambda d=data, n=node, p=str(path): ours_checks(d, n, p),
                       "pydantic": lambda d=data: pydantic_checks(model, d)}, REPEATS)
        n = t["ours"].result
        assert t["pydantic"].result == n
        lines.append(f"   {label:<14} {n:>6} queries: ours {t['ours'].median * 1e3:8.2f} ms, "
                     f"pydantic {t['pydantic'].median * 1e3:8.2f} ms "
                     f"(ratio ours/pydantic {t['ours'].median / t['pydantic'].median:.2f})")
    lines.append("")

    before = before_tree()
    lines.append(f"3. whole load (parse_golden_set: parse + every check + records), fresh "
                 f"process each, median of {REPEATS}:")
    for label, path in (("fixture", FIXTURE), ("synthetic 10k", synthetic)):
        old, new = whole_load(before, path), whole_load(ROOT, path)
        lines.append(f"   {label:<14} hand-written ({BEFORE}) {old * 1e3:8.2f} ms, "
                     f"reading.py {new * 1e3:8.2f} ms ({(new / old - 1) * 100:+.1f}%)")
    lines += ["", load_line(load)]
    emit("bench_readers", "\n".join(lines))


if __name__ == "__main__":
    main()
