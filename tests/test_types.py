"""mypy --strict over kebab_mlflow/ (the settings are pyproject.toml's [tool.mypy]) finds no error.

`make lint` runs the same check. The package is clean: any error mypy reports fails the test,
with mypy's own lines in the message.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")


def test_mypy_strict_finds_no_error():
    # the cache beside the code (gitignored) keeps a second run to seconds
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode != 2, done.stdout + done.stderr  # 2: mypy itself failed
    errors = [line for line in done.stdout.splitlines() if re.search(r": error: ", line)]
    assert errors == [], done.stdout[-5000:]
    assert done.returncode == 0 and re.search(r"^Success: no issues found in \d+ source files$",
                                              done.stdout, re.MULTILINE), done.stdout[-5000:]
