"""The checks compare runs before it compares anything: each returns a small record of what it
found (problems refuse the comparison; warnings and notes are reported with it) instead of
appending to lists the caller passed in, and the flags the later steps need are fields, never
read back out of message text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import CompareOptions, RunSide
from kebab_mlflow.errors import Problem
from kebab_mlflow.evaluation.per_query import QueryRow
from kebab_mlflow.vocabulary import RunStatus

CHUNK_ID_VERSIONS = ("parser_version", "chunker_version")
GOLDEN_SET = "golden set"  # the location of the problems about which queries are compared


@dataclass(frozen=True, kw_only=True)
class Findings:
    """What checks found: ``problems`` refuse the comparison, the rest is reported."""

    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __add__(self, other: Findings) -> Findings:
        return Findings(problems=self.problems + other.problems,
                        warnings=self.warnings + other.warnings, notes=self.notes + other.notes)

    @staticmethod
    def refused_or_warned(message: str, location: str, refuse: bool) -> Findings:
        """A finding that ``--strict`` (``refuse``) turns from a warning into a problem."""
        if refuse:
            return Findings(problems=(Problem(message + " (--strict refuses this)", location),))
        return Findings(warnings=(message,))


@dataclass(frozen=True, kw_only=True)
class SideCheck:
    """One run's check; ``rows_verified``: its per_query.jsonl matches its digest tag."""

    findings: Findings
    rows_verified: bool


@dataclass(frozen=True, kw_only=True)
class PairCheck:
    """Both runs' checks: what they found, whether chunk ids are comparable, whether both
    per_query.jsonl files were verified and whether different golden sets refused the pair."""

    findings: Findings
    chunk_ids_comparable: bool
    rows_verified: bool
    golden_refused: bool


@dataclass(frozen=True, kw_only=True)
class SharedRows:
    """The (baseline, candidate) row pairs of the shared query ids and the dropped counts."""

    pairs: tuple[tuple[QueryRow, QueryRow], ...]
    dropped: dict[str, int]
    findings: Findings


def check_side(side: RunSide, role: str) -> SideCheck:
    problems = []
    if side.status != RunStatus.FINISHED:
        problems.append(Problem(f"run {side.run_id} ({side.name}) is {side.status}; only "
                                "FINISHED runs can be compared", role))
    tag = side.tags.get(vocab.PER_QUERY_SHA256)
    if not tag:
        problems.append(Problem(f"run {side.run_id} has no {vocab.PER_QUERY_SHA256} tag "
                                "(not a kebab-mlflow eval run?)", role))
    elif side.per_query_sha256 != tag:
        problems.append(Problem(
            f"per_query.jsonl of run {side.run_id} does not match its {vocab.PER_QUERY_SHA256} "
            f"tag (sha256 {side.per_query_sha256}, tag {tag}): tampered with or truncated",
            role))
    verified = bool(tag) and side.per_query_sha256 == tag
    ids = [r.id for r in side.rows]
    if len(set(ids)) != len(ids):
        dup = sorted(i for i, c in Counter(ids).items() if c > 1)
        problems.append(Problem(f"per_query.jsonl of run {side.run_id} repeats query ids: "
                                f"{', '.join(dup[:10])}", role))
    return SideCheck(findings=Findings(problems=tuple(problems)), rows_verified=verified)


def check_golden(baseline: RunSide, candidate: RunSide, options: CompareOptions) -> Findings:
    g_base = baseline.tags.get(vocab.GOLDEN_SHA256)
    g_cand = candidate.tags.get(vocab.GOLDEN_SHA256)
    if g_base and g_base == g_cand:
        return Findings()
    what = (f"different golden sets ({baseline.params.get(vocab.GOLDEN_SET)} sha256 "
            f"{(g_base or 'unknown')[:12]} vs {candidate.params.get(vocab.GOLDEN_SET)} sha256 "
            f"{(g_cand or 'unknown')[:12]})")
    if options.allow_golden_mismatch:
        return Findings(warnings=(f"{what}: comparing the shared query ids only",))
    return Findings(problems=(Problem(f"{what}; {_golden_advice(baseline, candidate)}",
                                      GOLDEN_SET),))


def _golden_advice(baseline: RunSide, candidate: RunSide) -> str:
    """How to compare two runs of different golden versions: rescore the baseline under the
    candidate's version (issue 30), or compare the shared ids as they were scored."""
    path = candidate.tags.get(vocab.GOLDEN_PATH) or "CANDIDATE_GOLDEN.yaml"
    return (f"rescore the baseline under the candidate's golden version: `kebab-mlflow compare "
            f"--rescore` (in memory) or `kebab-mlflow rescore {baseline.run_id} --golden "
            f"{path}` (a derived run); `kebab-mlflow golden diff` shows what changed; "
            "--allow-golden-mismatch compares the shared query ids as they were scored")


