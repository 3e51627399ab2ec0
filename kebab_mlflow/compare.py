"""Compare a candidate eval run with a baseline: per-query diff, paired statistics, one verdict.

Flow (DESIGN §7): :func:`load_pair` reads both runs through the MLflow tracking API (via
:mod:`kebab_mlflow.tracking`, the only module that imports mlflow) and their
``per_query.jsonl``; :func:`compare_runs` is pure (no MLflow) — checks, per-query classes,
per-metric statistics and the verdict; :func:`to_json` / :func:`to_markdown` render it;
:func:`record` writes the verdict back onto the candidate run.

Conventions:

* **Level.** Chunk ids are comparable only when ``parser_version`` and ``chunker_version`` are
  equal (``unknown`` or missing counts as different). Otherwise everything is judged at doc
  level: chunk-level gates are replaced by their ``_doc`` variants (``hit_at_5`` →
  ``hit_at_5_doc``, ``mrr`` → ``mrr_doc``, ``precision_at_5_chunk`` → ``precision_at_5_doc``).
* **First-hit rank** of a query is read back from ``first_relevant_rank`` in
  ``per_query.jsonl`` (per level; files written before it existed: ``1 / mrr``, and when either
  run's file lacks it both are read that way); a miss is no relevant item within rank 10 (the
  mrr cut-off) or within a shallower run's ``--k``; ``null`` means the query has no ground
  truth at that level, and then "hit" means "returned at least one result".
* **Classes.** miss→hit Win; hit→miss Regression (query with ground truth) or Loss (without);
  better rank Win, worse rank Loss; same rank or miss→miss Draw.
* **Statistics** per gated metric over the queries where both runs have a value: mean delta
  (candidate − baseline), percentile bootstrap CI, two-sided sign-flip randomization p
  (:mod:`kebab_mlflow.stats`), Holm's correction across the gated metrics. For a metric where
  lower is better (``no_hit_rate``, ``error_rate``, ``refusal_rate``) "worse" means a positive
  delta.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kebab_mlflow.errors import IncomparableRunsError, Problem
from kebab_mlflow.metrics.registry import METRICS, MRR_CUTOFF
from kebab_mlflow.per_query import PerQueryRow, file_digest, read_per_query

DEFAULT_GATES = ("hit_at_5", "mrr", "precision_at_5_chunk", "recall_at_10_doc", "contains_all")
VERSION_KEYS = ("parser_version", "chunker_version", "embedding_version", "index_version",
                "prompt_template_version")
CHUNK_ID_VERSIONS = ("parser_version", "chunker_version")
SMALL_SET = 30
VERDICTS = ("Better", "Same", "Regressed")
KINDS = ("Regression", "Loss", "Win", "Draw")


class ComparisonRefused(IncomparableRunsError):
    """The pair cannot be compared; ``problems`` lists every reason at once (exit 2)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = tuple(problems)
        lines = [f"cannot compare these runs ({len(self.problems)} problem(s)):"]
        lines += [f"  - {p.location + ': ' if p.location else ''}{p.message}"
                  for p in self.problems]
        super().__init__("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True)
class RunSide:
    """What compare needs of one run (built from MLflow, or by hand in tests)."""

    run_id: str
    name: str
    status: str
    params: Mapping[str, str]
    tags: Mapping[str, str]
    rows: tuple[PerQueryRow, ...] = ()
    per_query_sha256: str | None = None  # digest of the bytes actually read

    @property
    def versions(self) -> dict[str, str]:
        return {k: self.params.get(k, "unknown") for k in VERSION_KEYS}

    @property
    def private(self) -> bool:
        return self.tags.get("kebab.private", "false") == "true"

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "status": self.status,
                "preset": self.params.get("preset"), "backend": self.params.get("backend"),
                "golden_set": self.params.get("golden_set"),
                "golden_sha256": self.tags.get("kebab.golden_sha256"),
                "git_commit": self.tags.get("kebab.git_commit"),
                "git_dirty": self.tags.get("kebab.git_dirty"),
                "versions": self.versions, "n_queries": len(self.rows)}


