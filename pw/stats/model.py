"""Result types of the statistics engine: frozen msgspec Structs, plain data only.

Every result carries its inputs and parameters (seeds included), so `msgspec.to_builtins(result)` is a
JSON-able dict from which an auditor recomputes the result bit for bit (`pw.stats.reanalyze`,
`pw.stats.redecide`). Speedups are baseline_time / candidate_time: above 1 the candidate is faster.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# Bump when a change in any statistic would change a recorded result for the same inputs; an auditor
# compares it before recomputing.
METHOD_VERSION = "pw.stats/1"

Verdict = Literal["FASTER", "SLOWER", "SAME", "INCONCLUSIVE"]
FASTER: Verdict = "FASTER"
SLOWER: Verdict = "SLOWER"
SAME: Verdict = "SAME"
INCONCLUSIVE: Verdict = "INCONCLUSIVE"

VERDICT_RULE = (
    "FASTER if low > 1+min_effect; SLOWER if high < 1/(1+min_effect); "
    "SAME if 1/(1+min_effect) <= low and high <= 1+min_effect; else INCONCLUSIVE"
)

PairOrder = Literal["AB", "BA"]

StopReason = Literal[
    "below_min_pairs",  # keep going: fewer pairs than the minimum
    "continue",  # keep going: the interval is not yet decisive
    "faster",  # stop: the interval lies above 1+min_effect
    "slower",  # stop: the interval lies below 1/(1+min_effect)
    "same",  # stop: the interval lies inside [1/(1+min_effect), 1+min_effect]
    "futility",  # stop: the interval lies below 1+min_effect, so FASTER can no longer be reached
    "max_pairs",  # stop: the pair budget is spent without a decisive interval
    "empty_interval",  # stop: the running intersection became empty (the model does not fit the data)
]


class Interval(msgspec.Struct, frozen=True, kw_only=True):
    """An interval for the speedup (baseline/candidate), on the ratio scale."""

    low: float
    high: float
    confidence: float  # nominal, or achieved where the method cannot hit the nominal level exactly
    method: str


class PairedInputs(msgspec.Struct, frozen=True, kw_only=True):
    baseline_s: tuple[float, ...]
    candidate_s: tuple[float, ...]
    order: tuple[PairOrder, ...]  # per pair, which arm ran first: "AB" = baseline first
    order_seed: int | None = None  # the seed `interleaved_order` drew `order` from, when known


class PairedParams(msgspec.Struct, frozen=True, kw_only=True):
    min_effect: float
    confidence: float
    seed: int  # the bootstrap's seed
    n_resamples: int
    bootstrap_min_pairs: int
    outlier_z: float
    drift_alpha: float


class OutlierReport(msgspec.Struct, frozen=True, kw_only=True):
    """Indices (0-based) flagged by a robust z above `threshold`; every flagged value is kept."""

    threshold: float
    pairs: tuple[int, ...]  # flagged log ratios
    baseline_runs: tuple[int, ...]  # flagged baseline times (by pair index)
    candidate_runs: tuple[int, ...]  # flagged candidate times (by pair index)


class RobustCheck(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict again from a median-based estimate that outliers cannot move much."""

    speedup: float  # exp(Hodges–Lehmann estimate of the log ratios)
    interval: Interval
    verdict: Verdict


class ArmTrend(msgspec.Struct, frozen=True, kw_only=True):
    """Spearman rank correlation of one arm's times against run position."""

    arm: Literal["baseline", "candidate"]
    spearman_rho: float | None  # None when it is undefined (fewer than 3 runs, constant times)
    p_value: float | None


class DriftReport(msgspec.Struct, frozen=True, kw_only=True):
    baseline: ArmTrend
    candidate: ArmTrend
    # Second-run-in-the-pair effect: mean log(t_second / t_first) after removing the A/B difference.
    position_effect: float | None
    position_p: float | None
    warmup_pairs: tuple[int, ...]  # pairs among the first 3 where a run is a slow outlier of its arm
    alpha: float
    drift_detected: bool


class PairedAnalysis(msgspec.Struct, frozen=True, kw_only=True):
    method_version: str
    n_pairs: int
    speedup: float  # geometric mean of the per-pair ratios baseline/candidate
    log_ratio_mean: float
    log_ratio_sd: float
    interval: Interval  # t-interval on the log ratios; the verdict is read from it
    bootstrap: Interval | None  # seeded BCa bootstrap, reported beside; None below bootstrap_min_pairs
    wilcoxon_p: float
    verdict: Verdict
    verdict_rule: str
    outliers: OutlierReport
    robust: RobustCheck
    # True when outliers were flagged and the robust (median-based) verdict differs from `verdict`.
    verdict_depends_on_outliers: bool
    drift: DriftReport
    notes: tuple[str, ...]
    inputs: PairedInputs
    params: PairedParams


class SequentialParams(msgspec.Struct, frozen=True, kw_only=True):
    min_effect: float = 0.01
    confidence: float = 0.95
    min_pairs: int = 5
    max_pairs: int = 100
    prior_scale: float = 0.5  # variance g of the N(0, g) mixture over the standardized effect
    stop_on_futility: bool = True
    # Equivalence margin: SAME when the interval lies inside [1/(1+margin), 1+margin]. None: min_effect.
    margin: float | None = None


class SequentialDecision(msgspec.Struct, frozen=True, kw_only=True):
    method_version: str
    n_pairs: int
    stop: bool
    reason: StopReason
    verdict: Verdict
    speedup: float | None  # geometric mean so far; None before the first pair
    interval: Interval | None  # the anytime-valid interval so far; None while it is unbounded
    method: str
    log_ratios: tuple[float, ...]
    params: SequentialParams
