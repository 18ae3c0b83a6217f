"""A candidate's status from its gates and its paired analysis (pure; no I/O).

Order of judgement, first match wins:

1. **rejected** for anything that makes the timing meaningless: refused edits (``edit-refused:``), a
   failed build (``build-failed:``), a failed oracle (``oracle-failed:``); all that apply are listed.
2. **rejected** when the paired analysis says SLOWER (``slower:``) or SAME (``no-effect:``).
3. **inconclusive** without an analysis, when it says INCONCLUSIVE, or for an exploratory campaign with
   fewer pairs than the minimum (``inconclusive:``).
4. **verified** when all six gates of ``pw.gates.GATE_NAMES`` are present and pass (one
   ``verified:`` reason summarising the speedup).
5. **proposed** otherwise, one reason per failed or missing gate (``gate <name>: <detail>``).

The reason prefixes are a contract: ``projections.state`` counts repair-budget use by them
(build-failed, oracle-failed, crashed, timeout, launch-failed, edit-refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ledger.events import GateResult
from pw.gates import DEFAULT_MIN_PAIRS, GATE_NAMES

Status = Literal["verified", "proposed", "rejected", "inconclusive"]

EDIT_REFUSED = "edit-refused:"
BUILD_FAILED = "build-failed:"
ORACLE_FAILED = "oracle-failed:"
SLOWER = "slower:"
NO_EFFECT = "no-effect:"
INCONCLUSIVE = "inconclusive:"


def _summary(a: dict[str, Any]) -> str:
    iv = a.get("interval") or {}
    low, high = iv.get("low"), iv.get("high")
    speedup = a.get("speedup")
    fmt = (lambda v: "n/a" if v is None else f"{v:.4g}")
    return (f"speedup {fmt(speedup)}x ({iv.get('confidence', 0.95):.0%} CI {fmt(low)}-{fmt(high)}) "
            f"over {a.get('n_pairs')} pairs")


def reach_verdict(
    gates: Sequence[GateResult],
    analysis: dict[str, Any] | msgspec.Struct | None,
    *,
    refused_edits: Sequence[str],
    build_ok: bool | None,
    oracle_passed: bool | None,
    exploratory: bool,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> tuple[Status, list[str]]:
    """(status, reasons) for one evaluated candidate; ``analysis`` is a ``pw.stats.PairedAnalysis`` or
    its ``msgspec.to_builtins`` dict. ``build_ok`` and ``oracle_passed`` are None when that step did not run."""
    by_name = {g.name: g for g in gates}
    a = msgspec.to_builtins(analysis) if isinstance(analysis, msgspec.Struct) else analysis

    rejections = []
    if refused_edits:
        rejections.append(f"{EDIT_REFUSED} {', '.join(refused_edits)}")
    if build_ok is False:  # None: no build was attempted (e.g. refused edits), not a failed one
        rejections.append(f"{BUILD_FAILED} the candidate did not build")
    if oracle_passed is False:
        corr = by_name.get("correctness")
        rejections.append(f"{ORACLE_FAILED} {corr.detail if corr else 'the oracle did not pass'}")
    if rejections:
        return "rejected", rejections

    if a is None:
        return "inconclusive", [f"{INCONCLUSIVE} no timing analysis"]
    n = int(a.get("n_pairs") or 0)
    verdict = a.get("verdict")
    if verdict == "SLOWER":
        return "rejected", [f"{SLOWER} {_summary(a)}"]
    if verdict == "SAME":
        return "rejected", [f"{NO_EFFECT} {_summary(a)}, within the minimum effect"]
    if verdict != "FASTER":
        return "inconclusive", [f"{INCONCLUSIVE} {_summary(a)}, verdict {verdict}"]
    if exploratory and n < min_pairs:
        return "inconclusive", [f"{INCONCLUSIVE} exploratory campaign, {n} pairs < {min_pairs}"]

    reasons = []
    for name in GATE_NAMES:
        g = by_name.get(name)
        if g is None:
            reasons.append(f"gate {name}: not evaluated")
        elif not g.passed:
            reasons.append(f"gate {name}: {g.detail}")
    if reasons:
        return "proposed", reasons
    return "verified", [f"verified: {_summary(a)}; all six gates passed"]
