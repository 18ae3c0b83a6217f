"""The gate rules, one frozen value per version: what each version does, by name.

A verdict records the version of the rules it was judged by (``GatesEvaluated.rules``), and
`pw audit` recomputes it under that version's ``RuleSet``. The gates and the judge read the named
fields below and never compare version numbers: a reader of the current rules reads one straight
story, and a reader of an old verdict looks up what its version did here. Each version is its
predecessor with the fields it changed replaced; its one-line reason is ``reason`` (the whole
history, with the evidence behind each step, is in CHANGELOG.md under "Gate rules").

Two families of evidence exist:

``reprofiled`` (versions 1-18)
    Timed pairs without a profiler, and separate profiled runs of each arm afterwards (the
    candidate's reprofile), reconciled by bands: the profile's shares scaled by the campaign's
    speedup, a consistency check between profiled and timed runs, a start-up offset for a profiler
    inside the sandbox. ``pw.rules.gates_reprofiled`` holds those gates.
``pairs`` (version 19 on)
    One kind of run: every timed run is a profiled run, and the mechanism and no-collateral gates read
    per-pair, per-operation costs from the same runs as the speedup (``pw.rules.gates``).
"""

from __future__ import annotations

from typing import Literal

import msgspec


class UnknownRules(ValueError):
    """Gate rules of a version this ProfileWeaver does not know (a run from a newer one)."""


Evidence = Literal["reprofiled", "pairs"]
Scaling = Literal["absolute", "campaign"]


class RuleSet(msgspec.Struct, frozen=True, kw_only=True):
    """What one version of the gate rules does. Field names say the behaviour; see CHANGELOG.md."""

    version: int
    reason: str
    evidence: Evidence = "reprofiled"
    # --- reprofiled evidence (versions 1-18) ---
    # How a sampled profile's costs become seconds: absolute profile values, or each operation's share
    # scaled by the campaign's whole-process speedup.
    sampled_scaling: Scaling = "absolute"
    # The mechanism gate reads concentration: the hotspot's family falls beyond its band, explains at
    # most all of the saving, and the rest of the program does not fall alike; no-collateral checks
    # operations new in the candidate too.
    concentration: bool = False
    # A GPU hotspot also needs the counter its mechanism names to move its way (Nsight Compute).
    gpu_counter: bool = False
    # The profiles must be of the timed programs (profiled runs against the timed median, in a band).
    profile_consistency: bool = False
    # "Explains more than 100%" is capped at 100% + EXPLAINED_EXCESS_MAX whatever the band.
    excess_capped: bool = False
    # An unresolved shrink says how many samples per profile would resolve the saving.
    resolution_detail: bool = False
    # The consistency check compares a merged profile's total per profiled run.
    consistency_per_run: bool = False
    # A profiler inside the sandbox (py-spy) is read with its start-up offset; no-collateral's band is
    # the pooled two-proportion band.
    startup_offset: bool = False
    # The reference's timed spread is at least its arm's spread in the candidate's campaign.
    reference_spread_from_campaign: bool = False
    # The ">100%" band carries the campaign's speedup interval too.
    excess_band_with_speedup: bool = False
    # The rest's cost after is read with the candidate's profiled run's excess over its timed runs.
    profiled_excess_added_back: bool = False
    # The consistency check reads every profiled run a merged profile sums, and no-collateral's band is
    # at least the between-runs band of an operation's share.
    between_runs: bool = False
    # --- evidence-independent judgement ---
    # The verdict also judges the oracle (compares nothing: proposed) and the baseline (shifted since
    # `pw start`: inconclusive).
    oracle_and_baseline: bool = False
    # A campaign on a busy machine decides nothing (host-busy veto).
    contention_veto: bool = False
    # Significance needs the candidate's summed time over the pairs below the baseline's.
    total_time: bool = False
    # A chained candidate must be shown faster than the baseline along its chain of parents.
    chain_cumulative: bool = False
    # A candidate that builds to its reference's running image is rejected as no effect.
    same_image: bool = False
    # An untimed chained candidate is judged against its parent, not the baseline.
    untimed_chain_against_parent: bool = False
    # For a region-of-interest metric, the time outside the region may not grow (no-collateral).
    outside_roi: bool = False
    # A chained candidate is verified only on a chain of verified parents.
    chain_parents_verified: bool = False
    # --- pairs evidence (version 19 on) ---
    # Pairs whose arms ran under unbalanced load are set aside (the campaign admits the rest).
    load_balance: bool = False
    # Cost on lines and in functions the candidate changed counts toward the hotspot's cost after.
    changed_code_attribution: bool = False
    # When the patch reaches beyond the hotspot, the hybrid (the parent with only the hotspot's change)
    # must carry at least half of the candidate's saving.
    hybrid_arm: bool = False
    # Which table names the GPU counter of a mechanism: keywords of the mechanism text, or the classes of
    # pw.rules.mechanisms (data reuse, coalescing, atomics, fusion, occupancy, divergence, launches).
    gpu_counter_catalog: Literal["keywords", "classes"] = "keywords"
    # The mixture (prior scale) of the mechanism fraction's confidence sequence: None, the speedup's
    # (the campaign record's ``prior_scale``); a number, the one the campaign's stopping rule decides
    # the mechanism with (``pw.stats.adaptive.MECHANISM_PRIOR_SCALE``), so the gate reads the
    # campaign's own decision.
    mechanism_prior_scale: float | None = None
    # Pairs with a run whose profile carries no cost (it ended before its profiler attached) are left out
    # of what is read from profiles (mechanism, no collateral): no samples is no evidence, not zero cost.
    unsampled_pairs_apart: bool = False


