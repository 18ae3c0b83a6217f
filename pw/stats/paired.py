"""Paired analysis of interleaved baseline/candidate runs.

Per pair i, d_i = log(baseline_i / candidate_i). The speedup is exp(mean d), the geometric mean of
the per-pair ratios. Its interval is Student's t-interval on the d_i, exponentiated: exact under
normal log ratios at every n >= 2 and close to nominal under the heavy-tailed noise simulated in
benchmarks/stats_sim.py. A seeded BCa bootstrap (Efron, "Better bootstrap confidence intervals",
JASA 82, 1987; scipy.stats.bootstrap) is reported beside it only from `bootstrap_min_pairs` pairs up,
because the simulation shows it under-covers below that (and still somewhat under heavy tails);
the verdict never reads it. The Wilcoxon
signed-rank p-value (scipy.stats.wilcoxon) is reported beside both.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import msgspec
import numpy as np
from scipy.stats import DegenerateDataWarning, bootstrap, t, wilcoxon

from .drift import drift_report
from .effect import verdict_of
from .errors import StatsInputError
from .model import (
    INCONCLUSIVE,
    METHOD_VERSION,
    VERDICT_RULE,
    Interval,
    OutlierReport,
    PairedAnalysis,
    PairedInputs,
    PairedParams,
    PairOrder,
    RobustCheck,
    Verdict,
)
from .order import interleaved_order
from .outliers import DEFAULT_THRESHOLD, flag_outliers
from .robust import hodges_lehmann
from .samples import check_int, check_min_effect, check_open_unit, check_positive, paired_times

# benchmarks/stats_sim.py: BCa covers 0.86-0.90 at 10 pairs and 0.89-0.93 at 30 (normal and t3 noise),
# 0.925-0.95 at 100; below 100 pairs it would be a narrower interval that is not a 95% one.
DEFAULT_BOOTSTRAP_MIN_PAIRS = 100
DEFAULT_N_RESAMPLES = 9999


def t_interval_log(d: np.ndarray, confidence: float) -> tuple[np.ndarray, ...]:
    """(mean, sd, low, high) of the t-interval for the mean of `d` along the last axis (log scale).

    Works on a batch of campaigns at once (shape (..., n)); n >= 2.
    """
    n = d.shape[-1]
    mean = d.mean(axis=-1)
    sd = d.std(axis=-1, ddof=1)
    half = float(t.ppf(0.5 + confidence / 2.0, n - 1)) * sd / np.sqrt(n)
    return mean, sd, mean - half, mean + half


def wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value for a zero median of `d` (1.0 when every d is 0)."""
    if not np.any(d != 0.0):
        return 1.0
    return float(wilcoxon(d).pvalue)


