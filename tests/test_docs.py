"""The documentation: the site builds in strict mode (no broken link or anchor), the README stays
short, every "DESIGN §N" names a section of docs/design.md, and every module or file a
docstring names exists."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 400
# Where docstrings and DESIGN references are looked for.
CODE_DIRS = ("kebab_mlflow", "tests", "bench", "scripts", "fixtures")
# A repository path a docstring names: kebab_mlflow/..., tests/..., bench/..., scripts/...
PATH_IN_TEXT = re.compile(r"(?<![\w./-])((?:kebab_mlflow|tests|bench|scripts)/[\w./-]*\w)")
MODULE_IN_TEXT = re.compile(r"(?<![\w.])(kebab_mlflow(?:\.\w+)+)")
DESIGN_REFERENCE = re.compile(r"DESIGN (§\d+(?:, §\d+)*)")


def _python_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def _docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of the module's, each class's and each function's docstring."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                found.append((node.body[0].lineno, text))
    return found


def _is_module(dotted: str) -> bool:
    """True when some prefix of ``dotted`` (below the top package) is a module or package
    of the repository: ``kebab_mlflow.pipeline.text.tokenize`` names a function of one."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def _named_paths_missing(label: str, source: str) -> list[str]:
    """``label:line: name`` for each file or module a docstring of ``source`` names that the
    repository does not have."""
    problems = []
    for line, text in _docstrings(source):
        for match in PATH_IN_TEXT.finditer(text):
            named = match[1]
            if "*" in text[match.end():match.end() + 1] or (ROOT / named).exists():
                continue  # a glob such as bench/bench_*.py names no one file
            problems.append(f"{label}:{line}: {named}")
        for match in MODULE_IN_TEXT.finditer(text):
            if not _is_module(match[1]):
                problems.append(f"{label}:{line}: {match[1]}")
    return problems


def test_every_file_and_module_a_docstring_names_exists() -> None:
    problems = [p for path in _python_files() for p in _named_paths_missing(
        str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))]
    assert problems == [], "docstrings name files or modules that do not exist:\n" + "\n".join(
        problems)


def test_the_path_check_reports_what_is_missing_and_accepts_what_exists() -> None:
    """The check above can fail: names that are not in the repository are reported; a module's
    function, an existing file and a glob are not."""
    source = ('"""See kebab_mlflow.no_such_module and bench/no_such_bench.py."""\n'
              'def f():\n'
              '    """Uses kebab_mlflow.pipeline.text.tokenize, tests/test_docs.py and\n'
              '    bench/bench_*.py."""\n')
    assert _named_paths_missing("probe.py", source) == [
        "probe.py:1: bench/no_such_bench.py", "probe.py:1: kebab_mlflow.no_such_module"]


def _design_sections() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    return {f"§{n}" for n in re.findall(r"^## (\d+)\. ", text, re.M)}


def test_every_design_reference_names_a_section_of_the_design_document() -> None:
    sections = _design_sections()
    assert {"§2", "§3", "§5", "§6", "§8"} <= sections
    files = _python_files() + sorted((ROOT / "fixtures").rglob("*.yaml")) + sorted(
        (ROOT / "docs").glob("*.md"))
    unresolved = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in DESIGN_REFERENCE.finditer(line):
                unresolved += [f"{path.relative_to(ROOT)}:{number}: DESIGN {ref}"
                               for ref in match[1].split(", ") if ref not in sections]
    assert unresolved == [], "\n".join(unresolved)


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_the_readme_links_resolve() -> None:
    """The README is not part of the site, so its relative links are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into the docs"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None
                    or importlib.util.find_spec("material") is None,
                    reason="mkdocs or mkdocs-material is not installed (the `docs` extra)")
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    """mkdocs.yml's `validation` makes links, anchors and pages missing from the nav warnings;
    --strict makes any warning fail the build."""
    site = tmp_path / "site"
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr + res.stdout
    assert "WARNING" not in res.stderr, res.stderr
    assert (site / "index.html").is_file() and (site / "design" / "index.html").is_file()


# A repository path the documentation names (placeholders such as <folder> and globs left out).
PATH_IN_DOCS = re.compile(
    r"(?<![\w./-])((?:kebab_mlflow|tests|bench|scripts|fixtures|examples)/[\w./<>*-]*)")


def _named_path(match: re.Match[str]) -> str | None:
    """The path a match names, None for a placeholder or glob (kebab-recovery/<folder>)."""
    path = match[1].rstrip(".-/")
    return None if "<" in path or "*" in path else path


def test_every_repository_path_the_docs_name_exists() -> None:
    """A page that names a module by its old path after the module moved is out of date."""
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            named = [p for m in PATH_IN_DOCS.finditer(line) if (p := _named_path(m))]
            missing += [f"{page.relative_to(ROOT)}:{number}: {p}" for p in named
                        if not (ROOT / p).exists()]
    assert missing == [], "\n".join(missing)


def test_the_cli_page_lists_every_command_and_its_current_help():
    """docs/cli.md's option reference is what the CLI prints (scripts/cli_reference.py), and
    its command table names every top-level command."""
    checked = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"),
                              "--check"], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    import typer

    from kebab_mlflow.cli.app import app

    root = typer.main.get_command(app)
    names = root.list_commands(root.context_class(root))
    table = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("## `run`", 1)[0]
    missing = [n for n in names if f"| `{n}" not in table]
    assert missing == [], f"docs/cli.md's command table lacks {missing}"