@dataclass(frozen=True)
class CompareOptions:
    gates: tuple[str, ...] | None = None  # None: the DEFAULT_GATES that both runs scored
    alpha: float = 0.05
    confidence: float = 0.95
    resamples: int = 10_000
    seed: int = 0
    strict: bool = False
    allow_golden_mismatch: bool = False
    small_set: int = SMALL_SET

    def __post_init__(self):
        problems = []
        if not 0 < self.alpha < 1:
            problems.append(Problem(f"--alpha must be in (0, 1), got {self.alpha}", "--alpha"))
        if not 0 < self.confidence < 1:
            problems.append(Problem(f"confidence must be in (0, 1), got {self.confidence}"))
        if self.resamples < 1:
            problems.append(Problem(f"resamples must be >= 1, got {self.resamples}"))
        if self.gates is not None and not self.gates:
            problems.append(Problem("at least one gated metric is needed", "--gate"))
        if problems:
            from kebab_mlflow.errors import InputError

            raise InputError("bad compare options", problems)


@dataclass(frozen=True)
class MetricResult:
    name: str  # the metric compared (its _doc variant in doc-level fallback)
    gate: str  # as requested
    higher_is_better: bool
    n: int
    baseline: float | None  # means over the n paired queries
    candidate: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    significant: str | None  # "better" | "worse" | None


@dataclass(frozen=True)
class QueryDiff:
    id: str
    query: str | None
    has_truth: bool
    baseline_rank: int | None  # first-hit rank, None = miss
    candidate_rank: int | None
    kind: str  # Win | Loss | Draw | Regression
    contains_all: str | None = None  # "gained" | "lost" when it flipped
    refusal: str | None = None  # "started" | "stopped" when it flipped
    top_score_delta: float | None = None


