"""The six trust gates of DESIGN.md §10, as one pure function of recorded facts.

``evaluate_gates(GateInputs) -> list[GateResult]``: no files, processes, clock, randomness or logging.
``GateInputs`` is plain data (frozen msgspec Structs, dicts, lists), recorded in ``GatesEvaluated.inputs``
as ``msgspec.to_builtins(inputs)``; an auditor decodes it back with ``decode_inputs`` and re-runs the
gates, which must give the identical results. Each result's ``evidence`` lists the ledger seqs of the
events the gate read (taken from ``GateInputs.seqs``).

The planted cheats each gate holds against (DESIGN.md §10):
- correctness: output that matches only because runs cached work (files left behind by a run), edits
  to the oracle, reference or harness files (refused edits);
- significance: a swapped or stale binary (the digest timed differs from the digest built), mismatched
  conditions (host, argv, inputs, tool versions);
- mechanism: a speedup of something other than the hotspot, and speedups above the hotspot's Amdahl
  ceiling (work outside the hotspot was changed or skipped).

Sampled profiles are single runs: their shares are trusted, their absolute times are not (see
"sampled profiles, scaled by the campaign" below).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import msgspec

from ledger.events import GateResult
from ledger.metrics import KNOWN_METRICS
from projections.profile_diff import OperationDelta, ProfileDiff

GATE_NAMES: tuple[str, ...] = (
    "correctness", "significance", "mechanism", "no_collateral", "attribution", "reproducible")

DEFAULT_MIN_PAIRS = 5
# The hotspot's shrink must explain at least half of the total saving in the reprofile: "most of the
# saving" (DESIGN.md §10). Below that, something other than the targeted mechanism did the work.
MIN_EXPLAINED_FRACTION = 0.5
# A measured speedup whose interval lies wholly above the hotspot's Amdahl ceiling cannot come from the
# hotspot alone. 5% slack absorbs the difference between the profiled and the timed run.
AMDAHL_SLACK = 1.05
# Operations below this share of the baseline total are not checked for regressions: their noise
# dominates and they cannot cost much.
COLLATERAL_MIN_SHARE = 0.02
# Noise band of a sampled metric: this many Poisson standard deviations of the difference of two
# sample counts, sqrt(n_before + n_after) samples, converted to the metric.
POISSON_SIGMAS = 3.0
# Noise band of an exact counter (callgrind's instructions): relative to the baseline value.
EXACT_RELATIVE_BAND = 0.01
# Peak memory (median max RSS over the timed runs) may grow by this factor plus this many KB.
PEAK_RSS_FACTOR = 1.10
PEAK_RSS_SLACK_KB = 1024.0

# The version of these rules, recorded in every GatesEvaluated: bump it with any change that can
# alter a gate's result or detail for the same inputs, so that an audit can tell "the rules
# changed" from "the evidence changed".
#   1: sampled profiles compared in absolute values, Poisson bands on sample counts.
#   2: sampled profiles compared by share, scaled by the campaign's whole-process speedup.
#   3: mechanism is concentration: the hotspot is matched by name, location and call (its family,
#      ``projections.profile_diff``), it must fall beyond its band while the rest of the program
#      does not fall alike, and it may not explain more than all of the saving; no_collateral checks
#      operations new in the candidate too. Every older version stays callable (``evaluate_gates(
#      inputs, rules=N)``), so an audit recomputes a run under the rules it was judged by.
#   4: a GPU hotspot (metric gpu_time_ns) also needs the counter its mechanism names to move the
#      right way (``CounterFacts``, Nsight Compute on parent and candidate); CPU verdicts unchanged.
#   5: the profiles must be of the timed programs (``ProfileConsistency``): each profiled run,
#      as pw's launcher reported it, and each profile's total must stand to the same target's
#      timed median as the reference's do to its own, within a band from the timed runs' spread;
#      a sampled time profile without that evidence (no launcher report, no timed runs) cannot
#      show a mechanism. "Explains more than 100%" is capped at 100% + EXPLAINED_EXCESS_MAX
#      whatever the band (a wide band at a small speedup let "explains 180%" pass).
#   6: a sampled hotspot whose shrink lies within its band, in a campaign that decided FASTER, says
#      how many samples per profile would resolve the campaign's saving (``pw.rules.resolution``) and, when the reprofile's budget
#      stopped it short (``ResolutionFacts``), that it did; results unchanged, details richer.
#   7: the profile-consistency check compares a profile's total per profiled run: a reprofile grown
#      by ``pw.rules.resolution`` sums several runs, and under rules 5-6 a reference summed from two
#      runs made a one-run candidate profile read -50% ("not of the program that was timed").
#   8: a campaign timed on a busy machine decides nothing (``pw.rules.contention``): faster,
#      slower and no effect become inconclusive when either arm's timed runs waited for a CPU (run
#      queue, or the hypervisor's steal) a median of more than 10% of their wall time, or other
#      work used more than 25% of the other CPUs meanwhile. A second timed workload's heavy runs
#      can fall on one arm for a stretch of pairs, which no interval sees; a no-op was verified so.
#      Gates unchanged.
#   9: a profiler inside the sandbox (py-spy: no launcher report, the program is its child) misses a
#      fixed start-up (a version manager's shim, the interpreter's own start) before its first sample
#      and covers the rest about 1:1. Its profiles are read against the timed runs with that offset
#      (``pw.rules.startup``: the reference's timed median less its profile's total per run, bounded by
#      STARTUP_OFFSET_MAX_S and fractions of the two medians): the consistency check
#      compares the candidate's total with (its timed median - offset) x the reference's coverage,
#      and the mechanism and no-collateral gates use whole-run shares, the uncovered start-up counted
#      as time outside the hotspot, as is the import machinery py-spy catches in some runs and not
#      in others (``pw.rules.startup``); the coverages' own error widens the ">100%" limit;
#      no-collateral's band is the pooled two-proportion band (an operation absent from one profile
#      still has a variance). Rules 5-8 read a fixed 0.1 s offset as
#      an inconsistent profile (20% of a 0.5 s baseline, 60% of a 0.16 s candidate) and one whose
#      hotspot "explains 148% of the saving" (pyloop's dict rewrite at 2.56x). Launched profilers
#      (perf) have no offset (the launcher reports the program alone): their consistency check and
#      mechanism are rules 7's; the pooled band applies to every sampled profile.
#  10: significance also needs the candidate's summed time over the campaign's pairs below the
#      baseline's (``_total_time_check``): the geometric mean of per-pair ratios shrugs off a rare
#      slow run, and a rewrite 38x slower on one input in 30 was verified 1.74x while it took 1.38x
#      the baseline's time in the campaign itself (tests/data/redteam-s6/series-rare-slow.patch).
#      And a chained candidate must be shown faster than the baseline along its chain of parents
#      (``pw.rules.judge._chain_doubt``, a ``chain:`` ceiling at proposed): a step over a parent
#      slowed on purpose verified a copy of the baseline 2.23x (series-chain-*.patch).
#  11: the profile-consistency check's reference spread is at least the reference arm's spread in
#      the candidate's campaign (``judge._profile_consistency``): five runs at `pw start` can come
#      out quiet by luck (3.6% where the campaign's baseline arm showed 10.0%), and the honest
#      interchange stayed `proposed` on CI in 2 of 5 clean-clone runs ("+54% against ±46%").
#  12: the band of "explains more than 100% of the saving" also carries the campaign's speedup
#      uncertainty (``_with_speedup_spread``: how far the fraction falls at the interval's end, in
#      quadrature with the profiles' band; still capped at EXPLAINED_EXCESS_MAX): on a noisy host
#      an honest 2x interchange was timed at 1.73x (95% CI 1.25-2.39), and its hotspot, 85% -> 63%
#      of the profile, "explained 116%" against a 13% band; at 2.39x it explains 101%. It stayed
#      proposed, and 7 CI tests failed on it (2026-12-01).
#  13: a candidate that builds to the same running image as its reference (``pw.workload.image``:
#      the loaded code and data of its executables, debug info and compiled sources aside) is
#      rejected as no effect whatever its timing (``judge._same_image``): a comment-only step was
#      verified 1.13x on a noisy CI host, and a no-op patch 1.058x on a busy VM. Gates unchanged.
#  14: the concentration check reads the rest's cost after with the candidate's profiled run's
#      excess over its timed runs added back (``_profiled_longer``; launched sampled profiles): one
#      profiled run on a noisy host took ~58% longer than its timed runs, in the hotspot, and an
#      honest 1.91x interchange read as "a uniform speedup" (CI, 2026-12-01, 7 tests).
#  15: a chained candidate without timing is judged against its parent, not the baseline
#      (``judge.judge_events``): `pw evaluate` no longer times a candidate that builds to its
#      reference's running image (rules 13 reject it whatever a campaign says), and under rules 14
#      an untimed step with its parent's image read as "no timing analysis" (inconclusive) against
#      the baseline's image. Gates unchanged.
#  16: resolution rule share-band/3 profiles a noisy campaign's sides several runs each, and the
#      gates read those runs as runs: the profile-consistency check takes the geometric mean of the
#      launcher's reports on every run a merged profile sums (``judge._profiled_walls``), as it
#      takes the profile's total per run (rules 7; rules 5-15 took the latest run's report for all
#      of them), and no-collateral's band is at least the between-runs band of an operation's share
#      (``_between_runs_band``): one of five profiled runs of the honest interchange spent 13% in
#      put_hex where the others spent 3%, and the summed profile read "put_hex regressed".
#  17: a region-of-interest metric: the time outside the region may not grow (``OutsideRoi``, in
#      no-collateral): the seconds a candidate saves inside the timed region must be saved by the
#      whole process. Session 8's red team had particles-aos-c verified 3.0-3.2x by moving work to
#      before the timer, and by defining clock_gettime in the editable file so that the harness's
#      timer ran 2.2x slow; both stayed under the Amdahl ceiling, while the whole process was
#      1.25-1.28x faster and the time outside the region grew by about a quarter of a run.
#  18: a chained candidate is verified only on a chain of verified parents (``judge._chain_doubt``,
#      the ``chain:`` ceiling at proposed): its step is timed against its parent, so whatever the
#      parent's gates held back (its work moved before the timer, under rules 17) sits in both arms
#      and passes the step's. Session 9's red team had an honest step over a `proposed` parent on
#      particles-aos-c (work moved before the region) verified, cumulative 4.32x. Gates unchanged.
GATE_RULES = 18
RULE_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)
# Rules 17: the time outside the region of interest may grow by at most this share of the
# baseline's whole run before the growth counts (an honest rewrite of the region can move a little
# cost: allocation, cache warmth), and only when the growth's 95% interval lies above it.
OUTSIDE_ROI_SLACK = 0.02
# Rules 3: the rest of the program may fall by at most this power of the hotspot's own factor
# (half of it in log terms) before the speedup counts as uniform, a change of conditions (build
# flags, machine state, a slowed baseline) rather than a mechanism. A real hotspot rewrite leaves
# the rest unchanged (factor 1, within noise).
CONCENTRATION_POWER = 0.5
# Rules 5: a profiled run is one run, a timed median many; the log of (profiled / timed median),
# candidate against reference, may differ by this many standard deviations of one timed run of
# each arm (their logs' spreads, combined), and never by less than CONSISTENCY_FLOOR: the
# profiler's own overhead is not exactly proportional to the run (perf's DWARF unwinding costs per
# sample, page faults and start-up do not scale), and a five-run spread can come out small by luck.
CONSISTENCY_SIGMAS = 3.0
CONSISTENCY_FLOOR = 0.10
# Rules 5: "explains more than all of the saving" fails beyond 100% plus the hotspot's band, and
# beyond 100% plus this, however wide that band.
EXPLAINED_EXCESS_MAX = 0.5




class UnknownRules(ValueError):
    """Gate rules of a version this ProfileWeaver does not know (a run from a newer one)."""


REPRO_FIELDS: tuple[str, ...] = ("command", "build_sha256", "host", "tool_versions", "source_sha256", "run_id")


class _Plain(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class OracleFacts(_Plain):
    """The candidate's oracle check (``OracleChecked``); ``passed`` covers the holdout inputs too."""

    passed: bool
    detail: str
    method: str
    rtol: float
    atol: float


