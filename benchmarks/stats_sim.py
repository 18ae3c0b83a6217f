"""Simulated A/A and A/B timing campaigns: error rates, power and pairs used by each design.

    python benchmarks/stats_sim.py [--quick] [--campaigns N] [--seed S]

Each cell (noise model x CV x true speedup) draws `campaigns` independent campaigns. Run times are
multiplicative: log t = log(base) + noise + drift(run position), base 1 for A (the baseline) and
1/speedup for B (the candidate). Noise models, with `cv` the SD of log run time:

    normal   N(0, cv)
    spikes   normal, plus 5% of runs made 20-50% slower (uniform), as by interference
    t3       Student t with 3 degrees of freedom, scaled to SD cv
    drift    normal, plus a trend: each run 0.1% faster than the one before (warm-up-like)
    bursts   normal, plus load that comes and goes (a shared machine): a two-state chain over run
             positions (quiet -> loaded 5% per run, loaded -> quiet 15%: a quarter of the runs, in
             bursts of about 7) and each loaded run 10-60% slower (uniform, drawn per run); both
             runs of a pair mostly share the state, so the log ratios' variance changes over time
    streaks  normal, plus interference that favours one arm for a stretch of pairs (what a VM showed
             a no-op: the baseline 8-20% slower for six pairs in both run orders, then not): a
             two-state chain over pairs (quiet -> streak 4% per pair, streak -> quiet 15%: streaks of
             about 7 pairs, a fifth of the pairs) and in a streak one arm, drawn per streak, 5-25%
             slower (uniform, per run). No interval on iid pairs holds here; the rates show how
             often a rule is fooled.

Designs; every one estimates the run-to-run variance from its own data:

    fixed5     5 interleaved pairs, t-interval on the log ratios (pw.stats.paired)
    fixedN     N interleaved pairs, N = pairs_needed(cv_eff, 0.05): 80% power at a 5% effect with
               FASTER read as "interval above 1+min_effect". cv_eff is the true SD of the noise
               model's log run time (what a preflight measures; for spikes it includes the spikes).
    sequential the anytime-valid confidence sequence (pw.stats.sequential), min 5 pairs,
               max = plan_sequential(cv_eff).max_pairs (2 x N)
    welch      back to back, all N A runs then all N B runs (what hyperfine users do), Welch's
               t-interval on log times: shown for comparison, not required to pass

Adaptive campaigns (the last section) run the product's own controller, pw.stats.adaptive.run_campaign
(what `pw evaluate` calls), fed the simulated run times of each campaign pair by pair, with the
product's default stopping rule (margin ±2%, min 5 pairs, a look every 2 pairs) and max pairs
= plan_sequential(cv_eff).max_pairs, at CV 5% and 10% under every noise model. The pairs ratio is
the mean pairs used over true speedups 1.05/1.10/1.50 divided by fixedN, the fixed design sized for
the same power (80% at a 5% effect; the campaign's measured power there is printed beside it).
Coverage counts campaigns whose reported interval, read where the campaign stopped, holds the true
speedup, over every cell including A/A.

The pair order of the paired designs is blocked-random as in pw.stats.interleaved_order.
Output: one table, then key=value lines; the four headline lines come last.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import integrate, stats

# The repository root first: benchmarks/ledger.py would otherwise shadow the `ledger` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.contract import Sampling  # noqa: E402
from pw.stats.adaptive import CAMPAIGN_RULE, CAMPAIGN_RULES, CampaignParams, run_campaign, run_looks
from pw.stats.effect import CODE_FASTER, verdict_codes
from pw.stats.paired import t_interval_log
from pw.stats.planning import pairs_needed, plan_sequential
from pw.stats.sequential import REASONS, stopping_times

NOISES = ("normal", "spikes", "t3", "drift", "bursts")
# Models no interval on iid pairs is meant to survive: run by the campaign section only, and reported
# apart from the headline (how often each campaign rule is fooled).
STRESS_NOISES = ("streaks",)
CVS = (0.005, 0.02, 0.05, 0.10)
SPEEDUPS = (1.00, 1.02, 1.05, 1.10, 1.50)
DESIGNS = ("fixed5", "fixedN", "sequential", "welch")
MIN_EFFECT = 0.01
CONFIDENCE = 0.95
TARGET_EFFECT = 0.05
SPIKE_P, SPIKE_LO, SPIKE_HI = 0.05, 0.20, 0.50
DRIFT_PER_RUN = -0.001
BURST_ON, BURST_OFF, BURST_LO, BURST_HI = 0.05, 0.15, 0.10, 0.60
STREAK_ON, STREAK_OFF, STREAK_LO, STREAK_HI = 0.04, 0.15, 0.05, 0.25
BOOTSTRAP_NS = (10, 30, 100)  # pw.stats reports the bootstrap from 100 pairs up


def spike_log_variance() -> float:
    """Variance of the log-time added by the spikes: B * log(1 + U), B ~ Bernoulli(p), U ~ U(lo, hi)."""
    width = SPIKE_HI - SPIKE_LO
    m1 = integrate.quad(lambda u: math.log1p(u) / width, SPIKE_LO, SPIKE_HI)[0]
    m2 = integrate.quad(lambda u: math.log1p(u) ** 2 / width, SPIKE_LO, SPIKE_HI)[0]
    return SPIKE_P * m2 - (SPIKE_P * m1) ** 2


def chain_log_variance(p: float, lo: float, hi: float) -> float:
    """Variance of the log-time a stationary load chain adds to a run it hits with probability p:
    B * log(1 + U), B ~ Bernoulli(p), U ~ U(lo, hi)."""
    width = hi - lo
    m1 = integrate.quad(lambda u: math.log1p(u) / width, lo, hi)[0]
    m2 = integrate.quad(lambda u: math.log1p(u) ** 2 / width, lo, hi)[0]
    return p * m2 - (p * m1) ** 2


def burst_log_variance() -> float:
    return chain_log_variance(BURST_ON / (BURST_ON + BURST_OFF), BURST_LO, BURST_HI)


def streak_log_variance() -> float:
    """A streak hits one of the two arms: each run with half the chain's stationary probability."""
    return chain_log_variance(STREAK_ON / (STREAK_ON + STREAK_OFF) / 2.0, STREAK_LO, STREAK_HI)


