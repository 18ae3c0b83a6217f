"""What every version of the gates shares: the facts a gate reads, and the gates that read the same
facts under every rule set (correctness, significance, attribution's claims, reproducible).

Pure: no files, processes, clock, randomness or logging. The gate-input structs of each evidence
family (``pw.rules.gates`` for pairs, ``pw.rules.gates_reprofiled`` for versions 1-18) are built of
these and recorded in ``GatesEvaluated.inputs`` as plain data.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Protocol

import msgspec

from ledger.events import GateResult
from ledger.metrics import KNOWN_METRICS
from pw.rules.rulesets import RuleSet

GATE_NAMES: tuple[str, ...] = (
    "correctness", "significance", "mechanism", "no_collateral", "attribution", "reproducible")

DEFAULT_MIN_PAIRS = 5

# A measured speedup whose interval lies wholly above the hotspot's Amdahl ceiling cannot come from the
# hotspot alone. 5% slack absorbs the difference between the profiled and the timed run.
AMDAHL_SLACK = 1.05
# Operations below this share of the baseline total are not checked for regressions: their noise
# dominates and they cannot cost much.
COLLATERAL_MIN_SHARE = 0.02

# Peak memory (median max RSS over the timed runs) may grow by this factor plus this many KB.
PEAK_RSS_FACTOR = 1.10
PEAK_RSS_SLACK_KB = 1024.0


class SharedInputs(Protocol):
    """The fields every version's gate inputs have, which the shared gates read."""

    oracle: OracleFacts | None
    refused_edits: list[str]
    run_side_effects: list[str]
    analysis: dict[str, Any] | None
    min_pairs: int
    baseline_conditions: Conditions
    candidate_conditions: Conditions
    binaries: Binaries
    repro: Repro
    seqs: Seqs


REPRO_FIELDS: tuple[str, ...] = ("command", "build_sha256", "host", "tool_versions", "source_sha256", "run_id")


