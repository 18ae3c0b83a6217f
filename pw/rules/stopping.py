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


def record_of(params: CampaignParams, looks, stop: str, continues: int | None = None) -> ev.CampaignRecord:
    return ev.CampaignRecord(
        rule=CAMPAIGN_RULE,
        min_effect=params.min_effect,
        margin=params.margin,
        confidence=params.confidence,
        min_pairs=params.min_pairs,
        max_pairs=params.max_pairs,
        max_time_s=params.max_time_s,
        look_every=params.look_every,
        prior_scale=params.prior_scale,
        looks=[ev.CampaignLook(n_pairs=lk.n_pairs, elapsed_s=lk.elapsed_s, reason=lk.reason) for lk in looks],
        stop=stop,
        continues=continues,
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
    return msgspec.structs.replace(
        last, samples=samples, order=[o for p in parts for o in p.order], conditions=conditions
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
