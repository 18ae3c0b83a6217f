"""Adaptive campaigns: when a paired timing campaign stops, and why (pure; the controller's rule).

`pw evaluate` runs pairs in interleaved blocks and, at each *look* (first after `min_pairs` pairs,
then every `look_every` pairs), asks `campaign_look` whether to stop. The test is the anytime-valid
t confidence sequence of pw.stats.sequential (variance estimated from the data), so the interval is
valid whenever the campaign stops, including after a continuation (`pw evaluate --more`): the
sequence runs over every pair from the first, and only the budgets change.

A look stops the campaign for one of four kinds of reason:

    decided   the interval lies above 1+min_effect (faster) or below 1/(1+min_effect) (slower)
    margin    the interval lies inside [1/(1+margin), 1+margin]: no effect beyond the margin
    budget    the pair budget (max_pairs) or the time budget (max_time_s) is spent undecided
    misfit    the running intersection became empty: the data do not fit the model (drift)

`decided` wins over `margin` when both hold (a small but real speedup). Futility stopping is off: a
campaign that cannot be faster still runs until it is slower, equivalent or out of budget, so
`inconclusive` only ever means a spent budget.

`replay_looks` recomputes every recorded look from the samples, which is how `pw audit` checks
that a recorded stop still follows.

Rules (``CAMPAIGN_RULES``; a campaign records its own and is replayed under it):

    pw.campaign/1  the interval at a look is the running intersection over every pair so far.
    pw.campaign/2  the interval at a look is that look's own, not intersected with the earlier
                   ones (each is anytime-valid by itself). On a VM, interference comes in stretches
                   that favour one arm; the intersection keeps the narrowest interval such a
                   stretch produced, and a no-op was verified 1.058x after 7 pairs whose own
                   interval was 0.74-1.52 (benchmarks/real_aa.py). In benchmarks/stats_sim.py's
                   `streaks` model the no-op's false FASTER rate goes 0.11 -> 0.10 and coverage
                   0.66 -> 0.75; on the iid models coverage 0.96 -> 0.99 for about 2% more pairs.
                   Requiring a decision at two looks in a row was measured too: 0.09 on streaks,
                   for 18% more pairs and no stop at the minimum; not taken.
    pw.campaign/3  one kind of run: every pair carries the hotspot's part of each run, and the
                   campaign stops when the speedup and the mechanism (the part's share of the
                   saving, `campaign_look_v3`) are both decided; pairs whose arms' loads differ by
                   more than pw.rules.contention.MAX_LOAD_IMBALANCE are set aside.
    pw.campaign/4  the looks of /3 on the time each run could run (its wall time less its measured
                   wait for a CPU, pw.rules.contention.without_wait), every pair admitted: on 240
                   A/A pairs under a 1.5-CPU load the per-pair spread fell 19.7% -> 11.4% with all
                   pairs kept, where admission at 0.15 kept 150 pairs at 13.2%.
    pw.campaign/5  the looks of /4, with only the wait the program could not have caused itself taken
                   out (pw.rules.contention.running_share): the CPU time its other threads and
                   processes used stays in the run. A red team's helper thread pinned to the main
                   thread's CPU made the main thread wait and had that wait forgiven (verified 1.26x
                   while 2% slower in raw wall). Each run's profile is also reduced with its
                   functions counted by name (pw.rules.attribution.side_cost), whatever line they name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
import numpy as np

from .errors import StatsInputError
from .model import SequentialParams, Verdict
from .samples import as_log_ratios, check_int, check_min_effect, check_open_unit, check_positive, log_ratios
from .sequential import (
    REASONS,
    confidence_sequence,
    radius_factor,
    reason_codes,
    sequential_decision,
    verdict_of_reason,
)

# Bump when a change would stop a recorded campaign at another look or for another reason; keep the
# old rules replayable (module docstring).
CAMPAIGN_RULE = "pw.campaign/5"
CAMPAIGN_RULES: tuple[str, ...] = ("pw.campaign/1", "pw.campaign/2", "pw.campaign/3", "pw.campaign/4",
                                   "pw.campaign/5")
# The rules whose looks decide the speedup and the mechanism on profiled pairs (one kind of run).
PAIRED_RULES: tuple[str, ...] = ("pw.campaign/3", "pw.campaign/4", "pw.campaign/5")
# The rules that judge each run's time less its wait for a CPU (pw.rules.contention.without_wait).
WAIT_RULES: tuple[str, ...] = ("pw.campaign/4", "pw.campaign/5")

StopKind = Literal["decided", "margin", "budget", "misfit"]
LookReason = Literal["continue", "faster", "slower", "same", "max_pairs", "max_time", "empty_interval"]
_KIND: dict[str, StopKind] = {
    "faster": "decided",
    "slower": "decided",
    "same": "margin",
    "max_pairs": "budget",
    "max_time": "budget",
    "empty_interval": "misfit",
}
# Fewest extra pairs the "how many more" estimate ever suggests, and the most it searches.
_MORE_CAP = 100_000
# g of the N(0, g) mixture: 2 keeps the interval bounded from the 4th pair, so a large effect can
# stop at the 5-pair minimum (g = 0.5 is unbounded up to 5 pairs); benchmarks/stats_sim.py measures
# the pairs it costs at CV 5% and 10%.
DEFAULT_PRIOR_SCALE = 2.0


class CampaignParams(msgspec.Struct, frozen=True, kw_only=True):
    """The stopping rule of one campaign part. `max_pairs` counts every pair of the campaign,
    earlier parts included; `max_time_s` counts this part's wall time only."""

    min_effect: float = 0.01
    margin: float = 0.02
    confidence: float = 0.95
    min_pairs: int = 5
    max_pairs: int = 64  # ledger.contract.Sampling's default
    max_time_s: float = 600.0
    look_every: int = 2
    prior_scale: float = DEFAULT_PRIOR_SCALE