def _next(previous: RuleSet, version: int, reason: str, **changes: object) -> RuleSet:
    return msgspec.structs.replace(previous, version=version, reason=reason, **changes)


def _history() -> dict[int, RuleSet]:
    v = RuleSet(version=1, reason="sampled profiles compared in absolute values, Poisson bands on sample counts")
    out = {1: v}
    steps: list[tuple[str, dict[str, object]]] = [
        ("sampled profiles compared by share, scaled by the campaign's whole-process speedup",
         {"sampled_scaling": "campaign"}),
        ("mechanism is concentration in the hotspot's family; the verdict judges the oracle and the baseline too",
         {"concentration": True, "oracle_and_baseline": True}),
        ("a GPU hotspot needs the counter its mechanism names to move", {"gpu_counter": True}),
        ("the profiles must be of the timed programs; 'explains more than 100%' is capped",
         {"profile_consistency": True, "excess_capped": True}),
        ("an unresolved shrink says how many samples would resolve the saving", {"resolution_detail": True}),
        ("the consistency check compares a merged profile's total per profiled run", {"consistency_per_run": True}),
        ("a campaign timed on a busy machine decides nothing", {"contention_veto": True}),
        ("a profiler inside the sandbox is read with its start-up offset; pooled collateral band",
         {"startup_offset": True}),
        ("significance needs less summed time; a chained candidate must beat the baseline along its chain",
         {"total_time": True, "chain_cumulative": True}),
        ("the reference's timed spread is at least its arm's in the candidate's campaign",
         {"reference_spread_from_campaign": True}),
        ("the '>100%' band carries the speedup's interval", {"excess_band_with_speedup": True}),
        ("a candidate with its reference's running image is rejected as no effect", {"same_image": True}),
        ("the rest's cost after is read with the profiled run's excess added back",
         {"profiled_excess_added_back": True}),
        ("an untimed chained candidate is judged against its parent", {"untimed_chain_against_parent": True}),
        ("merged profiles are read run by run (launcher reports, between-runs band)", {"between_runs": True}),
        ("for a region-of-interest metric the time outside the region may not grow", {"outside_roi": True}),
        ("a chained candidate is verified only on a chain of verified parents", {"chain_parents_verified": True}),
        ("one kind of run: every timed run is profiled; the gates read per-pair costs from the campaign; "
         "load is measured per pair, not vetoed; changed code counts toward the hotspot; a hybrid arm "
         "tests the hotspot's change alone; the GPU counter is named by the mechanism catalog and shown beside",
         {"evidence": "pairs", "contention_veto": False, "load_balance": True,
          "changed_code_attribution": True, "hybrid_arm": True, "gpu_counter_catalog": "classes",
          "gpu_counter": False}),
        ("the mechanism gate decides the fraction with the campaign's own stopping statistic",
         {"mechanism_prior_scale": 0.5}),
        ("a pair with a run that carries no samples is left out of the mechanism and no collateral",
         {"unsampled_pairs_apart": True}),
    ]
    for version, (reason, changes) in enumerate(steps, start=2):
        v = _next(v, version, reason, **changes)
        out[version] = v
    return out


RULE_SETS: dict[int, RuleSet] = _history()
CURRENT: RuleSet = RULE_SETS[max(RULE_SETS)]
GATE_RULES: int = CURRENT.version
RULE_VERSIONS: tuple[int, ...] = tuple(sorted(RULE_SETS))


def rule_set(version: int) -> RuleSet:
    """The rules of ``version`` (raises UnknownRules for a version this ProfileWeaver does not know)."""
    try:
        return RULE_SETS[version]
    except KeyError:
        raise UnknownRules(f"gate rules v{version} are unknown to this ProfileWeaver "
                           f"(it knows {', '.join(f'v{v}' for v in RULE_VERSIONS)})") from None