@dataclass(frozen=True)
class Comparison:
    verdict: str
    reasons: tuple[str, ...]
    rule: str
    level: str  # chunk | doc
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    versions: tuple[tuple[str, str, str, bool], ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    options: CompareOptions
    n_queries: int
    n_with_truth: int
    dropped: dict[str, int]
    metrics: tuple[MetricResult, ...]
    queries: tuple[QueryDiff, ...]
    private: bool
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "Regressed" else 0


# ---------------------------------------------------------------------------------------------
# loading from MLflow


def load_pair(tracker: Any, experiment: str, baseline_ref: str, candidate_ref: str,
              workdir: Path | None = None) -> tuple[RunSide, RunSide]:
    """Resolve both references, refuse unfinished runs, download and read ``per_query.jsonl``."""
    from kebab_mlflow.runs import resolve_run

    runs = [resolve_run(tracker, experiment, ref) for ref in (baseline_ref, candidate_ref)]
    problems = [Problem(f"run {r.info.run_id} ({r.info.run_name}) is {r.info.status}; only "
                        "FINISHED runs can be compared", role)
                for role, r in zip(("baseline", "candidate"), runs, strict=True)
                if r.info.status != "FINISHED"]
    problems += [Problem(f"run {r.info.run_id} ({r.info.run_name}) is a sweep parent, not an eval "
                         "run; compare two of its rows (its child runs) instead", role)
                 for role, r in zip(("baseline", "candidate"), runs, strict=True)
                 if r.data.tags.get("kebab.kind") == "sweep"]
    if problems:
        raise ComparisonRefused(problems)
    with tempfile.TemporaryDirectory(prefix="kebab-compare-", dir=workdir) as tmp:
        sides = []
        for role, r in zip(("baseline", "candidate"), runs, strict=True):
            path = tracker.download_artifact(r.info.run_id, "per_query.jsonl", Path(tmp) / role)
            digest = file_digest(path)
            # a file that fails its digest is not parsed: compare_runs reports the mismatch
            intact = digest == r.data.tags.get("kebab.per_query_sha256")
            sides.append(RunSide(r.info.run_id, r.info.run_name or "", r.info.status,
                                 dict(r.data.params), dict(r.data.tags),
                                 tuple(read_per_query(path)) if intact else (), digest))
    return sides[0], sides[1]


# ---------------------------------------------------------------------------------------------
# the comparison (pure)


def doc_variant(name: str) -> str:
    """The doc-level counterpart of a chunk-level metric name (others unchanged)."""
    m = METRICS.get(name)
    if m is None or m.level != "chunk":
        return name
    return name[: -len("_chunk")] + "_doc" if name.endswith("_chunk") else name + "_doc"


def _higher_is_better(name: str) -> bool:
    m = METRICS.get(name)
    return True if m is None else m.higher_is_better


def _check(baseline: RunSide, candidate: RunSide, options: CompareOptions
           ) -> tuple[list[Problem], list[str], list[str], str]:
    """(problems, warnings, notes, level)."""
    problems: list[Problem] = []
    warnings: list[str] = []
    notes: list[str] = []
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if side.status != "FINISHED":
            problems.append(Problem(f"run {side.run_id} ({side.name}) is {side.status}; only "
                                    "FINISHED runs can be compared", role))
        tag = side.tags.get("kebab.per_query_sha256")
        if not tag:
            problems.append(Problem(f"run {side.run_id} has no kebab.per_query_sha256 tag "
                                    "(not a kebab-mlflow eval run?)", role))
        elif side.per_query_sha256 != tag:
            problems.append(Problem(
                f"per_query.jsonl of run {side.run_id} does not match its kebab.per_query_sha256 "
                f"tag (sha256 {side.per_query_sha256}, tag {tag}): tampered with or truncated",
                role))
        ids = [r.id for r in side.rows]
        if len(set(ids)) != len(ids):
            dup = sorted(i for i, c in Counter(ids).items() if c > 1)
            problems.append(Problem(f"per_query.jsonl of run {side.run_id} repeats query ids: "
                                    f"{', '.join(dup[:10])}", role))
    g_base = baseline.tags.get("kebab.golden_sha256")
    g_cand = candidate.tags.get("kebab.golden_sha256")
    if not g_base or g_base != g_cand:
        what = (f"different golden sets ({baseline.params.get('golden_set')} sha256 "
                f"{(g_base or 'unknown')[:12]} vs {candidate.params.get('golden_set')} sha256 "
                f"{(g_cand or 'unknown')[:12]})")
        if options.allow_golden_mismatch:
            warnings.append(f"{what}: comparing the shared query ids only")
        else:
            problems.append(Problem(f"{what}; pass --allow-golden-mismatch to compare the "
                                    "shared query ids", "golden set"))
    vb, vc = baseline.versions, candidate.versions
    changed = [k for k in CHUNK_ID_VERSIONS if vb[k] != vc[k] or vb[k] == "unknown"]
    level = "chunk"
    if changed:
        level = "doc"
        detail = ", ".join(f"{k} {vb[k]} → {vc[k]}" for k in changed)
        msg = (f"chunk ids are not comparable ({detail}): DOC-LEVEL comparison, chunk-level "
               "gates replaced by their _doc variants")
        if options.strict:
            problems.append(Problem(msg + " (--strict refuses this)", "versions"))
        notes.append(msg)
    provenance = []
    cb, cc = baseline.tags.get("kebab.git_commit", "unknown"), \
        candidate.tags.get("kebab.git_commit", "unknown")
    if "unknown" in (cb, cc):
        provenance.append(f"git commit unknown (baseline {cb}, candidate {cc})")
    elif cb != cc:
        provenance.append(f"different git commits (baseline {cb}, candidate {cc})")
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if side.tags.get("kebab.git_dirty") == "true":
            provenance.append(f"the {role} run was made from a dirty working tree")
    for p in provenance:
        if options.strict:
            problems.append(Problem(p + " (--strict refuses this)", "provenance"))
        else:
            warnings.append(p)
    return problems, warnings, notes, level


def _rank(row: PerQueryRow, level: str, by_first_rank: bool) -> tuple[bool, int | None]:
    """(has ground truth, first-hit rank or None for a miss: nothing relevant in the top
    ``MRR_CUTOFF``, or in the top ``--k`` of a shallower run), from ``first_relevant_rank``
    when both runs' files have it; else from the per-query MRR (files written before it
    existed; only at depth >= 10). Mixing the two would read a missing MRR as "no truth" on one
    side only, i.e. as a miss."""
    if by_first_rank:
        rank = row.first_relevant_rank[level]
        if rank is None:
            return False, (1 if row.hits else None)
        return True, (rank if 0 < rank <= MRR_CUTOFF else None)
    value = row.scores.get("mrr" if level == "chunk" else "mrr_doc")
    if value is None:
        return False, (1 if row.hits else None)
    return True, (round(1.0 / value) if value > 0 else None)


def _classify(has_truth: bool, base: int | None, cand: int | None) -> str:
    if base is None:
        return "Draw" if cand is None else "Win"
    if cand is None:
        return "Regression" if has_truth else "Loss"
    return "Win" if cand < base else "Loss" if cand > base else "Draw"


def _refused(row: PerQueryRow) -> bool | None:
    if not isinstance(row.answer, dict):
        return None
    return row.answer.get("refusal_reason") is not None


def _query_diff(b: PerQueryRow, c: PerQueryRow, level: str, private: bool,
                by_first_rank: bool) -> QueryDiff:
    truth_b, rank_b = _rank(b, level, by_first_rank)
    truth_c, rank_c = _rank(c, level, by_first_rank)
    has_truth = truth_b or truth_c
    if has_truth and not (truth_b and truth_c):  # truth on one side only: a miss on the other
        rank_b = rank_b if truth_b else None
        rank_c = rank_c if truth_c else None
    kind = _classify(has_truth, rank_b, rank_c)
    ca_b, ca_c = b.scores.get("contains_all"), c.scores.get("contains_all")
    contains = None
    if ca_b is not None and ca_c is not None and bool(ca_b) != bool(ca_c):
        contains = "gained" if ca_c else "lost"
    ref_b, ref_c = _refused(b), _refused(c)
    refusal = None
    if ref_b is not None and ref_c is not None and ref_b != ref_c:
        refusal = "started" if ref_c else "stopped"
    top = (float(c.hits[0]["score"]) - float(b.hits[0]["score"])) if b.hits and c.hits else None
    query = None if private else (b.query if b.query is not None else c.query)
    return QueryDiff(b.id, query, has_truth, rank_b, rank_c, kind, contains, refusal, top)


def _gate_names(gates: Sequence[str] | None, level: str, available: set[str]
                ) -> tuple[list[tuple[str, str]], list[Problem], list[str]]:
    """(gate as asked, metric compared) pairs, problems, notes. Without ``--gate`` the default
    gates that either run lacks (``contains_all`` of a set without ask queries) are skipped
    with a note; a gate the user named must exist."""
    pairs, missing, seen = [], [], set()
    for gate in gates if gates is not None else DEFAULT_GATES:
        name = doc_variant(gate) if level == "doc" else gate
        if name not in available:
            missing.append(repr(name))
        elif name not in seen:
            seen.add(name)
            pairs.append((gate, name))
    if gates is None and pairs:
        return pairs, [], [f"default gate {m} skipped: not in both runs' per-query scores"
                           for m in missing]
    if not missing:
        return pairs, [], []
    valid = ", ".join(sorted(available)) or "(none)"
    what = "metric" if len(missing) == 1 else "metrics"
    return pairs, [Problem(f"unknown gated {what} {', '.join(missing)} (not in the per-query "
                           f"scores of both runs); valid metrics: {valid}", "--gate")], []


def rule_text(options: CompareOptions) -> str:
    conf = f"{options.confidence:.0%}"
    return (f"Regressed if some gated metric has its {conf} bootstrap CI entirely on the worse "
            f"side of 0 and Holm-adjusted randomization p < {options.alpha:g}, or if fewer than "
            f"{options.small_set} compared queries have ground truth and at least one query is a "
            f"Regression (hit → miss); Better if not Regressed and some gated metric has its CI "
            f"entirely on the better side of 0 with adjusted p < {options.alpha:g}; Same "
            f"otherwise. Paired bootstrap ({options.resamples} resamples) and sign-flip test "
            f"({options.resamples} flips, +1 correction), seed {options.seed}.")


def compare_runs(baseline: RunSide, candidate: RunSide,
                 options: CompareOptions | None = None) -> Comparison:
    """Check the pair, then compare; raises :class:`ComparisonRefused` listing every problem."""
    from kebab_mlflow.stats import holm, paired_tests

    options = options or CompareOptions()
    problems, warnings, notes, level = _check(baseline, candidate, options)
    by_id_c = {r.id: r for r in candidate.rows}
    ids_b = {r.id for r in baseline.rows}
    shared = [r for r in baseline.rows if r.id in by_id_c]
    dropped = {"baseline_only": len(ids_b - by_id_c.keys()),
               "candidate_only": len(by_id_c.keys() - ids_b)}
    unread = any("kebab.per_query_sha256" in p.message for p in problems)
    if (dropped["baseline_only"] or dropped["candidate_only"]) and not unread:
        if options.allow_golden_mismatch:
            warnings.append(f"dropped {dropped['baseline_only']} baseline-only and "
                            f"{dropped['candidate_only']} candidate-only queries; "
                            f"{len(shared)} shared")
        elif not any(p.location == "golden set" for p in problems):
            problems.append(Problem(
                f"the runs scored different queries ({dropped['baseline_only']} baseline-only, "
                f"{dropped['candidate_only']} candidate-only) although their golden sets match",
                "golden set"))
    if not shared and not unread and not problems:
        problems.append(Problem("the runs share no query id", "golden set"))
    available = ({k for r in baseline.rows for k in r.scores}
                 & {k for r in candidate.rows for k in r.scores})
    gates, gate_problems, gate_notes = _gate_names(options.gates, level, available)
    if baseline.rows and candidate.rows:  # else the gates cannot be checked
        problems += gate_problems
        notes += gate_notes
    if problems:
        raise ComparisonRefused(problems)

    private = baseline.private or candidate.private
    by_first_rank = all(level in (r.first_relevant_rank or {})
                        for side in (baseline, candidate) for r in side.rows)
    queries = tuple(_query_diff(b, by_id_c[b.id], level, private, by_first_rank)
                    for b in shared)
    counts = {k: 0 for k in KINDS} | Counter(q.kind for q in queries)
    n_truth = sum(q.has_truth for q in queries)

    pairs = []
    for _, name in gates:
        vb = np.array([np.nan if b.scores.get(name) is None else b.scores[name]
                       for b in shared], dtype=np.float64)
        vc = np.array([np.nan if by_id_c[b.id].scores.get(name) is None
                       else by_id_c[b.id].scores[name] for b in shared], dtype=np.float64)
        both = ~(np.isnan(vb) | np.isnan(vc))
        pairs.append((vb[both], vc[both]))
    tests = paired_tests([c - b for b, c in pairs], options.resamples, options.seed,
                         options.confidence)
    tested = [i for i, t in enumerate(tests) if t.p_value is not None]
    adjusted = dict(zip(tested, holm(np.array([tests[i].p_value for i in tested])), strict=True))
    metrics = []
    for i, ((gate, name), (vb, vc), t) in enumerate(zip(gates, pairs, tests, strict=True)):
        hib = _higher_is_better(name)
        p_adj = float(adjusted[i]) if i in adjusted else None
        sig = None
        if p_adj is not None and p_adj < options.alpha:
            if (t.ci_high < 0) if hib else (t.ci_low > 0):
                sig = "worse"
            elif (t.ci_low > 0) if hib else (t.ci_high < 0):
                sig = "better"
        metrics.append(MetricResult(
            name, gate, hib, t.n, float(vb.mean()) if t.n else None,
            float(vc.mean()) if t.n else None, t.mean, t.ci_low, t.ci_high, t.p_value, p_adj,
            sig))
        if t.n == 0:
            warnings.append(f"gated metric {name} has no query scored by both runs")

    reasons = [f"{m.name} is significantly worse (delta {m.delta:+.4f}, CI "
               f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}], adjusted p {m.p_holm:.4g})"
               for m in metrics if m.significant == "worse"]
    if n_truth < options.small_set and counts["Regression"]:
        reasons.append(f"small set: {n_truth} queries with ground truth (< {options.small_set}) "
                       f"and {counts['Regression']} Regression query(ies)")
    if reasons:
        verdict = "Regressed"
    else:
        reasons = [f"{m.name} is significantly better (delta {m.delta:+.4f}, CI "
                   f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}], adjusted p {m.p_holm:.4g})"
                   for m in metrics if m.significant == "better"]
        verdict = "Better" if reasons else "Same"
        if not reasons:
            reasons = ["no gated metric differs significantly"
                       + (" and no query regressed" if n_truth < options.small_set else "")]
    vb, vc = baseline.versions, candidate.versions
    versions = tuple((k, vb[k], vc[k], vb[k] == vc[k] and vb[k] != "unknown")
                     for k in VERSION_KEYS)
    return Comparison(verdict, tuple(reasons), rule_text(options), level, baseline.summary(),
                      candidate.summary(), versions, tuple(warnings), tuple(notes), options,
                      len(queries), n_truth, dropped, tuple(metrics), queries, private, counts)


