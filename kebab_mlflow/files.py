"""File helpers shared by every layer: the sha256 of a file, read in blocks."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_digest(path: Path) -> str:
    """The hex sha256 of the file's bytes (1 MiB blocks: large run files stay out of memory)."""
    sha = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()
