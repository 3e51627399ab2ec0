"""The terminal rendering of a comparison.

Narrow (a terminal, no ``--wide``): fits 80 columns — 8-character run ids, short headers, the
adjusted p only, the first 20 changed queries with their text cut by an ellipsis; a footnote
says what ``--wide`` adds, so nothing is dropped silently. Wide (``--wide``, or stdout is not
a terminal): full ids, raw and adjusted p, the top-score delta, every changed query, full text.
"""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table

from kebab_mlflow.comparison import KINDS, Comparison, headline, ordered
from kebab_mlflow.comparison.records import QueryKind, Verdict
from kebab_mlflow.comparison.rendering import kind_text, result_word, version_lines
from kebab_mlflow.comparison.slices import holm_words, slice_rows, verdict_text
from kebab_mlflow.formatting import number

NARROW_QUERIES = 20
SHORT_ID = 8
_STYLE = {Verdict.BETTER: "green", Verdict.SAME: "cyan", Verdict.INCONCLUSIVE: "bold yellow",
          Verdict.INCONCLUSIVE_UNJUDGED: "bold yellow",
          Verdict.REGRESSED: "bold red"}


def render_table(c: Comparison, width: int | None, wide: bool, color: bool) -> str:
    """The table as text; ``width`` None: as wide as the content (never cut)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 10_000, force_terminal=color,
                      color_system="auto" if color else None, highlight=False)
    for note in c.notes:
        console.print(f"[bold yellow]{note}[/]")
    console.print(f"[{_STYLE[c.verdict]}]{_headline(c, wide)}[/]")
    for reason in c.reasons:
        console.print(f"  - {reason}")
    changes = version_lines(c)
    console.print("versions: " + ("the same" if not changes else f"{len(changes)} differ"))
    for line in changes:
        console.print(f"  {line}", markup=False)
    console.print(_metrics(c, wide))
    if c.slices is not None:
        console.print(_slices(c))
    _queries(console, c, wide, width)
    console.print(f"rule: {c.rule}")
    if not wide:
        console.print("[dim]--wide: full run ids, raw p, top-score deltas and every changed "
                      "query; --format md|json|junit for reports[/]")
    # rich pads every line to the table's width: trailing blanks only bloat logs and files
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def _headline(c: Comparison, wide: bool) -> str:
    if wide:
        return headline(c)
    b, d = c.baseline, c.candidate
    return (f"{verdict_text(c)}: {d['name']} ({d['run_id'][:SHORT_ID]}) vs baseline {b['name']} "
            f"({b['run_id'][:SHORT_ID]}), {c.n_queries} queries ({c.n_with_truth} with ground "
            f"truth), {c.level} level")


def _table(title: str) -> Table:
    # SIMPLE_HEAD's blank separators are the one space between columns
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=0,
                 title_justify="left")


def _metrics(c: Comparison, wide: bool) -> Table:
    header = ["metric", "n", "base", "cand", "Δ", f"{c.options.confidence:.0%} CI"]
    header += ["p", "p Holm"] if wide else ["p adj"]
    header += ["MDE", "result"]
    rows = []
    for m in c.metrics:
        name = m.name + ("*" if m.role == "primary" else "")
        row = [name, str(m.n), number(m.baseline, 3), number(m.candidate, 3),
               number(m.delta, 3, signed=True),
               f"[{number(m.ci_low, 3, signed=True)}, {number(m.ci_high, 3, signed=True)}]"]
        row += [number(m.p_value), number(m.p_holm)] if wide else [number(m.p_holm)]
        rows.append(row + [number(m.mde, 3), result_word(m)])
    table = _table("gated metrics (Δ = candidate − baseline; * primary; MDE at 80% power)")
    for i, col in enumerate(header):
        table.add_column(col, no_wrap=True, justify="left" if i in (0, len(header) - 1)
                         else "right")
    for row in rows:
        table.add_row(*row)
    return table


def _slices(c: Comparison) -> Table:
    r = c.slices
    assert r is not None
    table = _table(f"slices by {r.by} ({holm_words(r)}; fewer than "
                   f"{r.small_set} judged queries: too small; {r.unlabelled} unlabelled)")
    for i, col in enumerate(("slice", "n", "judged", "Regr", "metric", "Δ", "CI", "p adj",
                             "MDE", "verdict")):
        table.add_column(col, no_wrap=True, justify="right" if i in (1, 2, 3, 5, 7, 8)
                         else "left")
    for row in slice_rows(r):
        table.add_row(*row)
    return table


def _queries(console: Console, c: Comparison, wide: bool, width: int | None) -> None:
    counts = ", ".join(f"{k}: {c.counts.get(k, 0)}" for k in KINDS)
    shown = [q for q in ordered(c.queries)
             if q.kind != QueryKind.DRAW or q.contains_all or q.refusal]
    if not shown:
        console.print(f"queries: {counts} ({c.level} level)")
        return
    listed = shown if wide else shown[:NARROW_QUERIES]
    columns = {"kind": [kind_text(q) for q in listed], "id": [q.id for q in listed]}
    if len({q.level for q in listed}) > 1:
        columns["level"] = [q.level for q in listed]
    columns["rank"] = [f"{_r(q.baseline_rank)}→{_r(q.candidate_rank)}" for q in listed]
    for key in ("contains_all", "refusal", "abstention"):
        values = [getattr(q, key) or "" for q in listed]
        if any(values):
            columns[key] = values
    if wide:
        columns["top Δ"] = [number(q.top_score_delta, 2, signed=True) for q in listed]
    columns["query"] = ["(private)" if c.private else (q.query or "") for q in listed]
    if width and not wide:  # the query text gets what the other columns leave, cut with "…"
        room = max(12, width - sum(1 + max(len(k), *map(len, v))
                                   for k, v in columns.items() if k != "query"))
        columns["query"] = [t if len(t) <= room else t[:room - 1] + "…"
                            for t in columns["query"]]
    console.print(f"queries ({counts}; first-hit rank at {c.level} level)")
    table = _table("")
    for key in columns:
        table.add_column(key, no_wrap=True)
    for row in zip(*columns.values(), strict=True):
        table.add_row(*row)
    console.print(table)
    if len(shown) > len(listed):
        console.print(f"… and {len(shown) - len(listed)} more changed queries (--wide or "
                      "--format md|json list them all)")


def _r(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)