class Look(msgspec.Struct, frozen=True, kw_only=True):
    """What the rule said after `n_pairs` pairs (`elapsed_s` into the campaign part)."""

    n_pairs: int
    elapsed_s: float
    stop: bool
    reason: LookReason
    kind: StopKind | None
    verdict: Verdict
    speedup: float
    low: float | None  # the anytime-valid interval so far (ratio scale); None while unbounded
    high: float | None
    more_pairs: int | None  # after a budget stop: pairs the current variance suggests would decide
    # pw.campaign/3: whether the hotspot's part carries the saving ("carried", "not-carried",
    # "undecided"; None: not asked), its fraction's interval, and how many pairs counted.
    mechanism: str | None = None
    fraction: tuple[float | None, float | None, float | None] | None = None
    admitted: int | None = None


def check_campaign(params: CampaignParams) -> CampaignParams:
    check_min_effect(params.min_effect)
    check_min_effect(params.margin)
    check_open_unit("confidence", params.confidence)
    min_pairs = check_int("min_pairs", params.min_pairs, 2)
    check_int("max_pairs", params.max_pairs, min_pairs)
    check_positive("max_time_s", params.max_time_s)
    check_int("look_every", params.look_every, 1)
    check_positive("prior_scale", params.prior_scale)
    return params


def sequential_params(params: CampaignParams) -> SequentialParams:
    return SequentialParams(
        min_effect=params.min_effect,
        confidence=params.confidence,
        min_pairs=params.min_pairs,
        max_pairs=params.max_pairs,
        prior_scale=params.prior_scale,
        stop_on_futility=False,
        margin=params.margin,
    )


def is_look(n_pairs: int, params: CampaignParams, start: int = 0) -> bool:
    """Whether the rule looks after `n_pairs` pairs, in a part that began after `start` pairs.

    The first part looks at min_pairs, then every look_every pairs; a continuation looks every
    look_every pairs after its start (and never before min_pairs). The budget is always a look.
    """
    first = max(params.min_pairs, start + params.look_every)
    if n_pairs >= params.max_pairs:
        return n_pairs == params.max_pairs
    return n_pairs >= first and (n_pairs - first) % params.look_every == 0


