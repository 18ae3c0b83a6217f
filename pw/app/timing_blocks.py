"""Adaptive timing campaigns: blocks of interleaved pairs until the stopping rule says stop.

The controller is `pw.stats.adaptive.run_campaign` (the same one benchmarks/stats_sim.py feeds
simulated timings); this shell gives it real pairs through `campaign.run_pairs`, one block at a time
from the campaign's single seeded order, and records the part as one TimingRecorded whose
`campaign` says which looks were taken, what each said and why the part stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ledger import events as ev
from ledger.contract import Sampling
from ledger.errors import InputError
from pw.app import campaign
from pw.rules import stopping
from pw.stats.adaptive import CampaignParams, progress_line, run_campaign
from pw.workload import steps as execute

# Confirmation is stricter: it never stops before this many pairs (a lucky first block cannot confirm).
CONFIRMATION_MIN_PAIRS = 10


def campaign_params(
    sampling: Sampling,
    *,
    min_pairs: int | None = None,
    max_pairs: int | None = None,
    max_time_s: float | None = None,
) -> CampaignParams:
    """The stopping rule from the manifest's sampling section, with per-call overrides."""
    lo = max(5, sampling.pairs if min_pairs is None else min_pairs)
    hi = sampling.max_pairs if max_pairs is None else max_pairs
    budget = sampling.max_time_s if max_time_s is None else max_time_s
    if hi < lo:
        raise InputError(f"max pairs {hi}: expected at least the {lo} pairs a campaign needs before its first look")
    if not budget > 0:
        raise InputError(f"max time {budget!r}: expected a number of seconds > 0")
    return CampaignParams(margin=sampling.margin, min_pairs=lo, max_pairs=hi, max_time_s=float(budget))


def run_adaptive(
    contract,
    baseline: execute.Target,
    candidate: execute.Target,
    params: CampaignParams,
    *,
    seed: int,
    purpose: str,
    host: str,
    scratch,
    tool_versions: dict[str, str],
    progress: Callable[[str], None] = lambda _m: None,
    earlier: ev.TimingRecorded | None = None,
    continues: int | None = None,
    input_seed: int | None = None,
    checks: dict[str, campaign.RunChecks] | None = None,
) -> campaign.CampaignResult:
    """One part of an adaptive campaign; `earlier` (all parts so far, merged) and `continues` (the
    seq of the last of them) for a continuation."""
    blocks: list[ev.TimingRecorded] = []
    failure: list[ev.FaultRecorded] = []
    side: set[str] = set()
    status = [f"timing: at least {params.min_pairs} pairs, at most {params.max_pairs}"]
    started = time.monotonic()

    def measure(first: int, count: int):
        result = campaign.run_pairs(
            contract, baseline, candidate, pairs=count, seed=seed, purpose=purpose, exploratory=False,
            host=host, scratch=scratch, tool_versions=tool_versions,
            progress=lambda m: progress(f"{status[0]} · running {m}"), first=first, input_seed=input_seed,
            checks=checks,
        )
        side.update(result.side_effects)
        if result.failure is not None:
            failure.append(result.failure)
            return None
        blocks.append(result.timing)
        return result.timing.samples[baseline.label], result.timing.samples[candidate.label]

    def on_look(look) -> None:
        status[0] = progress_line(look, params)
        progress(status[0])

    prior = ((), ())
    if earlier is not None:
        prior = (earlier.samples[baseline.label], earlier.samples[candidate.label])
    outcome = run_campaign(
        measure, params, clock=lambda: round(time.monotonic() - started, 3), earlier=prior, on_look=on_look
    )
    if outcome.aborted:
        return campaign.CampaignResult(None, failure[0], sorted(side))
    last = outcome.looks[-1]
    merged = stopping.merge(blocks)
    record = stopping.record_of(params, outcome.looks, last.kind, continues)
    import msgspec

    return campaign.CampaignResult(msgspec.structs.replace(merged, campaign=record), None, sorted(side))