class Plain(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class OracleFacts(Plain):
    """The candidate's oracle check (``OracleChecked``); ``passed`` covers the holdout inputs too."""

    passed: bool
    detail: str
    method: str
    rtol: float
    atol: float


class Conditions(Plain):
    """What one arm of the timing campaign ran under; the two arms must match exactly."""

    host: str | None = None
    argv: list[str] = []
    inputs_sha256: str | None = None
    tool_versions: dict[str, str] = {}
    other: dict[str, str] = {}  # e.g. governor, warm-up runs: compared as well


class Binaries(Plain):
    """Digests of the binaries: the one each arm should run vs the one actually timed."""

    baseline_expected: str | None = None
    baseline_timed: str | None = None
    candidate_built: str | None = None
    candidate_timed: str | None = None


class HotspotFacts(Plain):
    """The targeted hotspot (``HotspotSelected``): its share of the baseline and its Amdahl ceiling."""

    operation: str
    metric: str
    share: float
    amdahl_ceiling: float | None  # None: share 1, no ceiling


class AdapterFacts(Plain):
    """The profiler behind the reprofile, as probed on this host."""

    name: str
    can_reprofile: bool
    usable: bool
    measured: list[str]  # metric ids it measured here
    simulated: list[str] = []  # of those, the ones from a model of the machine, not its hardware


class CounterFacts(Plain):
    """The hardware counter a GPU mechanism names, on the hotspot kernel, parent vs candidate
    (Nsight Compute, one filtered launch each); ``direction`` is the way the mechanism says it moves."""

    metric: str
    before: float | None
    after: float | None
    direction: str  # "down" | "up"
    mechanism: str = ""


class DiagnosisFacts(Plain):
    """The diagnosis adapter's reprofile (callgrind's exact instructions when routing climbed to it),
    reference vs candidate: shown beside the gates, read by no gate rule (the mechanism gate judges
    the discovery adapter's diff)."""

    adapter: str
    metric: str
    hotspot: str
    hotspot_before: float  # inclusive, in ``metric``
    hotspot_after: float
    total_before: float
    total_after: float
    reused: bool = False  # the candidate's capture reused an identical executable's evidence


class Claim(Plain):
    """A causal claim made in the report, by the metric it cites; ``simulated`` = labelled as simulated."""

    metric: str
    text: str = ""
    simulated: bool = False


class Repro(Plain):
    command: list[str] = []
    build_sha256: str | None = None
    host: str | None = None
    tool_versions: dict[str, str] = {}
    source_sha256: str | None = None
    run_id: str | None = None
    # Where the campaign's runs ran when a scheduler placed them (`--remote`); None: on `host`.
    timed_on: str | None = None


class Seqs(Plain):
    """Ledger seqs of the events the inputs came from (None: no such event)."""

    run: int | None = None  # RunStarted
    preflight: int | None = None  # PreflightCompleted (adapter usability, tool versions)
    diff: int | None = None  # CandidateDiffRecorded (refused edits)
    build: int | None = None  # BuildFinished of the candidate
    oracle: int | None = None  # OracleChecked of the candidate
    timing: int | None = None  # TimingRecorded the analysis comes from
    wall: int | None = None  # TimingRecorded of whole-process wall time, when the timed metric is an ROI
    hotspot: int | None = None  # HotspotSelected
    baseline_profile: int | None = None  # ProfileNormalized of the baseline
    candidate_profile: int | None = None  # ProfileNormalized of the candidate's reprofile
    resolution: int | None = None  # ReprofileResolved: how many runs the reprofile took, and why


# --- helpers ------------------------------------------------------------------------------------


def num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def gate_result(name: str, failures: list[str], passed_detail: str, evidence: list[int | None]) -> GateResult:
    detail = "; ".join(failures) if failures else passed_detail
    seqs = sorted({s for s in evidence if s is not None})
    return GateResult(name=name, passed=not failures, detail=" ".join(detail.split()), evidence=seqs)


def listed(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def interval_of(analysis: dict[str, Any]) -> tuple[float | None, float | None]:
    iv = analysis.get("interval") or {}
    return iv.get("low"), iv.get("high")


def speedup_text(analysis: dict[str, Any]) -> str:
    low, high = interval_of(analysis)
    conf = (analysis.get("interval") or {}).get("confidence", 0.95)
    return (f"speedup {num(analysis.get('speedup'))}x ({conf:.0%} CI {num(low)}-{num(high)}), "
            f"{analysis.get('verdict')}, {analysis.get('n_pairs')} pairs")


def is_simulated(metric: str, adapter: AdapterFacts | None) -> bool:
    spec = KNOWN_METRICS.get(metric)
    return bool(spec and spec.simulated) or (adapter is not None and metric in adapter.simulated)


def correctness_gate(i: SharedInputs) -> GateResult:
    failures = []
    o = i.oracle
    tolerance = "" if o is None else f"{o.method}, rtol={o.rtol:g}, atol={o.atol:g}"
    if o is None:
        failures.append("oracle not run on the candidate")
    elif not o.passed:
        failures.append(f"oracle failed ({tolerance}): {o.detail}")
    if i.refused_edits:
        failures.append(f"refused edits (outside the editable set or protected): {listed(i.refused_edits)}")
    if i.run_side_effects:
        failures.append(
            f"runs changed their tree (possible caching across runs): {listed(i.run_side_effects)}")
    return gate_result("correctness", failures, f"oracle passed ({tolerance}): {o.detail if o else ''}",
                   [i.seqs.oracle, i.seqs.diff])


def condition_mismatches(a: Conditions, b: Conditions) -> list[str]:
    out = []
    if a.host is None or b.host is None:
        out.append("host not recorded")
    for field in ("host", "argv", "inputs_sha256", "tool_versions", "other"):
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb:
            out.append(f"{field} differs ({va!r} vs {vb!r})")
    return out


def binary_mismatches(b: Binaries) -> list[str]:
    out = []
    for arm, want, got in (("baseline", b.baseline_expected, b.baseline_timed),
                           ("candidate", b.candidate_built, b.candidate_timed)):
        if want is None or got is None:
            out.append(f"{arm} binary digest not recorded")
        elif want != got:
            out.append(f"{arm} binary timed ({got[:12]}) is not the one built ({want[:12]}): stale or swapped")
    return out


def total_time_check(a: dict[str, Any]) -> str | None:
    """Rules 10: why a FASTER campaign is not faster in total, or None. Its speedup is the geometric
    mean of the per-pair ratios, which weighs a run 38x slower like one 38x faster, not like 38 runs:
    a rewrite fast on most inputs and far slower on a few can be FASTER by that mean and still cost
    more time than the baseline over the very pairs that measured it."""
    inputs = a.get("inputs") or {}
    base, cand = list(inputs.get("baseline_s") or ()), list(inputs.get("candidate_s") or ())
    if not base or len(base) != len(cand) or sum(cand) < sum(base):
        return None
    worst = max(range(len(base)), key=lambda k: cand[k] / base[k] if base[k] > 0 else math.inf)
    return (f"the candidate took more time than the baseline over the campaign's {len(base)} pairs "
            f"({num(sum(cand))} against {num(sum(base))} in total): the per-pair ratios' mean hides its "
            f"slow runs (pair {worst + 1}: {num(cand[worst])} against {num(base[worst])})")


def significance_gate(i: SharedInputs, rs: RuleSet) -> GateResult:
    failures = []
    a = i.analysis
    summary = "no timing analysis"
    if a is None:
        failures.append("no timing analysis")
    else:
        summary = speedup_text(a)
        n = int(a.get("n_pairs") or 0)
        low, _ = interval_of(a)
        min_effect = float((a.get("params") or {}).get("min_effect", 0.0))
        problems = []
        if n < i.min_pairs:
            problems.append(f"{n} pairs < {i.min_pairs} required")
        if a.get("verdict") != "FASTER":
            problems.append("not FASTER")
        elif low is None or not low > 1.0 + min_effect:
            problems.append(f"interval low {num(low)} not above 1+min_effect {1 + min_effect:g}")
        elif rs.total_time and (slower_in_total := total_time_check(a)):
            problems.append(slower_in_total)
        if problems:
            failures.append(f"{summary}: {', '.join(problems)}")
    cond = condition_mismatches(i.baseline_conditions, i.candidate_conditions)
    if cond:
        failures.append("conditions not matched: " + ", ".join(cond))
    failures.extend(binary_mismatches(i.binaries))
    return gate_result("significance", failures,
                   f"{summary} >= {i.min_pairs}; conditions matched; timed binaries are the ones built",
                   [i.seqs.timing, i.seqs.build])


#: Relative change a GPU counter must show to count as moved (counters of one launch repeat to well
#: under 1% for the same binary and input; 5% leaves room for clocks and replay variation).
GPU_COUNTER_MIN_CHANGE = 0.05


#: Mechanism keyword -> the counter it must move and which way. Coalescing picks the load or store
#: sectors/request, whichever the parent had worse.
GPU_MECHANISM_COUNTERS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("coalesc", "tiled", "tile", "shared-memory transpose"),
     ("global_store_sectors_per_request", "global_load_sectors_per_request"), "down"),
    (("privatiz", "atomic", "warp-level reduction", "warp reduction"), ("global_atomic_requests",), "down"),
    (("fusion", "fuse", "fused"), ("dram_bytes",), "down"),
    (("occupancy",), ("achieved_occupancy_pct",), "up"),
    (("graph", "launch"), ("launch_api_calls",), "down"),
)


