"""The six trust gates as they stand (gate rules 19 on): one pure function of recorded facts.

``evaluate_gates(inputs, rules) -> list[GateResult]``: no files, processes, clock, randomness or
logging. The inputs are plain data recorded in ``GatesEvaluated.inputs``; `pw audit` decodes them
(``decode_inputs``) and runs the gates again, which must give the identical results. A verdict
recorded under rules 1-18 (reprofiled evidence) is judged by ``pw.rules.gates_reprofiled``.

The story of the current rules, gate by gate:

- **correctness**: the oracle passed on the candidate (holdouts included); no refused edits; no run
  changed its tree.
- **significance**: at least 5 admitted pairs, the anytime-valid interval of the speedup above
  1 + min_effect, the candidate not slower in summed time, conditions matched, the timed binaries the
  built ones.
- **mechanism**: every timed run is a profiled run, so each pair gives the hotspot's cost in both arms
  from the same two runs as the whole time. The hotspot's part is its own code in the reference's run
  and, in the candidate's, its code plus every function and line the candidate changed (changed code
  is no hiding place). The fraction of the saving that part carries is estimated on the pairs with the
  speedup's confidence sequence (Fieller's set, ``pw.stats.shares``), and must lie above one half.
  When the patch reaches beyond the hotspot's own function, the hybrid arm (the parent with only the
  hotspot's change) was timed in the same campaign and must carry at least half of the saving itself:
  a truthful profile can mislead, an intervention cannot. The speedup may not exceed the Amdahl ceiling
  of the code the candidate changed, from the reference arm of the same campaign; the rest of the
  program may not fall with the hotspot (a change of conditions, not a mechanism).
- **no collateral**: no other operation of the candidate's runs grew, per pair, by more than
  COLLATERAL_SLACK of the run with confidence (Bonferroni over the operations checked); the machine's
  samples (the OS kernel) are no operation: the candidate's own system time, paired, is checked
  instead; whole-process time for a region-of-interest metric, the time outside the region, peak memory.
- **attribution**: the mechanism's metric was measured in every timed run by an adapter usable here.
- **reproducible**: command, build, host, tool versions, source and run are recorded.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ledger.events import GateResult
from pw.rules.gate_facts import (
    AMDAHL_SLACK,
    COLLATERAL_MIN_SHARE,
    DEFAULT_MIN_PAIRS,
    GATE_NAMES,
    AdapterFacts,
    Binaries,
    Claim,
    Conditions,
    CounterFacts,
    DiagnosisFacts,
    HotspotFacts,
    OracleFacts,
    Plain,
    Repro,
    Seqs,
    correctness_gate,
    gate_result,
    gpu_counter_check,
    interval_of,
    num,
    reproducible_gate,
    significance_gate,
    whole_run_collateral,
)
from pw.rules.rulesets import GATE_RULES, RULE_VERSIONS, RuleSet, UnknownRules, rule_set
from pw.stats.shares import Fraction, fraction, mean

__all__ = ["GATE_NAMES", "GATE_RULES", "RULE_VERSIONS", "GateInputs", "PairFacts", "UnknownRules",
           "decode_inputs", "evaluate_gates"]

# "Most of the saving": the hotspot's part (or the hybrid arm) must carry more than this fraction.
MIN_CARRIED_FRACTION = 0.5
# An operation, or the candidate's system time, may grow by this share of the reference's run per pair
# before the growth counts (an honest rewrite moves a little cost: allocation, cache warmth), and only
# when the growth's interval lies wholly above it.
COLLATERAL_SLACK = 0.01
# Rules 17 on: the time outside the region of interest may grow by at most this share of the baseline's
# whole run, and only when the growth's 95% interval lies above it.
OUTSIDE_ROI_SLACK = 0.02
# The rest of the program (outside the hotspot's part) may fall, relative to its own cost, by at most
# this share of the hotspot's own relative saving before the speedup counts as uniform.
UNIFORM_SHARE = 0.5


class OutsideRoi(Plain, kw_only=True):
    """A region-of-interest metric: per timed pair, the whole-process seconds outside the region, candidate
    less reference; its mean and 95% t-interval over the pairs, and the reference's median whole run."""

    pairs: int
    growth_mean_s: float
    growth_low_s: float
    growth_high_s: float
    baseline_outside_median_s: float
    candidate_outside_median_s: float
    baseline_wall_median_s: float


