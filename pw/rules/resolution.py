"""How many samples a reprofile needs to resolve the saving it is asked to explain (issue 16).

Pure: numbers in, numbers and decisions out. The mechanism gate (rules 3+, ``pw.rules.gates``)
reads sampled profiles by share: in units of the candidate's run time the hotspot costs
``sb * S`` in the reference and ``sa`` in the candidate (S: the campaign's whole-process speedup,
sb/sa: the hotspot's shares of the two profiles), and its shrink must exceed a band of
``POISSON_SIGMAS`` binomial sigmas of the two shares over the profiles' sample counts nb and na:

    band = 3 * sqrt(S^2 * sb (1 - sb) / nb + sa (1 - sa) / na)

If the hotspot explains the whole saving its shrink is S - 1. One profiled run of matmul-c gives
about 350-650 samples: at 1.05x (an ~85% hotspot) the band is 0.06-0.08 against a shrink of
0.05, so a real 5% saving could never pass. The reprofile therefore grows, one profiled run at a
time with the samples of all runs summed (``ledger.profile.merge_profiles``), until

    band <= RESOLUTION_FRACTION * (S - 1)

so that an honest shrink of S - 1 lies 3 sigmas beyond the band (it fails the gate about once in
700), or until a budget is spent (``max_runs`` profiled runs per profile, ``max_time_s`` for the
whole step). Each run goes to the side (reference or candidate) whose next run shrinks the
variance most. The rule reads the sample counts and the shares (which set the binomial variance)
but never the shrink itself: how long the reprofile grows cannot depend on whether the hotspot
seems to shrink yet, so growing it cannot steer the gate's answer.

Rule ``share-band/2`` adds a futility stop. At each look, the band the whole budget could reach is
predicted: every side at ``max_runs`` runs of the samples per run it has given so far. When even that
band is wider than ``FUTILITY_SLACK`` times the target, growing cannot resolve the saving and the
reprofile stops at once (``futile``), instead of spending up to ``max_runs`` runs per side and
``max_time_s`` to end at ``budget`` with the same answer. This happens for savings of a percent or
two on a whole-process clock that noise made look decided (a cheat that moves its work out of its
region of interest: its wall clock is unchanged), and for a candidate that runs between two samples
(0 samples per run never add up). The prediction reads counts and shares only, like the rest of
the rule. Rule 1 (no futility stop) is kept for the runs recorded under it.

Rule ``share-band/3`` adds a floor on the runs each side's profile sums, from the campaign's own
spread. Binomial sampling error is not the only one: on a host whose runs vary by 10-15%, one
profiled run's hotspot share was 10-15 points off the truth (the interference of that run fell on
the hotspot or on the rest), and an honest 2x interchange read as "explains 116% of the saving",
"a uniform speedup" or "another operation grew" on CI. The floor is ``(spread / PROFILE_SPREAD)^2``
runs (at most FLOOR_MAX and half of ``max_runs``), the arms' larger standard deviation of log run time in the
campaign: the mean of that many runs varies about as much as one run of a host at PROFILE_SPREAD.
A quiet host (spread <= 5%) keeps one run per side. Like the rest, it never reads the shrink.

``replay_resolution`` checks a recorded sequence of looks against the rule, for ``pw audit``.
"""

from __future__ import annotations

import math

import msgspec

from pw.rules.reprofiled_facts import POISSON_SIGMAS, sampled_totals

RESOLUTION_RULES = ("share-band/1", "share-band/2", "share-band/3")
RESOLUTION_RULE = RESOLUTION_RULES[-1]  # what this ProfileWeaver records; audits replay each by its own
# Futile only when the whole budget would still leave the band this many times the target: the
# samples per run and the shares move a little as runs are added.
FUTILITY_SLACK = 1.25
# The band must be at most this fraction of the expected shrink (S - 1): the expected shrink then
# lies (1 / fraction - 1) * POISSON_SIGMAS sigmas beyond the band.
RESOLUTION_FRACTION = 0.5
DECISIONS = ("resolved", "before", "after", "budget", "futile")
# Rule 3: one profiled run per side is enough where the campaign's runs spread at most this much,
# and no floor asks for more than FLOOR_MAX runs a side (a profiled run of matmul-c costs ~2.5 s;
# in benchmarks/reprofile_resolution.py the gain from 5 to 8 runs is ~0.06 of the pass rate).
PROFILE_SPREAD = 0.05
FLOOR_MAX = 5


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    max_runs: int  # profiled runs per profile (the reference's and the candidate's), earlier runs included
    max_time_s: float  # seconds of profiling for the whole step
    min_runs: int = 1  # rule 3: runs each side's profile sums before it may be called resolved


