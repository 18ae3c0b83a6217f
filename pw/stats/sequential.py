"""Sequential mode: an anytime-valid confidence sequence on the per-pair log ratios.

Method: the Gaussian-mixture t confidence sequence of Wang & Ramdas, "Anytime-valid t-tests and
confidence sequences for Gaussian means with unknown variance", arXiv:2310.03722 (2023), which
replaces the flat mixture over the mean in Lai, "On confidence sequences", Ann. Statist. 4 (1976)
265-280, by a Gaussian one so that the statistic is a true test martingale. The variance is never
assumed known: the test of H0: mean = m is the Bayes factor of the scale-invariant part of the data,
mixing the standardized effect (mean - m)/sigma over N(0, g) and sigma over the right Haar measure
d(sigma)/sigma. With y_i = d_i - m, r = (sum y)^2 / (n sum y^2) and c = n g / (1 + n g),

    BF_n(m) = (1 + n g)^(-1/2) * (1 - c r)^(-n/2),

a nonnegative martingale under H0 in the filtration of the scale-invariant statistic (Pérez-Ortiz, Lardy, de Heide & Grünwald, "E-statistics, group
invariance and anytime-valid testing", Ann. Statist. 52 (2024)), so by Ville's inequality
P(BF_n(m) >= 1/alpha for some n) <= alpha. The confidence sequence is {m : BF_n(m) < 1/alpha}:

    |mean_n - m| < sqrt(rho / (1 - rho) * S_n / n),   rho = (1 - (alpha^2/(1 + n g))^(1/n)) / c,

unbounded while rho >= 1 (with g = 0.5 and alpha = 0.05, up to n = 5), S_n the sum of squared
deviations. The running intersection over n is reported (still valid at any stopping time).

A pure function for a controller loop: `sequential_decision(log_ratios_so_far, params)` says whether
to stop, why, and the verdict and interval so far. It may stop after any pair from `min_pairs` up to
`max_pairs`; the verdict rule is the fixed one (pw.stats.effect) applied to the anytime-valid
interval. A prefix where every log ratio is equal carries no information about sigma; the interval is
kept unbounded there instead of collapsing to a point.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from .errors import StatsInputError
from .model import (
    FASTER,
    INCONCLUSIVE,
    METHOD_VERSION,
    SAME,
    SLOWER,
    Interval,
    SequentialDecision,
    SequentialParams,
    StopReason,
    Verdict,
)
from .samples import as_log_ratios, check_int, check_min_effect, check_open_unit, check_positive

METHOD = "t confidence sequence (Wang & Ramdas 2023, after Lai 1976): N(0,g) mixture, right-Haar sigma"

REASONS: tuple[StopReason, ...] = (
    "below_min_pairs",
    "continue",
    "faster",
    "slower",
    "same",
    "futility",
    "max_pairs",
    "empty_interval",
)
_CODE = {reason: i for i, reason in enumerate(REASONS)}
STOPPING = frozenset(("faster", "slower", "same", "futility", "max_pairs", "empty_interval"))
_VERDICT_OF_REASON: dict[str, Verdict] = {"faster": FASTER, "slower": SLOWER, "same": SAME}


def radius_factor(n: np.ndarray, confidence: float, prior_scale: float) -> np.ndarray:
    """rho/(1-rho) per n: the half-width is sqrt(factor * S_n / n); inf where it is unbounded."""
    n = np.asarray(n, dtype=np.float64)
    alpha = 1.0 - confidence
    ng = n * prior_scale
    log_k = (2.0 * np.log(alpha) - np.log1p(ng)) / n
    rho = -np.expm1(log_k) * (1.0 + ng) / ng  # (1 - K) / c
    factor = np.full(n.shape, np.inf)
    bounded = rho < 1.0
    factor[bounded] = rho[bounded] / (1.0 - rho[bounded])
    return factor


def confidence_sequence(
    d: np.ndarray, confidence: float, prior_scale: float, *, intersect: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(running mean, low, high) on the log scale after each pair, along the last axis.

    `low`/`high` are the running intersection of the per-n intervals (±inf while unbounded), or with
    `intersect=False` each n's own interval. Works on a batch of campaigns at once (shape (..., n)).
    """
    n = np.arange(1, d.shape[-1] + 1, dtype=np.float64)
    y = d - d[..., :1]  # shifted by the first value: keeps sum-of-squares cancellation small
    sum_y = np.cumsum(y, axis=-1)
    ss = np.maximum(np.cumsum(y * y, axis=-1) - sum_y * sum_y / n, 0.0)
    mean = d[..., :1] + sum_y / n
    factor = radius_factor(n, confidence, prior_scale)
    with np.errstate(invalid="ignore"):  # inf * 0 where a flat prefix meets an unbounded factor
        half = np.sqrt(factor * ss / n)
    half = np.where((ss > 0.0) & np.isfinite(factor), half, np.inf)
    if not intersect:
        return mean, mean - half, mean + half
    low = np.maximum.accumulate(mean - half, axis=-1)
    high = np.minimum.accumulate(mean + half, axis=-1)
    return mean, low, high