class PairFacts(Plain, kw_only=True):
    """What the campaign's admitted pairs measured, per pair (lists aligned by pair).

    ``reference_s``/``candidate_s``/``hybrid_s``: the timed metric; ``*_wall_s``: each run's
    whole-process time; ``hot_*_s``: the hotspot's part (``Attribution``) in seconds of that run;
    ``reach_reference_s``: the reference's code the candidate changed (the ceiling); ``sys_*_s``: the
    launcher's system time; ``operations``: every other operation at or above COLLATERAL_MIN_SHARE of
    either arm, [reference seconds, candidate seconds] per pair."""

    reference: str
    candidate: str
    hybrid: str | None = None
    metric: str
    profiler: str
    pairs_run: int
    set_aside: int = 0
    # Admitted pairs left out here because a run carried no samples (``RuleSet.unsampled_pairs_apart``).
    unsampled: int = 0
    max_load_imbalance: float | None = None
    reference_s: list[float]
    candidate_s: list[float]
    hybrid_s: list[float] = []
    reference_wall_s: list[float]
    candidate_wall_s: list[float]
    hot_reference_s: list[float]
    hot_candidate_s: list[float]
    reach_reference_s: list[float] = []
    sys_reference_s: list[float] = []
    sys_candidate_s: list[float] = []
    operations: dict[str, list[list[float]]] = {}
    changed_functions: list[str] = []
    beyond: list[str] = []
    hybrid_status: str = "not-needed"  # "not-needed", "timed", or why it was not ("coupled: ...")
    confidence: float = 0.95
    prior_scale: float = 2.0


class GateInputs(Plain, kw_only=True):
    candidate: str
    exploratory: bool = False
    seqs: Seqs = Seqs()
    # correctness
    oracle: OracleFacts | None = None
    refused_edits: list[str] = []
    run_side_effects: list[str] = []
    # significance
    analysis: dict[str, Any] | None = None
    min_pairs: int = DEFAULT_MIN_PAIRS
    baseline_conditions: Conditions = Conditions()
    candidate_conditions: Conditions = Conditions()
    binaries: Binaries = Binaries()
    # mechanism, no collateral, attribution
    hotspot: HotspotFacts | None = None
    pairs: PairFacts | None = None
    adapter: AdapterFacts | None = None
    claims: list[Claim] = []
    counter: CounterFacts | None = None  # GPU hotspots: the counter the mechanism's class names (why)
    diagnosis: DiagnosisFacts | None = None  # the exact-count channel (callgrind), shown beside the timed one
    wall_analysis: dict[str, Any] | None = None
    outside_roi: OutsideRoi | None = None
    peak_rss_kb_baseline: list[float] = []
    peak_rss_kb_candidate: list[float] = []
    # reproducible
    repro: Repro = Repro()


def decode_inputs(data: dict[str, Any], rules: int = GATE_RULES):
    """The recorded ``GatesEvaluated.inputs`` back as the inputs of their rules' gates (raises
    msgspec.ValidationError, UnknownRules)."""
    if rule_set(rules).evidence == "reprofiled":
        from pw.rules import gates_reprofiled

        return gates_reprofiled.decode_inputs(data)
    return msgspec.convert(data, GateInputs)


def evaluate_gates(inputs, rules: int | RuleSet = GATE_RULES) -> list[GateResult]:
    """The six gates, in the order of ``GATE_NAMES``, under ``rules`` (a RuleSet or its version)."""
    rs = rules if isinstance(rules, RuleSet) else rule_set(rules)
    if rs.evidence == "reprofiled":
        from pw.rules import gates_reprofiled

        return gates_reprofiled.evaluate_reprofiled(inputs, rs)
    return [correctness_gate(inputs), significance_gate(inputs, rs), _mechanism(inputs, rs),
            _no_collateral(inputs, rs), _attribution(inputs), reproducible_gate(inputs)]


# --- mechanism ------------------------------------------------------------------------------------


def _pct(f: Fraction) -> str:
    if f.estimate is None:
        return "n/a"
    if not f.bounded:
        return f"{f.estimate:.0%} (interval unbounded)"
    return f"{f.estimate:.0%} [{f.low:.0%}, {f.high:.0%}]"


def _carried(p: PairFacts, part: list[float], prior_scale: float | None) -> Fraction:
    """The fraction's set at the campaign's one-sided level (``pw.stats.adaptive.one_sided``): the gate
    asks one question, "more than half?", as the campaign's stopping rule does, and with the rule
    set's ``mechanism_prior_scale`` with the same statistic (rules 19: the speedup's mixture, so a
    campaign could stop "carried" on a fraction the gate then called undecided)."""
    from pw.stats.adaptive import one_sided

    whole = [b - c for b, c in zip(p.reference_s, p.candidate_s)]
    return fraction(part, whole, scale=p.reference_s, confidence=one_sided(p.confidence),
                    prior_scale=p.prior_scale if prior_scale is None else prior_scale)


def hybrid_fraction(p: PairFacts, prior_scale: float | None = None) -> Fraction:
    """The share of the candidate's saving the hybrid arm (the hotspot's change alone) carries."""
    return _carried(p, [b - h for b, h in zip(p.reference_s, p.hybrid_s)], prior_scale)