class Conditions(_Plain):
    """What one arm of the timing campaign ran under; the two arms must match exactly."""

    host: str | None = None
    argv: list[str] = []
    inputs_sha256: str | None = None
    tool_versions: dict[str, str] = {}
    other: dict[str, str] = {}  # e.g. governor, warm-up runs: compared as well


class Binaries(_Plain):
    """Digests of the binaries: the one each arm should run vs the one actually timed."""

    baseline_expected: str | None = None
    baseline_timed: str | None = None
    candidate_built: str | None = None
    candidate_timed: str | None = None


class HotspotFacts(_Plain):
    """The targeted hotspot (``HotspotSelected``): its share of the baseline and its Amdahl ceiling."""

    operation: str
    metric: str
    share: float
    amdahl_ceiling: float | None  # None: share 1, no ceiling


class AdapterFacts(_Plain):
    """The profiler behind the reprofile, as probed on this host."""

    name: str
    can_reprofile: bool
    usable: bool
    measured: list[str]  # metric ids it measured here
    simulated: list[str] = []  # of those, the ones from a model of the machine, not its hardware


class CounterFacts(_Plain):
    """The hardware counter a GPU mechanism names, on the hotspot kernel, parent vs candidate
    (Nsight Compute, one filtered launch each); ``direction`` is the way the mechanism says it moves."""

    metric: str
    before: float | None
    after: float | None
    direction: str  # "down" | "up"
    mechanism: str = ""


class DiagnosisFacts(_Plain):
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


