"""Turn public collections into golden sets that ``run`` can use with their corpus."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kebab_mlflow.errors import CorpusError, Problem
from kebab_mlflow.files import json_loads

# Folder names that say how a collection is stored, not which one it is: a collection kept as
# ``<collection>/beir/`` is named after ``<collection>``.
GENERIC_FOLDER_NAMES = {"beir", "data", "dataset", "datasets", "corpus", "collection", "raw"}
CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")


@dataclass(frozen=True, kw_only=True)
class ImportSummary:
    written: int
    skipped_without_judgments: int
    out: Path
    name: str = ""
    corpus: Path | None = None  # the collection's corpus file, recorded in the golden set


def collection_name(folder: Path) -> str:
    """The collection a BEIR folder holds: its name, or its parent's for a generic name."""
    folder = folder.resolve()
    if folder.name.lower() in GENERIC_FOLDER_NAMES and folder.parent.name:
        return folder.parent.name
    return folder.name


def _recorded_path(corpus: Path, golden: Path) -> str:
    """The corpus as the golden set records it: relative to the golden file when the two share
    a folder below the root (the pair can move together, e.g. ``../shared/...``), else
    absolute."""
    corpus, base = corpus.resolve(), golden.resolve().parent
    if os.path.commonpath([corpus, base]) == corpus.anchor:
        return str(corpus)
    return os.path.relpath(corpus, base)


def find_corpus(folder: Path) -> Path | None:
    return next((folder / n for n in CORPUS_FILES if (folder / n).is_file()), None)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV (header ``query-id corpus-id score``) → query → doc → grade."""
    qrels: dict[str, dict[str, int]] = {}
    problems = []
    with path.open(encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if lineno == 1 and row and row[0] == "query-id":
                continue
            if not row:
                continue
            try:
                qid, did, score = row[0], row[1], int(row[2])
            except (IndexError, ValueError):
                problems.append(Problem(f"expected query-id<TAB>corpus-id<TAB>score, got {row!r}",
                                        f"{path}:{lineno}"))
                continue
            qrels.setdefault(qid, {})[did] = score
    if problems:
        raise CorpusError(f"invalid qrels {path}", problems[:50])
    return qrels


def import_beir(folder: Path, split: str, out: Path, name: str | None = None) -> ImportSummary:
    queries_path, qrels_path = folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"
    missing = [str(p) for p in (queries_path, qrels_path) if not p.is_file()]
    if missing:
        raise CorpusError(f"not a BEIR folder: missing {', '.join(missing)}")
    qrels = read_qrels(qrels_path)
    entries, skipped = [], 0
    with queries_path.open("rb") as fh:  # bytes: a line that is not UTF-8 is named too
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json_loads(line.decode("utf-8"))
                qid, text = str(rec["_id"]), rec["text"]
                if not isinstance(text, str):
                    raise TypeError(f"'text' is a {type(text).__name__}")
            except (ValueError, KeyError, TypeError) as exc:
                raise CorpusError("invalid BEIR queries file", [Problem(
                    f"expected a JSON object with _id and a string text ({exc})",
                    f"{queries_path}:{lineno}")]) from None
            judged = {d: g for d, g in qrels.get(qid, {}).items() if g > 0}
            if not judged:
                skipped += 1
                continue
            grades = qrels[qid]
            graded = any(g != 1 for g in grades.values())
            entries.append({"id": qid, "query": text,
                            "expected_doc_ids": dict(grades) if graded else sorted(grades)})
    header = (f"# Imported from the BEIR collection {folder} (split {split}) by kebab-mlflow "
              f"import-beir.\n# {len(entries)} judged queries; {skipped} without judgments "
              "left out. Doc-level ground truth only: judge with the _doc metrics.\n")
    name = name or f"{collection_name(folder)}-{split}"
    corpus = find_corpus(folder)
    doc: dict[str, Any] = {"name": name}
    if corpus is not None:
        doc["corpus"] = _recorded_path(corpus, out)
    doc["queries"] = entries
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000))
    return ImportSummary(written=len(entries), skipped_without_judgments=skipped, out=out,
                         name=name, corpus=corpus)
