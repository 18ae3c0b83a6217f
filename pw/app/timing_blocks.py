"""Adaptive timing campaigns: blocks of interleaved pairs until the stopping rule says stop.

The controller is `pw.stats.adaptive.run_looks` with the looks of `pw.rules.stopping` (pw.campaign/5:
the speedup and the mechanism on the same pairs, each run's time less its wait for a CPU); this shell gives it
real pairs through `campaign.run_pairs`, one block at a time from the campaign's single seeded
order, and records the part as one TimingRecorded whose `campaign` says which looks were taken,
what each said and why the part stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from ledger import events as ev
from ledger.contract import Sampling
from ledger.errors import InputError
from pw.app import campaign
from pw.rules import stopping
from pw.stats.adaptive import CAMPAIGN_RULE, CampaignParams, progress_line, run_looks
from pw.workload import steps as execute

# Confirmation is stricter: it never stops before this many pairs (a lucky first block cannot confirm).
CONFIRMATION_MIN_PAIRS = 10
# The mechanism: the hotspot's part (or the hybrid arm) must carry at least this fraction of the
# saving, "most of the saving" (the campaign decides it on the pairs, like the speedup).
MECHANISM_FRACTION = 0.5


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
    profiling: campaign.Profiling | None = None,
    hybrid: execute.Target | None = None,
    cpus: int = 1,
) -> campaign.CampaignResult:
    """One part of an adaptive campaign (pw.campaign/5, or the rule it began under); `earlier` (all parts so far, merged) and
    `continues` (the seq of the last of them) for a continuation. With ``profiling`` every timed run
    is profiled and, when it carries an attribution, the campaign decides the mechanism too."""
    blocks: list[ev.TimingRecorded] = []
    failure: list[ev.FaultRecorded] = []
    side: set[str] = set()
    status = [f"timing: at least {params.min_pairs} pairs, at most {params.max_pairs}"]
    started = time.monotonic()
    labels = (baseline.label, hybrid.label if hybrid is not None else None, candidate.label)
    fraction = MECHANISM_FRACTION if profiling is not None and profiling.attribution is not None else None
    # A campaign goes on under the rule it began with: its earlier looks and runs were judged and reduced
    # by it, and a rule's reading of the wait needs series an earlier rule's runs may not have.
    rule = earlier.campaign.rule if earlier is not None and earlier.campaign is not None else CAMPAIGN_RULE
    if profiling is not None:
        profiling = profiling.under(rule)

    def measure(first: int, count: int):
        result = campaign.run_pairs(
            contract, baseline, candidate, pairs=count, seed=seed, purpose=purpose, exploratory=False,
            host=host, scratch=scratch, tool_versions=tool_versions,
            progress=lambda m: progress(f"{status[0]} · running {m}"), first=first, input_seed=input_seed,
            checks=checks, profiling=profiling, hybrid=hybrid,
        )
        side.update(result.side_effects)
        if result.failure is not None:
            failure.append(result.failure)
            return None
        blocks.append(result.timing)
        return result.timing.samples

    metric = f"{contract.metric.kind}_time_s"  # as campaign.run_pairs records it

    def decide(series: dict[str, list[float]], elapsed: float):
        judged = stopping.judged_samples(series, rule, labels, cpus, metric)
        return stopping.look_of_samples(judged, labels, params, elapsed, cpus=cpus, max_imbalance=None,
                                        fraction=fraction)

    def on_look(look) -> None:
        status[0] = progress_line(look, params)
        progress(status[0])

    _series, looks, aborted = run_looks(
        measure, params, decide, clock=lambda: round(time.monotonic() - started, 3),
        earlier=dict(earlier.samples) if earlier is not None else None, on_look=on_look, length_key=baseline.label,
    )
    if aborted:
        return campaign.CampaignResult(None, failure[0], sorted(side))
    merged = stopping.merge(blocks)
    record = stopping.record_of(params, looks, looks[-1].kind, continues, mechanism_fraction=fraction, cpus=cpus,
                                rule=rule)
    return campaign.CampaignResult(msgspec.structs.replace(merged, campaign=record), None, sorted(side))