def next_look(n_pairs: int, params: CampaignParams, start: int = 0) -> int:
    """The first look strictly after `n_pairs` pairs (capped at max_pairs)."""
    n = n_pairs + 1
    while n < params.max_pairs and not is_look(n, params, start):
        n += 1
    return min(n, params.max_pairs)


def pairs_to_decide(log_ratios: np.ndarray, params: CampaignParams) -> int | None:
    """Extra pairs after which the interval would be decisive if the mean and SD stayed as they are.

    None when no number of pairs would do (the mean sits on a decision boundary) or the SD is 0.
    """
    n = log_ratios.size
    if n < 2:
        return None
    mean = float(log_ratios.mean())
    sd = float(log_ratios.std(ddof=1))
    if sd == 0.0:
        return None
    fast = math.log1p(params.min_effect)
    same = math.log1p(params.margin)
    room = max(abs(mean) - fast, same - abs(mean))  # how far the interval may reach and still decide
    if room <= 0.0:
        return None
    ns = np.arange(n + 1, n + _MORE_CAP + 1, dtype=np.float64)
    half = np.sqrt(radius_factor(ns, params.confidence, params.prior_scale) * sd * sd * (ns - 1.0) / ns)
    ok = np.flatnonzero(half < room)
    return int(ns[ok[0]]) - n if ok.size else None


def check_rule(rule: str) -> str:
    if rule not in CAMPAIGN_RULES:
        raise StatsInputError(f"campaign rule {rule!r} is not one of {', '.join(CAMPAIGN_RULES)}")
    return rule


def _current_decision(d: np.ndarray, params: CampaignParams) -> tuple[str, float, float | None, float | None]:
    """pw.campaign/2: (reason, speedup, low, high) from the interval after the last pair alone."""
    mean, low, high = confidence_sequence(d, params.confidence, params.prior_scale, intersect=False)
    reason = REASONS[int(reason_codes(low, high, sequential_params(params))[-1])]
    lo, hi = float(low[-1]), float(high[-1])
    bounded = math.isfinite(lo) and math.isfinite(hi)
    return reason, float(np.exp(mean[-1])), math.exp(lo) if bounded else None, math.exp(hi) if bounded else None


def campaign_look(
    log_ratios: Sequence[float] | np.ndarray, params: CampaignParams, elapsed_s: float = 0.0,
    rule: str = CAMPAIGN_RULE,
) -> Look:
    """The rule's answer after the pairs so far (every pair of the campaign, in run order)."""
    params = check_campaign(params)
    d = as_log_ratios(log_ratios)
    n = d.size
    if n < params.min_pairs:
        raise StatsInputError(f"a campaign looks from {params.min_pairs} pairs on, got {n}")
    if check_rule(rule) == "pw.campaign/1":
        decision = sequential_decision(d, sequential_params(params))
        iv = decision.interval
        said, speedup = decision.reason, float(decision.speedup)
        low, high = (None, None) if iv is None else (iv.low, iv.high)
    else:
        said, speedup, low, high = _current_decision(d, params)
    reason: LookReason
    if said in ("faster", "slower", "same", "empty_interval"):
        reason = said  # type: ignore[assignment]
    elif n >= params.max_pairs:
        reason = "max_pairs"
    elif elapsed_s >= params.max_time_s:
        reason = "max_time"
    else:
        reason = "continue"
    stop = reason != "continue"
    kind = _KIND.get(reason)
    return Look(
        n_pairs=n,
        elapsed_s=float(elapsed_s),
        stop=stop,
        reason=reason,
        kind=kind,
        verdict=verdict_of_reason(reason),
        speedup=speedup,
        low=low,
        high=high,
        more_pairs=pairs_to_decide(d, params) if kind == "budget" else None,
    )


def running_interval(
    log_ratios: Sequence[float] | np.ndarray, params: CampaignParams, rule: str = CAMPAIGN_RULE
) -> tuple[float, float]:
    """The rule's anytime-valid interval after every pair (ratio scale; inf/0 while unbounded)."""
    d = as_log_ratios(log_ratios)
    intersect = check_rule(rule) == "pw.campaign/1"
    _, low, high = confidence_sequence(d, params.confidence, params.prior_scale, intersect=intersect)
    return float(np.exp(low[-1])), float(np.exp(high[-1]))


