"""Judge a candidate from recorded facts alone: analysis, gate inputs, gates, verdict.

`judge_events` is a pure function of the events and the evidence bytes they cite, which the shell
loads first (`profiles_needed` names them): no files, no adapter registry, no clock. Evaluate and
confirm call it to decide, and `pw audit` calls it again on the same prefix of the ledger, under
the gate rules the verdict was recorded with, to check that every verdict still follows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from ledger import events as ev
from ledger.codec import canonical_json
from ledger.metrics import metric as metric_spec
from ledger.profile import decode_profile
from pw.rules import gate_facts as gf
from pw.rules import gates as g
from pw.rules import gates_reprofiled as gr
from pw.rules import stopping
from pw.rules.contention import timing_cpus, where_timed
from pw.rules.rulesets import GATE_RULES, RuleSet, rule_set
from pw.rules.verdict import reach_verdict
from pw.stats.adaptive import PAIRED_RULES


class Judgement(msgspec.Struct, frozen=True):
    evaluated: ev.CandidateEvaluated
    gates: ev.GatesEvaluated
    verdict: ev.VerdictReached
    profile_diff: bytes | None


Found = tuple[int, Any] | None  # (seq, payload) of the latest matching event


def _latest(items, pred) -> Found:
    found = None
    for seq, data in items:
        if pred(data):
            found = (seq, data)
    return found


# Fault classes that mean the candidate was caught at something (ledger.events.FailureClass).
CAUGHT_FAULTS = frozenset({"caught", "output-mismatch"})


class Selection(msgspec.Struct, frozen=True):
    """The events a judgement reads: the candidate's latest attempt and the baseline's facts."""

    run: Found
    preflight: Found
    diff: Found
    build: Found
    oracle: Found
    timing: Found
    candidate_capture: Found
    candidate_profile: Found
    baseline_profile: Found
    baseline_build: Found
    baseline_timing: Found
    baseline_oracle: Found
    hotspot: Found
    fault: Found
    caught: Found = None  # the latest `caught` / `output-mismatch` fault of a timed or profiled run
    prepared: Found = None  # CandidatePrepared: the mechanism the agent named
    baseline_capture: Found = None  # ProfileCaptured of the reference's profile (the launcher's report on it)
    baseline_counters: Found = None  # ncu ProfileNormalized of the baseline (GPU hotspots)
    candidate_counters: Found = None  # ncu ProfileNormalized of this attempt
    reference_diagnosis: Found = None  # the diagnosis adapter's profile of the reference (callgrind)
    candidate_diagnosis: Found = None  # ... and of this attempt
    candidate_diagnosis_capture: Found = None
    resolution: Found = None  # ReprofileResolved of this attempt: how the reprofile was sized
    # Each single-run profile (by sha256) and the ProfileCaptured recorded with it: the launcher's
    # report on every run a merged profile sums (gate rules 16).
    part_captures: dict[str, ev.ProfileCaptured] = {}
    hybrid: Found = None  # HybridPrepared of this attempt: the hotspot's change alone, or why it could not be made


def _captures_by_profile(items) -> dict[str, ev.ProfileCaptured]:
    """Single-run ProfileNormalized sha256 -> the ProfileCaptured of the same target and adapter
    recorded just before it (`profile_once` records the two together)."""
    last: dict[tuple[str, str], ev.ProfileCaptured] = {}
    out: dict[str, ev.ProfileCaptured] = {}
    for _seq, d in items:
        if isinstance(d, ev.ProfileCaptured):
            last[(d.target, d.adapter)] = d
        elif isinstance(d, ev.ProfileNormalized) and not d.parts and (d.target, d.adapter) in last:
            out[d.profile_sha256] = last[(d.target, d.adapter)]
    return out


def select(envelopes: list[ev.Envelope], cid: str) -> Selection:
    items = [(e.seq, e.data) for e in envelopes]
    diff = _latest(items, lambda d: isinstance(d, ev.CandidateDiffRecorded) and d.id == cid)
    attempt = [(s, d) for s, d in items if diff is not None and s >= diff[0]]

    def mine(kind, **extra) -> Found:
        return _latest(attempt, lambda d: isinstance(d, kind) and all(getattr(d, k) == v for k, v in extra.items()))

    def baseline(kind, **extra) -> Found:
        return _latest(items, lambda d: isinstance(d, kind) and all(getattr(d, k) == v for k, v in extra.items()))

    # The candidate's reprofile with the discovery adapter; an Nsight Compute capture of the hotspot
    # kernel (recorded after it) is counter evidence for the mechanism, not the profile to diff.
    # A second CPU reprofile (the adapter the diagnosis climbed to) is shown, not diffed by the gates.
    discovery = _latest(items, lambda d: isinstance(d, ev.RoutingDecided) and d.phase == "discovery")
    first = discovery[1].chosen if discovery else None
    timing = _latest(attempt, lambda d: isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid
                     and d.purpose != "unprofiled")
    profiled_pairs = timing is not None and timing[1].profiler is not None
    cand_prof = _latest(attempt, lambda d: isinstance(d, ev.ProfileNormalized) and d.target == cid
                        and d.adapter != "ncu" and d.adapter == first)
    if cand_prof is None and not profiled_pairs:  # rules 1-18: whichever reprofile there was
        cand_prof = _latest(attempt, lambda d: isinstance(d, ev.ProfileNormalized) and d.target == cid
                            and d.adapter != "ncu")
    cand_diag = None
    if cand_prof is not None or profiled_pairs:  # the exact-count channel beside the discovery one
        own = cand_prof[1].adapter if cand_prof is not None else first
        cand_diag = _latest(attempt, lambda d: isinstance(d, ev.ProfileNormalized) and d.target == cid
                            and d.adapter not in ("ncu", own))
    if timing is not None:  # every part of an adaptive campaign, as one, as its rule reads it
        started = baseline(ev.RunStarted)
        cpus = timing_cpus(timing[1], started[1].host.cpus if started is not None else 1)
        timing = (timing[0], stopping.judged_timing(stopping.merged_timing(items, *timing), cpus))
    # A chained candidate is timed against its parent: the parent's build and profile are the reference.
    ref = timing[1].targets[0] if timing else "baseline"
    base_prof = None
    if cand_prof is not None:
        base_prof = baseline(ev.ProfileNormalized, target=ref, adapter=cand_prof[1].adapter)
    return Selection(
        run=baseline(ev.RunStarted), preflight=baseline(ev.PreflightCompleted), diff=diff,
        build=mine(ev.BuildFinished, target=cid), oracle=mine(ev.OracleChecked, target=cid),
        timing=timing,
        candidate_capture=mine(ev.ProfileCaptured, target=cid, adapter=cand_prof[1].adapter) if cand_prof else None,
        candidate_profile=cand_prof, baseline_profile=base_prof,
        baseline_build=baseline(ev.BuildFinished, target=ref, outcome="ok"),
        baseline_timing=baseline(ev.TimingRecorded, purpose="baseline-variance"),
        baseline_oracle=baseline(ev.OracleChecked, target="baseline"),
        hotspot=baseline(ev.HotspotSelected), fault=mine(ev.FaultRecorded, target=cid),
        caught=_latest(attempt, lambda d: isinstance(d, ev.FaultRecorded) and d.target == cid
                       and d.failure_class in CAUGHT_FAULTS and d.stage != "oracle"),
        prepared=baseline(ev.CandidatePrepared, id=cid),
        baseline_capture=_latest([(q, d) for q, d in items if base_prof is not None and q <= base_prof[0]],
                                 lambda d: isinstance(d, ev.ProfileCaptured) and d.target == ref
                                 and d.adapter == base_prof[1].adapter),
        baseline_counters=baseline(ev.ProfileNormalized, target="baseline", adapter="ncu"),
        candidate_counters=mine(ev.ProfileNormalized, target=cid, adapter="ncu"),
        reference_diagnosis=baseline(ev.ProfileNormalized, target=ref, adapter=cand_diag[1].adapter) if cand_diag else None,
        candidate_diagnosis=cand_diag,
        candidate_diagnosis_capture=mine(ev.ProfileCaptured, target=cid, adapter=cand_diag[1].adapter) if cand_diag else None,
        resolution=mine(ev.ReprofileResolved, target=cid),
        part_captures=_captures_by_profile(items),
        hybrid=mine(ev.HybridPrepared, id=cid),
    )


def profiles_needed(envelopes: list[ev.Envelope], cid: str) -> list[str]:
    """The evidence (normalized profiles, by sha256) `judge_events` will read for `cid`."""
    s = select(envelopes, cid)
    counters = [f[1].profile_sha256 for f in (s.baseline_counters, s.candidate_counters) if f is not None]
    diagnosis = [f[1].profile_sha256 for f in (s.reference_diagnosis, s.candidate_diagnosis)
                 if f is not None and s.reference_diagnosis is not None]
    if s.timing is not None and s.timing[1].profiler is not None:  # one kind of run: the runs' own profiles
        from pw.rules.judge_pairs import profiles_of

        return [*profiles_of(s.timing[1]), *counters, *diagnosis]
    if s.candidate_profile is None or s.baseline_profile is None or s.hotspot is None:
        return []
    return [s.baseline_profile[1].profile_sha256, s.candidate_profile[1].profile_sha256, *counters, *diagnosis,
            *_run_parts(s)]


def _run_parts(s: Selection) -> list[str]:
    """The single-run profiles both merged profiles sum, when each sums two or more (gate rules 16
    read an operation's share run by run)."""
    before, after = (list(f[1].parts) if f is not None else [] for f in (s.baseline_profile, s.candidate_profile))
    return before + after if min(len(before), len(after)) >= 2 else []


def _run_shares(s: Selection, profiles: Mapping[str, bytes], diff, rs: RuleSet) -> dict[str, list[list[float]]]:
    """Gate rules 16: each operation no-collateral checks, its share of each profiled run on both
    sides, in the diff's metric."""
    parts = _run_parts(s)
    if not rs.between_runs or not parts or diff is None:
        return {}
    from pw.rules.gate_facts import COLLATERAL_MIN_SHARE

    m = diff.metric
    checked = [op.id for op in diff.operations
               if max(op.share_before, op.self_after / diff.total_after if diff.total_after > 0 else 0.0)
               >= COLLATERAL_MIN_SHARE]
    sides = []
    for found in (s.baseline_profile, s.candidate_profile):
        runs = [decode_profile(profiles[sha]) for sha in found[1].parts]  # type: ignore[index]
        totals = [float(p.totals.get(m) or math.fsum(o.self_metrics.get(m, 0.0) for o in p.operations)) for p in runs]
        selves = [{o.id: float(o.self_metrics.get(m, 0.0)) for o in p.operations} for p in runs]
        sides.append([[own.get(op, 0.0) / t if t > 0 else 0.0 for own, t in zip(selves, totals)] for op in checked])
    return {op: [sides[0][k], sides[1][k]] for k, op in enumerate(checked)}


def _diagnosis_facts(s: Selection, profiles: Mapping[str, bytes]) -> gf.DiagnosisFacts | None:
    """The diagnosis adapter's hotspot and total, reference vs candidate (None without both profiles)."""
    if s.reference_diagnosis is None or s.candidate_diagnosis is None or s.hotspot is None:
        return None
    before = decode_profile(profiles[s.reference_diagnosis[1].profile_sha256])
    after = decode_profile(profiles[s.candidate_diagnosis[1].profile_sha256])
    metric = before.primary_metric
    if metric not in after.metrics:
        return None
    op = s.hotspot[1].operation

    def inclusive(p) -> float:
        o = p.operation(op)
        return float(o.inclusive_metrics.get(metric, o.self_metrics.get(metric, 0.0))) if o is not None else 0.0

    capture = s.candidate_diagnosis_capture[1] if s.candidate_diagnosis_capture else None
    return gf.DiagnosisFacts(adapter=s.candidate_diagnosis[1].adapter, metric=metric, hotspot=op,
                            hotspot_before=inclusive(before), hotspot_after=inclusive(after),
                            total_before=float(before.totals.get(metric, 0.0)),
                            total_after=float(after.totals.get(metric, 0.0)),
                            reused=bool(capture is not None and capture.reused_from))


def gpu_counter_metrics(s: Selection, profiles: Mapping[str, bytes], timeline_before=None, timeline_after=None
                        ) -> tuple[str, dict[str, float], dict[str, float]] | None:
    """(the agent's mechanism text, the parent's and the candidate's GPU metrics of the hotspot
    kernel: Nsight Compute counters over the timelines' totals); None for CPU hotspots."""
    if s.hotspot is None or s.hotspot[1].metric != "gpu_time_ns" or s.prepared is None:
        return None
    op = s.hotspot[1].operation

    def metrics(found: Found, timeline) -> dict[str, float]:
        out = dict(timeline.totals) if timeline is not None else {}
        if found is not None and found[1].profile_sha256 in profiles:
            o = decode_profile(profiles[found[1].profile_sha256]).operation(op)
            out.update(o.self_metrics if o is not None else {})
        return out

    return (s.prepared[1].mechanism, metrics(s.baseline_counters, timeline_before),
            metrics(s.candidate_counters, timeline_after))


def _gpu_counter(s: Selection, profiles: Mapping[str, bytes], timeline_before, timeline_after,
                 rs: RuleSet) -> gf.CounterFacts | None:
    """The counter the candidate's stated mechanism names (rules 1-18: a keyword table,
    ``gate_facts.gpu_counter_facts``; 19 on: the class catalog of ``pw.rules.mechanisms``, shown beside
    the device-time mechanism); None for CPU hotspots."""
    found = gpu_counter_metrics(s, profiles, timeline_before, timeline_after)
    if found is None:
        return None
    if rs.gpu_counter_catalog == "classes":
        from pw.rules import mechanisms

        c = mechanisms.gpu_counter_facts(*found)
        return None if c is None else gf.CounterFacts(metric=c.metric, before=c.before, after=c.after,
                                                      direction=c.direction, mechanism=c.mechanism)
    return gf.gpu_counter_facts(*found)


def _tool_versions(pf: ev.PreflightCompleted | None) -> dict[str, str]:
    if pf is None:
        return {}
    out = {p.name: p.version or "" for p in pf.profilers}
    out.update({c.name: c.version or "" for c in pf.compilers})
    return dict(sorted(out.items()))


def _is_simulated(metric_id: str) -> bool:
    try:
        return metric_spec(metric_id).simulated
    except KeyError:
        return False


def analyze(timing: ev.TimingRecorded, cid: str, suffix: str = "") -> dict[str, Any] | None:
    """The paired analysis of one campaign, as recorded plain data (None below two pairs)."""
    from pw.stats import StatsInputError, analyze_pairs

    base = timing.samples.get(timing.targets[0] + suffix, [])  # the reference: baseline, or the parent
    cand = timing.samples.get(cid + suffix, [])
    try:
        out = msgspec.to_builtins(analyze_pairs(base, cand, order=list(timing.order), seed=timing.seed))
        if timing.campaign is not None and not suffix:  # an adaptive campaign: its stopping rule decides
            from pw.stats import log_ratios

            out = stopping.with_campaign(out, timing.campaign, log_ratios(base, cand))
    except StatsInputError:  # too few pairs, or a campaign rule this version does not know (audit says which)
        return None
    return out


def _one_pair_estimate(timing: ev.TimingRecorded, cid: str) -> float | None:
    base = timing.samples.get(timing.targets[0], [])
    cand = timing.samples.get(cid, [])
    if len(base) != 1 or len(cand) != 1 or cand[0] <= 0:
        return None
    return round(base[0] / cand[0], 6)


def _uncontained(conditions: ev.TimingConditions | None) -> str | None:
    """Why the campaign's runs were not sandboxed, or None (sandboxed, or recorded before the
    sandbox existed, when no campaign said either way)."""
    sandbox = conditions.sandbox if conditions is not None else ""
    return (sandbox.partition(": ")[2] or "no sandbox") if sandbox.startswith("none") else None


def baseline_shift_reason(reference: ev.TimingRecorded | None, timing: ev.TimingRecorded | None) -> str | None:
    """Why the campaign's baseline cannot be trusted as the reference (it ran slower than the
    baseline-variance stage of `pw start`, beyond noise), or None."""
    from pw.stats.baseline_shift import baseline_shift, describe

    if timing is None or reference is None or reference.metric != timing.metric:
        return None
    shift = baseline_shift(list(reference.samples.get("baseline", [])), list(timing.samples.get("baseline", [])))
    return describe(shift) if shift is not None and shift.slower else None


def _timed_digest(arm: ev.TimedArm | None) -> str | None:
    """The digest of what was timed: the tree after the campaign when it differs from before."""
    if arm is None or not arm.binary_before:
        return None
    return arm.binary_after if arm.binary_after != arm.binary_before else arm.binary_before


def _side_effects(s: Selection, cid: str) -> list[str]:
    timing = s.timing[1] if s.timing else None
    side = list(timing.conditions.side_effects) if timing else []
    # Files the candidate's traced oracle run wrote outside its workspace that the baseline's did
    # not: a cache in /tmp survives between runs as surely as one in the working directory.
    base_writes = set(s.baseline_oracle[1].outside_writes) if s.baseline_oracle else set()
    if s.oracle is not None:
        side += [f"wrote {p} outside its workspace" for p in s.oracle[1].outside_writes if p not in base_writes]
    return side


def _conditions(s: Selection, cid: str) -> tuple[gf.Conditions, gf.Conditions]:
    """(the baseline's, as recorded by `pw start`; the candidate's, as recorded by its campaign)."""
    run, contract = s.run[1], s.run[1].contract
    base_arm = s.baseline_timing[1].conditions.arms.get("baseline") if s.baseline_timing else None
    baseline = gf.Conditions(host=run.host.hostname, argv=list(contract.run.argv),
                            inputs_sha256=base_arm.inputs_sha256 if base_arm else None,
                            tool_versions=_tool_versions(s.preflight[1] if s.preflight else None))
    if s.timing is None:
        return baseline, gf.Conditions()
    c = s.timing[1].conditions
    cand_arm = c.arms.get(cid)
    candidate = gf.Conditions(host=c.host, argv=list(c.argv), inputs_sha256=cand_arm.inputs_sha256 if cand_arm else None,
                             tool_versions=dict(c.tool_versions))
    return baseline, candidate


def _timed_wall(timing: ev.TimingRecorded | None, label: str) -> list[float]:
    """Whole-process seconds of ``label``'s timed runs (the ROI metric's runs too), or []."""
    if timing is None:
        return []
    walls = timing.samples.get(f"{label}:wall_s")
    if walls:
        return list(walls)
    wall = timing.metric == "wall_time_s" or (timing.conditions is not None and timing.conditions.metric == "wall")
    return list(timing.samples.get(label, [])) if wall else []


def _arm(samples: list[float]) -> tuple[float | None, float | None]:
    """(median, standard deviation of the logs) of one arm's timed runs; None below two runs."""
    import numpy as np

    vals = np.asarray([v for v in samples if v > 0], dtype=float)
    if vals.size < 2:
        return None, None
    return round(float(np.median(vals)), 9), round(float(np.std(np.log(vals), ddof=1)), 9)


def _profile_consistency(s: Selection, cid: str, ref: str, rs: RuleSet) -> gr.ProfileConsistency | None:
    """What the profile-consistency check (gate rules 5) reads: each profiled run, as the launcher
    reported it, and the same target's timed runs. The reference's timed runs are those timed
    alongside its profile (the baseline-variance stage for the baseline), so that a machine busier
    then than now cancels out of its profiled/timed ratio; the candidate's are its campaign's.

    Rules 11: the reference's spread is at least its arm's in the candidate's campaign. Five runs
    at `pw start` can come out quiet by luck: on CI, matmul-c's start measured 3.6% where the
    baseline arm of the next campaign measured 10.0%, and the honest interchange's one profiled run
    each (the reference's 16% fast, the candidate's 29% slow) read +54% against a ±46% band."""
    if s.candidate_capture is None or s.baseline_capture is None or s.timing is None:
        return None
    if ref == "baseline" and s.baseline_timing is not None and _timed_wall(s.baseline_timing[1], "baseline"):
        ref_timed = _timed_wall(s.baseline_timing[1], "baseline")
    else:
        ref_timed = _timed_wall(s.timing[1], ref)
    b_med, b_sd = _arm(ref_timed)
    if rs.reference_spread_from_campaign and b_sd is not None:
        _, arm_sd = _arm(_timed_wall(s.timing[1], ref))
        b_sd = max(b_sd, arm_sd) if arm_sd is not None else b_sd
    c_med, c_sd = _arm(_timed_wall(s.timing[1], cid))
    bc, cc = s.baseline_capture[1], s.candidate_capture[1]
    b_launched, b_wall, c_launched, c_wall = bc.launched, bc.program_wall_s, cc.launched, cc.program_wall_s
    if rs.between_runs:
        b_launched, b_wall = _profiled_walls(s, s.baseline_profile, bc)
        c_launched, c_wall = _profiled_walls(s, s.candidate_profile, cc)
    return gr.ProfileConsistency(
        baseline_launched=b_launched, candidate_launched=c_launched,
        baseline_profiled_wall_s=b_wall, candidate_profiled_wall_s=c_wall,
        baseline_timed_median_s=b_med, baseline_timed_log_sd=b_sd, baseline_timed_runs=len(ref_timed),
        candidate_timed_median_s=c_med, candidate_timed_log_sd=c_sd,
        candidate_timed_runs=len(_timed_wall(s.timing[1], cid)),
        baseline_profile_runs=_profiled_runs(s.baseline_profile), candidate_profile_runs=_profiled_runs(s.candidate_profile),
    )


def _outside_roi(timing: ev.TimingRecorded, ref: str, cid: str, kind):
    """Gate rules 17: per pair, the candidate's whole-process seconds outside the region of interest
    less the baseline's (None without the launcher's wall time for every run, or under 3 pairs)."""
    import numpy as np

    from pw.stats.paired import t_interval_log

    walls = [timing.samples.get(f"{label}:wall_s") or [] for label in (ref, cid)]
    rois = [timing.samples.get(label) or [] for label in (ref, cid)]
    n = len(rois[0])
    if n < 3 or any(len(x) != n for x in (*walls, rois[1])):
        return None
    outside = [np.asarray(w, dtype=float) - np.asarray(r, dtype=float) for w, r in zip(walls, rois)]
    mean, _sd, low, high = t_interval_log(outside[1] - outside[0], 0.95)
    return kind(pairs=n, growth_mean_s=round(float(mean), 9), growth_low_s=round(float(low), 9),
                        growth_high_s=round(float(high), 9),
                        baseline_outside_median_s=round(float(np.median(outside[0])), 9),
                        candidate_outside_median_s=round(float(np.median(outside[1])), 9),
                        baseline_wall_median_s=round(float(np.median(walls[0])), 9))


def _profiled_walls(s: Selection, profile: Found, latest: ev.ProfileCaptured) -> tuple[bool, float | None]:
    """Gate rules 16: (launched, the geometric mean of the launcher's wall-clock reports) over every
    profiled run a merged profile sums; its total per run is compared with them. Under rules 5-15
    the latest capture's report alone stood for all of them (and one run slowed by the host while
    profiled failed a profile averaged over several). None when a run's report is missing."""
    parts = list(profile[1].parts) if profile is not None else []
    captures = [s.part_captures.get(p) for p in parts] or [latest]
    if any(c is None for c in captures):
        return latest.launched, None
    launched = all(c.launched for c in captures)  # type: ignore[union-attr]
    walls = [c.program_wall_s for c in captures]  # type: ignore[union-attr]
    if any(w is None or not w > 0 for w in walls):
        return launched, None
    return launched, round(math.exp(math.fsum(math.log(w) for w in walls) / len(walls)), 9)  # type: ignore[arg-type]


def _profiled_runs(found: Found) -> int:
    """How many profiled runs a normalized profile sums: its parts, or the one capture."""
    return max(1, len(found[1].parts)) if found is not None else 1


def _adapter_facts(s: Selection, profile_diff) -> gf.AdapterFacts | None:
    """What the reprofiling adapter could do and measured, from the events that recorded it."""
    if s.candidate_profile is None:
        return None
    name = s.candidate_profile[1].adapter
    probe = next((p for p in (s.preflight[1].profilers if s.preflight else []) if p.name == name), None)
    measured = sorted(set(profile_diff.baseline_metrics) & set(profile_diff.candidate_metrics)) if profile_diff else []
    return gf.AdapterFacts(
        name=name, can_reprofile=bool(s.candidate_capture and s.candidate_capture[1].can_reprofile),
        usable=bool(probe and probe.usable), measured=measured, simulated=[m for m in measured if _is_simulated(m)],
    )


def _resolution_facts(r: ev.ReprofileResolved) -> gr.ResolutionFacts:
    last = r.looks[-1] if r.looks else None
    return gr.ResolutionFacts(stop=r.stop, runs_before=last.runs_before if last else 0,
                             runs_after=last.runs_after if last else 0, max_runs=r.max_runs,
                             max_time_s=r.max_time_s, required_samples=r.required_samples)


def _chain_doubt(envelopes: list[ev.Envelope], parent: str, analysis: dict[str, Any], rs: RuleSet) -> str | None:
    """Gate rules 10: why a candidate timed against its parent is not shown faster than the baseline
    along the chain of parents, or None. Its verdict is the step over the parent, and a step over a
    parent slowed on purpose is real while the program gained nothing: a series-c candidate whose
    source was the baseline's, prepared on a parent that ran the kernel twice (rejected, 0.44x), was
    verified 2.23x (tests/data/redteam-s6/series-chain-*.patch). The cumulative speedup and its
    interval are those ``projections.state.cumulative`` reports (steps' log half-widths added in
    quadrature); its low end must clear the campaign's minimum effect, as a step's must.

    Gate rules 18: and every parent along the chain must be verified (its latest judgement, a
    confirmation's where there is one). A step is timed against its parent, so whatever held the
    parent back sits in both arms and passes the step's gates: an honest step over a particles-aos-c
    parent that moved work before the region (proposed under rules 17) was verified, cumulative
    4.32x (session 9's red team)."""
    import math

    from projections.state import cumulative, fold

    state = fold(envelopes)
    before = cumulative(state, parent)
    if before is None or not before.interval or before.interval[0] <= 0:
        return f"the parent {parent!r} has no measured speedup over the baseline to build on"
    speedup, low = float(analysis["speedup"]), float(analysis["interval"]["low"])
    min_effect = float((analysis.get("params") or {}).get("min_effect", 0.0))
    log_total = math.log(before.speedup) + math.log(speedup)
    half = math.hypot(math.log(before.speedup) - math.log(before.interval[0]), math.log(speedup) - math.log(low))
    total, total_low = math.exp(log_total), math.exp(log_total - half)
    path = " -> ".join(["baseline", *before.steps])
    if total_low <= 1.0 + min_effect:
        return (f"{speedup:.4g}x over its parent {parent!r}, but {total:.4g}x (low {total_low:.4g}) over the "
                f"baseline along {path}: not shown faster than the baseline (the parent was {before.speedup:.4g}x)")
    if rs.chain_parents_verified:
        for step in before.steps:
            cand = state.candidates[step]
            judged = cand.confirmation or cand.verdict
            if judged is not None and judged.status != "verified":
                why = f" ({judged.reasons[0][:200]})" if judged.reasons else ""
                return (f"{speedup:.4g}x over its parent {parent!r}, {total:.4g}x over the baseline along {path}, "
                        f"but {step!r} is {judged.status}{why}: a step over a parent pw did not verify is not "
                        f"verified, because what held the parent back is in both arms of the step's campaign")
    return None


def same_image(reference: ev.BuildFinished | None, build: ev.BuildFinished | None, ref: str) -> str | None:
    """Rules 13: why the candidate cannot be faster than its reference, when both builds load the
    same image (``pw.workload.image``: code and data, debug info and compiled sources aside)."""
    if reference is None or build is None:
        return None
    mine, theirs = build.image_sha256, reference.image_sha256
    if mine is None or mine != theirs or build.outcome != "ok" or reference.outcome != "ok":
        return None
    return (f"the candidate builds to the same running image as {ref} (code and data sha256 {mine[:12]}; it "
            "differs in debug info or sources only): nothing it changed runs, whatever the timing measured")


def _judged_reference(rs: RuleSet, s: Selection, envelopes: list[ev.Envelope]) -> tuple[str, Found]:
    """(the reference's label, its successful build): the baseline, or a chained candidate's parent
    (the timed one; untimed, the parent it is prepared on, under rules 15 on)."""
    timing = s.timing
    ref = timing[1].targets[0] if timing else "baseline"
    base_build = s.baseline_build
    if rs.untimed_chain_against_parent and timing is None and s.prepared is not None \
            and s.prepared[1].resolved_parent != "baseline":
        ref = s.prepared[1].resolved_parent
        base_build = _latest([(e.seq, e.data) for e in envelopes], lambda d: isinstance(d, ev.BuildFinished)
                             and d.target == ref and d.outcome == "ok")
    return ref, base_build


def _shared_inputs(s: Selection, cid: str, ref: str, base_build: Found, analysis) -> dict[str, Any]:
    """The gate inputs every rule family records alike (correctness, significance, reproducible)."""
    run_seq, run = s.run
    contract = run.contract
    pf, (_, diff), build, oracle, timing, hot = s.preflight, s.diff, s.build, s.oracle, s.timing, s.hotspot
    arms = timing[1].conditions.arms if timing else {}
    baseline_conditions, candidate_conditions = _conditions(s, cid)
    return dict(
        candidate=cid,
        exploratory=bool(timing and timing[1].exploratory),
        oracle=gf.OracleFacts(passed=oracle[1].passed, detail=oracle[1].detail, method=oracle[1].method,
                             rtol=oracle[1].rtol, atol=oracle[1].atol) if oracle else None,
        refused_edits=list(diff.refused),
        run_side_effects=_side_effects(s, cid),
        analysis=analysis,
        min_pairs=gf.DEFAULT_MIN_PAIRS,
        baseline_conditions=baseline_conditions,
        candidate_conditions=candidate_conditions,
        binaries=gf.Binaries(
            baseline_expected=base_build[1].binary_sha256 if base_build else None,
            baseline_timed=_timed_digest(arms.get(ref)),
            candidate_built=build[1].binary_sha256 if build else None, candidate_timed=_timed_digest(arms.get(cid)),
        ),
        hotspot=gf.HotspotFacts(operation=hot[1].operation, metric=hot[1].metric, share=hot[1].share,
                               amdahl_ceiling=hot[1].amdahl_ceiling) if hot else None,
        peak_rss_kb_baseline=list(timing[1].samples.get(f"{ref}:max_rss_kb", [])) if timing else [],
        peak_rss_kb_candidate=list(timing[1].samples.get(f"{cid}:max_rss_kb", [])) if timing else [],
        repro=gf.Repro(
            command=list(contract.run.argv), build_sha256=build[1].binary_sha256 if build else None,
            host=run.host.hostname, tool_versions=_tool_versions(pf[1] if pf else None),
            source_sha256=diff.source_sha256, run_id=run.run_id,
            timed_on=where_timed(timing[1]) if timing else None,
        ),
    )


def _seqs(s: Selection, wall) -> gf.Seqs:
    timing, pf, build, oracle, hot = s.timing, s.preflight, s.build, s.oracle, s.hotspot
    return gf.Seqs(
        run=s.run[0], preflight=pf[0] if pf else None, diff=s.diff[0], build=build[0] if build else None,
        oracle=oracle[0] if oracle else None, timing=timing[0] if timing else None,
        wall=timing[0] if wall is not None and timing else None, hotspot=hot[0] if hot else None,
        baseline_profile=s.baseline_profile[0] if s.baseline_profile else None,
        candidate_profile=s.candidate_profile[0] if s.candidate_profile else None,
        resolution=s.resolution[0] if s.resolution else None,
    )


def _reprofiled_inputs(rs: RuleSet, s: Selection, cid: str, ref: str, shared: dict[str, Any],
                       profiles: Mapping[str, bytes], wall) -> tuple[Any, bytes | None]:
    """Rules 1-18: the gate inputs of a campaign of unprofiled pairs and a separate reprofile."""
    timing, hot, base_prof, cand_prof = s.timing, s.hotspot, s.baseline_profile, s.candidate_profile
    profile_diff, diff_bytes, bp, cp = None, None, None, None
    if cand_prof and base_prof and hot:
        from projections.profile_diff import diff_profiles

        bp = decode_profile(profiles[base_prof[1].profile_sha256])
        cp = decode_profile(profiles[cand_prof[1].profile_sha256])
        metric = hot[1].metric
        if metric not in bp.metrics or metric not in cp.metrics:
            # Diffed in what both measured; the mechanism gate then says the diff is not in the
            # hotspot's metric. Profiles that share no metric give no diff ("no reprofile").
            metric = None
        try:
            profile_diff = diff_profiles(bp, cp, hotspot=hot[1].operation, metric=metric)
        except ValueError:
            profile_diff = None
        diff_bytes = canonical_json(profile_diff) if profile_diff is not None else None
    roi = timing is not None and s.run[1].contract.metric.kind == "roi"
    inputs = gr.GateInputs(
        **shared, seqs=_seqs(s, wall), profile_diff=profile_diff, adapter=_adapter_facts(s, profile_diff),
        counter=_gpu_counter(s, profiles, bp, cp, rs), diagnosis=_diagnosis_facts(s, profiles),
        profile_consistency=_profile_consistency(s, cid, ref, rs) if profile_diff is not None else None,
        resolution=_resolution_facts(s.resolution[1]) if s.resolution else None,
        run_shares=_run_shares(s, profiles, profile_diff, rs), wall_analysis=wall,
        outside_roi=_outside_roi(timing[1], ref, cid, gr.OutsideRoi) if roi and rs.outside_roi else None,
    )
    return inputs, diff_bytes


def _pair_inputs(rs: RuleSet, s: Selection, cid: str, ref: str, shared: dict[str, Any],
                 profiles: Mapping[str, bytes], wall) -> g.GateInputs:
    """Rules 19 on: the gate inputs of a campaign whose every timed run was profiled."""
    from pw.rules.judge_pairs import pair_facts

    timing, run = s.timing, s.run[1]
    pairs = pair_facts(timing[1], profiles, timing_cpus(timing[1], run.host.cpus), _hybrid_status(s),
                       unsampled_apart=rs.unsampled_pairs_apart) if timing else None
    profiler = timing[1].profiler if timing else None
    adapter = None
    if profiler is not None:
        probe = next((p for p in (s.preflight[1].profilers if s.preflight else []) if p.name == profiler.adapter), None)
        measured = sorted({m for sha in _first_profiles(timing[1]) for m in decode_profile(profiles[sha]).metrics})
        adapter = gf.AdapterFacts(name=profiler.adapter, can_reprofile=True, usable=bool(probe and probe.usable),
                                 measured=measured, simulated=[m for m in measured if _is_simulated(m)])
    roi = timing is not None and run.contract.metric.kind in ("roi", "operation")
    return g.GateInputs(
        **shared, seqs=_seqs(s, wall), pairs=pairs, adapter=adapter,
        counter=_gpu_counter(s, profiles, None, None, rs), diagnosis=_diagnosis_facts(s, profiles), wall_analysis=wall,
        outside_roi=_outside_roi(timing[1], ref, cid, g.OutsideRoi) if roi else None,
    )


def _first_profiles(timing: ev.TimingRecorded) -> list[str]:
    """One run profile of each arm (what the adapter measured there)."""
    return [runs[0].profile for runs in timing.runs.values() if runs]


def _hybrid_status(s: Selection) -> str:
    """Why the campaign had no hybrid arm: it was not needed, or the hybrid could not be made."""
    return s.hybrid[1].status if s.hybrid is not None else "not-needed"


def _verdict_checks(rs: RuleSet, s: Selection, envelopes, ref: str, base_build: Found, analysis):
    """(ceiling, doubts, contended, chain, same image): the verdict's judgement beyond the gates."""
    run = s.run[1]
    timing, build = s.timing, s.build
    ceiling, doubts = [], []
    if rs.oracle_and_baseline:
        if s.baseline_oracle is not None and s.baseline_oracle[1].compares_nothing:
            ceiling.append(f"oracle: {s.baseline_oracle[1].compares_nothing}")
        # (a chained candidate's reference is its parent, not the baseline pw start timed)
        if rs.evidence == "reprofiled":  # one kind of run: the reference arm of the same campaign is the reference
            shifted = baseline_shift_reason(s.baseline_timing[1] if s.baseline_timing and ref == "baseline" else None,
                                            timing[1] if timing else None)
            if shifted is not None:
                doubts.append(shifted)
    contended = None
    if rs.contention_veto:  # the machine's load, measured per timed run (pw.rules.contention)
        from pw.rules.contention import contention_reason

        contended = contention_reason(timing[1] if timing else None,
                                       timing_cpus(timing[1], run.host.cpus) if timing else run.host.cpus)
    chain = _chain_doubt(envelopes, ref, analysis, rs) if rs.chain_cumulative and ref != "baseline" and analysis else None
    image = same_image(base_build[1] if base_build else None, build[1] if build else None, ref) if rs.same_image else None
    return ceiling, doubts, contended, chain, image


def judge_events(envelopes: list[ev.Envelope], cid: str, profiles: Mapping[str, bytes],
                 rules: int = GATE_RULES) -> Judgement:
    """Judge `cid`'s latest attempt from `envelopes` and the profile bytes `profiles_needed` named,
    under gate rules version `rules`."""
    rs = rule_set(rules)
    s = select(envelopes, cid)
    contract = s.run[1].contract
    oracle, timing, build, diff = s.oracle, s.timing, s.build, s.diff[1]
    ref, base_build = _judged_reference(rs, s, envelopes)
    roi = contract.metric.kind in ("roi", "operation")
    if rs.evidence == "pairs" and timing is not None and timing[1].campaign is not None \
            and timing[1].campaign.rule in PAIRED_RULES:
        from pw.rules.judge_pairs import admitted_analysis

        cpus = timing_cpus(timing[1], s.run[1].host.cpus)
        analysis = admitted_analysis(timing[1], cid, cpus)
        wall = admitted_analysis(timing[1], cid, cpus, ":wall_s") if roi else None
    else:
        analysis = analyze(timing[1], cid) if timing else None
        wall = analyze(timing[1], cid, ":wall_s") if timing and roi else None
    shared = _shared_inputs(s, cid, ref, base_build, analysis)
    diff_bytes = None
    if rs.evidence == "reprofiled":
        inputs, diff_bytes = _reprofiled_inputs(rs, s, cid, ref, shared, profiles, wall)
    else:
        inputs = _pair_inputs(rs, s, cid, ref, shared, profiles, wall)
    gate_results = g.evaluate_gates(inputs, rs)
    ceiling, doubts, contended, chain, image = _verdict_checks(rs, s, envelopes, ref, base_build, analysis)
    timing_fault = None
    # Caught in a timed or profiled run (it left something for the next run, or printed something
    # else than in its oracle run): rejected, whatever the timing says. Oracle-stage catches fail
    # the oracle and are rejected as such.
    if s.caught is not None:
        timing_fault = s.caught[1]
    elif timing is None and oracle is not None and oracle[1].passed:
        # The campaign itself failed (a crash or hang in a timed run): that is the verdict.
        timing_fault = s.fault[1] if s.fault is not None else None
    exploratory = inputs.exploratory
    verdict = reach_verdict(
        gate_results, analysis, refused_edits=list(diff.refused),
        screening_estimate=_one_pair_estimate(timing[1], cid) if timing and exploratory else None,
        build_ok=None if build is None else build[1].outcome == "ok",
        oracle_passed=None if oracle is None else oracle[1].passed,
        exploratory=exploratory, timing_fault=timing_fault, ceiling=ceiling, doubts=doubts, contended=contended,
        uncontained=_uncontained(timing[1].conditions if timing else None), chain=chain, same_image=image,
    )
    speedup = interval = None
    if analysis is not None and analysis["speedup"] is not None:
        speedup = round(analysis["speedup"], 6)
        interval = [round(analysis["interval"]["low"], 6), round(analysis["interval"]["high"], 6)]
    elif timing is not None and exploratory:
        # winner-confirmation screening: one pair, no interval; its ratio only ranks the candidates
        speedup = _one_pair_estimate(timing[1], cid)
    attempt = diff.attempt
    cand_prof = s.candidate_profile
    return Judgement(
        evaluated=ev.CandidateEvaluated(
            id=cid, attempt=attempt, exploratory=exploratory,
            build_seq=inputs.seqs.build, oracle_seq=inputs.seqs.oracle, timing_seq=inputs.seqs.timing,
            profile_sha256=cand_prof[1].profile_sha256 if cand_prof and rs.evidence == "reprofiled" else None,
            profile_diff_sha256=hashlib.sha256(diff_bytes).hexdigest() if diff_bytes else None,
            analysis=analysis,
        ),
        gates=ev.GatesEvaluated(id=cid, attempt=attempt, gates=gate_results, inputs=msgspec.to_builtins(inputs),
                                rules=rs.version),
        verdict=ev.VerdictReached(
            id=cid, attempt=attempt, status=verdict.status, reasons=verdict.reasons, repairable=verdict.repairable,
            speedup=speedup, interval=interval, exploratory=exploratory, reference=ref,
        ),
        profile_diff=diff_bytes,
    )


def campaign_spread(envelopes: list[ev.Envelope], cid: str) -> float | None:
    """The larger of the two arms' standard deviations of log whole-process run time in `cid`'s latest
    campaign (resolution rule 3 sizes the profiled runs by it); None without two runs an arm."""
    s = select(envelopes, cid)
    if s.timing is None:
        return None
    sds = [_arm(_timed_wall(s.timing[1], label))[1] for label in (s.timing[1].targets[0], cid)]
    known = [sd for sd in sds if sd is not None]
    return max(known) if known else None


def saving_to_resolve(envelopes: list[ev.Envelope], cid: str) -> tuple[str | None, float | None]:
    """(the campaign's verdict, the whole-process speedup the mechanism gate scales by) for `cid`'s
    latest attempt, from the events alone: what a reprofile must resolve (``pw.rules.resolution``)."""
    s = select(envelopes, cid)
    if s.timing is None or s.run is None:
        return None, None
    analysis = analyze(s.timing[1], cid)
    wall = analyze(s.timing[1], cid, ":wall_s") if s.run[1].contract.metric.kind == "roi" else None
    verdict = analysis.get("verdict") if analysis else None
    speedup = (wall or analysis or {}).get("speedup")
    return verdict, float(speedup) if isinstance(speedup, (int, float)) else None
