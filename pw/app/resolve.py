"""Grow a sampled reprofile until it resolves the saving it is asked to explain (issue 16).

After a candidate's reprofile (and after `pw evaluate --more`), when its campaign decided FASTER:
the mechanism gate can only see the hotspot shrink beyond 3 binomial sigmas of the two profiles'
shares, so `pw.rules.resolution` says how many samples the campaign's speedup needs and which side
(the reference's profile or the candidate's) to profile once more. Each extra run is its own
ProfileCaptured and ProfileNormalized (audit renormalizes it from the raw capture like any other);
a side that grew gets a ProfileNormalized whose `parts` are its single-run profiles and whose
profile sums their samples, and that is the profile the judge compares. ReprofileResolved records
every look (runs, samples, shares, band, decision), so `pw audit` replays the sizing from the
evidence. The reference's merged profile stays in the ledger: later candidates start from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from ledger import events as ev
from ledger.profile import Profile, decode_profile, encode_profile, merge_profiles, mergeable
from pw.app.run import RunHandle
from pw.rules import judge
from pw.rules import resolution as rz

#: Called with a side's label: (the target to profile it on, the build note of its capture).
TargetFor = Callable[[str], tuple[object, str | None]]


def parts_of(normalized: ev.ProfileNormalized) -> list[str]:
    """The single-run profiles a recorded profile sums (itself, when it is one run)."""
    return list(normalized.parts) or [normalized.profile_sha256]


def resolve_reprofile(handle: RunHandle, state, cid: str, target_for: TargetFor, progress: Callable[[str], None],
                      profile_once: Callable) -> object:
    """Profile the reference and the candidate `cid` again until the hotspot's share band resolves the
    campaign's saving or the manifest's budget (`profiling.max_runs`, `profiling.max_time_s`) is
    spent; record the merged profiles and a ReprofileResolved. No-op (no event) where the profiles are
    not sampled or there is no hotspot or reprofile to compare."""
    envelopes = handle.ledger.events()
    s = judge.select(envelopes, cid)
    if s.timing is None or s.candidate_profile is None or s.baseline_profile is None or s.hotspot is None:
        return state
    ref = s.timing[1].targets[0]
    base, cand, hot = s.baseline_profile[1], s.candidate_profile[1], s.hotspot[1]
    adapter = cand.adapter
    before_parts, after_parts = parts_of(base), parts_of(cand)
    profiles: dict[str, Profile] = {sha: decode_profile(handle.evidence.get(sha)) for sha in before_parts + after_parts}
    if not all(mergeable(p) for p in profiles.values()):
        return state  # exact counters (callgrind) or a timeline: nothing to resolve by sampling more
    if any(hot.metric not in p.metrics for p in profiles.values()):
        return state  # not measured in the hotspot's metric: the mechanism gate says so
    contract = state.run.contract
    spread = judge.campaign_spread(envelopes, cid)
    budget = rz.Budget(max_runs=contract.profiling.max_runs, max_time_s=contract.profiling.max_time_s,
                       min_runs=rz.min_runs_for(spread, contract.profiling.max_runs))
    verdict, speedup = judge.saving_to_resolve(envelopes, cid)
    common = dict(target=cid, reference=ref, adapter=adapter, rule=rz.RESOLUTION_RULE, speedup=speedup,
                  fraction=rz.RESOLUTION_FRACTION, target_band=rz.target_band(speedup), max_runs=budget.max_runs,
                  max_time_s=budget.max_time_s, min_runs=budget.min_runs, spread=spread)
    if verdict != "FASTER" or rz.target_band(speedup) is None:
        return handle.record(state, [ev.ReprofileResolved(
            **common, looks=[], stop="not-needed", required_samples=None, before_parts=before_parts,
            after_parts=after_parts, reason=f"the campaign did not decide faster ({verdict}): no saving to resolve")])

    def capture(side: str, look: ev.ResolutionLook) -> Profile:
        nonlocal state
        label = ref if side == "before" else cid
        run = (look.runs_before if side == "before" else look.runs_after) + 1
        if look.band <= rz.target_band(speedup):  # type: ignore[operator]
            progress(f"reprofile: the campaign's runs spread {spread:.1%} (> {rz.PROFILE_SPREAD:.0%}): profiling "
                     f"{label} again (run {run} of the {budget.min_runs} each side's profile sums)")
        else:
            progress(f"reprofile: band {look.band:.3g} > {rz.target_band(speedup):.3g} (resolving a "  # type: ignore[operator]
                     f"{speedup - 1:.1%} saving) at {look.samples_before:g} + {look.samples_after:g} samples: "  # type: ignore[operator]
                     f"profiling {label} again (run {run} of at most {budget.max_runs})")
        profiled, note = target_for(label)
        state, result = profile_once(handle, state, profiled, adapter, note)
        return result.profile

    grown = grow(profiles, before_parts, after_parts, hot.operation, hot.metric, speedup, budget,  # type: ignore[arg-type]
                 capture, lambda p: handle.evidence.put(encode_profile(p)))
    looks, merged_b, merged_a = grown.looks, grown.merged_before, grown.merged_after
    if not looks:
        return state  # the diff tracks no hotspot: the gate says so without a sizing
    grown_sides = {"before": len(before_parts) > len(parts_of(base)), "after": len(after_parts) > len(parts_of(cand))}
    merged_events: list[ev.Payload] = []
    for side, label, parts, merged in (("before", ref, before_parts, merged_b), ("after", cid, after_parts, merged_a)):
        if grown_sides[side]:
            merged_events.append(ev.ProfileNormalized(
                adapter=adapter, target=label, profile_sha256=handle.evidence.put(encode_profile(merged)),
                primary_metric=merged.primary_metric, total=merged.totals.get(merged.primary_metric, 0.0),
                parts=list(parts)))
    last = looks[-1]
    need = rz.required_samples(last.share_before, last.share_after, speedup)
    if last.decision == "resolved":
        reason = (f"band {last.band:.3g} <= {rz.RESOLUTION_FRACTION:g} x the {speedup - 1:.1%} saving at "  # type: ignore[operator]
                  f"{last.samples_before:g} + {last.samples_after:g} samples ({last.runs_before} + {last.runs_after} "
                  "profiled runs)")
        if budget.min_runs > 1:
            reason += (f"; at least {budget.min_runs} runs per side, as the campaign's runs spread {spread:.1%} "
                       f"(> {rz.PROFILE_SPREAD:.0%})")
    elif last.decision == "futile":
        reach = rz.reachable_band(rz.Look(**{f: getattr(last, f) for f in rz.Look.__struct_fields__}),
                                  speedup, budget)  # type: ignore[arg-type]
        reason = (f"futile: {budget.max_runs} runs per profile at the samples per run seen so far ("
                  f"{last.samples_before / last.runs_before:.0f} + {last.samples_after / last.runs_after:.0f}) "
                  f"would leave the band at {reach:.3g} > {rz.target_band(speedup):.3g}, so it stopped growing; "  # type: ignore[operator]
                  f"about {need} samples per profile would resolve a {speedup - 1:.1%} saving")  # type: ignore[operator]
    else:
        reason = (f"budget spent ({budget.max_runs} runs per profile, {budget.max_time_s:g} s) at "
                  f"{last.runs_before} + {last.runs_after} runs, {last.samples_before:g} + {last.samples_after:g} "
                  f"samples: band {last.band:.3g} > {rz.target_band(speedup):.3g}; about {need} samples per profile "
                  "would resolve it")
    progress(f"reprofile: {reason}")
    return handle.record(state, [*merged_events, ev.ReprofileResolved(
        **common, looks=looks, stop=last.decision, required_samples=need,  # type: ignore[arg-type]
        before_parts=before_parts, after_parts=after_parts, reason=reason)])


class Grown(msgspec.Struct, frozen=True):
    looks: list[ev.ResolutionLook]
    merged_before: Profile | None
    merged_after: Profile | None


def grow(profiles: dict[str, Profile], before_parts: list[str], after_parts: list[str], hotspot: str, metric: str,
         speedup: float, budget: rz.Budget, capture: Callable[[str, ev.ResolutionLook], Profile],
         store: Callable[[Profile], str], clock: Callable[[], float] = time.monotonic,
         rule: str = rz.RESOLUTION_RULE) -> Grown:
    """The resolution loop: look at the merged profiles, ask the rule, and while it names a side,
    `capture` one more run of it (its profile is stored by `store`, which returns its sha256, and
    appended to that side's parts, in place). No looks when the diff tracks no hotspot."""
    from projections.profile_diff import diff_profiles

    started = clock()
    looks: list[ev.ResolutionLook] = []
    while True:
        merged_b = merge_profiles([profiles[p] for p in before_parts])
        merged_a = merge_profiles([profiles[p] for p in after_parts])
        look = rz.look_of(diff_profiles(merged_b, merged_a, hotspot=hotspot, metric=metric),
                          len(before_parts), len(after_parts), round(clock() - started, 3))
        if look is None:
            return Grown(looks=[], merged_before=None, merged_after=None)
        decision = rz.decide(look, speedup, budget, rule=rule)
        band = rz.share_band(look.share_before, look.share_after, speedup, look.samples_before, look.samples_after)
        looks.append(ev.ResolutionLook(
            runs_before=look.runs_before, runs_after=look.runs_after, samples_before=look.samples_before,
            samples_after=look.samples_after, share_before=look.share_before, share_after=look.share_after,
            band=band, elapsed_s=look.elapsed_s, decision=decision))  # type: ignore[arg-type]
        if decision in ("resolved", "budget", "futile"):
            return Grown(looks=looks, merged_before=merged_b, merged_after=merged_a)
        profile = capture(decision, looks[-1])
        sha = store(profile)
        profiles[sha] = profile
        (before_parts if decision == "before" else after_parts).append(sha)
