"""A Comparison as JSON, markdown and terminal rows."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from typing import Any

from kebab_mlflow.comparison.records import (
    KINDS,
    Comparison,
    MetricResult,
    QueryDiff,
    QueryKind,
)
from kebab_mlflow.comparison.slices import holm_words, slice_json, slice_rows, verdict_text
from kebab_mlflow.formatting import number


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_json(c: Comparison) -> dict[str, Any]:
    return _document(c, [asdict(q) for q in ordered(c.queries)])


def _document(c: Comparison, queries: Any) -> dict[str, Any]:
    """The report as JSON-ready values, ``queries`` in its place (a placeholder for
    :func:`dumps`, which renders them one at a time)."""
    o = c.options
    cleaned: dict[str, Any] = _clean({
        "verdict": c.verdict,
        "reasons": list(c.reasons),
        "rule": c.rule,
        "exit_code": c.exit_code,
        "level": c.level,
        "notes": list(c.notes),
        "warnings": list(c.warnings),
        "settings": {"primary": c.primary.name, "primary_source": c.primary_source,
                     "gates": [m.gate for m in c.metrics], "alpha": o.alpha,
                     "confidence": o.confidence,
                     "resamples": o.resamples, "seed": o.seed, "strict": o.strict,
                     "allow_golden_mismatch": o.allow_golden_mismatch,
                     "small_set_threshold": o.small_set, "margin": o.margin,
                     "max_regressions": o.max_regressions, "power": 0.8,
                     "abstention_gate": o.abstention_gate, "alternative": str(o.alternative),
                     "count_flaky": o.count_flaky,
                     "multiple_comparisons": "holm over the gated metrics that changed"},
        "n": {"queries": c.n_queries, "with_ground_truth": c.n_with_truth, **c.dropped},
        "baseline": c.baseline,
        "candidate": c.candidate,
        "versions": [{"key": k, "baseline": b, "candidate": v, "same": s}
                     for k, b, v, s in c.versions],
        "version_changes": [{"key": k, "baseline": b, "candidate": v, "line": line}
                            for (k, b, v), line in zip(changed_versions(c),
                                                       version_lines(c), strict=True)],
        "counts": c.counts,
        "flaky_regressions": c.flaky_regressions,
        "metrics": [asdict(m) for m in c.metrics],
        "queries": queries,
        "slices": slice_json(c.slices),
    })
    return cleaned


def changed_versions(c: Comparison) -> list[tuple[str, str, str]]:
    """(key, baseline, candidate) of each version that differs (or is unknown)."""
    return [(k, b, v) for k, b, v, same in c.versions if not same]


def version_lines(c: Comparison) -> list[str]:
    """One line per version that differs, as every format prints it."""
    return [f"{k}: {b} → {v}" if b != v else f"{k}: {b} (unknown: cannot tell if it changed)"
            for k, b, v in changed_versions(c)]


_QUERIES = "\x00queries\x00"  # stands for the query list while the rest is rendered
_FIELDS = tuple(f.name for f in fields(QueryDiff))


def dumps(c: Comparison) -> str:
    """``json.dumps(to_json(c), indent=1)``: the report as compare.json holds it."""
    return "".join(iter_dumps(c))


def iter_dumps(c: Comparison) -> Iterator[str]:
    """:func:`dumps` in pieces, byte for byte, without the whole tree or the whole text: the
    query diffs (100k at 100k queries) are rendered one at a time, as they are written."""
    if not c.queries:
        yield json.dumps(to_json(c), indent=1, allow_nan=False, ensure_ascii=False)
        return
    head = json.dumps(_document(c, _QUERIES), indent=1, allow_nan=False, ensure_ascii=False)
    before, after = head.split(json.dumps(_QUERIES), 1)
    encode = json.JSONEncoder(indent=1, allow_nan=False, ensure_ascii=False).encode
    yield before + "["
    for i, q in enumerate(ordered(c.queries)):
        yield ("\n  " if i == 0 else ",\n  ") + encode(
            _clean({f: getattr(q, f) for f in _FIELDS})).replace("\n", "\n  ")
    yield "\n ]" + after


def ordered(queries: Sequence[QueryDiff]) -> list[QueryDiff]:
    """Regressions first, then losses, wins, draws with a flip, plain draws (stable)."""
    def key(q: QueryDiff) -> int:
        if q.kind == QueryKind.DRAW:
            return 3 if (q.contains_all or q.refusal) else 4
        return KINDS.index(q.kind)

    return sorted(queries, key=key)


def kind_text(q: QueryDiff) -> str:
    """The class as shown: "Regression (flaky)" when its repeats disagreed on either side."""
    return f"{q.kind} (flaky)" if q.flaky else q.kind


def _rank_text(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)


def result_word(m: MetricResult) -> str:
    """significant direction, "unchanged" (left out of Holm) or "—"."""
    return m.significant or ("unchanged" if m.unchanged else "—")


def metric_rows(c: Comparison) -> list[list[str]]:
    return [[m.name + ("" if m.name == m.gate else f" (gate {m.gate})"), m.role, str(m.n),
             number(m.baseline), number(m.candidate), number(m.delta, signed=True),
             f"[{number(m.ci_low, signed=True)}, {number(m.ci_high, signed=True)}]",
             number(m.p_value) + (" (exact)" if m.p_exact and m.p_value is not None else ""),
             number(m.p_holm), number(m.mde), result_word(m)] for m in c.metrics]


METRIC_COLUMNS = ["metric", "role", "n", "baseline", "candidate", "delta", "95% CI", "p",
                  "p Holm", "MDE (80%)", "result"]


def query_rows(c: Comparison, limit: int | None = None) -> tuple[list[list[str]], int]:
    shown = [q for q in ordered(c.queries)
             if q.kind != QueryKind.DRAW or q.contains_all or q.refusal]
    rows = [[kind_text(q), q.id, q.level, _rank_text(q.baseline_rank),
             _rank_text(q.candidate_rank), q.contains_all or "", q.refusal or "",
             q.abstention or "", number(q.top_score_delta, signed=True),
             ("(private)" if c.private else (q.query or ""))] for q in shown[:limit]]
    return rows, len(shown) - len(rows)


QUERY_COLUMNS = ["kind", "id", "level", "base rank", "cand rank", "contains_all", "refusal",
                 "abstention", "top-score Δ", "query"]


def headline(c: Comparison) -> str:
    b, d = c.baseline, c.candidate
    return (f"{verdict_text(c)}: candidate {d['name']} ({d['run_id']}) vs baseline {b['name']} "
            f"({b['run_id']}), {c.n_queries} queries ({c.n_with_truth} with ground truth), "
            f"{c.level} level")


def to_markdown(c: Comparison, query_limit: int = 200) -> str:
    lines = [f"# Compare: {verdict_text(c)}", ""]
    lines += [f"> **{note}**" for note in c.notes] + ([""] if c.notes else [])
    lines += [headline(c), ""]
    lines += [f"- {r}" for r in c.reasons] + [""]
    changes = version_lines(c)
    lines += ["**Versions that differ:** " + ("none" if not changes else ""), ""]
    lines += [f"- {line}" for line in changes] + ([""] if changes else [])
    lines += ["**Rule.** " + c.rule, ""]
    if c.warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in c.warnings] + [""]
    lines += ["## Gated metrics", "", "| " + " | ".join(METRIC_COLUMNS) + " |",
              "|" + "---|" * len(METRIC_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in metric_rows(c)]
    lines += _slice_markdown(c)
    lines += ["", "## Queries", "",
              ", ".join(f"{k}: {c.counts.get(k, 0)}" for k in KINDS)
              + f" (first-hit rank at each query's ground-truth level: {c.level}; "
              f"n = {c.n_queries}, {c.n_with_truth} with ground truth, dropped "
              f"{c.dropped['baseline_only']} baseline-only / {c.dropped['candidate_only']} "
              "candidate-only)", ""]
    rows, more = query_rows(c, query_limit)
    if rows:
        lines += ["| " + " | ".join(QUERY_COLUMNS) + " |", "|" + "---|" * len(QUERY_COLUMNS)]
        lines += ["| " + " | ".join(v.replace("|", "\\|") for v in r) + " |" for r in rows]
        if more:
            lines += ["", f"… and {more} more (all in compare.json)"]
    else:
        lines += ["No query changed."]
    lines += ["", "## Versions", "", "| version | baseline | candidate | same |",
              "|---|---|---|---|"]
    lines += [f"| {k} | {b} | {v} | {'yes' if s else '**no**'} |" for k, b, v, s in c.versions]
    lines += ["", "## Runs", "", "| | baseline | candidate |", "|---|---|---|"]
    for key in ("run_id", "name", "preset", "backend", "golden_set", "golden_sha256",
                "git_commit", "git_dirty"):
        lines.append(f"| {key} | {c.baseline.get(key) or '—'} | {c.candidate.get(key) or '—'} |")
    return "\n".join(lines) + "\n"


def _slice_markdown(c: Comparison) -> list[str]:
    if c.slices is None:
        return []
    r = c.slices
    lines = ["", f"## Slices by {r.by}", "",
             f"Labels from golden set {r.golden}; {len(r.slices)} slices, {r.unlabelled} "
             f"compared queries without a {r.by} (in no slice); {holm_words(r)}; a slice "
             f"with fewer than {r.small_set} judged queries is too small to "
             "carry a verdict.", "",
             "| " + " | ".join(SLICE_COLUMNS) + " |", "|" + "---|" * len(SLICE_COLUMNS)]
    return lines + ["| " + " | ".join(v.replace("|", "\\|") for v in row) + " |"
                    for row in slice_rows(r)]


SLICE_COLUMNS = ["slice", "n", "judged", "Regressions", "metric", "delta", "95% CI",
                 "p Holm", "MDE (80%)", "verdict"]


def to_junit(c: Comparison) -> str:
    """JUnit XML: one testcase per gated metric, per verdict rule that fired and per Regression
    query (CI systems show failed testcases in their test reports); failures only when the
    verdict fails (Regressed, Inconclusive)."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name="kebab-mlflow compare")
    cases = 0

    def case(name: str, failure: str | None, text: str = "") -> None:
        nonlocal cases
        cases += 1
        el = ET.SubElement(suite, "testcase", classname="kebab-mlflow.compare", name=name)
        if failure is not None:
            ET.SubElement(el, "failure", message=failure).text = text
        elif text:
            ET.SubElement(el, "system-out").text = text

    for m, row in zip(c.metrics, metric_rows(c), strict=True):
        detail = ", ".join(f"{k}={v}" for k, v in zip(METRIC_COLUMNS, row, strict=True))
        bad = m.significant == "worse" or m.within_margin is False
        case(f"{m.role} {m.name}", f"{m.name}: {result_word(m)}" if bad else None, detail)
    for reason in c.reasons:
        if (reason.startswith(("small set:", "not shown non-inferior", "slice"))
                or "--max-regr" in reason):
            case(f"rule: {reason.split(':')[0]}", reason, reason)
    # a regressed query fails its testcase only when the verdict fails: a JUnit consumer that
    # marks a build unstable on any failure must agree with the exit code
    failing = c.exit_code != 0
    for q in ordered(c.queries):
        if q.kind == QueryKind.REGRESSION:
            what = (f"Regression at {q.level} level: rank {_rank_text(q.baseline_rank)} → miss"
                    + ("" if failing else f" (the gate passed: {c.verdict})"))
            text = "" if c.private else (q.query or "")
            case(f"query {q.id}", what if failing else None, what + "\n" + text)
    failures = sum(1 for el in suite if el.find("failure") is not None)
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    ET.SubElement(suite, "system-out").text = headline(c) + "\n" + "\n".join(c.reasons)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
