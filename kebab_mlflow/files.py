"""File helpers shared by every layer: the sha256 of a file, read in blocks; JSON whose
nesting is too deep for Python's parser reported like any other malformed JSON."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
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


#: bytes read at a time by a digest: large files stay out of memory, and a digest on a second
#: thread is not starved by a busy first one — each block's read and hash let go of the GIL
#: and wait up to 5 ms to take it back (1 MiB blocks: a 3.6 GB file hashed in 42 s beside a
#: busy pure-Python thread, 3.7 s alone; 16 MiB: 6.7 s)
BLOCK = 1 << 24


def file_digest(path: Path) -> str:
    """The hex sha256 of the file's bytes, read in blocks (:data:`BLOCK`)."""
    sha = hashlib.sha256()
    for block in _blocks(path):
        sha.update(block)
    return sha.hexdigest()


def digest_and_lines(path: Path) -> tuple[str, int]:
    """:func:`file_digest` and the number of lines (newlines, plus one for a last line
    without its own), in one read of the file."""
    sha = hashlib.sha256()
    newlines, last = 0, b"\n"
    for block in _blocks(path):
        sha.update(block)
        newlines += block.count(b"\n")
        last = block[-1:]
    return sha.hexdigest(), newlines + (last != b"\n")


def _blocks(path: Path) -> Iterator[bytes]:
    with Path(path).open("rb") as fh:
        yield from iter(lambda: fh.read(BLOCK), b"")
