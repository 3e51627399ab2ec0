"""Turn public collections into golden sets that ``run`` can use with their corpus."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from kebab_mlflow.errors import CorpusError, Problem


@dataclass(frozen=True)
class ImportSummary:
    written: int
    skipped_without_judgments: int
    out: Path


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
    with queries_path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                qid, text = str(rec["_id"]), rec["text"]
            except (ValueError, KeyError, TypeError):
                raise CorpusError("invalid BEIR queries file", [Problem(
                    "expected a JSON object with _id and text", f"{queries_path}:{lineno}")]) \
                    from None
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
    doc = {"name": name or f"{folder.name}-{split}", "queries": entries}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000))
    return ImportSummary(len(entries), skipped, out)