class WholeRunInputs(Protocol):
    """The fields every version's no-collateral gate reads of the whole runs."""

    wall_analysis: dict[str, Any] | None
    outside_roi: Any  # each version's OutsideRoi: pairs, growth_*_s, *_median_s
    peak_rss_kb_baseline: list[int]
    peak_rss_kb_candidate: list[int]


def whole_run_collateral(i: WholeRunInputs, check_outside_roi: bool,
                         outside_roi_slack: float) -> tuple[list[str], list[str]]:
    """(failures, checked) of the no-collateral checks on whole runs, the same in every version: the
    whole-process time may not be slower, the time outside the region of interest may not grow by
    more than ``outside_roi_slack`` of the baseline's whole run (rules 17 on: ``check_outside_roi``),
    and peak memory may not grow beyond PEAK_RSS_FACTOR plus PEAK_RSS_SLACK_KB."""
    failures: list[str] = []
    checked: list[str] = []
    w = i.wall_analysis
    if w is not None:
        if w.get("verdict") == "SLOWER":
            failures.append(f"whole-process time slower: {speedup_text(w)}")
        else:
            checked.append(f"whole-process time {w.get('verdict')}")
    o = i.outside_roi
    if check_outside_roi and o is not None:
        limit = outside_roi_slack * o.baseline_wall_median_s
        text = (f"the time outside the region of interest {num(o.baseline_outside_median_s)} -> "
                f"{num(o.candidate_outside_median_s)} s per run (growth {num(o.growth_mean_s)} s, 95% CI "
                f"{num(o.growth_low_s)} to {num(o.growth_high_s)}, over {o.pairs} pairs)")
        if o.growth_low_s > limit:
            failures.append(f"{text}: more than {outside_roi_slack:.0%} of the baseline's whole run "
                            f"({num(limit)} s): the region's saving is not the program's (work moved out of "
                            "the timed region, or the region's clock is not the one the program runs by)")
        else:
            checked.append(text)
    rb, rc = i.peak_rss_kb_baseline, i.peak_rss_kb_candidate
    if not rb or not rc:
        failures.append("peak memory not recorded for both arms")
    else:
        mb, mc = statistics.median(rb), statistics.median(rc)
        limit = mb * PEAK_RSS_FACTOR + PEAK_RSS_SLACK_KB
        text = f"peak RSS median {mb:.0f} -> {mc:.0f} KB (limit {limit:.0f})"
        (failures if mc > limit else checked).append(text)
    return failures, checked


