"""File helpers shared by every layer: the sha256 of a file, read in blocks; JSON whose
nesting is too deep for Python's parser reported like any other malformed JSON."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import TooDeeplyNested


def json_loads(text: str | bytes) -> Any:
    """``json.loads``; a RecursionError (``[[[[…`` thousands deep) becomes a ValueError, so
    the caller reports it with file:line as it does any malformed line."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeeplyNested("JSON nested too deeply") from None


_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what json.dumps(ensure_ascii=False) escapes


def json_texts(strings: Iterable[str]) -> list[str]:
    """Each string as ``json.dumps(s, ensure_ascii=False)`` writes it; one with nothing to
    escape is just quoted (a million ids: 0.3 s, not 3 s)."""
    return [json.dumps(s, ensure_ascii=False) if _JSON_ESCAPED.search(s) else f'"{s}"'
            for s in strings]


def file_digest(path: Path) -> str:
    """The hex sha256 of the file's bytes (1 MiB blocks: large run files stay out of memory)."""
    sha = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()