def check_chunk_ids(baseline: RunSide, candidate: RunSide, options: CompareOptions
                    ) -> tuple[bool, Findings]:
    """(chunk ids comparable, findings): comparable needs the same known parser and chunker."""
    vb, vc = baseline.versions, candidate.versions
    changed = [k for k in CHUNK_ID_VERSIONS if vb[k] != vc[k] or vb[k] == "unknown"]
    if not changed:
        return True, Findings()
    detail = ", ".join(f"{k} {vb[k]} → {vc[k]}" for k in changed)
    through_evidence, why_not = evidence_chunk_level(baseline, candidate)
    if through_evidence:
        return True, Findings(notes=(
            f"{detail}: CHUNK-LEVEL comparison through the golden set's evidence spans "
            f"({through_evidence}): each run's relevant chunks were derived from the same "
            "spans under its own chunking",))
    msg = (f"chunk ids are not comparable ({detail}): DOC-LEVEL comparison, chunk-level "
           f"metrics replaced by their _doc variants ({why_not})")
    refused = (Problem(msg + " (--strict refuses this)", "versions"),) if options.strict else ()
    return False, Findings(problems=refused, notes=(msg,))


def evidence_chunk_level(baseline: RunSide, candidate: RunSide) -> tuple[str, str]:
    """(the rule, "") when both runs derived their chunk truth from evidence spans by the
    same rule — every query with chunk truth has evidence in both — else ("", why not)."""
    rules = {(s.params.get(vocab.EVIDENCE_RULE), s.params.get(vocab.EVIDENCE_TAU))
             for s in (baseline, candidate)}
    if any(rule is None for rule, _ in rules):
        return "", ("the golden set has no evidence spans; `kebab-mlflow golden anchor` "
                    "adds them" if rules == {(None, None)} else
                    "only one run resolved evidence spans")
    if len(rules) > 1:
        return "", "the runs resolved evidence by different rules"
    by_ids = sum(1 for side in (baseline, candidate) for r in side.rows
                 if not r.has_evidence and (r.first_relevant_rank or {}).get("chunk") is not None)
    if by_ids:
        return "", f"{by_ids} query row(s) have chunk truth from expected_chunk_ids only"
    [(rule, tau)] = rules
    return f"rule {rule}, tau {tau}", ""


def check_provenance(baseline: RunSide, candidate: RunSide, options: CompareOptions
                     ) -> Findings:
    found = []
    cb = baseline.tags.get(vocab.GIT_COMMIT, "unknown")
    cc = candidate.tags.get(vocab.GIT_COMMIT, "unknown")
    if "unknown" in (cb, cc):
        found.append(f"git commit unknown (baseline {cb}, candidate {cc})")
    elif cb != cc:
        found.append(f"different git commits (baseline {cb}, candidate {cc})")
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if side.tags.get(vocab.GIT_DIRTY) == "true":
            found.append(f"the {role} run was made from a dirty working tree")
    return sum((Findings.refused_or_warned(p, "provenance", options.strict) for p in found),
               Findings())


def check_experiments(baseline: RunSide, candidate: RunSide) -> Findings:
    if baseline.experiment and candidate.experiment and baseline.experiment != candidate.experiment:
        return Findings(notes=(f"the runs are in different experiments (baseline in "
                               f"{baseline.experiment!r}, candidate in "
                               f"{candidate.experiment!r})",))
    return Findings()


def check_pair(baseline: RunSide, candidate: RunSide, options: CompareOptions) -> PairCheck:
    sides = (check_side(baseline, "baseline"), check_side(candidate, "candidate"))
    golden = check_golden(baseline, candidate, options)
    chunk_ok, chunk_findings = check_chunk_ids(baseline, candidate, options)
    findings = (sides[0].findings + sides[1].findings + golden + chunk_findings
                + check_provenance(baseline, candidate, options)
                + check_experiments(baseline, candidate))
    return PairCheck(findings=findings, chunk_ids_comparable=chunk_ok,
                     rows_verified=all(s.rows_verified for s in sides),
                     golden_refused=bool(golden.problems))


def shared_rows(baseline: RunSide, candidate: RunSide, options: CompareOptions,
                check: PairCheck) -> SharedRows:
    """The pairs of the shared query ids; different query sets under one golden set refuse
    the pair (only when both per_query.jsonl files were verified: else they say why)."""
    by_id_c = candidate.by_id
    ids_b = {r.id for r in baseline.rows}
    pairs = tuple((r, by_id_c[r.id]) for r in baseline.rows if r.id in by_id_c)
    dropped = {"baseline_only": len(ids_b - by_id_c.keys()),
               "candidate_only": len(by_id_c.keys() - ids_b)}
    return SharedRows(pairs=pairs, dropped=dropped,
                      findings=_dropped_findings(pairs, dropped, options, check))


def _dropped_findings(pairs: Sequence[object], dropped: dict[str, int],
                      options: CompareOptions, check: PairCheck) -> Findings:
    if not check.rows_verified:
        return Findings()
    found = Findings()
    if dropped["baseline_only"] or dropped["candidate_only"]:
        if options.allow_golden_mismatch:
            found = Findings(warnings=(f"dropped {dropped['baseline_only']} baseline-only and "
                                       f"{dropped['candidate_only']} candidate-only queries; "
                                       f"{len(pairs)} shared",))
        elif not check.golden_refused:
            found = Findings(problems=(Problem(
                f"the runs scored different queries ({dropped['baseline_only']} baseline-only, "
                f"{dropped['candidate_only']} candidate-only) although their golden sets match",
                GOLDEN_SET),))
    if not pairs and not check.findings.problems and not found.problems:
        found += Findings(problems=(Problem("the runs share no query id", GOLDEN_SET),))
    return found