def min_runs_for(spread: float | None, max_runs: int) -> int:
    """Rule 3's floor on each side's profiled runs for a campaign whose arms' larger SD of log run
    time is `spread` (None: not known, one run)."""
    if spread is None or not math.isfinite(spread) or spread <= PROFILE_SPREAD:
        return 1
    return max(1, min(math.ceil(round((spread / PROFILE_SPREAD) ** 2, 9)), max_runs // 2, FLOOR_MAX))


class Look(msgspec.Struct, frozen=True, kw_only=True):
    runs_before: int
    runs_after: int
    samples_before: float
    samples_after: float
    share_before: float
    share_after: float
    elapsed_s: float = 0.0


def _var_terms(share_before: float, share_after: float, speedup: float) -> tuple[float, float]:
    """The binomial variance numerators of the two sides, in units of the candidate's run time."""
    sb, sa = min(max(share_before, 0.0), 1.0), min(max(share_after, 0.0), 1.0)
    return speedup**2 * sb * (1 - sb), sa * (1 - sa)


def target_band(speedup: float | None, fraction: float = RESOLUTION_FRACTION) -> float | None:
    """The widest band that resolves a saving of ``speedup`` (None: no saving to resolve)."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 1.0:
        return None
    return fraction * (speedup - 1.0)


def share_band(share_before: float, share_after: float, speedup: float, samples_before: float,
               samples_after: float) -> float:
    """The mechanism gate's band on the hotspot's scaled shares (``gates._scaled_pair``)."""
    a, b = _var_terms(share_before, share_after, speedup)
    if samples_before <= 0 or samples_after <= 0:
        return math.inf
    return POISSON_SIGMAS * math.sqrt(a / samples_before + b / samples_after)


def required_samples(share_before: float, share_after: float, speedup: float | None,
                     fraction: float = RESOLUTION_FRACTION) -> int | None:
    """Samples per profile (the same number in each) that resolve a saving of ``speedup`` at these
    shares; None when there is no saving to resolve."""
    band = target_band(speedup, fraction)
    if band is None:
        return None
    a, b = _var_terms(share_before, share_after, speedup)  # type: ignore[arg-type]
    return max(1, math.ceil((POISSON_SIGMAS / band) ** 2 * (a + b)))


class UnknownRule(ValueError):
    """A reprofile sized by a rule this ProfileWeaver does not know (written by a newer one, or forged)."""


def reachable_band(look: Look, speedup: float, budget: Budget) -> float:
    """The band if each side took every run the budget allows, at the samples per run it has given
    so far (infinite when a side has given none)."""
    per_run = [look.samples_before / look.runs_before if look.runs_before > 0 else 0.0,
               look.samples_after / look.runs_after if look.runs_after > 0 else 0.0]
    runs = [max(budget.max_runs, look.runs_before), max(budget.max_runs, look.runs_after)]
    return share_band(look.share_before, look.share_after, speedup, per_run[0] * runs[0], per_run[1] * runs[1])


def decide(look: Look, speedup: float | None, budget: Budget, fraction: float = RESOLUTION_FRACTION,
           rule: str = RESOLUTION_RULE) -> str:
    """``resolved`` (the band resolves the saving), ``before``/``after`` (profile one more run of the
    reference/candidate), ``budget`` (spent, or no side may take another run) or, from rule 2 on,
    ``futile`` (even the whole budget could not resolve it)."""
    if rule not in RESOLUTION_RULES:
        raise UnknownRule(f"unknown resolution rule {rule!r} (this ProfileWeaver knows {', '.join(RESOLUTION_RULES)})")
    band_max = target_band(speedup, fraction)
    if band_max is None:
        return "resolved"  # nothing to resolve: the caller records "not-needed" before asking
    band = share_band(look.share_before, look.share_after, speedup, look.samples_before,  # type: ignore[arg-type]
                      look.samples_after)
    floor = budget.min_runs if rule not in ("share-band/1", "share-band/2") else 1
    short = [(runs, side) for side, runs in (("after", look.runs_after), ("before", look.runs_before))
             if runs < min(floor, budget.max_runs)]
    if band <= band_max and not short:
        return "resolved"
    if look.elapsed_s >= budget.max_time_s:
        return "budget"
    if band > band_max and rule != "share-band/1" and \
            reachable_band(look, speedup, budget) > FUTILITY_SLACK * band_max:  # type: ignore[arg-type]
        return "futile"
    if band <= band_max:
        return min(short)[1]  # resolved by its samples, short of the floor: the side with fewer runs
    a, b = _var_terms(look.share_before, look.share_after, speedup)  # type: ignore[arg-type]
    gains = {}
    for side, var, n, runs in (("before", a, look.samples_before, look.runs_before),
                               ("after", b, look.samples_after, look.runs_after)):
        if runs >= budget.max_runs or runs <= 0 or n <= 0:
            continue
        per_run = n / runs  # the next run is expected to give the average of the earlier ones
        gains[side] = var / n - var / (n + per_run)
    if not gains:
        return "budget"
    return max(("after", "before"), key=lambda side: gains.get(side, -1.0))  # ties: the candidate


def replay_resolution(looks: list[Look], decisions: list[str], stop: str, speedup: float | None, budget: Budget,
                      fraction: float = RESOLUTION_FRACTION, rule: str = RESOLUTION_RULE) -> str | None:
    """Whether recorded looks and decisions follow the rule: each decision is what ``decide`` says
    at its look, each look after a ``before``/``after`` has exactly one more run on that side, and
    the last decision is the stop. None when they do, else what does not follow."""
    if not looks or len(looks) != len(decisions):
        return "no looks recorded" if not looks else "looks and decisions differ in number"
    for k, (look, said) in enumerate(zip(looks, decisions)):
        again = decide(look, speedup, budget, fraction, rule)
        if again != said:
            return (f"look {k + 1} ({look.runs_before}+{look.runs_after} runs, {look.samples_before:g}+"
                    f"{look.samples_after:g} samples) recorded {said}, but the rule gives {again}")
        if k + 1 < len(looks):
            if said not in ("before", "after"):
                return f"look {k + 1} recorded {said}, yet the reprofile went on"
            nxt = looks[k + 1]
            step = (nxt.runs_before - look.runs_before, nxt.runs_after - look.runs_after)
            if step != ((1, 0) if said == "before" else (0, 1)):
                return f"look {k + 2} does not add one run to the {said} side after look {k + 1} said so"
    if decisions[-1] != stop:
        return f"the reprofile recorded stop {stop!r}, but its last look says {decisions[-1]!r}"
    return None


def look_of(diff, runs_before: int, runs_after: int, elapsed_s: float = 0.0) -> Look | None:
    """The look at a profile diff (``projections.profile_diff.ProfileDiff``) as the mechanism gate
    reads it (rules 3+: the hotspot's share before, its family's share after, the sample totals);
    None when the profiles are not both sampled or the diff tracks no hotspot."""
    totals, hd = sampled_totals(diff), diff.hotspot
    if totals is None or hd is None:
        return None
    after = hd.family_after if hd.family_after is not None else hd.inclusive_after
    return Look(runs_before=runs_before, runs_after=runs_after, samples_before=totals[0], samples_after=totals[1],
                share_before=hd.inclusive_before / diff.total_before, share_after=min(after / diff.total_after, 1.0),
                elapsed_s=elapsed_s)