class ProfileConsistency(_Plain):
    """Whether the profiled runs were the timed programs (gate rules 5). A program that can tell
    a profiled run from a timed one can shape its profile (keep a saving out of it, or put cost
    where the gate wants a shrink); whatever it does, the profiled run must take as long, relative
    to its own timed runs, as the reference's profiled run did to the reference's.

    ``*_launched``: the profiled program ran under pw's launcher, as a timed run does (its report,
    ``*_profiled_wall_s``, is the program's own wall time; None: the report never came). Timed
    runs: the median and the standard deviation of the logs of the whole-process seconds."""

    baseline_launched: bool = False
    candidate_launched: bool = False
    baseline_profiled_wall_s: float | None = None
    candidate_profiled_wall_s: float | None = None
    baseline_timed_median_s: float | None = None
    baseline_timed_log_sd: float | None = None
    baseline_timed_runs: int = 0
    candidate_timed_median_s: float | None = None
    candidate_timed_log_sd: float | None = None
    candidate_timed_runs: int = 0
    # How many profiled runs each profile sums (``ProfileNormalized.parts``; 1 for a single capture).
    baseline_profile_runs: int = 1
    candidate_profile_runs: int = 1


class OutsideRoi(_Plain):
    """Rules 17, a region-of-interest metric: per timed pair, the whole-process seconds outside the
    region (the launcher's wall time less the region's), candidate less baseline; its mean and
    95% t-interval over the campaign's pairs, and the baseline's median whole run."""

    pairs: int
    growth_mean_s: float
    growth_low_s: float
    growth_high_s: float
    baseline_outside_median_s: float
    candidate_outside_median_s: float
    baseline_wall_median_s: float


class ResolutionFacts(_Plain):
    """How the reprofile was sized (``ReprofileResolved``): its stop (resolved, budget, futile, not-needed),
    the profiled runs merged on each side, the budget, and the samples per profile it asked for."""

    stop: str
    runs_before: int
    runs_after: int
    max_runs: int
    max_time_s: float
    required_samples: int | None = None


class Claim(_Plain):
    """A causal claim made in the report, by the metric it cites; ``simulated`` = labelled as simulated."""

    metric: str
    text: str = ""
    simulated: bool = False


class Repro(_Plain):
    command: list[str] = []
    build_sha256: str | None = None
    host: str | None = None
    tool_versions: dict[str, str] = {}
    source_sha256: str | None = None
    run_id: str | None = None


class Seqs(_Plain):
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


class GateInputs(_Plain):
    candidate: str
    exploratory: bool = False
    seqs: Seqs = Seqs()
    # correctness
    oracle: OracleFacts | None = None
    refused_edits: list[str] = []  # outside the editable set, or protected oracle/reference/harness files
    run_side_effects: list[str] = []  # files runs created, modified or deleted in the workspace
    # significance
    analysis: dict[str, Any] | None = None  # msgspec.to_builtins(pw.stats.PairedAnalysis)
    min_pairs: int = DEFAULT_MIN_PAIRS
    baseline_conditions: Conditions = Conditions()
    candidate_conditions: Conditions = Conditions()
    binaries: Binaries = Binaries()
    # mechanism, attribution
    hotspot: HotspotFacts | None = None
    profile_diff: ProfileDiff | None = None  # None: no reprofile yet
    adapter: AdapterFacts | None = None
    claims: list[Claim] = []  # causal claims besides the mechanism metric itself
    counter: CounterFacts | None = None  # GPU hotspots: the counter the mechanism names
    diagnosis: DiagnosisFacts | None = None  # the diagnosis adapter's before/after (no gate reads it)
    profile_consistency: ProfileConsistency | None = None  # rules 5: the profiles are of the timed programs
    resolution: ResolutionFacts | None = None  # sampled reprofiles: how many runs were merged, and why
    # Rules 16: each checked operation's share of each profiled run that a merged profile sums,
    # [reference runs, candidate runs] (only where both profiles sum two or more runs).
    run_shares: dict[str, list[list[float]]] = {}
    # no collateral
    wall_analysis: dict[str, Any] | None = None  # whole-process time, when the timed metric is an ROI
    outside_roi: OutsideRoi | None = None  # rules 17: the time outside the region of interest, per pair
    peak_rss_kb_baseline: list[float] = []
    peak_rss_kb_candidate: list[float] = []
    # reproducible
    repro: Repro = Repro()


def decode_inputs(data: dict[str, Any]) -> GateInputs:
    """The recorded ``GatesEvaluated.inputs`` back as ``GateInputs`` (raises msgspec.ValidationError)."""
    return msgspec.convert(data, GateInputs)


def evaluate_gates(inputs: GateInputs, rules: int = GATE_RULES) -> list[GateResult]:
    """The six gates, in the order of ``GATE_NAMES``, under gate rules version ``rules``
    (``RULE_VERSIONS``; raises ValueError for another)."""
    if rules not in RULE_VERSIONS:
        raise UnknownRules(f"gate rules v{rules} are unknown to this ProfileWeaver "
                           f"(it knows {', '.join(f'v{v}' for v in RULE_VERSIONS)})")
    return [
        _correctness(inputs),
        _significance(inputs, rules),
        _mechanism(inputs, rules),
        _no_collateral(inputs, rules),
        _attribution(inputs),
        _reproducible(inputs),
    ]


# --- helpers ------------------------------------------------------------------------------------


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _result(name: str, failures: list[str], passed_detail: str, evidence: list[int | None]) -> GateResult:
    detail = "; ".join(failures) if failures else passed_detail
    seqs = sorted({s for s in evidence if s is not None})
    return GateResult(name=name, passed=not failures, detail=" ".join(detail.split()), evidence=seqs)


def _names(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _interval(analysis: dict[str, Any]) -> tuple[float | None, float | None]:
    iv = analysis.get("interval") or {}
    return iv.get("low"), iv.get("high")


def _speedup_text(analysis: dict[str, Any]) -> str:
    low, high = _interval(analysis)
    conf = (analysis.get("interval") or {}).get("confidence", 0.95)
    return (f"speedup {_g(analysis.get('speedup'))}x ({conf:.0%} CI {_g(low)}-{_g(high)}), "
            f"{analysis.get('verdict')}, {analysis.get('n_pairs')} pairs")


def _is_simulated(metric: str, adapter: AdapterFacts | None) -> bool:
    spec = KNOWN_METRICS.get(metric)
    return bool(spec and spec.simulated) or (adapter is not None and metric in adapter.simulated)


# --- the gates ----------------------------------------------------------------------------------


def _correctness(i: GateInputs) -> GateResult:
    failures = []
    o = i.oracle
    tolerance = "" if o is None else f"{o.method}, rtol={o.rtol:g}, atol={o.atol:g}"
    if o is None:
        failures.append("oracle not run on the candidate")
    elif not o.passed:
        failures.append(f"oracle failed ({tolerance}): {o.detail}")
    if i.refused_edits:
        failures.append(f"refused edits (outside the editable set or protected): {_names(i.refused_edits)}")
    if i.run_side_effects:
        failures.append(
            f"runs changed their tree (possible caching across runs): {_names(i.run_side_effects)}")
    return _result("correctness", failures, f"oracle passed ({tolerance}): {o.detail if o else ''}",
                   [i.seqs.oracle, i.seqs.diff])


def _condition_mismatches(a: Conditions, b: Conditions) -> list[str]:
    out = []
    if a.host is None or b.host is None:
        out.append("host not recorded")
    for field in ("host", "argv", "inputs_sha256", "tool_versions", "other"):
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb:
            out.append(f"{field} differs ({va!r} vs {vb!r})")
    return out


def _binary_mismatches(b: Binaries) -> list[str]:
    out = []
    for arm, want, got in (("baseline", b.baseline_expected, b.baseline_timed),
                           ("candidate", b.candidate_built, b.candidate_timed)):
        if want is None or got is None:
            out.append(f"{arm} binary digest not recorded")
        elif want != got:
            out.append(f"{arm} binary timed ({got[:12]}) is not the one built ({want[:12]}): stale or swapped")
    return out


def _total_time_check(a: dict[str, Any]) -> str | None:
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
            f"({_g(sum(cand))} against {_g(sum(base))} in total): the per-pair ratios' mean hides its "
            f"slow runs (pair {worst + 1}: {_g(cand[worst])} against {_g(base[worst])})")


