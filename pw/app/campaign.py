"""Paired timing campaigns: interleaved baseline/candidate runs in a seeded, recorded order.

Before the first pair and after the last, both built trees are hashed, so a binary swapped or
rebuilt during the campaign (or a stale one) shows up as a mismatch with what was built.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.contract import Contract
from pw.workload import steps as execute


class CampaignResult(msgspec.Struct, frozen=True):
    timing: ev.TimingRecorded | None
    failure: ev.FaultRecorded | None
    side_effects: list[str]


def campaign_seed(run_id: str, cid: str, attempt: int, purpose: str) -> int:
    """A seed derived from names, recorded in the event: the same campaign reorders the same way."""
    digest = hashlib.sha256(f"{run_id}/{cid}/{attempt}/{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def run_pairs(
    contract: Contract,
    baseline: execute.Target,
    candidate: execute.Target,
    *,
    pairs: int,
    seed: int,
    purpose: str,
    exploratory: bool,
    host: str,
    scratch: Path,
    tool_versions: str,
    progress: Callable[[str], None] = lambda _m: None,
    first: int = 0,
) -> CampaignResult:
    from pw.stats import interleaved_order

    # Pairs first..first+pairs-1 of the campaign's one seeded order (an adaptive campaign runs it block
    # by block, and a continuation picks it up where it stopped).
    order = list(interleaved_order(first + pairs, seed))[first:]
    base_bin_before = execute.binary_digest(baseline)
    cand_bin_before = execute.binary_digest(candidate)
    arms = {"A": baseline, "B": candidate}
    values: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    walls: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    rss: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    side_effects: list[str] = []
    for i, pair in enumerate(order):
        progress(f"pair {first + i + 1} ({pair})")
        for arm in pair:
            target = arms[arm]
            out = execute.run_once(contract, target, scratch, tag=f"pair-{first + i}-{arm}")
            failure = execute.classify(out)
            if failure is not None or out.value is None:
                message = execute.failure_message(contract, out) if failure else (out.metric_error or "no metric")
                fault = ev.FaultRecorded(
                    stage=purpose, target=target.label, failure_class=failure or "launch-failed",
                    message=f"pair {first + i + 1}: {message}",
                )
                return CampaignResult(None, fault, side_effects)
            values[target.label].append(round(out.value, 9))
            walls[target.label].append(round(out.process.wall_s, 9))
            rss[target.label].append(float(out.process.max_rss_kb))
            side_effects.extend(f"{target.label}: {s}" for s in out.side_effects)
    samples = {}
    for label in (baseline.label, candidate.label):
        samples[label] = values[label]
        samples[f"{label}:wall_s"] = walls[label]
        samples[f"{label}:max_rss_kb"] = rss[label]
    conditions = {
        "host": host,
        "argv": " ".join(contract.run.argv),
        "metric": contract.metric.kind,
        "tool_versions": tool_versions,
        "baseline_binary_before": base_bin_before,
        "baseline_binary_after": execute.binary_digest(baseline),
        "candidate_binary_before": cand_bin_before,
        "candidate_binary_after": execute.binary_digest(candidate),
        "side_effects": "; ".join(sorted(set(side_effects))),
    }
    timing = ev.TimingRecorded(
        purpose=purpose,
        targets=[baseline.label, candidate.label],
        metric=f"{contract.metric.kind}_time_s",
        unit="s",
        samples=samples,
        order=order,
        seed=seed,
        exploratory=exploratory,
        conditions=conditions,
        inputs_sha256=cand_bin_before,
    )
    return CampaignResult(timing, None, sorted(set(side_effects)))
