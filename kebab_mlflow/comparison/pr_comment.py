"""A Comparison as a pull-request comment: what a reviewer needs, within GitHub's limit.

``compare --format pr-comment`` writes it; ``kebab-mlflow ci comment`` posts it and, finding
:data:`MARKER` in an earlier comment, updates that one instead of adding another. In order:
the verdict line; the primary metric's change with its CI, p and MDE (what this set could not
have detected); the other gated metrics; the worst per-query changes (Regression, then Loss,
worst first) with the query text unless the golden set is private, the first relevant rank
before → after and what the candidate ranks in its place; the queries in one run only; the
versions that differ; links to both runs (and their traces) when a UI address is known.

GitHub refuses a comment body over 65,536 characters: the query table shrinks (and a long
query is cut) until the body fits, and a last cut keeps the marker and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kebab_mlflow.comparison.records import KINDS, Comparison, MetricResult, QueryDiff, RunSide
from kebab_mlflow.comparison.slices import holm_words, verdict_text
from kebab_mlflow.formatting import number
from kebab_mlflow.records import Hit

MARKER = "<!-- kebab-mlflow:pr-comment -->"
GITHUB_COMMENT_LIMIT = 65_536
WORST_QUERIES = 10
ONE_RUN_IDS = 20  # query ids listed per side for "in one run only"
QUERY_TEXT = 160  # characters of a query shown in the table
VERDICT_ICON = {"Better": "🟢", "Same": "⚪", "Regressed": "🔴", "Inconclusive": "🟡"}


@dataclass(frozen=True, kw_only=True)
class RunLink:
    """Where a run and its traces open in the MLflow UI (traces: None when it has none)."""

    run: str
    traces: str | None = None


def run_link(ui_base: str, experiment_id: str, run_id: str, traces: bool) -> RunLink:
    """The run page (and its Traces tab) under the UI's address."""
    page = f"{ui_base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return RunLink(run=page, traces=f"{page}/traces" if traces else None)