def _significance(i: GateInputs, rules: int = GATE_RULES) -> GateResult:
    failures = []
    a = i.analysis
    summary = "no timing analysis"
    if a is None:
        failures.append("no timing analysis")
    else:
        summary = _speedup_text(a)
        n = int(a.get("n_pairs") or 0)
        low, _ = _interval(a)
        min_effect = float((a.get("params") or {}).get("min_effect", 0.0))
        problems = []
        if n < i.min_pairs:
            problems.append(f"{n} pairs < {i.min_pairs} required")
        if a.get("verdict") != "FASTER":
            problems.append("not FASTER")
        elif low is None or not low > 1.0 + min_effect:
            problems.append(f"interval low {_g(low)} not above 1+min_effect {1 + min_effect:g}")
        elif rules >= 10 and (slower_in_total := _total_time_check(a)):
            problems.append(slower_in_total)
        if problems:
            failures.append(f"{summary}: {', '.join(problems)}")
    cond = _condition_mismatches(i.baseline_conditions, i.candidate_conditions)
    if cond:
        failures.append("conditions not matched: " + ", ".join(cond))
    failures.extend(_binary_mismatches(i.binaries))
    return _result("significance", failures,
                   f"{summary} >= {i.min_pairs}; conditions matched; timed binaries are the ones built",
                   [i.seqs.timing, i.seqs.build])


def _mechanism(i: GateInputs, rules: int) -> GateResult:
    failures = []
    h, d = i.hotspot, i.profile_diff
    passed_detail = ""
    if h is None:
        failures.append("no hotspot selected")
    if i.adapter is None:
        failures.append("no adapter facts: cannot tell whether the reprofile is possible")
    elif not i.adapter.can_reprofile:
        failures.append(f"adapter {i.adapter.name} cannot reprofile, so the mechanism cannot be shown")
    if d is None:
        failures.append("no reprofile yet")
    elif h is not None:
        hd = d.hotspot
        if hd is None or hd.operation != h.operation:
            failures.append(f"the reprofile diff does not track the hotspot {h.operation}")
        elif d.metric != h.metric:
            failures.append(f"the reprofile diff is in {d.metric}, the hotspot was chosen by {h.metric}")
        elif rules >= 3:
            found, passed_detail = _concentration(i, d, hd, rules)
            failures.extend(found)
            if rules >= 5:
                ok, detail = consistency_check(i.profile_consistency, d, rules)
                if not ok:
                    # What the profiles would show, and why they cannot be taken as the timed program's.
                    failures.append(f"{passed_detail}; but {detail}" if passed_detail else detail)
                    passed_detail = ""
                elif passed_detail and detail:
                    passed_detail += f"; {detail}"
        else:
            scaled = _scaled_hotspot(i, d, hd) if rules >= 2 else None
            if scaled is not None:
                shrink, value, band, explained, how = scaled
            else:
                shrink = (f"hotspot {h.operation} {d.metric} {_g(hd.inclusive_before)} -> "
                          f"{_g(hd.inclusive_after)} (shrink {_g(hd.inclusive_shrink)}, total "
                          f"{_g(d.total_before)} -> {_g(d.total_after)})")
                hot_op = next((o for o in d.operations if o.id == h.operation), None)
                band, how = _op_band(hot_op) if hot_op is not None else (0.0, "")
                value, explained = hd.inclusive_shrink, hd.explained_fraction
            if not value > 0:
                failures.append(f"{shrink}: the hotspot did not shrink")
            elif value <= band:
                # A shrink inside the noise cannot carry a causal claim, however large a share of a
                # small total saving it happens to be.
                failures.append(f"{shrink}: the shrink is within the hotspot's noise band {_g(band)} ({how})")
            elif explained is None:
                failures.append(f"{shrink}: the total did not shrink")
            elif explained < MIN_EXPLAINED_FRACTION:
                failures.append(f"{shrink}: explains only {explained:.0%} of the saving "
                                f"(< {MIN_EXPLAINED_FRACTION:.0%})")
            else:
                passed_detail = f"{shrink}: explains {explained:.0%} of the saving"
    if rules >= 4 and h is not None and h.metric == "gpu_time_ns":
        ok, detail = gpu_counter_check(i.counter)
        if not ok:
            failures.append(detail)
        elif passed_detail:
            passed_detail += f"; {detail}"
    if h is not None and h.amdahl_ceiling is not None and i.analysis is not None:
        low, _ = _interval(i.analysis)
        limit = h.amdahl_ceiling * AMDAHL_SLACK
        if low is not None and low > limit:
            failures.append(
                f"speedup interval low {_g(low)} exceeds the Amdahl ceiling {_g(h.amdahl_ceiling)} "
                f"(x{AMDAHL_SLACK:g} = {_g(limit)}) of a {h.share:.0%} hotspot: "
                "work outside the hotspot changed or was skipped")
        elif passed_detail:
            passed_detail += f"; speedup interval low {_g(low)} within the Amdahl ceiling {_g(h.amdahl_ceiling)}"
    return _result("mechanism", failures, passed_detail,
                   [i.seqs.hotspot, i.seqs.baseline_profile, i.seqs.candidate_profile, i.seqs.timing,
                    i.seqs.resolution if rules >= 6 else None])


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
    text = f"counter {c.metric} {_g(c.before)} -> {_g(c.after)} ({change:+.0%}, mechanism says {c.direction})"
    return (True, text) if moved else (False, f"{text}: did not move the mechanism's way beyond "
                                               f"{GPU_COUNTER_MIN_CHANGE:.0%}")


# --- sampled profiles, scaled by the campaign ------------------------------------------------------
#
# A sampled profile is one run. Its composition (each operation's share of the samples) is
# estimated well, but its absolute times carry that run's luck: on a shared machine one slow
# baseline profile made an untouched hotspot look 26% smaller in the candidate's profile, and a
# rewrite elsewhere was verified as a hotspot win. So for sampled profiles the gates take each
# operation's share from its profile and the magnitude from the paired timing campaign (many
# interleaved runs): in units of the candidate's run time, an operation costs share_before * S
# in the baseline and share_after in the candidate, where S is the whole-process speedup. The
# noise band is the binomial error of the two shares. Exact counters (callgrind) keep their
# absolute values: they do not vary between runs.