def effective_cv(noise: str, cv: float) -> float:
    """The true SD of log run time of a noise model, drift aside: what a preflight would measure."""
    extra = {"spikes": spike_log_variance, "bursts": burst_log_variance, "streaks": streak_log_variance}.get(noise)
    return math.sqrt(cv * cv + extra()) if extra else cv


def log_noise(rng: np.random.Generator, noise: str, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    if noise == "t3":
        return rng.standard_t(3, size=shape) * (cv / math.sqrt(3.0))
    x = rng.normal(0.0, cv, size=shape)
    if noise == "spikes":
        hit = rng.random(shape) < SPIKE_P
        x = x + np.where(hit, np.log1p(rng.uniform(SPIKE_LO, SPIKE_HI, size=shape)), 0.0)
    return x


def drift(noise: str, positions: np.ndarray) -> np.ndarray:
    return DRIFT_PER_RUN * positions if noise == "drift" else np.zeros(positions.shape)


def load(rng: np.random.Generator, noise: str, campaigns: int, runs: int) -> np.ndarray:
    """Log-time added at each run position by the machine's load (bursts only): (campaigns, runs)."""
    if noise != "bursts":
        return np.zeros((campaigns, runs))
    loaded = np.zeros((campaigns, runs), dtype=bool)
    state = rng.random(campaigns) < BURST_ON / (BURST_ON + BURST_OFF)  # start in the stationary mix
    flips = rng.random((campaigns, runs))
    for p in range(runs):
        loaded[:, p] = state
        state = np.where(state, flips[:, p] >= BURST_OFF, flips[:, p] < BURST_ON)
    return np.where(loaded, np.log1p(rng.uniform(BURST_LO, BURST_HI, size=(campaigns, runs))), 0.0)


def streaks(rng: np.random.Generator, noise: str, campaigns: int, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Log-time added to the baseline's and the candidate's run of each pair by a streak (streaks
    only): (campaigns, pairs) each."""
    if noise != "streaks":
        return np.zeros((campaigns, pairs)), np.zeros((campaigns, pairs))
    on = np.zeros((campaigns, pairs), dtype=bool)
    hits_a = np.zeros((campaigns, pairs), dtype=bool)
    state = rng.random(campaigns) < STREAK_ON / (STREAK_ON + STREAK_OFF)
    arm_a = rng.random(campaigns) < 0.5
    flips, arms = rng.random((campaigns, pairs)), rng.random((campaigns, pairs)) < 0.5
    for p in range(pairs):
        on[:, p], hits_a[:, p] = state, arm_a
        starts = ~state & (flips[:, p] < STREAK_ON)
        arm_a = np.where(starts, arms[:, p], arm_a)
        state = np.where(state, flips[:, p] >= STREAK_OFF, starts)
    slow = np.log1p(rng.uniform(STREAK_LO, STREAK_HI, size=(campaigns, pairs)))
    return np.where(on & hits_a, slow, 0.0), np.where(on & ~hits_a, slow, 0.0)


def blocked_orders(rng: np.random.Generator, campaigns: int, pairs: int) -> np.ndarray:
    """True where a pair runs A first; blocks of two pairs are (AB, BA) or (BA, AB)."""
    blocks = rng.random((campaigns, (pairs + 1) // 2)) < 0.5
    first_is_a = np.stack([~blocks, blocks], axis=-1).reshape(campaigns, -1)
    return first_is_a[:, :pairs]


@dataclass
class CellResult:
    faster: dict[str, float]  # design -> rate of FASTER
    pairs: dict[str, float]  # design -> mean pairs used


def paired_log_times(rng, noise, cv, speedup, campaigns, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Log run times of the baseline and the candidate per pair, in a blocked-random pair order."""
    first_is_a = blocked_orders(rng, campaigns, pairs)
    base = 2 * np.arange(pairs)
    pos_a = base + np.where(first_is_a, 0, 1)
    pos_b = base + np.where(first_is_a, 1, 0)
    machine = load(rng, noise, campaigns, 2 * pairs)
    streak_a, streak_b = streaks(rng, noise, campaigns, pairs)
    log_a = (log_noise(rng, noise, cv, (campaigns, pairs)) + drift(noise, pos_a) + np.take_along_axis(machine, pos_a, 1)
             + streak_a)
    log_b = (-math.log(speedup) + log_noise(rng, noise, cv, (campaigns, pairs)) + drift(noise, pos_b)
             + np.take_along_axis(machine, pos_b, 1) + streak_b)
    return log_a, log_b


def paired_log_ratios(rng, noise, cv, speedup, campaigns, pairs) -> np.ndarray:
    log_a, log_b = paired_log_times(rng, noise, cv, speedup, campaigns, pairs)
    return log_a - log_b


def fixed_faster_rate(d: np.ndarray, n: int) -> float:
    _, _, lo, hi = t_interval_log(d[:, :n], CONFIDENCE)
    return float(np.mean(verdict_codes(lo, hi, MIN_EFFECT) == CODE_FASTER))


def welch_faster_rate(rng, noise, cv, speedup, campaigns, n) -> float:
    machine = load(rng, noise, campaigns, 2 * n)
    log_a = log_noise(rng, noise, cv, (campaigns, n)) + drift(noise, np.arange(n)) + machine[:, :n]
    log_b = (-math.log(speedup) + log_noise(rng, noise, cv, (campaigns, n)) + drift(noise, n + np.arange(n))
             + machine[:, n:])
    va, vb = log_a.var(axis=1, ddof=1) / n, log_b.var(axis=1, ddof=1) / n
    df = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (n - 1))
    diff = log_a.mean(axis=1) - log_b.mean(axis=1)
    half = stats.t.ppf(0.5 + CONFIDENCE / 2.0, df) * np.sqrt(va + vb)
    return float(np.mean(verdict_codes(diff - half, diff + half, MIN_EFFECT) == CODE_FASTER))


def run_cell(seed_seq, noise, cv, speedup, campaigns, n_fixed, seq_params) -> CellResult:
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    d = paired_log_ratios(rng, noise, cv, speedup, campaigns, max(n_fixed, seq_params.max_pairs))
    used, codes = stopping_times(d, seq_params)
    return CellResult(
        faster={
            "fixed5": fixed_faster_rate(d, 5),
            "fixedN": fixed_faster_rate(d, n_fixed),
            "sequential": float(np.mean(codes == REASONS.index("faster"))),
            "welch": welch_faster_rate(rng, noise, cv, speedup, campaigns, n_fixed),
        },
        pairs={
            "fixed5": 5.0,
            "fixedN": float(n_fixed),
            "sequential": float(used.mean()),
            "welch": float(n_fixed),
        },
    )


CAMPAIGN_CVS = (0.05, 0.10)
CAMPAIGN_SPEEDUPS = (1.00, 1.05, 1.10, 1.50)


@dataclass
class CampaignCell:
    pairs: float  # mean pairs used
    faster: float  # rate of stops with FASTER
    same: float  # rate of "no effect" (within the margin)
    budget: float  # rate of spent budgets (inconclusive)
    covered: float  # rate of reported intervals that hold the true speedup


def campaign_cell(seed_seq, noise, cv, speedup, campaigns, params: CampaignParams,
                  rule: str = CAMPAIGN_RULE) -> CampaignCell:
    """`campaigns` runs of the product's controller on simulated timings of one cell."""
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    log_a, log_b = paired_log_times(rng, noise, cv, speedup, campaigns, params.max_pairs)
    base_s, cand_s = np.exp(log_a), np.exp(log_b)
    pairs, faster, same, budget, covered = [], [], [], [], []
    for i in range(campaigns):

        def measure(first: int, count: int, i: int = i):
            return base_s[i, first : first + count], cand_s[i, first : first + count]

        last = run_campaign(measure, params, rule=rule).looks[-1]
        pairs.append(last.n_pairs)
        faster.append(last.reason == "faster")
        same.append(last.reason == "same")
        budget.append(last.kind == "budget")
        low = 0.0 if last.low is None else last.low
        high = math.inf if last.high is None else last.high
        covered.append(low <= speedup <= high)
    return CampaignCell(*(float(np.mean(x)) for x in (pairs, faster, same, budget, covered)))


def campaign_section(root, campaigns: int, rule: str = CAMPAIGN_RULE) -> tuple[list[str], dict[str, float]]:
    """The adaptive-campaign table and its headline numbers."""
    cells: dict[tuple[str, float, float], CampaignCell] = {}
    fixed: dict[tuple[str, float], int] = {}
    for i, noise in enumerate(NOISES + STRESS_NOISES):
        for j, cv in enumerate(CAMPAIGN_CVS):
            cv_eff = effective_cv(noise, cv)
            fixed[noise, cv] = pairs_needed(cv_eff, TARGET_EFFECT, min_effect=MIN_EFFECT)
            params = CampaignParams(
                max_pairs=plan_sequential(cv_eff, TARGET_EFFECT, min_effect=MIN_EFFECT).max_pairs,
                max_time_s=1e12,
            )
            for k, speedup in enumerate(CAMPAIGN_SPEEDUPS):
                child = np.random.SeedSequence(root.entropy, spawn_key=(77, i, j, k))
                cells[noise, cv, speedup] = campaign_cell(child, noise, cv, speedup, campaigns, params, rule)
    lines = [
        f"\nAdaptive campaigns (pw.stats.adaptive.run_campaign, rule {rule}, {campaigns} per cell, margin "
        f"±{CampaignParams().margin:.0%}): mean pairs, rate FASTER / no effect / budget, coverage",
    ]
    for noise in NOISES + STRESS_NOISES:
        for cv in CAMPAIGN_CVS:
            parts = []
            for s in CAMPAIGN_SPEEDUPS:
                c = cells[noise, cv, s]
                parts.append(f"@{s:.2f} {c.pairs:5.1f}p F{c.faster:.2f} S{c.same:.2f} B{c.budget:.2f} cov{c.covered:.2f}")
            lines.append(f"  {noise:7} {cv * 100:4.1f}% fixedN {fixed[noise, cv]:3d}  " + "  ".join(parts))
    headline = {}
    for cv in CAMPAIGN_CVS:
        ratios = [cells[nz, cv, s].pairs / fixed[nz, cv] for nz in NOISES for s in (1.05, 1.10, 1.50)]
        headline[f"campaign_pairs_ratio_cv{round(cv * 100)}"] = float(np.mean(ratios))
    headline["campaign_power_at_5pct_min"] = min(cells[nz, cv, 1.05].faster for nz in NOISES for cv in CAMPAIGN_CVS)
    headline["campaign_aa_false_verified"] = max(cells[nz, cv, 1.00].faster for nz in NOISES for cv in CAMPAIGN_CVS)
    headline["campaign_coverage"] = min(c.covered for (nz, _, _), c in cells.items() if nz in NOISES)
    for nz in STRESS_NOISES:
        headline[f"campaign_{nz}_aa_false_faster"] = max(cells[nz, cv, 1.00].faster for cv in CAMPAIGN_CVS)
        headline[f"campaign_{nz}_coverage"] = min(c.covered for (n, _, _), c in cells.items() if n == nz)
    return lines, headline


def bootstrap_coverage(rng, campaigns: int, n: int, noise: str) -> tuple[float, float]:
    """A/A coverage of 1.0 by the BCa bootstrap and by the t-interval (2,000 resamples: a bit coarser
    than the library's 9,999, which moves coverage by well under a point)."""
    d = log_noise(rng, noise, 0.05, (campaigns, n)) - log_noise(rng, noise, 0.05, (campaigns, n))
    res = stats.bootstrap(
        (d,),
        np.mean,
        axis=-1,
        n_resamples=2000,
        confidence_level=CONFIDENCE,
        method="BCa",
        rng=rng,
        batch=100,
    )
    boot = float(np.mean((res.confidence_interval.low < 0) & (res.confidence_interval.high > 0)))
    _, _, lo, hi = t_interval_log(d, CONFIDENCE)
    return boot, float(np.mean((lo < 0) & (hi > 0)))


def fmt_rate(x: float) -> str:
    return f"{x:6.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 campaigns per cell (under a minute)")
    parser.add_argument("--campaigns", type=int, default=None, help="campaigns per cell (full: 2000)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--campaign-rule", choices=CAMPAIGN_RULES, default=CAMPAIGN_RULE,
                        help=f"the adaptive campaigns' stopping rule (default {CAMPAIGN_RULE})")
    parser.add_argument("--campaigns-only", action="store_true", help="only the adaptive-campaign section")
    parser.add_argument("--mechanism-only", action="store_true",
                        help="only the mechanism section (pw.campaign/3: the speedup and the mechanism on the pairs)")
    args = parser.parse_args(argv)
    campaigns = args.campaigns or (300 if args.quick else 2000)
    if campaigns < 10:
        parser.error("--campaigns must be at least 10")
    started = time.perf_counter()
    root = np.random.SeedSequence(args.seed)
    if args.mechanism_only:
        return mechanism_report(root, min(campaigns, 400 if args.quick else 1000), started)
    if args.campaigns_only:
        return campaign_report(root, campaigns, args.campaign_rule, started)

    results: dict[tuple[str, float, float], CellResult] = {}
    plans: dict[tuple[str, float], tuple[int, int]] = {}
    for i, noise in enumerate(NOISES):
        for j, cv in enumerate(CVS):
            cv_eff = effective_cv(noise, cv)
            n_fixed = pairs_needed(cv_eff, TARGET_EFFECT, min_effect=MIN_EFFECT)
            seq_params = plan_sequential(cv_eff, TARGET_EFFECT, min_effect=MIN_EFFECT)
            plans[noise, cv] = (n_fixed, seq_params.max_pairs)
            for k, speedup in enumerate(SPEEDUPS):
                child = np.random.SeedSequence(root.entropy, spawn_key=(i, j, k))
                results[noise, cv, speedup] = run_cell(
                    child, noise, cv, speedup, campaigns, n_fixed, seq_params
                )

    header = (
        f"{'noise':7} {'cv':>5} {'design':10} {'pairs':>9} {'A/A F':>6} "
        + " ".join(f"{'P@' + format(s, '.2f'):>6}" for s in SPEEDUPS[1:])
        + "  mean pairs @"
        + "/".join(f"{s:.2f}" for s in SPEEDUPS)
    )
    lines = [
        (
            f"stats_sim: {campaigns} campaigns per cell, seed {args.seed}, min_effect {MIN_EFFECT}, "
            f"confidence {CONFIDENCE}; 'A/A F' = false-FASTER rate at speedup 1.00, 'P@s' = rate of FASTER"
        ),
        header,
        "-" * len(header),
    ]
    for noise in NOISES:
        for cv in CVS:
            n_fixed, max_pairs = plans[noise, cv]
            for design in DESIGNS:
                size = {"fixed5": "5", "fixedN": str(n_fixed), "sequential": f"5..{max_pairs}"}.get(
                    design, f"{n_fixed}+{n_fixed}"
                )
                cells = [results[noise, cv, s] for s in SPEEDUPS]
                rates = " ".join(fmt_rate(c.faster[design]) for c in cells[1:])
                pairs = "/".join(f"{c.pairs[design]:.1f}" for c in cells)
                lines.append(
                    f"{noise:7} {cv * 100:4.1f}% {design:10} {size:>9} {fmt_rate(cells[0].faster[design])} "
                    f"{rates}  {pairs}"
                )
    print("\n".join(lines))

    boot_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(root.entropy, spawn_key=(99,))))
    boot_campaigns = min(campaigns, 1000)
    print(f"\nA/A coverage of the 95% intervals at CV 5% ({boot_campaigns} campaigns): BCa bootstrap vs t")
    coverage = {}
    for noise in ("normal", "t3"):
        for n in BOOTSTRAP_NS:
            boot, tcov = bootstrap_coverage(boot_rng, boot_campaigns, n, noise)
            coverage[noise, n] = boot
            print(f"  {noise:6} n={n:3d}  bootstrap {boot:.3f}  t {tcov:.3f}")

    aa_fixed = max(
        results[nz, cv, 1.00].faster[d] for nz in NOISES for cv in CVS for d in ("fixed5", "fixedN")
    )
    aa_seq = max(results[nz, cv, 1.00].faster["sequential"] for nz in NOISES for cv in CVS)
    aa_welch = max(results[nz, cv, 1.00].faster["welch"] for nz in NOISES for cv in CVS)
    ratios = [
        results[nz, cv, s].pairs["sequential"] / plans[nz, cv][0]
        for nz in NOISES
        for cv in (0.05, 0.10)
        for s in (1.05, 1.10, 1.50)
    ]
    ratio_105 = [
        results[nz, cv, 1.05].pairs["sequential"] / plans[nz, cv][0] for nz in NOISES for cv in (0.05, 0.10)
    ]
    seq_power = min(results["normal", cv, 1.05].faster["sequential"] for cv in (0.05, 0.10))
    fixed_power = min(results["normal", cv, 1.05].faster["fixedN"] for cv in (0.05, 0.10))
    runtime = time.perf_counter() - started
    print()
    print(f"campaigns_per_cell={campaigns}")
    print(f"seed={args.seed}")
    print(f"runtime_s={runtime:.1f}")
    print(f"welch_aa_false_faster_rate={aa_welch:.4f}")
    print(f"fixedN_power_at_5pct={fixed_power:.4f}")
    print(f"sequential_pairs_ratio_at_5pct={np.mean(ratio_105):.4f}")
    for n in BOOTSTRAP_NS:
        print(f"bootstrap_coverage_n{n}_min={min(coverage['normal', n], coverage['t3', n]):.4f}")
    print(f"aa_false_faster_rate_fixed={aa_fixed:.4f}")
    print(f"aa_false_faster_rate_sequential={aa_seq:.4f}")
    print(f"sequential_pairs_ratio={np.mean(ratios):.4f}")
    print(f"sequential_power_at_5pct={seq_power:.4f}")
    return campaign_report(root, campaigns, args.campaign_rule, started + runtime)