def to_pr_comment(c: Comparison, baseline: RunSide, candidate: RunSide, *,
                  links: tuple[RunLink, RunLink] | None = None,
                  limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The comment's markdown, at most ``limit`` characters (see the module docstring)."""
    for worst, text in ((WORST_QUERIES, QUERY_TEXT), (5, 80), (0, 0)):
        body = _render(c, baseline, candidate, links, worst, text)
        if len(body) <= limit:
            return body
    note = "\n\n… cut to fit the comment limit (the whole report: compare --format md)\n"
    return body[:limit - len(note)] + note


def _render(c: Comparison, baseline: RunSide, candidate: RunSide,
            links: tuple[RunLink, RunLink] | None, worst: int, text: int) -> str:
    sections = [
        [MARKER, verdict_line(c), ""],
        _primary_lines(c),
        _gate_lines(c),
        _slice_lines(c),
        # the MDE reason says what the line under the primary metric already says
        [f"- {r}" for r in c.reasons if not r.startswith("could not have detected")] + [""],
        [f"> ⚠️ {w}" for w in c.warnings] + ([""] if c.warnings else []),
        _query_lines(c, baseline, candidate, worst, text),
        _one_run_lines(c, baseline, candidate),
        _version_lines(c),
        _link_lines(c, links),
        ["<sub>kebab-mlflow compare --format pr-comment; updated in place on each push</sub>"],
    ]
    return "\n".join(line for section in sections for line in section) + "\n"


def verdict_line(c: Comparison) -> str:
    """``### 🔴 Regressed: candidate vs baseline on golden set (N queries, level)``."""
    b, d = c.baseline, c.candidate
    golden = d.get("golden_set") or b.get("golden_set") or "the golden set"
    digest = (d.get("golden_sha256") or "")[:12]
    return (f"### {VERDICT_ICON.get(c.verdict, '')} {verdict_text(c)}: `{d['name']}` vs "
            "baseline "
            f"`{b['name']}` on {golden}" + (f" ({digest})" if digest else "")
            + f", {c.n_queries} queries, {c.level} level")


def _primary_lines(c: Comparison) -> list[str]:
    m = c.primary
    lines = [f"**{m.name}** {number(m.baseline)} → {number(m.candidate)} "
             f"(Δ {number(m.delta, signed=True)}, {_confidence(c)} CI {_ci(m)}, p {_p(m)}"
             + (f", Holm p {number(m.p_holm)}" if len(c.metrics) > 1 else "")
             + f"; {_result(m)})"]
    if m.mde is not None:
        spread = (f"; a loss spread like the observed changes from {number(m.mde_spread)}"
                  if m.mde_spread is not None and number(m.mde_spread) != number(m.mde) else "")
        lines.append(f"With {m.n} paired queries this comparison could not have detected a "
                     f"drop below **{number(m.mde)}** in {m.name} (80% power, α "
                     f"{number(m.mde_alpha, 3)}; a loss of any shape{spread}).")
    return [*lines, ""]


def _gate_lines(c: Comparison) -> list[str]:
    gates = c.metrics[1:]
    if not gates:
        return []
    lines = [f"| gated metric | baseline | candidate | Δ | {_confidence(c)} CI | p Holm | MDE "
             "| result |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {m.name} | {number(m.baseline)} | {number(m.candidate)} | "
              f"{number(m.delta, signed=True)} | {_ci(m)} | {number(m.p_holm)} | "
              f"{number(m.mde)} | {_result(m)} |" for m in gates]
    return [*lines, ""]


def _slice_lines(c: Comparison) -> list[str]:
    """One line per regressed slice (compare --by), else one line saying none did."""
    r = c.slices
    if r is None:
        return []
    if not r.regressed:
        small = sum(s.verdict == "too small" for s in r.slices)
        return [f"**Slices by {r.by}**: none regressed ({len(r.slices)} slices, {small} too "
                f"small to carry a verdict).", ""]
    lines = [f"**Slices by {r.by} that regressed** ({holm_words(r)})", ""]
    for s in r.regressed:
        worse = [m for m in s.metrics if m.significant == "worse"]
        lines += [f"- 🔴 `{s.label}` (n={s.n}): **{m.name}** {number(m.baseline)} → "
                  f"{number(m.candidate)} (Δ {number(m.delta, signed=True)}, CI {_ci(m)}, "
                  f"Holm p {number(m.p_holm)})" for m in worse]
    return [*lines, ""]


def _ci(m: MetricResult) -> str:
    return f"[{number(m.ci_low, signed=True)}, {number(m.ci_high, signed=True)}]"


def _confidence(c: Comparison) -> str:
    return f"{c.options.confidence * 100:g}%"


def _p(m: MetricResult) -> str:
    return number(m.p_value) + (" exact" if m.p_exact and m.p_value is not None else "")


def _result(m: MetricResult) -> str:
    return m.significant or ("unchanged" if m.unchanged else "not significant")


def worst_changes(queries: Sequence[QueryDiff]) -> list[QueryDiff]:
    """Regressions (a hit lost: the best rank lost first), then losses (the largest drop in
    reciprocal rank first); ties by query id, so the list is stable."""
    def drop(q: QueryDiff) -> float:
        before = 1 / q.baseline_rank if q.baseline_rank else 0.0
        after = 1 / q.candidate_rank if q.candidate_rank else 0.0
        return before - after

    bad = [q for q in queries if q.kind in ("Regression", "Loss")]
    return sorted(bad, key=lambda q: (q.kind != "Regression", -drop(q), q.id))


def _query_lines(c: Comparison, baseline: RunSide, candidate: RunSide, worst: int,
                 text: int) -> list[str]:
    counts = ", ".join(f"{k} {c.counts.get(k, 0)}" for k in KINDS)
    lines = [f"**Queries** (first relevant rank at each query's level): {counts}", ""]
    changes = worst_changes(c.queries)
    if not changes or worst == 0:
        return lines + ([f"{len(changes)} queries got worse: the list is in compare "
                         "--format md."] if changes else []) + ([""] if changes else [])
    # the whole rows of the listed queries only, read again (compact rows keep no hits)
    hits = {r.id: r.hits for r in candidate.full_rows([q.id for q in changes[:worst]])}
    lines += [f"<details open><summary>{min(worst, len(changes))} worst of {len(changes)} "
              "queries that got worse</summary>", "",
              "| query | rank before → after | in its place now |", "|---|---|---|"]
    for q in changes[:worst]:
        shown = q.id if c.private or not q.query else f"{q.id}: {_cell(q.query, text)}"
        lines.append(f"| {shown} | {_rank(q.baseline_rank)} → {_rank(q.candidate_rank)} | "
                     f"{_in_place(q, hits.get(q.id, ()))} |")
    return [*lines, "", "</details>", ""]


def _in_place(q: QueryDiff, hits: Sequence[Hit]) -> str:
    """What the candidate ranks where the baseline had the first relevant item."""
    if q.baseline_rank is None:
        return "—"
    at = next((h for h in hits if h.rank == q.baseline_rank), None)
    if at is None:
        return "nothing (fewer hits)"
    shown = at.chunk_id if q.level == "chunk" else at.doc_id
    return f"`{_cell(shown, 60)}` (score {number(at.score, 3)})"


def _rank(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)


def _cell(value: str, width: int) -> str:
    value = " ".join(value.split()).replace("|", "\\|")
    return value if len(value) <= width else value[:width - 1] + "…"


def _one_run_lines(c: Comparison, baseline: RunSide, candidate: RunSide) -> list[str]:
    base_ids = {r.id for r in baseline.rows}
    cand_ids = {r.id for r in candidate.rows}
    lines = []
    for role, only in (("baseline", base_ids - cand_ids), ("candidate", cand_ids - base_ids)):
        if only:
            ids = ", ".join(sorted(only)[:ONE_RUN_IDS])
            more = f" and {len(only) - ONE_RUN_IDS} more" if len(only) > ONE_RUN_IDS else ""
            lines.append(f"- {len(only)} queries only in the {role} run: {ids}{more}")
    return (["**Queries in one run only** (left out of the comparison)", "", *lines, ""]
            if lines else [])


def _version_lines(c: Comparison) -> list[str]:
    changed = [(k, b, v) for k, b, v, same in c.versions if not same]
    if not changed:
        return ["**Versions**: the same in both runs.", ""]
    lines = ["| version | baseline | candidate |", "|---|---|---|"]
    lines += [f"| {k} | `{_cell(b, 80)}` | `{_cell(v, 80)}` |" for k, b, v in changed]
    return ["**Versions that differ**", "", *lines, ""]


def _link_lines(c: Comparison, links: tuple[RunLink, RunLink] | None) -> list[str]:
    if links is None:
        return [f"Runs: baseline `{c.baseline['run_id']}`, candidate "
                f"`{c.candidate['run_id']}` (pass --ui-url for links).", ""]
    out = []
    for role, side, link in (("baseline", c.baseline, links[0]),
                             ("candidate", c.candidate, links[1])):
        traces = f" · [traces]({link.traces})" if link.traces else ""
        out.append(f"- {role}: [{side['name']}]({link.run}){traces}")
    return ["**Runs in the MLflow UI**", "", *out, ""]