def stop_line(look: Look, params: CampaignParams) -> str:
    """What would stop the campaign from here, for a progress line."""
    return (
        f"stops: CI > {1 + params.min_effect:.3g} faster, < {1 / (1 + params.min_effect):.3g} slower, "
        f"within ±{params.margin:.0%} no effect, or {params.max_pairs} pairs / {params.max_time_s:.0f} s"
    )


def progress_line(look: Look, params: CampaignParams) -> str:
    iv = "[unbounded]" if look.low is None else f"[{look.low:.3f}, {look.high:.3f}]"
    return f"pair {look.n_pairs}/{params.max_pairs}: {look.speedup:.3f}x {iv}; {stop_line(look, params)}"


class RecordedLook(msgspec.Struct, frozen=True, kw_only=True):
    n_pairs: int
    elapsed_s: float
    reason: str


def replay_looks(
    log_ratios: Sequence[float] | np.ndarray,
    looks: Sequence[RecordedLook],
    params: CampaignParams,
    start: int = 0,
    rule: str = CAMPAIGN_RULE,
) -> str | None:
    """The first way recorded looks of one campaign part no longer follow from the samples, or None.

    `log_ratios` are every pair of the campaign up to this part's end; the part began after `start`.
    Checks that the looks fall on the schedule, that every look but the last said continue, that
    the last one stopped for the recorded reason, and that the part ends at its last look.
    """
    d = as_log_ratios(log_ratios)
    if not looks:
        return "no looks recorded"
    expected = start
    for k, rec in enumerate(looks, 1):
        expected = next_look(expected, params, start)
        if rec.n_pairs != expected:
            return f"look {k} is after {rec.n_pairs} pairs, but the schedule looks after {expected}"
        if rec.n_pairs > d.size:
            return f"look {k} is after {rec.n_pairs} pairs, but only {d.size} pairs were recorded"
        again = campaign_look(d[: rec.n_pairs], params, rec.elapsed_s, rule)
        last = k == len(looks)
        if again.reason != rec.reason:
            return f"look {k} (after {rec.n_pairs} pairs) recorded {rec.reason}, but the samples give {again.reason}"
        if again.stop != last:
            what = "stops" if again.stop else "continues"
            return f"look {k} (after {rec.n_pairs} pairs) {what}, but the campaign {'ended' if last else 'went on'}"
    if looks[-1].n_pairs != d.size:
        return f"the campaign stopped after {looks[-1].n_pairs} pairs but recorded {d.size}"
    return None


class CampaignOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The times of every pair of the campaign so far and the looks of this part."""

    baseline_s: tuple[float, ...]
    candidate_s: tuple[float, ...]
    looks: tuple[Look, ...]
    aborted: bool  # the measurement gave up (a failed run): no stop was reached


def run_campaign(
    measure: Callable[[int, int], tuple[Sequence[float], Sequence[float]] | None],
    params: CampaignParams,
    *,
    clock: Callable[[], float] = lambda: 0.0,
    earlier: tuple[Sequence[float], Sequence[float]] = ((), ()),
    on_look: Callable[[Look], None] = lambda _look: None,
    rule: str = CAMPAIGN_RULE,
) -> CampaignOutcome:
    """The controller: measure pairs up to each look, ask `campaign_look`, stop when it says so.

    `measure(first, count)` times pairs first..first+count-1 (0-based over the whole campaign) and
    returns their (baseline, candidate) times, or None when a run failed. `earlier` holds the pairs
    of the parts before this one (a continuation); `clock()` is seconds since this part began. The
    same function drives `pw evaluate` (real runs) and benchmarks/stats_sim.py (simulated ones).
    """
    params, rule = check_campaign(params), check_rule(rule)
    base = [float(x) for x in earlier[0]]
    cand = [float(x) for x in earlier[1]]
    start = len(base)
    if start >= params.max_pairs:
        raise StatsInputError(f"max_pairs ({params.max_pairs}) leaves no pairs after the {start} already run")
    looks: list[Look] = []
    n = start
    while True:
        target = next_look(n, params, start)
        got = measure(n, target - n)
        if got is None:
            return CampaignOutcome(baseline_s=tuple(base), candidate_s=tuple(cand), looks=tuple(looks), aborted=True)
        b, c = got
        if len(b) != target - n or len(c) != target - n:
            raise StatsInputError(f"measure({n}, {target - n}) returned {len(b)} and {len(c)} times")
        base.extend(float(x) for x in b)
        cand.extend(float(x) for x in c)
        n = target
        look = campaign_look(log_ratios(base, cand), params, clock(), rule)
        looks.append(look)
        on_look(look)
        if look.stop:
            return CampaignOutcome(baseline_s=tuple(base), candidate_s=tuple(cand), looks=tuple(looks), aborted=False)


# --- pw.campaign/3: the speedup and the mechanism, on the pairs the load admits ----------------------


class MechanismSeries(msgspec.Struct, frozen=True):
    """Per admitted pair: the saving of the part that should carry it (the hotspot's, or the hybrid
    arm's), the whole saving, and the reference's time (each pair is divided by it)."""

    part: tuple[float, ...]
    whole: tuple[float, ...]
    scale: tuple[float, ...]


# g of the mechanism's confidence sequences: its per-pair values (a fraction of the run the hotspot's
# part saved, less the threshold's share of the whole saving) are small against their own spread, so a
# tighter mixture than the log ratios' serves them (benchmarks/stats_sim.py --mechanism-only measured it).
MECHANISM_PRIOR_SCALE = 0.5


def one_sided(confidence: float) -> float:
    """The two-sided level whose each side errs with 1 - ``confidence``: the mechanism asks one
    question at a time ("above the threshold?", or "below it?"), so each side may err at the
    speedup's two-sided rate, not half of it."""
    return 1.0 - 2.0 * (1.0 - confidence)


def mechanism_state(series: MechanismSeries, params: CampaignParams, threshold: float):
    """("carried" | "not-carried" | "undecided", the fraction) at this look (``pw.stats.shares``):
    carried when the fraction's one-sided anytime-valid bound lies above ``threshold``."""
    from .shares import decided_above, fraction

    f = fraction(series.part, series.whole, scale=series.scale, confidence=one_sided(params.confidence),
                 prior_scale=MECHANISM_PRIOR_SCALE)
    above = decided_above(f, threshold)
    return ("undecided" if above is None else "carried" if above else "not-carried"), f


def pairs_to_decide_fraction(series: MechanismSeries, params: CampaignParams, threshold: float) -> int | None:
    """Extra pairs after which the fraction's set would exclude ``threshold`` if the means and the
    per-pair spreads stayed as they are; None when no number would (it sits on the threshold)."""
    a = np.asarray(series.part, dtype=float) / np.asarray(series.scale, dtype=float)
    b = np.asarray(series.whole, dtype=float) / np.asarray(series.scale, dtype=float)
    n = a.size
    if n < 2 or float(b.mean()) == 0.0:
        return None
    est = float(a.mean()) / float(b.mean())
    z = a - est * b  # its spread sets the fraction's half-width, about sd(z) / |mean(b)| x the radius
    sd = float(z.std(ddof=1))
    room = abs(est - threshold) * abs(float(b.mean()))
    if room <= 0.0 or sd == 0.0:
        return None
    ns = np.arange(n + 1, n + _MORE_CAP + 1, dtype=np.float64)
    half = np.sqrt(radius_factor(ns, one_sided(params.confidence), MECHANISM_PRIOR_SCALE) * sd * sd * (ns - 1.0) / ns)
    ok = np.flatnonzero(half < room)
    return int(ns[ok[0]]) - n if ok.size else None


def campaign_look_v3(
    log_ratios: Sequence[float] | np.ndarray, params: CampaignParams, *, elapsed_s: float, pairs_run: int,
    mechanism: MechanismSeries | None, threshold: float = 0.5,
) -> Look:
    """pw.campaign/3: the look after ``pairs_run`` pairs, of which the admitted ones gave
    ``log_ratios`` (and ``mechanism``'s series). It stops when the speedup is decided slower, the same
    or misfit; when faster and the mechanism is decided too (or there is no mechanism to decide); or
    when the budget (pairs run, seconds) is spent. The speedup's reason stays "faster" when only the
    mechanism is undecided at the budget (its kind is then "budget")."""
    params = check_campaign(params)
    d = as_log_ratios(log_ratios)
    spent = pairs_run >= params.max_pairs or elapsed_s >= params.max_time_s
    budget_reason: LookReason = "max_pairs" if pairs_run >= params.max_pairs else "max_time"
    state, frac, more = None, None, None
    if d.size < max(2, params.min_pairs):
        reason: LookReason = budget_reason if spent else "continue"
        speedup, low, high = (float(np.exp(d.mean())) if d.size else 1.0), None, None
        kind = _KIND.get(reason)
        return Look(n_pairs=pairs_run, elapsed_s=float(elapsed_s), stop=reason != "continue", reason=reason,
                    kind=kind, verdict=verdict_of_reason(reason), speedup=speedup, low=low, high=high,
                    more_pairs=None, mechanism=None, fraction=None, admitted=int(d.size))
    said, speedup, low, high = _current_decision(d, params)
    kind = None
    if said == "faster" and mechanism is not None:
        state, f = mechanism_state(mechanism, params, threshold)
        frac = (f.estimate, f.low, f.high)
        if state == "undecided":
            reason = "faster" if spent else "continue"
            kind = "budget" if spent else None
            if spent:
                more = pairs_to_decide_fraction(mechanism, params, threshold)
        else:
            reason, kind = "faster", "decided"
    elif said in ("faster", "slower", "same", "empty_interval"):
        reason, kind = said, _KIND[said]  # type: ignore[assignment]
    elif spent:
        reason, kind = budget_reason, "budget"
        more = pairs_to_decide(d, params)
    else:
        reason = "continue"
    return Look(n_pairs=pairs_run, elapsed_s=float(elapsed_s), stop=kind is not None, reason=reason, kind=kind,
                verdict=verdict_of_reason(reason), speedup=speedup, low=low, high=high, more_pairs=more,
                mechanism=state, fraction=frac, admitted=int(d.size))


def run_looks(
    measure: Callable[[int, int], dict[str, Sequence[float]] | None],
    params: CampaignParams,
    decide: Callable[[dict[str, list[float]], float], Look],
    *,
    clock: Callable[[], float] = lambda: 0.0,
    earlier: dict[str, Sequence[float]] | None = None,
    on_look: Callable[[Look], None] = lambda _look: None,
    length_key: str,
) -> tuple[dict[str, list[float]], tuple[Look, ...], bool]:
    """The controller of pw.campaign/3: measure pairs up to each look (``next_look``), ask ``decide``
    with every series so far, stop when it says so. ``measure(first, count)`` returns each series'
    values for those pairs (None: a run failed); ``length_key`` names the series that counts pairs.
    Returns (every series so far, this part's looks, aborted)."""
    params = check_campaign(params)
    series: dict[str, list[float]] = {k: [float(x) for x in v] for k, v in (earlier or {}).items()}
    start = len(series.get(length_key, []))
    if start >= params.max_pairs:
        raise StatsInputError(f"max_pairs ({params.max_pairs}) leaves no pairs after the {start} already run")
    looks: list[Look] = []
    n = start
    while True:
        target = next_look(n, params, start)
        got = measure(n, target - n)
        if got is None:
            return series, tuple(looks), True
        if len(got.get(length_key, ())) != target - n:
            raise StatsInputError(f"measure({n}, {target - n}) returned {len(got.get(length_key, ()))} pairs")
        for key, values in got.items():
            series.setdefault(key, []).extend(float(x) for x in values)
        n = target
        look = decide(series, clock())
        looks.append(look)
        on_look(look)
        if look.stop:
            return series, tuple(looks), False