# ---------------------------------------------------------------------------------------------
# rendering


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_json(c: Comparison) -> dict[str, Any]:
    o = c.options
    return _clean({
        "verdict": c.verdict,
        "reasons": list(c.reasons),
        "rule": c.rule,
        "exit_code": c.exit_code,
        "level": c.level,
        "notes": list(c.notes),
        "warnings": list(c.warnings),
        "settings": {"gates": [m.gate for m in c.metrics], "alpha": o.alpha,
                     "confidence": o.confidence,
                     "resamples": o.resamples, "seed": o.seed, "strict": o.strict,
                     "allow_golden_mismatch": o.allow_golden_mismatch,
                     "small_set_threshold": o.small_set, "multiple_comparisons": "holm"},
        "n": {"queries": c.n_queries, "with_ground_truth": c.n_with_truth, **c.dropped},
        "baseline": c.baseline,
        "candidate": c.candidate,
        "versions": [{"key": k, "baseline": b, "candidate": v, "same": s}
                     for k, b, v, s in c.versions],
        "counts": c.counts,
        "metrics": [asdict(m) for m in c.metrics],
        "queries": [asdict(q) for q in ordered(c.queries)],
    })


def dumps(c: Comparison) -> str:
    return json.dumps(to_json(c), indent=1, allow_nan=False, ensure_ascii=False)


