"""Ingest a corpus: a folder of markdown/text files or a BEIR ``corpus.jsonl[.gz]``."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import CorpusError, Problem
from kebab_mlflow.files import json_loads
from kebab_mlflow.pipeline.cache import cached_text
from kebab_mlflow.progress import warn

TEXT_SUFFIXES = (".md", ".markdown", ".txt")


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Corpus:
    """A corpus's digest, and its documents as ``read()`` returns them on first use."""

    source: str
    digest: str  # sha256 over the bytes that were read, in a fixed order
    read: Callable[[], tuple[Document, ...]] = field(repr=False, compare=False)

    @cached_property
    def documents(self) -> tuple[Document, ...]:
        return self.read()

    def __len__(self) -> int:
        return len(self.documents)


def load_corpus(path: str | Path) -> Corpus:
    """Folder → one document per text file (doc id = relative path without suffix);
    a ``.jsonl``/``.jsonl.gz`` file or a folder holding ``corpus.jsonl[.gz]`` → BEIR. Every
    document is read and checked (CorpusError)."""
    corpus = open_corpus(path)
    corpus.documents  # noqa: B018 - parsed now, so a bad file fails here
    return corpus


def open_corpus(path: str | Path) -> Corpus:
    """:func:`load_corpus`, but a BEIR file's records are parsed (and checked) only when its
    documents are first read: a run whose index is cached for the digest needs just the
    digest (SciFact: 0.05 s, not 0.19 s) — an index is cached only for a digest whose
    records parsed, so a bad file still fails before anything is built for it."""
    path = Path(path)
    if path.is_dir():
        for name in ("corpus.jsonl", "corpus.jsonl.gz"):
            if (path / name).is_file():
                return _load_beir(path / name)
        return _load_folder(path)
    if path.is_file() and (path.name.endswith(".jsonl") or path.name.endswith(".jsonl.gz")):
        return _load_beir(path)
    raise CorpusError(f"corpus {path} is neither a folder of .md/.txt files nor a BEIR "
                      "corpus.jsonl[.gz]")


def _load_folder(root: Path) -> Corpus:
    files = _unique_files(root, _text_files(root))
    if not files:
        raise CorpusError(f"corpus folder {root} has no {'/'.join(TEXT_SUFFIXES)} files")
    digest = hashlib.sha256()
    docs, problems = [], []
    for f in files:
        rel = f.relative_to(root).with_suffix("").as_posix()
        raw = f.read_bytes()
        digest.update(rel.encode() + b"\0" + raw + b"\0")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(f"not UTF-8 at byte {exc.start}", str(f)))
            continue
        docs.append(Document(rel, text, _first_heading(text) or rel))
    if problems:
        raise CorpusError(f"unreadable files in corpus {root}", problems)
    documents = tuple(docs)
    return Corpus(source=str(root), digest=digest.hexdigest(), read=lambda: documents)


def _text_files(root: Path) -> list[Path]:
    """The folder's text files, links included, in path order. A link whose target leaves the
    folder is refused (CorpusError naming every one); a dangling link is warned about. A link
    to a folder inside it is not walked: its files are found under their own path."""
    real_root = root.resolve()
    files, leaving, dangling = [], [], []
    for folder, dirs, names in os.walk(root):  # followlinks=False: no loop, no escape
        for name in sorted({*dirs, *names}):
            path = Path(folder, name)
            texty = name in names and path.suffix in TEXT_SUFFIXES
            if not path.is_symlink():
                files += [path] if texty else []
                continue
            target = path.resolve()
            if not target.exists():
                dangling.append(path)
            elif not target.is_relative_to(real_root) and (texty or target.is_dir()):
                leaving.append(Problem(f"a link to {target}, outside the corpus folder: "
                                       "refused (copy the file into the folder)", str(path)))
            elif texty and target.is_file():
                files.append(path)
    if leaving:
        raise CorpusError(f"links leaving the corpus folder {root}", leaving)
    if dangling:
        warn(f"corpus {root}: {len(dangling)} dangling link(s) skipped: "
             + ", ".join(str(p.relative_to(root)) for p in dangling))
    return sorted(files)