def gpu_counter_facts(mechanism: str, before: dict[str, float], after: dict[str, float]) -> CounterFacts | None:
    """The counter ``mechanism`` (the candidate's stated mechanism) names, read from the parent's and
    the candidate's GPU metrics (Nsight Compute diagnostic + timeline totals); None: no rule names one."""
    text = mechanism.lower()
    for keys, metrics, direction in GPU_MECHANISM_COUNTERS:
        if any(k in text for k in keys):
            have = [m for m in metrics if m in before] or list(metrics[:1])
            metric = max(have, key=lambda m: before.get(m, 0.0))
            return CounterFacts(metric=metric, before=before.get(metric), after=after.get(metric),
                                direction=direction, mechanism=mechanism)
    return None


def gpu_counter_check(c: CounterFacts | None) -> tuple[bool, str]:
    """Whether the counter a GPU mechanism names moved its way by more than GPU_COUNTER_MIN_CHANGE."""
    if c is None:
        return False, ("GPU hotspot: no counter for the mechanism (needs an Nsight Compute capture of the "
                       "kernel in parent and candidate)")
    if c.before is None or c.after is None:
        side = "parent" if c.before is None else "candidate"
        return False, f"counter {c.metric} missing in the {side}'s Nsight Compute capture"
    if c.direction not in ("down", "up"):
        return False, f"counter {c.metric}: direction {c.direction!r} is not 'down' or 'up'"
    base = abs(c.before) or 1.0
    change = (c.after - c.before) / base
    moved = change <= -GPU_COUNTER_MIN_CHANGE if c.direction == "down" else change >= GPU_COUNTER_MIN_CHANGE
    text = f"counter {c.metric} {num(c.before)} -> {num(c.after)} ({change:+.0%}, mechanism says {c.direction})"
    return (True, text) if moved else (False, f"{text}: did not move the mechanism's way beyond "
                                               f"{GPU_COUNTER_MIN_CHANGE:.0%}")


def reproducible_gate(i: SharedInputs) -> GateResult:
    r = i.repro
    missing = [f for f in REPRO_FIELDS if not getattr(r, f)]
    failures = [f"not recorded: {', '.join(missing)}"] if missing else []
    return gate_result("reproducible", failures,
                   f"run {r.run_id} on {r.host}{f', timed on {r.timed_on}' if r.timed_on else ''}: build {(r.build_sha256 or '')[:12]}, source "
                   f"{(r.source_sha256 or '')[:12]}, tools {', '.join(f'{k} {v}' for k, v in sorted(r.tool_versions.items()))}, "
                   f"command {' '.join(r.command)}",
                   [i.seqs.run, i.seqs.preflight, i.seqs.build])