def hotspot_fraction(p: PairFacts, prior_scale: float | None = None) -> Fraction:
    """The share of the saving the hotspot's part (its code, and changed code) carries, per pair."""
    return _carried(p, [b - c for b, c in zip(p.hot_reference_s, p.hot_candidate_s)], prior_scale)


def _judge_fraction(f: Fraction, what: str) -> tuple[str | None, str]:
    """(failure or None, the detail) of "``what`` carries most of the saving"."""
    text = (f"{what} carries {_pct(f)} of the saving ({f.confidence:.0%} anytime-valid, each side at "
            f"{(1 - f.confidence) / 2:.0%}; {f.n} pairs)")
    if f.bounded and f.low > MIN_CARRIED_FRACTION:  # type: ignore[operator]
        return None, text
    if f.bounded and f.high < MIN_CARRIED_FRACTION:  # type: ignore[operator]
        return f"{text}: less than {MIN_CARRIED_FRACTION:.0%}, so the saving came from elsewhere", text
    return f"{text}: not shown to be more than {MIN_CARRIED_FRACTION:.0%} (undecided)", text


def _uniform(p: PairFacts, hot: Fraction) -> str | None:
    """Why the speedup looks uniform (the rest of the program fell as the hotspot did), or None."""
    rest_ref = [w - h for w, h in zip(p.reference_wall_s, p.hot_reference_s)]
    rest_cand = [w - h for w, h in zip(p.candidate_wall_s, p.hot_candidate_s)]
    if min(rest_ref, default=0.0) <= 0 or min(p.hot_reference_s, default=0.0) <= 0:
        return None
    rest = fraction([a - b for a, b in zip(rest_ref, rest_cand)], rest_ref, scale=p.reference_wall_s,
                    confidence=p.confidence, prior_scale=p.prior_scale)
    own = fraction([a - b for a, b in zip(p.hot_reference_s, p.hot_candidate_s)], p.hot_reference_s,
                   scale=p.reference_wall_s, confidence=p.confidence, prior_scale=p.prior_scale)
    if not rest.bounded or own.estimate is None or own.estimate <= 0:
        return None
    if rest.low > UNIFORM_SHARE * own.estimate:  # type: ignore[operator]
        return (f"the rest of the program fell too: {_pct(rest)} of its own cost, against the hotspot's "
                f"{own.estimate:.0%}: a uniform speedup is a change of conditions, not a mechanism")
    return None


def _ceiling(i: GateInputs, p: PairFacts) -> tuple[str | None, str]:
    """The Amdahl ceiling of the code the candidate changed, from the reference arm of this campaign."""
    reach = p.reach_reference_s or p.hot_reference_s
    total, part = math.fsum(p.reference_s), math.fsum(reach)
    if not total > 0 or i.analysis is None:
        return None, ""
    share = min(part / total, 1.0)
    if share >= 1.0:
        return None, "the changed code took all of the reference's runs (no Amdahl ceiling)"
    ceiling = 1.0 / (1.0 - share)
    low, _ = interval_of(i.analysis)
    limit = ceiling * AMDAHL_SLACK
    text = (f"Amdahl ceiling {num(ceiling)}x of the changed code ({share:.0%} of the reference's runs in this "
            f"campaign)")
    if low is not None and low > limit:
        return (f"speedup interval low {num(low)} exceeds the {text} (x{AMDAHL_SLACK:g} = {num(limit)}): work "
                "outside the code that changed got faster or was skipped"), text
    return None, f"speedup within the {text}"


def _mechanism(i: GateInputs, rs: RuleSet) -> GateResult:
    failures: list[str] = []
    details: list[str] = []
    p = i.pairs
    evidence = [i.seqs.hotspot, i.seqs.timing]
    if i.hotspot is None:
        failures.append("no hotspot selected")
    if p is None or len(p.reference_s) < 2 or not p.hot_reference_s:
        why = "no profiled pairs: the campaign's runs carry no per-operation costs"
        if p is not None and p.unsampled:
            why = (f"fewer than 2 sampled pairs: {p.unsampled} pair(s) had a run that ended before its profiler "
                   "attached, which says nothing of where its time went (give the program a longer input)")
        failures.append(why)
        return gate_result("mechanism", failures, "", evidence)
    if rs.hybrid_arm and p.hybrid_status == "timed" and p.hybrid_s:
        failure, text = _judge_fraction(hybrid_fraction(p, rs.mechanism_prior_scale),
                                        f"the hotspot's change alone (hybrid arm {p.hybrid})")
        beyond = f"; the patch also changed {', '.join(p.beyond[:4])}" if p.beyond else ""
        details.append(text + beyond)
        if failure:
            failures.append(failure + beyond)
    else:
        hot = hotspot_fraction(p, rs.mechanism_prior_scale)
        what = "the hotspot's code" + (" with the code the candidate changed outside it" if p.beyond else "")
        failure, text = _judge_fraction(hot, what)
        if p.hybrid_status.startswith("coupled"):
            text += f" (no hybrid arm: {p.hybrid_status}; judged by changed-code attribution alone)"
            failure = failure and failure + f" (no hybrid arm: {p.hybrid_status})"
        details.append(text)
        if failure:
            failures.append(failure)
        elif (uniform := _uniform(p, hot)) is not None:
            failures.append(uniform)
    failure, text = _ceiling(i, p)
    if failure:
        failures.append(failure)
    elif text:
        details.append(text)
    if i.counter is not None:  # GPU: the counters say why; the kernel's device time is the mechanism
        ok, detail = gpu_counter_check(i.counter)
        details.append(detail if ok else f"({detail})")
    if p.set_aside:
        details.append(f"{p.set_aside} of {p.pairs_run} pairs set aside for unbalanced load")
    if p.unsampled:
        details.append(f"{p.unsampled} pair(s) with an unsampled run left out (no evidence of where its time went)")
    return gate_result("mechanism", failures, "; ".join(details), evidence)