def _sampled_totals(d: ProfileDiff) -> tuple[float, float] | None:
    """Total samples of the two profiles, when every operation's sample count is known."""
    if not d.operations or any(o.samples_before is None or o.samples_after is None for o in d.operations):
        return None
    nb = sum(o.samples_before for o in d.operations)
    na = sum(o.samples_after for o in d.operations)
    return (nb, na) if nb > 0 and na > 0 and d.total_before > 0 and d.total_after > 0 else None


def _campaign_scale(i: GateInputs) -> float | None:
    """Baseline time over candidate time for the whole process (the profiles cover all of it)."""
    analysis = i.wall_analysis or i.analysis
    speedup = analysis.get("speedup") if analysis else None
    return speedup if isinstance(speedup, (int, float)) and speedup > 0 else None


def _scaled_pair(share_before: float, share_after: float, scale: float, totals: tuple[float, float]) -> tuple[float, float, float]:
    """(cost before, cost after, noise band) in units of the candidate's run time."""
    nb, na = totals
    var = scale**2 * share_before * (1 - share_before) / nb + share_after * (1 - share_after) / na
    return share_before * scale, share_after, POISSON_SIGMAS * math.sqrt(max(var, 0.0))


def _scaled_hotspot(i: GateInputs, d: ProfileDiff, hd) -> tuple[str, float, float, float | None, str] | None:
    """(detail, shrink, band, explained fraction, how the band was derived), or None when the
    profiles are not sampled or there is no campaign to scale by."""
    totals, scale = _sampled_totals(d), _campaign_scale(i)
    if totals is None or scale is None:
        return None
    sb, sa = hd.inclusive_before / d.total_before, hd.inclusive_after / d.total_after
    before, after, band = _scaled_pair(sb, sa, scale, totals)
    shrink = before - after
    explained = shrink / (scale - 1) if scale > 1 else None
    detail = (f"hotspot {hd.operation} {sb:.1%} -> {sa:.1%} of the {d.metric} profile; with the campaign's "
              f"{_g(scale)}x that is {_g(before)} -> {_g(after)} of the candidate's run time "
              f"(shrink {_g(shrink)})")
    how = f"{POISSON_SIGMAS:g} sigma of the shares over {_g(totals[0])} and {_g(totals[1])} samples"
    return detail, shrink, band, explained, how


def _concentration(i: GateInputs, d: ProfileDiff, hd, rules: int = 4) -> tuple[list[str], str]:
    """Rules 3 (module comment above ``GATE_RULES``): (failures, passed detail) of the mechanism."""
    family = ", ".join(f"{m.id} ({m.why})" for m in hd.family) or "none found"
    after = hd.family_after
    cover_band = 0.0  # rules 9: the coverages' error on the hotspot's whole-run cost
    if after is None:  # a diff recorded before families: the hotspot's own id is all there is
        after, family = hd.inclusive_after, "by id only (diff recorded without families)"
    totals, scale = _sampled_totals(d), _campaign_scale(i)
    st = None
    if rules >= 9 and totals is not None and scale is not None:
        from pw.rules.startup import startup
        st = startup(i.profile_consistency, d, rules)
    if st is not None:
        from pw.rules.startup import covered_pair
        # Rules 9: whole-run shares; the start-up (missed, or in the import machinery) is outside the hotspot.
        cov_b, cov_c = st.coverage_before, st.coverage_after
        runs_b = max(1, i.profile_consistency.baseline_profile_runs)
        runs_c = max(1, i.profile_consistency.candidate_profile_runs)
        sb, sa = min(hd.inclusive_before / runs_b / st.work_before, 1.0), min(after / runs_c / st.work_after, 1.0)
        hot_b, hot_a, band = covered_pair(sb, sa, scale, st.samples, (cov_b, cov_c))
        rest_b, rest_a, rest_band = scale - hot_b, 1.0 - hot_a, band
        cover_band = POISSON_SIGMAS * math.hypot(scale * sb * st.coverage_sd[0], sa * st.coverage_sd[1])
        how = (f"{POISSON_SIGMAS:g} sigma of the shares over {_g(st.samples[0])} and {_g(st.samples[1])} samples "
               "of work")
        unit = "of the candidate's run time"
        text = (f"hotspot {hd.operation} {sb:.1%} -> {sa:.1%} of the {d.metric} profile's work (matched in the "
                f"candidate: {family}), {sb * cov_b:.1%} -> {sa * cov_c:.1%} of the whole run (the profiles' work "
                f"covers {cov_b:.0%} and {cov_c:.0%} of the timed runs, {_g(st.offset)} s of start-up outside it); "
                f"with the campaign's {_g(scale)}x that is {_g(hot_b)} -> {_g(hot_a)} {unit}")
    elif totals is not None and scale is not None:
        sb, sa = hd.inclusive_before / d.total_before, min(after / d.total_after, 1.0)
        hot_b, hot_a, band = _scaled_pair(sb, sa, scale, totals)
        rest_b, rest_a, rest_band = _scaled_pair(1.0 - sb, 1.0 - sa, scale, totals)
        unit = "of the candidate's run time"
        text = (f"hotspot {hd.operation} {sb:.1%} -> {sa:.1%} of the {d.metric} profile (matched in the candidate: "
                f"{family}); with the campaign's {_g(scale)}x that is {_g(hot_b)} -> {_g(hot_a)} {unit}")
        how = f"{POISSON_SIGMAS:g} sigma of the shares over {_g(totals[0])} and {_g(totals[1])} samples"
    else:
        hot_b, hot_a = hd.inclusive_before, after
        hot_op = next((o for o in d.operations if o.id == hd.operation), None)
        band, how = _op_band(hot_op) if hot_op is not None else (0.0, "")
        rest_b, rest_a = d.total_before - hot_b, d.total_after - hot_a
        rest_band = EXACT_RELATIVE_BAND * max(rest_b, 0.0)
        rest_samples = _rest_samples(d, hd)
        if rest_samples is not None and sum(rest_samples) > 0:
            per = (max(rest_b, 0.0) + max(rest_a, 0.0)) / sum(rest_samples)
            rest_band = POISSON_SIGMAS * math.sqrt(sum(rest_samples)) * per
        unit = d.metric
        text = (f"hotspot {hd.operation} {d.metric} {_g(hot_b)} -> {_g(hot_a)} (matched in the candidate: "
                f"{family}; total {_g(d.total_before)} -> {_g(d.total_after)})")
    shrink, saving = hot_b - hot_a, (hot_b + rest_b) - (hot_a + rest_a)
    text += f" (shrink {_g(shrink)})"
    if not shrink > 0:
        return [f"{text}: the hotspot did not shrink"], ""
    if shrink <= band:
        unresolved = _unresolved(i, sb, sa, scale, totals, band) if rules >= 6 and totals is not None and scale else ""
        return [f"{text}: the shrink is within the hotspot's noise band {_g(band)} ({how}){unresolved}"], ""
    if not saving > 0:
        return [f"{text}: the total did not shrink"], ""
    explained = shrink / saving
    if explained < MIN_EXPLAINED_FRACTION:
        return [f"{text}: explains only {explained:.0%} of the saving (< {MIN_EXPLAINED_FRACTION:.0%})"], ""
    wide = math.hypot(band, cover_band)  # = band where there is no coverage (math.hypot(x, 0) == |x|)
    spread, timing = (wide / saving, "")
    if rules >= 12 and totals is not None and scale is not None:
        spread, timing = _with_speedup_spread(i, hot_b, hot_a, scale, explained, spread)
    excess = spread if rules < 5 else min(spread, EXPLAINED_EXCESS_MAX)
    if explained > 1.0 + excess:
        # More than all of the saving: the rest of the program got slower by what the hotspot lost,
        # i.e. its work moved somewhere the profile does not match to it.
        capped = " (capped)" if rules >= 5 and excess < spread else ""
        return [f"{text}: explains {explained:.0%} of the saving, more than 100% plus its band "
                f"({excess:.0%}{capped}{timing}): the hotspot's work moved elsewhere"], ""
    hot_factor = hot_b / hot_a if hot_a > 0 else math.inf
    longer = _profiled_longer(i, d) if rules >= 14 and st is None and totals is not None and scale else 0.0
    if longer > 0.0:
        # Rules 14: the candidate's profiled run took longer than its timed runs say it should; time
        # added to the hotspot's part made the rest's share, and so its cost, look smaller.
        rest_a *= 1.0 + longer
    rest_shrink = rest_b - rest_a
    rest_factor = rest_b / rest_a if rest_a > 0 and rest_b > 0 else 1.0
    if rest_shrink > rest_band and math.log(rest_factor) >= CONCENTRATION_POWER * math.log(hot_factor):
        read = f", read with the profiled run's {longer:.0%} over its timed runs" if longer > 0.0 else ""
        return [f"{text}: the rest of the program fell too, {_g(rest_b)} -> {_g(rest_a)} {unit}{read} (x{_g(rest_factor)} "
                f"against the hotspot's x{_g(hot_factor)}; beyond its band {_g(rest_band)}): a uniform speedup is a "
                "change of conditions, not a mechanism"], ""
    said = f" (within 100% plus {excess:.0%}{timing})" if timing and explained > 1.0 else ""
    return [], (f"{text}: explains {explained:.0%} of the saving{said}; the rest of the program "
                f"{_g(rest_b)} -> {_g(rest_a)} {unit} (x{_g(rest_factor)} against the hotspot's x{_g(hot_factor)})")