def _unique_files(root: Path, files: list[Path]) -> list[Path]:
    """Each real file once (links and hard links to one file are one document): the file
    itself when it is in the folder, else the first link by path; the others named in one
    warning."""
    by_identity: dict[tuple[int, int], list[Path]] = {}
    for f in files:
        st = f.stat()
        by_identity.setdefault((st.st_dev, st.st_ino), []).append(f)
    kept, dropped = [], []
    for same in by_identity.values():
        first = min(same, key=lambda p: (p.is_symlink(), p.as_posix()))
        kept.append(first)
        dropped += [f"{p.relative_to(root)} (= {first.relative_to(root)})"
                    for p in same if p != first]
    if dropped:
        warn(f"corpus {root}: {len(dropped)} file(s) are links to a file indexed once under "
             f"its own name: {', '.join(sorted(dropped))}")
    return sorted(kept)


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


# the file's identity (_identity) -> corpus. A sweep validates the corpus and then builds one
# pipeline per row in the same process: parse the JSON once, not once per row.
_PARSED_BEIR: dict[str, Corpus] = {}
#: how long a file must have been left alone for its digest to be kept by its identity: a file
#: rewritten within the file system's timestamp tick can keep its size and times ("racy git")
SETTLED_NS = 2_000_000_000


def _load_beir(path: Path) -> Corpus:
    """The corpus of a BEIR file. Its digest — the sha256 of the decompressed content, which
    index cache keys use — is kept in the cache by the file's identity (:func:`_identity`),
    so a cached run does not decompress and hash the file again (SciFact: 0.05 s of a cached
    run's CPU, which shares the GIL with importing mlflow); the content read later for parsing
    is checked against it."""
    key = _identity(path)
    if key not in _PARSED_BEIR:
        if len(_PARSED_BEIR) >= 4:
            _PARSED_BEIR.clear()
        read: list[bytes] = []  # the content, when hashing it read it

        def digest() -> str:
            read.append(_decompressed(path.read_bytes(), path))
            return hashlib.sha256(read[0]).hexdigest()

        found = cached_text("corpus-digests", key, digest, valid=_is_digest,
                            keep=lambda: _settled(path))
        _PARSED_BEIR[key] = Corpus(
            source=str(path), digest=found,
            read=lambda: _parse_beir(read[0] if read else _content(path, found), path))
    return _PARSED_BEIR[key]


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _is_digest(text: str) -> bool:
    return _DIGEST.fullmatch(text) is not None


def _identity(path: Path) -> str:
    """A key that changes whenever the file's bytes may have: its real path, device, inode,
    size, modification and change times (the change time moves on every write, and also when a
    tool puts the modification time back)."""
    st = path.stat()
    fields = (path.resolve(), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return hashlib.sha256("\0".join(map(str, fields)).encode()).hexdigest()


def _settled(path: Path) -> bool:
    st = path.stat()
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLED_NS


def _content(path: Path, digest: str) -> bytes:
    """The file's decompressed content, refused if it no longer has ``digest``."""
    content = _decompressed(path.read_bytes(), path)
    if hashlib.sha256(content).hexdigest() != digest:
        raise CorpusError(f"BEIR corpus {path} changed while it was being read; run again")
    return content


def _decompressed(raw: bytes, path: Path) -> bytes:
    if not path.name.endswith(".gz"):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise CorpusError(f"BEIR corpus {path} is not a readable gzip file ({exc})") from None


def _string(record: dict[str, Any], key: str) -> str:
    """A record's text or title: a string, or absent/null (""). A number, list or mapping is
    refused rather than turned into text with ``str()`` (it means the file is not what it
    claims to be)."""
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{key!r} must be a string, got a {type(value).__name__}")
    return value


def _parse_beir(raw: bytes, path: Path) -> tuple[Document, ...]:
    docs, problems, seen = [], [], set()
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json_loads(line)
            doc_id, text, title = str(rec["_id"]), _string(rec, "text"), _string(rec, "title")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(Problem(f"not a BEIR record ({type(exc).__name__}: {exc})",
                                    f"{path}:{lineno}"))
            continue
        if doc_id in seen:
            problems.append(Problem(f"duplicate _id {doc_id!r}", f"{path}:{lineno}"))
        seen.add(doc_id)
        docs.append(Document(doc_id, text, title))
        if len(problems) >= 50:
            break
    if problems:
        raise CorpusError(f"invalid BEIR corpus {path}", problems)
    if not docs:
        raise CorpusError(f"BEIR corpus {path} is empty")
    return tuple(docs)