def campaign_report(root, campaigns: int, rule: str, started: float) -> int:
    lines, headline = campaign_section(root, campaigns, rule)
    print("\n".join(lines))
    print(f"campaign_rule={rule}")
    print(f"campaign_runtime_s={time.perf_counter() - started:.1f}")
    for nz in STRESS_NOISES:
        for key in (f"campaign_{nz}_aa_false_faster", f"campaign_{nz}_coverage"):
            print(f"{key}={headline[key]:.4f}")
    print(f"campaign_power_at_5pct_min={headline['campaign_power_at_5pct_min']:.4f}")
    for key in ("campaign_pairs_ratio_cv5", "campaign_pairs_ratio_cv10", "campaign_aa_false_verified",
                "campaign_coverage"):
        print(f"{key}={headline[key]:.4f}")
    return 0


# --- the mechanism on the pairs (pw.campaign/3, gate rules 19) -------------------------------------
#
# A 1 s program whose hotspot is 80% of each run (SAMPLES samples a run, as perf at 499 Hz gives a
# 0.4 s run; 400 at 999 Hz): the candidate saves ``saving`` of the run, in the hotspot's code
# ("honest") or outside it ("elsewhere"). Each run's time has CV ``cv``; each run's hotspot seconds are
# its sampled share of the run (binomial over the run's samples) times its time, as the campaign
# reduces a real run's profile. The campaign is pw's: pw.stats.adaptive.run_looks with the looks of
# pw.rules.stopping (min 5 pairs, max 40, a look every 2). "Verified" here = the campaign stopped
# FASTER with the mechanism carried (the fraction's anytime-valid set above 1/2); "mechanism passes"
# = the mechanism carried, whatever stopped the campaign.

