"""Where a result came from: git commit and dirty flag of the working directory, digests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kebab_mlflow import vocabulary as vocab


def git_state(cwd: Path | None = None) -> tuple[str, bool | None]:
    """(12-char commit or 'unknown', dirty tree or None when not a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                                 timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return "unknown", None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip()[:12], bool(status and status.strip())


def provenance_tags(kind: str) -> dict[str, str]:
    """The tags every run carries about where it came from: its kind, the git commit and dirty
    flag of the working directory, and the tool's version."""
    from kebab_mlflow import __version__

    commit, dirty = git_state()
    return {vocab.KIND: kind, vocab.GIT_COMMIT: commit,
            vocab.GIT_DIRTY: str(dirty).lower(), vocab.TOOL_VERSION: __version__}