def ordered(queries: Sequence[QueryDiff]) -> list[QueryDiff]:
    """Regressions first, then losses, wins, draws with a flip, plain draws (stable)."""
    def key(q: QueryDiff) -> int:
        if q.kind == "Draw":
            return 3 if (q.contains_all or q.refusal) else 4
        return KINDS.index(q.kind)

    return sorted(queries, key=key)


def fmt(value: Any, digits: int = 4, signed: bool = False) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return str(value)


def _rank_text(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)


def metric_rows(c: Comparison) -> list[list[str]]:
    return [[m.name + ("" if m.name == m.gate else f" (gate {m.gate})"), str(m.n),
             fmt(m.baseline), fmt(m.candidate), fmt(m.delta, signed=True),
             f"[{fmt(m.ci_low, signed=True)}, {fmt(m.ci_high, signed=True)}]",
             fmt(m.p_value), fmt(m.p_holm), m.significant or "—"] for m in c.metrics]


METRIC_COLUMNS = ["metric", "n", "baseline", "candidate", "delta", "95% CI", "p", "p Holm",
                  "significant"]


def query_rows(c: Comparison, limit: int | None = None) -> tuple[list[list[str]], int]:
    shown = [q for q in ordered(c.queries)
             if q.kind != "Draw" or q.contains_all or q.refusal]
    rows = [[q.kind, q.id, _rank_text(q.baseline_rank), _rank_text(q.candidate_rank),
             q.contains_all or "", q.refusal or "", fmt(q.top_score_delta, signed=True),
             ("(private)" if c.private else (q.query or ""))] for q in shown[:limit]]
    return rows, len(shown) - len(rows)