def _profiled_longer(i: GateInputs, d: ProfileDiff) -> float:
    """Rules 14: how much longer the candidate's profile (per run) is than its timed median says it
    should be, by the reference's own profile-to-timed ratio (the consistency check's yardstick), and
    as much longer by the launcher's wall-clock report of that run; the smaller of the two, 0
    without that evidence or when either is not longer. Bounded by the consistency check, which fails
    the gate beyond its band. (A first cut read the profile alone, and CI verified the cheat of
    tests/test_cheats.py: the baseline's profile, 72% "longer" than the candidate's normal run.)

    CI, 2026-12-01: an honest 1.91x interchange (95% CI 1.59-2.31) had a profiled run about 58%
    longer than expected on a host whose timed runs spread widely; the time went to the hotspot's
    part, its share read 79.5% where ~67% was due, the rest's cost read x1.58 smaller, and the
    concentration check called it a uniform speedup. Scaling the rest's cost back by the excess makes
    it x1.0. A uniform speedup (new build flags, a slowed baseline) still fails: its profiled runs
    are as long as its timed ones say, so nothing is scaled."""
    c = i.profile_consistency
    if c is None or not c.baseline_timed_median_s or not c.candidate_timed_median_s:
        return 0.0
    if not (c.baseline_launched and c.candidate_launched and c.baseline_profiled_wall_s and c.candidate_profiled_wall_s):
        return 0.0  # only the launcher's report of the profiled run says the run itself was longer
    runs_b, runs_c = max(1, c.baseline_profile_runs), max(1, c.candidate_profile_runs)
    ratio = c.candidate_timed_median_s / c.baseline_timed_median_s
    by_profile = (d.total_after / runs_c) / (ratio * d.total_before / runs_b) - 1.0
    by_wall = c.candidate_profiled_wall_s / (ratio * c.baseline_profiled_wall_s) - 1.0
    # Both must say so: a profile longer than the run it came from (the reference's profile passed
    # off as the candidate's, with the real run's report) is not a slowed run.
    return max(min(by_profile, by_wall), 0.0) if d.total_before > 0 and d.total_after > 0 else 0.0


def _with_speedup_spread(i: GateInputs, hot_b: float, hot_a: float, scale: float, explained: float,
                         spread: float) -> tuple[float, str]:
    """Rules 12: the ">100%" check's relative band, the profiles' ``spread`` widened by what the
    campaign's speedup interval allows (in quadrature: two independent errors), and how it was.

    In units of the candidate's run time the hotspot's cost before is its share times the speedup S
    and the saving is S - 1, so the fraction explained, (share x S - after) / (S - 1), falls as S
    rises whenever the hotspot's share fell. Its spread from the speedup is how far it falls at the
    interval's end that lowers it most. At a 1.73x point estimate (95% CI 1.25-2.39) an honest 2x
    interchange "explained 116%", beyond 100% plus its profiles' 13%, and was proposed; at 2.39x it
    explains 101%. The cap (EXPLAINED_EXCESS_MAX) still bounds the widened band: a calibrated
    misattribution at 180% stays beyond it however wide its interval."""
    low, high = _interval(i.wall_analysis or i.analysis or {})
    per_unit = hot_b / scale  # the hotspot's cost before, per unit of speedup
    lowest, at = explained, None
    for end in (low, high):
        if isinstance(end, (int, float)) and math.isfinite(end) and end > 1.0:
            e = (per_unit * end - hot_a) / (end - 1.0)
            if e < lowest:
                lowest, at = e, end
    if at is None:
        return spread, ""
    widened = math.hypot(spread, explained - lowest)
    return widened, (f"; with the speedup's interval, {spread:.0%} from the profiles and {explained - lowest:.0%} "
                     f"from the timing ({lowest:.0%} at {_g(at)}x)")


# --- the profiles are of the timed programs (rules 5) ----------------------------------------------

# Metrics of a time-based sampler (perf cpu-clock, py-spy): samples are time as much as seconds are.
_TIME_METRICS = ("cpu_time_s", "wall_time_s", "samples")


def consistency_band(c: ProfileConsistency) -> float | None:
    """The band, in log terms, within which candidate and reference must agree; None without the
    timed spreads."""
    if c.baseline_timed_log_sd is None or c.candidate_timed_log_sd is None:
        return None
    spread = math.hypot(c.baseline_timed_log_sd, c.candidate_timed_log_sd)
    return max(CONSISTENCY_FLOOR, CONSISTENCY_SIGMAS * spread)