def bootstrap_interval(d: np.ndarray, confidence: float, seed: int, n_resamples: int) -> Interval | None:
    """Seeded BCa bootstrap interval of the geometric-mean speedup; None if the data are degenerate."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateDataWarning)
        try:
            result = bootstrap(
                (d,),
                np.mean,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method="BCa",
                rng=np.random.Generator(np.random.PCG64(seed)),
            )
        except DegenerateDataWarning:
            return None
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return Interval(
        low=float(np.exp(low)),
        high=float(np.exp(high)),
        confidence=confidence,
        method=f"BCa bootstrap of the mean log ratio, {n_resamples} resamples, PCG64 seed {seed}",
    )


def _checked_order(order: Sequence[str], n: int, order_seed: int | None) -> tuple[PairOrder, ...]:
    if isinstance(order, str):
        raise StatsInputError('order must be a sequence of "AB"/"BA" strings, got one string')
    try:
        checked = tuple(order)
    except TypeError:
        raise StatsInputError(f'order must be a sequence of "AB"/"BA", got {order!r}') from None
    if len(checked) != n:
        raise StatsInputError(f"order must give one entry per pair: {n} pairs, {len(checked)} entries")
    for i, o in enumerate(checked):
        if o not in ("AB", "BA"):
            raise StatsInputError(f'order entries must be "AB" or "BA", got {o!r} at index {i}')
    if order_seed is not None:
        check_int("order_seed", order_seed, 0)
        if list(checked) != interleaved_order(n, order_seed):
            raise StatsInputError(f"order does not match interleaved_order({n}, seed={order_seed})")
    return checked  # type: ignore[return-value]


def analyze_pairs(
    baseline_s: Sequence[float],
    candidate_s: Sequence[float],
    *,
    order: Sequence[str],
    min_effect: float = 0.01,
    confidence: float = 0.95,
    seed: int = 0,
    order_seed: int | None = None,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    bootstrap_min_pairs: int = DEFAULT_BOOTSTRAP_MIN_PAIRS,
    outlier_z: float = DEFAULT_THRESHOLD,
    drift_alpha: float = 0.01,
) -> PairedAnalysis:
    """Judge interleaved pairs of run times (seconds): speedup, intervals, verdict and checks.

    `order[i]` is "AB" when pair i ran the baseline first. Raises StatsInputError for inputs no
    statistic can be computed from; zero spread in the log ratios gives INCONCLUSIVE.
    """
    base, cand = paired_times(baseline_s, candidate_s, min_pairs=2)
    n = base.size
    checked_order = _checked_order(order, n, order_seed)
    params = PairedParams(
        min_effect=check_min_effect(min_effect),
        confidence=check_open_unit("confidence", confidence),
        seed=check_int("seed", seed, 0),
        n_resamples=check_int("n_resamples", n_resamples, 1),
        bootstrap_min_pairs=check_int("bootstrap_min_pairs", bootstrap_min_pairs, 2),
        outlier_z=check_positive("outlier_z", outlier_z),
        drift_alpha=check_open_unit("drift_alpha", drift_alpha),
    )
    inputs = PairedInputs(
        baseline_s=tuple(float(x) for x in base),
        candidate_s=tuple(float(x) for x in cand),
        order=checked_order,
        order_seed=order_seed,
    )
    d = np.log(base) - np.log(cand)
    zero_spread = bool(np.ptp(d) == 0.0)
    notes: list[str] = []

    mean, sd, interval = _t_interval(d, zero_spread, params.confidence, notes)
    verdict: Verdict = (
        INCONCLUSIVE if zero_spread else verdict_of(interval.low, interval.high, params.min_effect)
    )

    boot = None
    if n >= params.bootstrap_min_pairs and not zero_spread:
        boot = bootstrap_interval(d, params.confidence, params.seed, params.n_resamples)

    outliers = OutlierReport(
        threshold=params.outlier_z,
        pairs=flag_outliers(d, params.outlier_z),
        baseline_runs=flag_outliers(np.log(base), params.outlier_z),
        candidate_runs=flag_outliers(np.log(cand), params.outlier_z),
    )
    robust = _robust_check(d, zero_spread, params, notes)

    return PairedAnalysis(
        method_version=METHOD_VERSION,
        n_pairs=n,
        speedup=float(np.exp(mean)),
        log_ratio_mean=mean,
        log_ratio_sd=sd,
        interval=interval,
        bootstrap=boot,
        wilcoxon_p=wilcoxon_p(d),
        verdict=verdict,
        verdict_rule=VERDICT_RULE,
        outliers=outliers,
        robust=robust,
        verdict_depends_on_outliers=bool(outliers.pairs) and robust.verdict != verdict,
        drift=drift_report(base, cand, checked_order, alpha=params.drift_alpha),
        notes=tuple(notes),
        inputs=inputs,
        params=params,
    )


def _t_interval(d: np.ndarray, zero_spread: bool, confidence: float, notes: list[str]) -> tuple[float, float, Interval]:
    """(mean, sd, interval of the speedup) from Student's t on the log ratios; with zero spread the
    one ratio and a note saying why no interval could be estimated."""
    mean, sd, lo, hi = (float(v) for v in t_interval_log(d, confidence))
    if zero_spread:
        mean, sd, lo, hi = float(d[0]), 0.0, float(d[0]), float(d[0])
        notes.append(
            "log ratios have zero spread, so no interval can be estimated; verdict INCONCLUSIVE "
            "(is the timer resolution too coarse?)"
        )
    interval = Interval(
        low=float(np.exp(lo)),
        high=float(np.exp(hi)),
        confidence=confidence,
        method="Student t on per-pair log ratios",
    )
    return mean, sd, interval


def _robust_check(d: np.ndarray, zero_spread: bool, params: PairedParams, notes: list[str]) -> RobustCheck:
    """The Hodges-Lehmann speedup, its signed-rank interval and the verdict it gives; a note when
    the few pairs cannot reach the nominal coverage."""
    hl, hl_lo, hl_hi, achieved = hodges_lehmann(d, params.confidence)
    robust_interval = Interval(
        low=float(np.exp(hl_lo)),
        high=float(np.exp(hl_hi)),
        confidence=achieved,
        method="Hodges-Lehmann with the signed-rank (Walsh average) interval",
    )
    if achieved < params.confidence:
        notes.append(
            f"with {d.size} pairs the robust interval reaches only {achieved:.4f} coverage, "
            f"below the nominal {params.confidence}"
        )
    robust_verdict: Verdict = (
        INCONCLUSIVE
        if zero_spread
        else verdict_of(robust_interval.low, robust_interval.high, params.min_effect)
    )
    return RobustCheck(speedup=float(np.exp(hl)), interval=robust_interval, verdict=robust_verdict)


def reanalyze(recorded: PairedAnalysis | dict) -> PairedAnalysis:
    """Recompute a recorded analysis from its own inputs and params (a Struct or its builtins dict).

    An auditor compares `msgspec.json.encode` of the two; any difference is a divergence.
    """
    if isinstance(recorded, dict):
        recorded = _decode_analysis(recorded)
    if recorded.method_version != METHOD_VERSION:
        raise StatsInputError(
            f"recorded method_version {recorded.method_version!r} is not this engine's {METHOD_VERSION!r}"
        )
    p, i = recorded.params, recorded.inputs
    return analyze_pairs(
        i.baseline_s,
        i.candidate_s,
        order=i.order,
        order_seed=i.order_seed,
        min_effect=p.min_effect,
        confidence=p.confidence,
        seed=p.seed,
        n_resamples=p.n_resamples,
        bootstrap_min_pairs=p.bootstrap_min_pairs,
        outlier_z=p.outlier_z,
        drift_alpha=p.drift_alpha,
    )


def _decode_analysis(data: dict) -> PairedAnalysis:
    try:
        return msgspec.convert(data, PairedAnalysis)
    except msgspec.ValidationError as exc:
        raise StatsInputError(f"not a recorded PairedAnalysis: {exc}") from None