# --- no collateral --------------------------------------------------------------------------------


def _growth(p: PairFacts, before: list[float], after: list[float], confidence: float):
    growth = [a - b for a, b in zip(after, before)]
    return mean(growth, scale=p.reference_wall_s, confidence=confidence, prior_scale=p.prior_scale)


def _regressions(p: PairFacts) -> tuple[list[str], int]:
    """Operations (and the system time) that grew beyond COLLATERAL_SLACK of the run, with
    confidence 1 - alpha/k over the k things checked (Bonferroni)."""
    checks = [(op, v[0], v[1]) for op, v in sorted(p.operations.items())]
    if p.sys_reference_s and p.sys_candidate_s:
        checks.append(("the candidate's system time (the OS kernel on its behalf)", p.sys_reference_s,
                       p.sys_candidate_s))
    if not checks:
        return [], 0
    level = 1.0 - (1.0 - p.confidence) / len(checks)
    out = []
    for name, before, after in checks:
        m = _growth(p, before, after, level)
        if m.low is not None and m.low > COLLATERAL_SLACK:
            out.append(f"{name} grew by {m.estimate:.1%} of the run [{m.low:.1%}, {m.high:.1%}] "
                       f"(mean per pair; more than {COLLATERAL_SLACK:.0%})")
    return out, len(checks)


def _no_collateral(i: GateInputs, rs: RuleSet) -> GateResult:
    failures, checked = [], []
    p = i.pairs
    if p is None or len(p.reference_s) < 2:
        failures.append("no profiled pairs: other operations not checked")
    else:
        regressed, n = _regressions(p)
        if regressed:
            failures.append("regressed: " + "; ".join(regressed[:5]))
        checked.append(f"{n} other operations and the system time within {COLLATERAL_SLACK:.0%} of the run "
                       f"(operations >= {COLLATERAL_MIN_SHARE:.0%} of either arm; the OS kernel's samples read "
                       "as system time)")
    whole_failures, whole_checked = whole_run_collateral(i, rs.outside_roi, OUTSIDE_ROI_SLACK)
    failures += whole_failures
    checked += whole_checked
    return gate_result("no_collateral", failures, "; ".join(checked), [i.seqs.timing, i.seqs.wall])


# --- attribution ----------------------------------------------------------------------------------


def _attribution(i: GateInputs) -> GateResult:
    failures, cited = [], []
    a, p = i.adapter, i.pairs
    if a is None:
        failures.append("no adapter facts: cannot tell what was measured on this host")
    elif not a.usable:
        failures.append(f"adapter {a.name} is not usable on this host")
    mech = i.hotspot.metric if i.hotspot is not None else None
    if p is None:
        failures.append("no profiled pairs: the mechanism's metric was not measured in the timed runs")
    elif mech is not None:
        if a is not None and mech not in a.measured:
            failures.append(f"mechanism metric {mech} was not measured by {a.name} in the timed runs")
        cited.append(f"{mech} in every timed run ({p.profiler})")
    for c in i.claims:
        if a is not None and c.metric not in a.measured and c.metric not in (i.counter.metric if i.counter else "",):
            failures.append(f"claim cites {c.metric}, which {a.name} did not measure here")
        else:
            cited.append(c.metric + (" (simulated)" if c.simulated else ""))
    if i.counter is not None and i.counter.before is not None and i.counter.after is not None:
        cited.append(f"{i.counter.metric} (Nsight Compute, parent and candidate)")
    name = a.name if a is not None else "?"
    return gate_result("attribution", failures, f"claims cite metrics {name} measured on this host: "
                       + ", ".join(sorted(set(cited))), [i.seqs.preflight, i.seqs.timing])