def consistency_check(c: ProfileConsistency | None, d: ProfileDiff, rules: int = GATE_RULES) -> tuple[bool, str]:
    """(passed, detail): were the reprofile and the reference profile of the programs that were
    timed? Exact counters (callgrind's instructions: a simulation, not a run's time) are not
    checked, and say so; a sampled time profile needs the evidence, and fails without it. Under
    rules 7 a profile that sums several profiled runs is compared by its total per run; under rules
    9 a profiler inside the sandbox is read with its start-up offset (``pw.rules.startup``)."""
    if d.metric not in _TIME_METRICS or _sampled_totals(d) is None:
        return True, f"profile consistency not checked: {d.metric} is not a sampled time"
    if c is None:
        return False, ("no evidence that the profiled runs are the timed programs (no launcher report or "
                       "timed runs recorded with the profiles): the profile may be of a run that behaved "
                       "differently")
    # A profiler inside the sandbox (py-spy follows one process) is the program's parent and no
    # launcher reports on the program alone: only the profile's total is compared. A launched
    # capture whose report never came is a failure, not a pass.
    missing = [f"the launcher's report on the {who}'s profiled run never came"
               for who, launched, wall in (("reference", c.baseline_launched, c.baseline_profiled_wall_s),
                                           ("candidate", c.candidate_launched, c.candidate_profiled_wall_s))
               if launched and (wall is None or not wall > 0)]
    timed = [f"no {who} timed runs to compare with" for who, med in
             (("reference", c.baseline_timed_median_s), ("candidate", c.candidate_timed_median_s))
             if med is None or not med > 0]
    st = None
    if rules >= 9 and not timed:
        from pw.rules.startup import startup
        st = startup(c, d, rules)
    band = consistency_band(c)
    if missing or timed or band is None:
        return False, "; ".join([*missing, *timed] or ["no timed spread to derive a band from"]) + \
            ": no evidence that the profiles are of the timed programs"
    tb, tc = c.baseline_timed_median_s, c.candidate_timed_median_s
    runs_b, runs_c = (max(1, c.baseline_profile_runs), max(1, c.candidate_profile_runs)) if rules >= 7 else (1, 1)
    per_run = " per profiled run" if (runs_b, runs_c) != (1, 1) else ""
    if st is not None:
        from pw.rules.startup import offset_check
        return offset_check(c, f"profile's {d.metric}{per_run}", st)
    checks = [(f"profile's {d.metric}{per_run}", d.total_before / runs_b, d.total_after / runs_c, "s")]
    if c.baseline_launched and c.candidate_launched:
        checks.insert(0, ("profiled run", c.baseline_profiled_wall_s, c.candidate_profiled_wall_s, "s"))
    found = []
    for what, pb, pc, _unit in checks:
        expected = tc * pb / tb  # the candidate's timed median, scaled by the reference's own ratio
        off = math.log(pc / expected) if pc > 0 and expected > 0 else math.inf
        found.append((what, pc, expected, off))
    bad = [f for f in found if abs(f[3]) > band]
    text = "; ".join(f"candidate's {what} {_g(pc)} s against {_g(exp)} s expected from its timed median "
                     f"{_g(tc)} s x the reference's {_g(exp / tc)} ({math.exp(off) - 1:+.0%})"
                     for what, pc, exp, off in (bad or found))
    if bad:
        return False, (f"{text}: beyond the band of ±{math.exp(band) - 1:.0%} from the timed runs' spread: the "
                       "profile is not of the program that was timed (it behaved differently when profiled)")
    return True, f"profiled runs agree with the timed runs ({text}; band ±{math.exp(band) - 1:.0%})"


def _unresolved(i: GateInputs, sb: float, sa: float, scale: float, totals: tuple[float, float], band: float) -> str:
    """Rules 6: how many samples per profile would resolve the campaign's saving, and whether the
    reprofile's budget stopped it short of them; or, when these samples resolve it, that the
    hotspot's shrink is too small for the saving."""
    from pw.rules.resolution import required_samples, target_band

    if (i.analysis or {}).get("verdict") != "FASTER":
        return ""  # no decided saving to resolve: the significance gate says why
    need, resolving = required_samples(sb, sa, scale), target_band(scale)
    if need is None or resolving is None:
        return ""
    if band <= resolving:
        return (f"; {_g(totals[0])} and {_g(totals[1])} samples resolve a {scale - 1:.1%} saving (band <= "
                f"{_g(resolving)}), so the hotspot's shrink is too small to be the saving")
    text = (f"; resolving a {scale - 1:.1%} saving needs about {need} samples per profile "
            f"(have {_g(totals[0])} and {_g(totals[1])})")
    r = i.resolution
    if r is not None and r.stop == "budget":
        text += (f": the reprofile's budget ({r.max_runs} profiled runs per profile, {_g(r.max_time_s)} s) "
                 f"stopped at {r.runs_before} + {r.runs_after} runs")
    elif r is not None and r.stop == "futile":
        text += (f": {r.max_runs} profiled runs per profile could not give that many, so the reprofile "
                 f"stopped growing at {r.runs_before} + {r.runs_after} runs")
    return text


def _rest_samples(d: ProfileDiff, hd) -> tuple[float, float] | None:
    """Sample counts outside the hotspot (before) and its family (after), when sampled."""
    if not d.operations or any(o.samples_before is None or o.samples_after is None for o in d.operations):
        return None
    family = {m.id for m in hd.family}
    before = sum(o.samples_before for o in d.operations if o.id != hd.operation)
    after = sum(o.samples_after for o in d.operations if o.id not in family)
    return before, after


def _op_band(op: OperationDelta) -> tuple[float, str]:
    """(band in the metric, how it was derived) for one operation's self value."""
    sb, sa = op.samples_before, op.samples_after
    if sb is not None and sa is not None and (sb + sa) > 0:
        band_samples = POISSON_SIGMAS * math.sqrt(sb + sa)
        per_sample = (op.self_before + op.self_after) / (sb + sa)
        return band_samples * per_sample, f"{POISSON_SIGMAS:g}*sqrt({_g(sb)}+{_g(sa)}) samples"
    return EXACT_RELATIVE_BAND * op.self_before, f"{EXACT_RELATIVE_BAND:.0%} of baseline"


def _between_runs_band(shares: list[list[float]] | None, scale: float) -> float | None:
    """Rules 16: POISSON_SIGMAS standard errors of the difference of an operation's mean share per
    run (the reference's scaled by the campaign's speedup), from how much its share varied from run
    to run on each side: a host's interference can fall on one operation in one profiled run (an
    output routine took 13% of one run of five, 3% of the others), which the binomial band of the
    summed samples does not see. None with fewer than two runs a side."""
    if not shares or len(shares) != 2 or min(len(shares[0]), len(shares[1])) < 2:
        return None
    var = sum(w**2 * statistics.variance(xs) / len(xs) for w, xs in ((scale, shares[0]), (1.0, shares[1])))
    return POISSON_SIGMAS * math.sqrt(var)


