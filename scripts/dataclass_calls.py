"""Count dataclass constructions by their number of positional arguments (issue 26's target:
0 constructions with 6 or more), and list the dataclasses with more than three fields that are
not `kw_only`.

    PYTHONPATH=$PWD .venv/bin/python scripts/dataclass_calls.py [kebab_mlflow tests bench ...]

A construction is a call whose callee's name (`Name(...)` or `module.Name(...)`) is a class
decorated with `@dataclass` in the scanned files; `dataclasses.replace` is not counted. Exit 1
when a construction has 6+ positional arguments or a wide dataclass is not kw_only.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDE = 6


@dataclass(frozen=True, kw_only=True)
class DataclassInfo:
    name: str
    where: str
    fields: int
    kw_only: bool


def dataclass_decorator(node: ast.ClassDef) -> ast.expr | None:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return deco
    return None


def is_kw_only(deco: ast.expr) -> bool:
    if not isinstance(deco, ast.Call):
        return False
    return any(k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in deco.keywords)


def field_count(node: ast.ClassDef) -> int:
    return sum(1 for stmt in node.body if isinstance(stmt, ast.AnnAssign)
               and not (isinstance(stmt.annotation, ast.Subscript)
                        and getattr(stmt.annotation.value, "id", "") == "ClassVar"))


def python_files(roots: list[str]) -> list[Path]:
    return sorted(p for root in roots for p in (ROOT / root).rglob("*.py"))


def find_dataclasses(files: list[Path]) -> dict[str, DataclassInfo]:
    found: dict[str, DataclassInfo] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (deco := dataclass_decorator(node)):
                found[node.name] = DataclassInfo(
                    name=node.name, where=f"{path.relative_to(ROOT)}:{node.lineno}",
                    fields=field_count(node), kw_only=is_kw_only(deco))
    return found


def constructions(files: list[Path], names: set[str]) -> list[tuple[str, str, int]]:
    calls = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in names:
                calls.append((name, f"{path.relative_to(ROOT)}:{node.lineno}", len(node.args)))
    return calls


def main(roots: list[str]) -> int:
    files = python_files(roots)
    classes = find_dataclasses(files)
    calls = constructions(files, set(classes))
    by_count = Counter(min(n, WIDE) for _, _, n in calls)
    print("constructions by positional arguments:",
          ", ".join(f"{n if n < WIDE else f'{WIDE}+'}: {by_count[n]}" for n in sorted(by_count)))
    wide_calls = [c for c in calls if c[2] >= WIDE]
    for name, where, n in wide_calls:
        print(f"  {where}: {name} with {n} positional arguments")
    wide = [c for c in classes.values() if c.fields > 3]
    loose = [c for c in wide if not c.kw_only]
    print(f"dataclasses: {len(classes)}; with > 3 fields: {len(wide)}; of those not kw_only: "
          f"{len(loose)}")
    for info in loose:
        print(f"  {info.where}: {info.name} ({info.fields} fields)")
    return 1 if wide_calls or loose else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["kebab_mlflow"]))