def reason_codes(low: np.ndarray, high: np.ndarray, params: SequentialParams) -> np.ndarray:
    """Index into REASONS after each pair, from the running interval (log scale), along the last axis."""
    n = np.arange(1, low.shape[-1] + 1)
    margin = np.log1p(params.min_effect)
    same = np.log1p(params.margin if params.margin is not None else params.min_effect)
    codes = np.full(low.shape, _CODE["continue"], dtype=np.int8)
    codes[..., n >= params.max_pairs] = _CODE["max_pairs"]
    if params.stop_on_futility:
        codes[high <= margin] = _CODE["futility"]
    codes[(low >= -same) & (high <= same)] = _CODE["same"]
    codes[high < -margin] = _CODE["slower"]
    codes[low > margin] = _CODE["faster"]
    codes[low > high] = _CODE["empty_interval"]
    codes[..., n < params.min_pairs] = _CODE["below_min_pairs"]
    return codes


def stopping_times(d: np.ndarray, params: SequentialParams) -> tuple[np.ndarray, np.ndarray]:
    """For a batch of campaigns d (shape (campaigns, >= max_pairs)): pairs used and stop reason codes.

    The simulation's view of `sequential_decision`: the controller stops at the first pair whose
    reason is a stopping one.
    """
    d = d[:, : params.max_pairs]
    _, low, high = confidence_sequence(d, params.confidence, params.prior_scale)
    codes = reason_codes(low, high, params)
    stops = np.isin(codes, [_CODE[r] for r in STOPPING])
    first = np.where(stops.any(axis=-1), stops.argmax(axis=-1), d.shape[-1] - 1)
    return first + 1, codes[np.arange(d.shape[0]), first]


def verdict_of_reason(reason: str) -> Verdict:
    return _VERDICT_OF_REASON.get(reason, INCONCLUSIVE)


def check_params(params: SequentialParams) -> SequentialParams:
    check_min_effect(params.min_effect)
    check_open_unit("confidence", params.confidence)
    min_pairs = check_int("min_pairs", params.min_pairs, 2)
    check_int("max_pairs", params.max_pairs, min_pairs)
    check_positive("prior_scale", params.prior_scale)
    if params.margin is not None:
        check_min_effect(params.margin)
    if not isinstance(params.stop_on_futility, bool):
        raise StatsInputError(f"stop_on_futility must be a bool, got {params.stop_on_futility!r}")
    return params


def sequential_decision(
    log_ratios: Sequence[float] | np.ndarray, params: SequentialParams | None = None
) -> SequentialDecision:
    """Whether to stop after the pairs seen so far, why, and the verdict and interval so far.

    `log_ratios` are log(baseline/candidate) per pair in run order (see pw.stats.log_ratios).
    Before `min_pairs` pairs it never stops; at `max_pairs` it always does.
    """
    params = check_params(params if params is not None else SequentialParams())
    d = as_log_ratios(log_ratios)
    n = d.size
    recorded = tuple(float(x) for x in d)
    if n == 0:
        return SequentialDecision(
            method_version=METHOD_VERSION,
            n_pairs=0,
            stop=False,
            reason="below_min_pairs",
            verdict=INCONCLUSIVE,
            speedup=None,
            interval=None,
            method=METHOD,
            log_ratios=recorded,
            params=params,
        )
    mean, low, high = confidence_sequence(d, params.confidence, params.prior_scale)
    reason = REASONS[int(reason_codes(low, high, params)[-1])]
    lo, hi = float(low[-1]), float(high[-1])
    interval = None
    if np.isfinite(lo) and np.isfinite(hi):
        interval = Interval(
            low=float(np.exp(lo)),
            high=float(np.exp(hi)),
            confidence=params.confidence,
            method=f"{METHOD}, g={params.prior_scale}, running intersection",
        )
    return SequentialDecision(
        method_version=METHOD_VERSION,
        n_pairs=n,
        stop=reason in STOPPING,
        reason=reason,
        verdict=verdict_of_reason(reason),
        speedup=float(np.exp(mean[-1])),
        interval=interval,
        method=METHOD,
        log_ratios=recorded,
        params=params,
    )


def redecide(recorded: SequentialDecision | dict) -> SequentialDecision:
    """Recompute a recorded decision from its own log ratios and params (Struct or builtins dict)."""
    if isinstance(recorded, dict):
        try:
            recorded = msgspec.convert(recorded, SequentialDecision)
        except msgspec.ValidationError as exc:
            raise StatsInputError(f"not a recorded SequentialDecision: {exc}") from None
    if recorded.method_version != METHOD_VERSION:
        raise StatsInputError(
            f"recorded method_version {recorded.method_version!r} is not this engine's {METHOD_VERSION!r}"
        )
    return sequential_decision(recorded.log_ratios, recorded.params)
