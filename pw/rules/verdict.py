"""A candidate's status from its gates and its paired analysis (pure; no I/O).

Order of judgement, first match wins:

1. **rejected** for anything that makes the timing meaningless: a failed timed run (its failure class,
   e.g. ``crashed:``), refused edits (``edit-refused:``), a failed build (``build-failed:``), a failed
   oracle (``oracle-failed:``); all that apply are listed. An edit can address each of these (a timed-run
   failure only when its class is in ``REPAIRABLE_FAULTS``).
2. **rejected** as no effect (``no-effect:``) when the candidate builds to the same running image as
   its reference (gate rules 13, ``pw.workload.image``: it runs the same code on the same data, so
   a measured speedup is the machine's), and when the paired analysis says SLOWER (``slower:``) or
   SAME (``no-effect:``).
3. **inconclusive** without an analysis, when it says INCONCLUSIVE, or for an exploratory campaign with
   fewer pairs than the minimum (``inconclusive:``); and a FASTER candidate whose campaign's baseline
   ran slower than at `pw start`, beyond noise (``baseline-shift:``; ``pw.stats.baseline_shift``).
4. **verified** when all six gates of ``pw.rules.gates.GATE_NAMES`` are present and pass (one
   ``verified:`` reason summarising the speedup).
5. **proposed** otherwise, one reason per failed or missing gate (``gate <name>: <detail>``), and one
   per ceiling: an oracle that compares nothing is no oracle (``no-oracle:``); runs that could not
   be contained by a sandbox (``no sandbox:``); a chained candidate not shown faster than the
   baseline along its chain of parents (``chain:``, gate rules 10: a step over a parent slowed on
   purpose is no improvement of the program).

``Verdict.repairable`` (recorded as ``VerdictReached.repairable``) is True only when a rule-1 failure
that an edit can address was found: the agent may fix the workspace and evaluate again, spending one
repair. A slower or no-effect rejection is final. The reason texts are for people; nothing parses them
(``ledger.upcast`` derives the field for verdicts recorded before it existed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ledger.events import FailureClass, FaultRecorded, GateResult
from pw.rules.gate_facts import DEFAULT_MIN_PAIRS, GATE_NAMES

Status = Literal["verified", "proposed", "rejected", "inconclusive"]

EDIT_REFUSED = "edit-refused:"
BUILD_FAILED = "build-failed:"
ORACLE_FAILED = "oracle-failed:"
SLOWER = "slower:"
NO_EFFECT = "no-effect:"
INCONCLUSIVE = "inconclusive:"
UNCONTAINED = "no sandbox:"
BASELINE_SHIFT = "baseline-shift:"
HOST_BUSY = "host-busy:"
NO_ORACLE = "no-oracle:"
CHAIN = "chain:"

# Failures of the candidate's own program, which an edit can fix. The others (nondeterministic
# baseline output, an unusable profiler) are about the workload or the host.
REPAIRABLE_FAULTS: frozenset[FailureClass] = frozenset(
    {"build-failed", "launch-failed", "oracle-failed", "timeout", "crashed"}
)


class Verdict(msgspec.Struct, frozen=True):
    """What `VerdictReached` records about one attempt (see the module docstring for `repairable`)."""

    status: Status
    reasons: list[str]
    repairable: bool = False


def _summary(a: dict[str, Any]) -> str:
    iv = a.get("interval") or {}
    low, high = iv.get("low"), iv.get("high")
    speedup = a.get("speedup")
    fmt = (lambda v: "n/a" if v is None else f"{v:.4g}")
    aside = (a.get("campaign") or {}).get("set_aside")
    kept = f" ({aside} more set aside: their arms ran under unbalanced load)" if aside else ""
    if speedup is None:
        return f"{a.get('n_pairs')} pairs left to judge{kept}"
    return (f"speedup {fmt(speedup)}x ({iv.get('confidence', 0.95):.0%} CI {fmt(low)}-{fmt(high)}) "
            f"over {a.get('n_pairs')} pairs{kept}")


def _undecided(verdict: str | None, campaign: dict[str, Any]) -> str:
    """Why an interval did not decide: the verdict alone, or the budget an adaptive campaign spent
    and how many more pairs its current variance suggests (``pw evaluate --more``)."""
    if not campaign:
        return f"verdict {verdict}"
    if campaign.get("stop") == "misfit":
        return "the running interval became empty (the timings drift or do not fit the model)"
    spent = (f"time budget of {campaign['max_time_s']:g} s spent" if campaign.get("reason") == "max_time"
             else f"budget of {campaign['max_pairs']} pairs spent")
    more = campaign.get("more_pairs")
    if not more:
        hint = "no number of pairs at the current mean would decide"
    elif more > 4 * campaign["max_pairs"]:  # the noise, not the budget, is the problem
        hint = (f"about {more} more pairs at the current variance would decide: lower the timing noise "
                "first (a quiet machine, a longer-running input)")
    else:
        hint = f"about {more} more pairs at the current variance would decide (--more {more})"
    return f"{spent}; {hint}"


def reach_verdict(
    gates: Sequence[GateResult],
    analysis: dict[str, Any] | msgspec.Struct | None,
    *,
    refused_edits: Sequence[str],
    build_ok: bool | None,
    oracle_passed: bool | None,
    exploratory: bool,
    min_pairs: int = DEFAULT_MIN_PAIRS,
    timing_fault: FaultRecorded | None = None,
    ceiling: Sequence[str] = (),
    doubts: Sequence[str] = (),
    contended: str | None = None,
    uncontained: str | None = None,
    screening_estimate: float | None = None,
    chain: str | None = None,
    same_image: str | None = None,
) -> Verdict:
    """The verdict on one evaluated candidate; ``analysis`` is a ``pw.stats.PairedAnalysis`` or its
    ``msgspec.to_builtins`` dict. ``build_ok`` and ``oracle_passed`` are None when that step did not run;
    ``timing_fault`` is the failure that stopped the candidate's timed runs, if one did. ``doubts``
    (the baseline itself ran slower than at start) make a FASTER candidate inconclusive, and
    ``contended`` (the machine was too busy for the timings, ``pw.rules.contention``) any decided
    one (faster, slower or no effect); ``ceiling``
    (an oracle that compares nothing) keeps a candidate whose gates all pass at proposed, and so
    does ``uncontained`` (why its runs had no sandbox), and ``chain`` (why a chained candidate is
    not shown faster than the baseline). ``same_image`` (the candidate loads the same code and data
    as its reference, ``pw.workload.image``) rejects it as no effect, whatever the timing says.
    A ``timing_fault`` may also be what the
    candidate was caught at in a timed or profiled run (``caught``, ``output-mismatch``).

    The checks run in that order of precedence: a failed step, the same image, the timing, then
    the gates; the first that decides is the verdict."""
    by_name = {g.name: g for g in gates}
    a = msgspec.to_builtins(analysis) if isinstance(analysis, msgspec.Struct) else analysis
    failed = _failed_steps(by_name, timing_fault, refused_edits, build_ok, oracle_passed)
    if failed is not None:
        return failed
    if same_image is not None:
        # The image decides, not the machine; a campaign that found no effect says so first.
        said = a is not None and a.get("verdict") == "SAME" and (a.get("campaign") or {}).get("margin") is not None
        margin = [f"{NO_EFFECT} speedup within ±{a['campaign']['margin']:.0%} ({_summary(a)})"] if said else []
        return Verdict("rejected", [*margin, f"{NO_EFFECT} {same_image}"])
    undecided = _timing_verdict(a, exploratory=exploratory, min_pairs=min_pairs, doubts=doubts,
                                contended=contended, screening_estimate=screening_estimate)
    if undecided is not None:
        return undecided
    reasons = []
    for name in GATE_NAMES:
        g = by_name.get(name)
        if g is None:
            reasons.append(f"gate {name}: not evaluated")
        elif not g.passed:
            reasons.append(f"gate {name}: {g.detail}")
    reasons += [f"{NO_ORACLE} {c}" for c in ceiling]
    if chain is not None:
        reasons.append(f"{CHAIN} {chain}")
    if uncontained is not None:
        reasons.append(f"{UNCONTAINED} {uncontained}; a run outside a sandbox could have cached its result or "
                       "read the references, so the ceiling is proposed")
    if reasons:
        return Verdict("proposed", reasons)
    return Verdict("verified", [f"verified: {_summary(a)}; all six gates passed"])


def _failed_steps(by_name: dict[str, GateResult], timing_fault: FaultRecorded | None, refused_edits: Sequence[str],
                  build_ok: bool | None, oracle_passed: bool | None) -> Verdict | None:
    """Rejected when a step before the timing failed (every failure listed, repairable when an edit
    can address one of them); None when none did."""
    failures: list[tuple[str, bool]] = []  # (reason, whether an edit can address it)
    if timing_fault is not None:
        failures.append((f"{timing_fault.failure_class}: {timing_fault.message}",
                         timing_fault.failure_class in REPAIRABLE_FAULTS))
    if refused_edits:
        failures.append((f"{EDIT_REFUSED} {', '.join(refused_edits)}", True))
    if build_ok is False:  # None: no build was attempted (e.g. refused edits), not a failed one
        failures.append((f"{BUILD_FAILED} the candidate did not build", True))
    if oracle_passed is False:
        corr = by_name.get("correctness")
        failures.append((f"{ORACLE_FAILED} {corr.detail if corr else 'the oracle did not pass'}", True))
    if failures:
        return Verdict("rejected", [reason for reason, _ in failures], any(fixable for _, fixable in failures))
    return None


def _timing_verdict(a: dict[str, Any] | None, *, exploratory: bool, min_pairs: int, doubts: Sequence[str],
                    contended: str | None, screening_estimate: float | None) -> Verdict | None:
    """The verdict when the timing alone decides it (no analysis, a busy host, slower, no effect,
    undecided, too few exploratory pairs, a shifted baseline); None for a FASTER campaign the gates
    must judge."""
    if a is None and exploratory and screening_estimate is not None:
        return Verdict("inconclusive", [
            f"{INCONCLUSIVE} exploratory screening: one pair gives {screening_estimate:.3g}x (no interval, "
            "not a verdict); it ranks the candidates, `pw confirm` the top one"])
    if a is None:
        return Verdict("inconclusive", [f"{INCONCLUSIVE} no timing analysis"])
    n = int(a.get("n_pairs") or 0)
    verdict = a.get("verdict")
    if contended is not None and verdict in ("FASTER", "SLOWER", "SAME"):
        # whichever way the timing decided, it decided on the machine's load as much as the code
        return Verdict("inconclusive", [f"{HOST_BUSY} {_summary(a)}; {contended}"])
    if verdict == "SLOWER":
        return Verdict("rejected", [f"{SLOWER} {_summary(a)}"])
    campaign = a.get("campaign") or {}
    if verdict == "SAME":
        if campaign:
            return Verdict("rejected", [f"{NO_EFFECT} speedup within ±{campaign['margin']:.0%} ({_summary(a)})"])
        return Verdict("rejected", [f"{NO_EFFECT} {_summary(a)}, within the minimum effect"])
    if verdict != "FASTER":
        return Verdict("inconclusive", [f"{INCONCLUSIVE} {_summary(a)}, {_undecided(verdict, campaign)}"])
    if exploratory and n < min_pairs:
        return Verdict("inconclusive", [f"{INCONCLUSIVE} exploratory campaign, {n} pairs < {min_pairs}"])
    if doubts:
        return Verdict("inconclusive", [f"{BASELINE_SHIFT} {d}" for d in doubts])
    return None