def _no_collateral(i: GateInputs, rules: int) -> GateResult:
    failures, checked = [], []
    d = i.profile_diff
    hot = i.hotspot.operation if i.hotspot is not None else None
    # Rules 3: the hotspot's whole family is the hotspot, and an operation new in the candidate (no
    # baseline share) is checked by its candidate share: work moved into a new function is not free.
    family = {m.id for m in d.hotspot.family} if rules >= 3 and d is not None and d.hotspot is not None else set()
    if d is None:
        failures.append("no reprofile yet: other operations not checked")
    else:
        regressed = []
        n_checked = 0
        totals, scale = (_sampled_totals(d), _campaign_scale(i)) if rules >= 2 else (None, None)
        st = None
        if rules >= 9 and totals is not None and scale is not None:
            from pw.rules.startup import startup
            st = startup(i.profile_consistency, d, rules)
        start_ops = st.ops if st is not None else frozenset()
        for op in d.operations:
            share = op.share_before
            if rules >= 3 and d.total_after > 0:
                share = max(share, op.self_after / d.total_after)
            if op.id == hot or op.id in family or share < COLLATERAL_MIN_SHARE or op.id in start_ops:
                continue
            n_checked += 1
            if totals is not None and scale is not None and rules >= 9:
                from pw.rules.startup import pooled_pair
                # Whole-run shares (rules 9: times each profile's coverage; 1 without an offset),
                # pooled two-proportion band.
                if st is not None:
                    runs_b = max(1, i.profile_consistency.baseline_profile_runs)
                    runs_c = max(1, i.profile_consistency.candidate_profile_runs)
                    before, after, band = pooled_pair(op.self_before / runs_b / st.work_before,
                                                       op.self_after / runs_c / st.work_after, scale, st.samples,
                                                       (st.coverage_before, st.coverage_after))
                else:
                    before, after, band = pooled_pair(op.share_before, op.self_after / d.total_after, scale, totals,
                                                       (1.0, 1.0))
                spread_band = _between_runs_band(i.run_shares.get(op.id), scale) if rules >= 16 else None
                if spread_band is not None and spread_band > band:
                    band = spread_band
                if after - before > band:
                    whole = (f", of whole runs the profiles' work covers {st.coverage_before:.0%} and "
                             f"{st.coverage_after:.0%} of" if st is not None else "")
                    kind = "between-runs band" if spread_band is not None and band == spread_band else "pooled band"
                    regressed.append(f"{op.id} {_g(before)} -> {_g(after)} of the candidate's run time "
                                     f"(shares scaled by the campaign's {_g(scale)}x{whole}; "
                                     f"+{_g(after - before)} > {kind} {_g(band)})")
                continue
            if totals is not None and scale is not None:
                before, after, band = _scaled_pair(op.share_before, op.self_after / d.total_after, scale, totals)
                if after - before > band:
                    regressed.append(f"{op.id} {_g(before)} -> {_g(after)} of the candidate's run time "
                                     f"(shares scaled by the campaign's {_g(scale)}x; "
                                     f"+{_g(after - before)} > band {_g(band)})")
                continue
            band, how = _op_band(op)
            if op.self_delta > band:
                regressed.append(f"{op.id} {d.metric} {_g(op.self_before)} -> {_g(op.self_after)} "
                                 f"(+{_g(op.self_delta)} > band {_g(band)} = {how})")
        if regressed:
            failures.append("regressed beyond noise: " + "; ".join(regressed[:5]))
        checked.append(f"{n_checked} other operations >= {COLLATERAL_MIN_SHARE:.0%} within noise")
        if rules >= 9 and start_ops:
            checked.append(f"{len(start_ops)} import-machinery operations counted as start-up")
    w = i.wall_analysis
    if w is not None:
        if w.get("verdict") == "SLOWER":
            failures.append(f"whole-process time slower: {_speedup_text(w)}")
        else:
            checked.append(f"whole-process time {w.get('verdict')}")
    o = i.outside_roi
    if rules >= 17 and o is not None:
        limit = OUTSIDE_ROI_SLACK * o.baseline_wall_median_s
        text = (f"the time outside the region of interest {_g(o.baseline_outside_median_s)} -> "
                f"{_g(o.candidate_outside_median_s)} s per run (growth {_g(o.growth_mean_s)} s, 95% CI "
                f"{_g(o.growth_low_s)} to {_g(o.growth_high_s)}, over {o.pairs} pairs)")
        if o.growth_low_s > limit:
            failures.append(f"{text}: more than {OUTSIDE_ROI_SLACK:.0%} of the baseline's whole run "
                            f"({_g(limit)} s): the region's saving is not the program's (work moved out of "
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
        if mc > limit:
            failures.append(text)
        else:
            checked.append(text)
    return _result("no_collateral", failures, "; ".join(checked),
                   [i.seqs.baseline_profile, i.seqs.candidate_profile, i.seqs.wall, i.seqs.timing])


def _attribution(i: GateInputs) -> GateResult:
    failures, cited = [], []
    a, d, h = i.adapter, i.profile_diff, i.hotspot
    if a is None:
        failures.append("no adapter facts: cannot tell what was measured on this host")
    elif not a.usable:
        failures.append(f"adapter {a.name} is not usable on this host")
    mech = h.metric if h is not None else (d.metric if d is not None else None)
    if mech is None:
        failures.append("no mechanism metric")
    else:
        if a is not None and mech not in a.measured:
            failures.append(f"mechanism metric {mech} was not measured by {a.name} here")
        if d is None:
            failures.append(f"no reprofile yet: {mech} not measured on the candidate")
        else:
            missing = [side for side, ms in (("baseline", d.baseline_metrics), ("candidate", d.candidate_metrics))
                       if mech not in ms]
            if missing:
                failures.append(f"mechanism metric {mech} missing from the {' and '.join(missing)} profile")
        cited.append(mech + (" (simulated)" if _is_simulated(mech, a) else ""))
    for c in i.claims:
        if a is not None and c.metric not in a.measured:
            failures.append(f"claim cites {c.metric}, which {a.name} did not measure here")
        elif _is_simulated(c.metric, a) and not c.simulated:
            failures.append(f"claim cites simulated metric {c.metric} without labelling it simulated")
        else:
            cited.append(c.metric + (" (simulated)" if c.simulated else ""))
    name = a.name if a is not None else "?"
    return _result("attribution", failures, f"claims cite metrics {name} measured on this host: "
                   + ", ".join(sorted(set(cited))), [i.seqs.preflight, i.seqs.baseline_profile,
                                                     i.seqs.candidate_profile])


def _reproducible(i: GateInputs) -> GateResult:
    r = i.repro
    missing = [f for f in REPRO_FIELDS if not getattr(r, f)]
    failures = [f"not recorded: {', '.join(missing)}"] if missing else []
    return _result("reproducible", failures,
                   f"run {r.run_id} on {r.host}: build {(r.build_sha256 or '')[:12]}, source "
                   f"{(r.source_sha256 or '')[:12]}, tools {', '.join(f'{k} {v}' for k, v in sorted(r.tool_versions.items()))}, "
                   f"command {' '.join(r.command)}",
                   [i.seqs.run, i.seqs.preflight, i.seqs.build])
