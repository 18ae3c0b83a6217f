"""The facts the current gates read, from one campaign whose every timed run was profiled (pure).

``pair_facts`` turns a merged TimingRecorded (samples, each run's profile by sha256, the attribution
the runs were reduced by) and the profile bytes into ``pw.rules.gates.PairFacts``: per admitted
pair, the timed metric, the whole run, the hotspot's part, the reach of the changed code, the
system time, and every other operation's seconds. The judge and `pw audit` call it alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ledger import events as ev
from ledger.profile import Profile, decode_profile
from pw.rules import attribution as attr
from pw.rules import stopping
from pw.rules.gate_facts import COLLATERAL_MIN_SHARE
from pw.rules.gates import PairFacts


def profiles_of(timing: ev.TimingRecorded) -> list[str]:
    """Every run profile (sha256) a campaign's judgement reads."""
    return [run.profile for label in timing.targets for run in timing.runs.get(label, [])]


def _keep(values: list[float], mask: list[bool]) -> list[float]:
    return [v for v, ok in zip(values, mask) if ok]


def _ops_of(profile: Profile, wall: float) -> dict[str, float]:
    return attr.operation_seconds(profile, wall)


def _excluded(profile: Profile, sides: list[ev.CodeSide]) -> set[str]:
    """Operations that are the hotspot's part or changed code (checked by the mechanism, not here)."""
    out = set()
    for op in profile.operations:
        if any(attr.belongs(op, side) for side in sides):
            out.add(op.id)
    return out


def operation_costs(timing: ev.TimingRecorded, profiles: Mapping[str, bytes], mask: list[bool],
                    ref: str, cid: str) -> dict[str, list[list[float]]]:
    """Each other operation's seconds per admitted pair, [reference, candidate], for operations at or
    above COLLATERAL_MIN_SHARE of either arm's mean run (``[machine]`` and the hotspot's part aside)."""
    a = timing.attribution
    sides = [a.hotspot, a.changed] if a is not None else []
    arms = []
    excluded: set[str] = {"[machine]"}
    for label in (ref, cid):
        runs = timing.runs.get(label, [])
        walls = timing.samples.get(f"{label}:wall_s", [])
        per_run = []
        for run, wall, ok in zip(runs, walls, mask):
            if not ok:
                continue
            prof = decode_profile(profiles[run.profile])
            excluded |= _excluded(prof, sides)
            per_run.append(_ops_of(prof, wall))
        arms.append(per_run)
    n = min(len(arms[0]), len(arms[1]))
    if n == 0:
        return {}
    walls_ref = _keep(timing.samples.get(f"{ref}:wall_s", []), mask)
    mean_wall = math.fsum(walls_ref) / max(1, len(walls_ref))
    names = sorted({k for side in arms for run in side for k in run} - excluded)
    out = {}
    for name in names:
        before = [arms[0][i].get(name, 0.0) for i in range(n)]
        after = [arms[1][i].get(name, 0.0) for i in range(n)]
        if max(math.fsum(before), math.fsum(after)) / n >= COLLATERAL_MIN_SHARE * mean_wall:
            out[name] = [before, after]
    return out


def pair_facts(timing: ev.TimingRecorded, profiles: Mapping[str, bytes], cpus: int,
               hybrid_status: str, *, unsampled_apart: bool = True) -> PairFacts | None:
    """The current gates' view of a profiled campaign (None when its runs carry no profiles). With
    ``unsampled_apart`` (``RuleSet.unsampled_pairs_apart``), the pairs it lists are the admitted pairs
    whose runs all carry samples: the gates reading it read profiles."""
    if timing.profiler is None or not timing.runs:
        return None
    ref, hybrid, cid = stopping.labels_of(timing)
    admitted = stopping.admitted_of(timing, cpus)
    arms = [x for x in (ref, hybrid, cid) if x is not None]
    sampled = stopping.sampled_pairs(timing.samples, arms, len(admitted)) if unsampled_apart else [True] * len(admitted)
    mask = [ok and seen for ok, seen in zip(admitted, sampled)]
    s = timing.samples
    record = timing.campaign
    a = timing.attribution

    def get(key: str) -> list[float]:
        values = s.get(key, [])
        return _keep(values, mask) if len(values) == len(mask) else []

    return PairFacts(
        reference=ref, candidate=cid, hybrid=hybrid, metric=timing.metric, profiler=timing.profiler.adapter,
        pairs_run=len(mask), set_aside=admitted.count(False),
        unsampled=sum(1 for ok, seen in zip(admitted, sampled) if ok and not seen),
        max_load_imbalance=record.max_load_imbalance if record is not None else None,
        reference_s=get(ref), candidate_s=get(cid), hybrid_s=get(hybrid) if hybrid else [],
        reference_wall_s=get(f"{ref}:wall_s"), candidate_wall_s=get(f"{cid}:wall_s"),
        hot_reference_s=get(f"{ref}:hot_s"), hot_candidate_s=get(f"{cid}:hot_s"),
        reach_reference_s=get(f"{ref}:reach_s"),
        sys_reference_s=get(f"{ref}:sys_s"), sys_candidate_s=get(f"{cid}:sys_s"),
        operations=operation_costs(timing, profiles, mask, ref, cid),
        changed_functions=list(a.changed_functions) if a is not None else [],
        beyond=list(a.beyond) if a is not None else [],
        hybrid_status="timed" if hybrid else hybrid_status,
        confidence=record.confidence if record is not None else 0.95,
        prior_scale=record.prior_scale if record is not None else 2.0,
    )


def admitted_analysis(timing: ev.TimingRecorded, cid: str, cpus: int, suffix: str = "") -> dict[str, Any] | None:
    """The paired analysis of a pw.campaign/3 campaign over its admitted pairs, with its look's verdict."""
    import msgspec

    from pw.stats import StatsInputError, analyze_pairs
    from pw.stats.order import pair_order_of

    ref = timing.targets[0]
    mask = stopping.admitted_of(timing, cpus)
    base = _keep(timing.samples.get(ref + suffix, []), mask)
    cand = _keep(timing.samples.get(cid + suffix, []), mask)
    order = [pair_order_of(o) if len(o) == 3 else o for o in _keep(list(timing.order), mask)]
    try:
        out = msgspec.to_builtins(analyze_pairs(base, cand, order=order, seed=timing.seed))
    except StatsInputError:
        if timing.campaign is None or suffix:
            return None
        # too few pairs admitted to analyse: still the campaign's look, so the verdict says how many
        # pairs the load set aside and what budget was spent, not merely that nothing was analysed
        out = {"speedup": None, "interval": None, "n_pairs": sum(mask), "verdict": "INCONCLUSIVE"}
    if timing.campaign is not None and not suffix:
        out = stopping.with_campaign_v3(out, timing, mask)
    return out