QUERY_COLUMNS = ["kind", "id", "base rank", "cand rank", "contains_all", "refusal",
                 "top-score Δ", "query"]


def headline(c: Comparison) -> str:
    b, d = c.baseline, c.candidate
    return (f"{c.verdict}: candidate {d['name']} ({d['run_id']}) vs baseline {b['name']} "
            f"({b['run_id']}), {c.n_queries} queries ({c.n_with_truth} with ground truth), "
            f"{c.level} level")


def to_markdown(c: Comparison, query_limit: int = 200) -> str:
    lines = [f"# Compare: {c.verdict}", ""]
    lines += [f"> **{note}**" for note in c.notes] + ([""] if c.notes else [])
    lines += [headline(c), ""]
    lines += [f"- {r}" for r in c.reasons] + [""]
    lines += ["**Rule.** " + c.rule, ""]
    if c.warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in c.warnings] + [""]
    lines += ["## Gated metrics", "", "| " + " | ".join(METRIC_COLUMNS) + " |",
              "|" + "---|" * len(METRIC_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in metric_rows(c)]
    lines += ["", "## Queries", "",
              ", ".join(f"{k}: {c.counts.get(k, 0)}" for k in KINDS)
              + f" (first-hit rank at {c.level} level; n = {c.n_queries}, dropped "
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


# ---------------------------------------------------------------------------------------------
# recording


def record(tracker: Any, c: Comparison) -> None:
    """Tag the candidate run with the verdict and log compare/report.md + compare/compare.json."""
    run_id = c.candidate["run_id"]
    with tempfile.TemporaryDirectory(prefix="kebab-compare-") as tmp:
        md, js = Path(tmp) / "report.md", Path(tmp) / "compare.json"
        md.write_text(to_markdown(c))
        js.write_text(dumps(c))
        tracker.log_artifact(run_id, md, "compare")
        tracker.log_artifact(run_id, js, "compare")
    tracker.set_tags(run_id, {"kebab.verdict": c.verdict,
                              "kebab.compared_to": c.baseline["run_id"],
                              "kebab.compare_seed": str(c.options.seed),
                              "kebab.compare_level": c.level})