MECH_SAMPLES = (200, 400)


def mechanism_campaign(rng, *, cv: float, saving: float, where: str, samples: int, max_pairs: int = 40):
    from pw.rules.stopping import look_of_samples

    params = CampaignParams(max_pairs=max_pairs)
    share_b = 0.8
    share_c = (share_b - saving) / (1 - saving) if where == "honest" else share_b / (1 - saving)

    def measure(first: int, count: int):
        base = np.exp(rng.normal(0, cv, count))
        cand = (1 - saving) * np.exp(rng.normal(0, cv, count))
        hot_b = rng.binomial(samples, share_b, count) / samples * base
        hot_c = rng.binomial(samples, min(share_c, 1.0), count) / samples * cand
        return {"baseline": base.tolist(), "c": cand.tolist(), "baseline:hot_s": hot_b.tolist(), "c:hot_s": hot_c.tolist()}

    def decide(series, elapsed):
        return look_of_samples(series, ("baseline", None, "c"), params, elapsed, cpus=2, max_imbalance=None,
                               fraction=0.5)

    _series, looks, _ = run_looks(measure, params, decide, length_key="baseline")
    last = looks[-1]
    return last.reason == "faster", last.mechanism == "carried", last.n_pairs


def mechanism_report(root, campaigns: int, started: float) -> int:
    planned = plan_sequential(0.05, TARGET_EFFECT, min_effect=MIN_EFFECT).max_pairs
    default = Sampling().max_pairs  # the budget a campaign has unless its manifest says otherwise
    cells = [(cv, saving, where, n, budget) for budget in (40, default) for n in MECH_SAMPLES for cv in (0.05,)
             for saving in (0.05,) for where in ("honest", "elsewhere")] + \
        [(0.10, 0.05, "honest", 400, default), (0.05, 0.5, "honest", 200, default)]
    print(f"\nMechanism on the pairs (pw.campaign/3), {campaigns} campaigns per cell: hotspot 80% of the run")
    print(f"{'cv':>5} {'saving':>7} {'where':>10} {'samples/run':>11} {'budget':>6} {'faster':>7} {'verified':>9} "
          f"{'mech passes':>11} {'mean pairs':>10}")
    out = {}
    for k, (cv, saving, where, n, budget) in enumerate(cells):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(root.entropy, spawn_key=(77, k))))
        got = [mechanism_campaign(rng, cv=cv, saving=saving, where=where, samples=n, max_pairs=budget)
               for _ in range(campaigns)]
        faster = sum(f for f, _, _ in got) / campaigns
        verified = sum(f and m for f, m, _ in got) / campaigns
        passes = sum(m for _, m, _ in got) / campaigns
        pairs = sum(p for _, _, p in got) / campaigns
        out[cv, saving, where, n, budget] = (verified, passes, pairs, faster)
        print(f"{cv * 100:4.1f}% {saving * 100:6.1f}% {where:>10} {n:>11} {budget:>6} {faster:>7.3f} {verified:>9.3f} "
              f"{passes:>11.3f} {pairs:>10.1f}")
    print(f"mechanism_campaigns_per_cell={campaigns}")
    print(f"mechanism_runtime_s={time.perf_counter() - started:.1f}")
    for budget in (40, default):
        for n in MECH_SAMPLES:
            print(f"mechanism_honest5_cv5_verified_s{n}_b{budget}={out[0.05, 0.05, 'honest', n, budget][0]:.4f}")
            print(f"mechanism_elsewhere5_cv5_passes_s{n}_b{budget}={out[0.05, 0.05, 'elsewhere', n, budget][1]:.4f}")
        print(f"mechanism_speedup_power_cv5_b{budget}={out[0.05, 0.05, 'honest', 400, budget][3]:.4f}")
    print(f"mechanism_planned_budget_pairs={planned}")
    print(f"mechanism_default_budget_pairs={default}")
    print(f"mechanism_honest5_cv5_verified={out[0.05, 0.05, 'honest', 200, default][0]:.4f}")
    print(f"mechanism_elsewhere5_cv5_passes={max(v[1] for k, v in out.items() if k[2] == 'elsewhere'):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
