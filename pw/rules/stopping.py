"""Adaptive campaigns in the ledger: a campaign's parts, its verdict, and whether its stops follow.

An adaptive campaign is one or more TimingRecorded events: the first part, then one per
`pw evaluate --more`, each naming the part it continues (`CampaignRecord.continues`). The judge
reads the whole campaign as one (`merged_timing`), and its verdict and interval come from the
anytime-valid stopping rule (`pw.stats.adaptive`) at the last look, not from the fixed t-interval,
which optional stopping would invalidate (the t-interval stays beside it as `fixed_interval`).
`stop_divergence` replays every look of every part from the recorded samples, for `pw audit`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger import events as ev
from pw.stats.adaptive import (
    CAMPAIGN_RULE,
    CAMPAIGN_RULES,
    PAIRED_RULES,
    WAIT_RULES,
    CampaignParams,
    RecordedLook,
    campaign_look,
    replay_looks,
)
from pw.stats.sequential import METHOD as CS_METHOD


def params_of(record: ev.CampaignRecord) -> CampaignParams:
    return CampaignParams(
        min_effect=record.min_effect,
        margin=record.margin,
        confidence=record.confidence,
        min_pairs=record.min_pairs,
        max_pairs=record.max_pairs,
        max_time_s=record.max_time_s,
        look_every=record.look_every,
        prior_scale=record.prior_scale,
    )


def record_of(params: CampaignParams, looks, stop: str, continues: int | None = None, *,
              max_load_imbalance: float | None = None, mechanism_fraction: float | None = None,
              cpus: int | None = None, rule: str = CAMPAIGN_RULE) -> ev.CampaignRecord:
    return ev.CampaignRecord(
        rule=rule,
        min_effect=params.min_effect,
        margin=params.margin,
        confidence=params.confidence,
        min_pairs=params.min_pairs,
        max_pairs=params.max_pairs,
        max_time_s=params.max_time_s,
        look_every=params.look_every,
        prior_scale=params.prior_scale,
        looks=[ev.CampaignLook(n_pairs=lk.n_pairs, elapsed_s=lk.elapsed_s, reason=lk.reason, mechanism=lk.mechanism,
                               admitted=lk.admitted) for lk in looks],
        stop=stop,
        continues=continues,
        max_load_imbalance=max_load_imbalance,
        mechanism_fraction=mechanism_fraction,
        cpus=cpus,
    )


def chain(timings: dict[int, ev.TimingRecorded], seq: int) -> list[tuple[int, ev.TimingRecorded]]:
    """The parts of the campaign whose last part is at `seq`, first part first."""
    parts = []
    seen = set()
    while seq is not None and seq in timings and seq not in seen:
        seen.add(seq)
        t = timings[seq]
        parts.append((seq, t))
        seq = t.campaign.continues if t.campaign is not None else None
    return parts[::-1]


def merge(parts: list[ev.TimingRecorded]) -> ev.TimingRecorded:
    """One TimingRecorded holding every pair of the parts (the last part's campaign record)."""
    if len(parts) == 1:
        return parts[0]
    first, last = parts[0], parts[-1]
    samples: dict[str, list[float]] = {}
    for part in parts:
        for key, values in part.samples.items():
            samples.setdefault(key, []).extend(values)
    arms = {}
    for label, arm in first.conditions.arms.items():
        after = last.conditions.arms[label].binary_after if label in last.conditions.arms else None
        # A part that started on another tree than the first shows up as a before/after mismatch.
        for part in parts[1:]:
            other = part.conditions.arms.get(label)
            if other is None or other.binary_before != arm.binary_before:
                after = other.binary_before if other is not None else None
                break
        arms[label] = msgspec.structs.replace(arm, binary_after=after)
    conditions = msgspec.structs.replace(
        first.conditions,
        arms=arms,
        side_effects=sorted({e for p in parts for e in p.conditions.side_effects}),
        pair_inputs=[list(a) for p in parts for a in p.conditions.pair_inputs],
    )
    runs: dict[str, list[ev.ProfiledRun]] = {}
    for part in parts:
        for label, profiled in part.runs.items():
            runs.setdefault(label, []).extend(profiled)
    return msgspec.structs.replace(
        last, samples=samples, order=[o for p in parts for o in p.order], conditions=conditions, runs=runs,
        profiler=first.profiler, attribution=first.attribution,
    )


def merged_timing(items, seq: int, timing: ev.TimingRecorded) -> ev.TimingRecorded:
    """`timing` (at `seq`) with the earlier parts of its campaign in front, from (seq, payload) items."""
    if timing.campaign is None or timing.campaign.continues is None:
        return timing
    timings = {s: d for s, d in items if isinstance(d, ev.TimingRecorded)}
    return merge([t for _, t in chain(timings, seq)])


_INTERVAL_OF_RULE = {
    "pw.campaign/1": "running intersection",
    "pw.campaign/2": "at the last look",
    "pw.campaign/3": "at the last look, over the pairs the load admitted",
    "pw.campaign/4": "at the last look, on the time each run could run",
    "pw.campaign/5": "at the last look, on the time each run could run (others' load taken out, not its own)",
}


def with_campaign(analysis: dict[str, Any], record: ev.CampaignRecord, log_ratios) -> dict[str, Any]:
    """The paired analysis with the verdict and interval of the stopping rule at the last look."""
    params = params_of(record)
    elapsed = record.looks[-1].elapsed_s if record.looks else 0.0
    look = campaign_look(log_ratios, params, elapsed, record.rule)
    out = dict(analysis)
    out["fixed_interval"] = analysis["interval"]
    if look.low is not None:
        out["interval"] = {
            "low": look.low,
            "high": look.high,
            "confidence": params.confidence,
            "method": f"{CS_METHOD}, g={params.prior_scale}, {_INTERVAL_OF_RULE.get(record.rule, record.rule)} (anytime-valid)",
        }
    out["verdict"] = look.verdict
    out["campaign"] = {
        "rule": record.rule,
        "stop": look.kind,
        "reason": look.reason,
        "looks": len(record.looks),
        "n_pairs": look.n_pairs,
        "min_effect": params.min_effect,
        "margin": params.margin,
        "max_pairs": params.max_pairs,
        "max_time_s": params.max_time_s,
        "more_pairs": look.more_pairs,
    }
    return out


def stop_divergence(seq: int, timing: ev.TimingRecorded, timings: dict[int, ev.TimingRecorded]) -> str | None:
    """Whether the looks recorded by the campaign part at `seq` still follow from the samples."""
    from pw.stats import StatsInputError, log_ratios

    record = timing.campaign
    if record is None:
        return None
    parts = chain(timings, seq)
    if parts[0][1].campaign is None or (record.continues is not None and len(parts) < 2):
        return f"event seq {seq}: its campaign continues seq {record.continues}, which is no campaign part"
    earlier = merge([t for _, t in parts[:-1]]) if len(parts) > 1 else None
    whole = merge([t for _, t in parts])
    ref, cid = timing.targets[0], timing.targets[-1]
    if record.rule not in CAMPAIGN_RULES:
        return (f"event seq {seq}: campaign rule {record.rule!r} is not one this ProfileWeaver knows "
                f"({', '.join(CAMPAIGN_RULES)})")
    if record.rule in PAIRED_RULES:
        start = len(earlier.samples.get(ref, [])) if earlier is not None else 0
        try:
            problem = replay_v3(whole, record, start)
        except StatsInputError as exc:
            problem = str(exc)
        return None if problem is None else \
            f"event seq {seq}: the timing campaign of {cid} no longer stops where it did: {problem}"
    try:
        d = log_ratios(whole.samples.get(ref, []), whole.samples.get(cid, []))
        looks = [RecordedLook(n_pairs=lk.n_pairs, elapsed_s=lk.elapsed_s, reason=lk.reason) for lk in record.looks]
        start = len(earlier.samples.get(ref, [])) if earlier is not None else 0
        problem = replay_looks(d, looks, params_of(record), start, record.rule)
        if problem is None:
            kind = campaign_look(d, params_of(record), looks[-1].elapsed_s, record.rule).kind
            if kind != record.stop:
                problem = f"the campaign recorded stop {record.stop!r}, but its last look gives {kind!r}"
    except StatsInputError as exc:
        problem = str(exc)
    if problem is None:
        return None
    return f"event seq {seq}: the timing campaign of {cid} no longer stops where it did: {problem}"


# --- pw.campaign/3: one kind of run ----------------------------------------------------------------


def labels_of(timing: ev.TimingRecorded) -> tuple[str, str | None, str]:
    """(reference, hybrid arm or None, candidate) of a campaign's targets."""
    targets = list(timing.targets)
    return targets[0], (targets[1] if len(targets) == 3 else None), targets[-1]


def sampled_pairs(samples: dict[str, list[float]], arms: list[str], n: int) -> list[bool]:
    """Per pair, whether every one of ``arms``' runs carries a profile with any cost in it (the
    ``{label}:sampled`` series; a campaign recorded before that series counts every run as sampled).
    A run that ended before its profiler attached is timed like any other, but says nothing about
    where its time went."""
    out = [True] * n
    for label in arms:
        seen = samples.get(f"{label}:sampled")
        if seen is not None and len(seen) == n:
            out = [ok and bool(v) for ok, v in zip(out, seen)]
    return out


def mechanism_series(samples: dict[str, list[float]], ref: str, hybrid: str | None, cid: str,
                     admitted: list[bool]):
    """The series the mechanism is decided on: with a hybrid arm, the hybrid's saving against the
    candidate's (the hotspot's change alone, tested by intervention); otherwise the hotspot's part's
    saving (``{label}:hot_s``, the same runs' profiles) against the whole. None without either."""
    from pw.stats.adaptive import MechanismSeries

    base, cand = samples.get(ref, []), samples.get(cid, [])
    if hybrid is not None and len(samples.get(hybrid, [])) == len(base):
        part = [b - h for b, h in zip(base, samples[hybrid])]
    elif len(samples.get(f"{ref}:hot_s", [])) == len(base) and len(samples.get(f"{cid}:hot_s", [])) == len(base):
        part = [b - c for b, c in zip(samples[f"{ref}:hot_s"], samples[f"{cid}:hot_s"])]
    else:
        return None
    # The hotspot's part comes from the runs' profiles: a pair with an unsampled run has no such part.
    sampled = [True] * len(base) if hybrid is not None else sampled_pairs(samples, [ref, cid], len(base))
    keep = [i for i, (ok, seen) in enumerate(zip(admitted, sampled)) if ok and seen]
    return MechanismSeries(part=tuple(part[i] for i in keep), whole=tuple(base[i] - cand[i] for i in keep),
                           scale=tuple(base[i] for i in keep))


def look_of_samples(samples: dict[str, list[float]], labels: tuple[str, str | None, str], params: CampaignParams,
                    elapsed_s: float, *, cpus: int, max_imbalance: float | None, fraction: float | None):
    """The pw.campaign/3 look over every pair so far (admission, speedup, mechanism)."""
    import numpy as np

    from pw.rules.contention import admitted_pairs
    from pw.stats.adaptive import campaign_look_v3

    ref, hybrid, cid = labels
    arms = [x for x in (ref, hybrid, cid) if x is not None]
    admitted = admitted_pairs(samples, arms, cpus, max_imbalance)
    base, cand = samples.get(ref, []), samples.get(cid, [])
    d = np.log(np.asarray([b for b, ok in zip(base, admitted) if ok], dtype=float)) - \
        np.log(np.asarray([c for c, ok in zip(cand, admitted) if ok], dtype=float))
    mech = mechanism_series(samples, ref, hybrid, cid, admitted) if fraction is not None else None
    return campaign_look_v3(d, params, elapsed_s=elapsed_s, pairs_run=len(base), mechanism=mech,
                            threshold=fraction if fraction is not None else 0.5)


def judged_samples(samples: dict[str, list[float]], rule: str, labels: tuple[str, str | None, str], cpus: int,
                   metric: str) -> dict[str, list[float]]:
    """The samples a campaign's looks and its judge read: under pw.campaign/4 and /5 each run's times
    less its wait for a CPU (pw.rules.contention.without_wait, by the rule's reading of the wait); as
    recorded under every earlier rule."""
    from pw.rules.contention import without_wait

    if rule not in WAIT_RULES:
        return samples
    return without_wait(samples, [x for x in labels if x is not None], cpus, metric, rule)


def judged_timing(timing: ev.TimingRecorded, cpus: int) -> ev.TimingRecorded:
    """A (merged) campaign as its rule judges it: ``judged_samples`` in place of its samples."""
    record = timing.campaign
    if record is None or record.rule not in WAIT_RULES:
        return timing
    samples = judged_samples(timing.samples, record.rule, labels_of(timing), record.cpus or cpus, timing.metric)
    return msgspec.structs.replace(timing, samples=samples)


def admitted_of(timing: ev.TimingRecorded, cpus: int) -> list[bool]:
    """Which pairs of a (merged) campaign counted (every pair but under pw.campaign/3)."""
    from pw.rules.contention import admitted_pairs

    record = timing.campaign
    ref, hybrid, cid = labels_of(timing)
    if record is None or record.rule != "pw.campaign/3":
        return [True] * len(timing.samples.get(ref, []))
    arms = [x for x in (ref, hybrid, cid) if x is not None]
    return admitted_pairs(timing.samples, arms, record.cpus or cpus, record.max_load_imbalance)


def replay_v3(whole: ev.TimingRecorded, record: ev.CampaignRecord, start: int) -> str | None:
    """pw.campaign/3: the first way this part's recorded looks no longer follow from the samples."""
    from pw.stats.adaptive import next_look

    params = params_of(record)
    labels = labels_of(whole)
    n_all = len(whole.samples.get(labels[0], []))
    expected = start
    for k, rec in enumerate(record.looks, 1):
        expected = next_look(expected, params, start)
        if rec.n_pairs != expected:
            return f"look {k} is after {rec.n_pairs} pairs, but the schedule looks after {expected}"
        if rec.n_pairs > n_all:
            return f"look {k} is after {rec.n_pairs} pairs, but only {n_all} pairs were recorded"
        prefix = judged_samples({key: list(v[:rec.n_pairs]) for key, v in whole.samples.items()}, record.rule,
                                labels, record.cpus or 1, whole.metric)
        again = look_of_samples(prefix, labels, params, rec.elapsed_s, cpus=record.cpus or 1,
                                max_imbalance=record.max_load_imbalance, fraction=record.mechanism_fraction)
        last = k == len(record.looks)
        said = (again.reason, again.mechanism, again.admitted)
        if said != (rec.reason, rec.mechanism, rec.admitted):
            return (f"look {k} (after {rec.n_pairs} pairs) recorded {rec.reason} (mechanism {rec.mechanism}, "
                    f"{rec.admitted} pairs admitted), but the samples give {again.reason} (mechanism "
                    f"{again.mechanism}, {again.admitted} admitted)")
        if again.stop != last:
            what = "stops" if again.stop else "continues"
            return f"look {k} (after {rec.n_pairs} pairs) {what}, but the campaign {'ended' if last else 'went on'}"
        if last and again.kind != record.stop:
            return f"the campaign recorded stop {record.stop!r}, but its last look gives {again.kind!r}"
    if not record.looks:
        return "no looks recorded"
    if record.looks[-1].n_pairs != n_all:
        return f"the campaign stopped after {record.looks[-1].n_pairs} pairs but recorded {n_all}"
    return None


def with_campaign_v3(analysis: dict[str, Any], timing: ev.TimingRecorded, admitted: list[bool]) -> dict[str, Any]:
    """The paired analysis (of the admitted pairs) with the pw.campaign/3 look's verdict, interval,
    mechanism state and how many pairs the load set aside."""
    record = timing.campaign
    params = params_of(record)
    elapsed = record.looks[-1].elapsed_s if record.looks else 0.0
    look = look_of_samples(timing.samples, labels_of(timing), params, elapsed, cpus=record.cpus or 1,
                           max_imbalance=record.max_load_imbalance, fraction=record.mechanism_fraction)
    out = dict(analysis)
    out["fixed_interval"] = analysis["interval"]
    if look.low is not None:
        out["interval"] = {"low": look.low, "high": look.high, "confidence": params.confidence,
                           "method": f"{CS_METHOD}, g={params.prior_scale}, {_INTERVAL_OF_RULE[record.rule]} (anytime-valid)"}
    out["verdict"] = look.verdict
    out["campaign"] = {
        "rule": record.rule, "stop": look.kind, "reason": look.reason, "looks": len(record.looks),
        "n_pairs": look.n_pairs, "admitted": look.admitted, "set_aside": look.n_pairs - (look.admitted or 0),
        "max_load_imbalance": record.max_load_imbalance, "min_effect": params.min_effect, "margin": params.margin,
        "max_pairs": params.max_pairs, "max_time_s": params.max_time_s, "more_pairs": look.more_pairs,
        "mechanism": look.mechanism, "fraction": list(look.fraction) if look.fraction else None,
    }
    return out
