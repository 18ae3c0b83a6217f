"""Whether the machine was too busy for a campaign's timings to say anything about the code.

A paired campaign's statistics assume that run-to-run noise is independent of the arm. A busy
machine breaks that in a way no interval sees: a second timed workload on the same cores (another
agent's campaign, a build) alternates its own heavy and light runs, and for a stretch of pairs
its heavy runs can fall on one arm. On this 2-core host, with other jobs running, a no-op of
series-c was *verified* at 1.058x: six pairs in a row had the baseline 8-20% slower in both run
orders (benchmarks/real_aa.py). Its runs had waited for a CPU about half their wall time.

pw's launcher reports, for each timed run, how long the program's main thread was runnable but
waiting for a CPU (``run_queue_s``, from /proc/PID/schedstat) and how much CPU time the hypervisor
took from the machine meanwhile (``steal_s``, from /proc/stat, summed over the virtual CPUs). The
*delayed share* of a run is (run_queue_s + steal_s / cpus) / wall_s: the part of its wall time in
which it could not run because of someone else's load. When either arm's median delayed share
exceeds CONTENDED_SHARE, a FASTER verdict is doubted (gate rules 8): the timings are of the load.

Pure: reads recorded samples only.
"""

from __future__ import annotations

import math
import statistics

import msgspec

from ledger import events as ev

# Above this median share of its wall time spent waiting for a CPU, a run was timed on a busy
# machine. A quiet host measures well under 1% (a serial test suite: 0-0.2%); the verified no-op
# above waited about 50%.
CONTENDED_SHARE = 0.10
RUN_QUEUE, STEAL, WALL = "run_queue_s", "steal_s", "wall_s"


class ArmContention(msgspec.Struct, frozen=True):
    """One arm's delayed share: the median over its timed runs, and the largest."""

    label: str
    median_share: float
    max_share: float
    runs: int


def delayed_shares(timing: ev.TimingRecorded, label: str, cpus: int) -> list[float] | None:
    """Each of ``label``'s timed runs' delayed share, or None when the campaign did not record the
    run queue for every run (older runs, a kernel without scheduler statistics)."""
    samples = timing.samples
    waits, walls = samples.get(f"{label}:{RUN_QUEUE}"), samples.get(f"{label}:{WALL}")
    if not waits or not walls or len(waits) != len(walls):
        return None
    steals = samples.get(f"{label}:{STEAL}")
    if steals is None or len(steals) != len(walls):
        steals = [0.0] * len(walls)
    cpus = max(1, cpus)
    return [(w + max(0.0, s) / cpus) / t if t > 0 else math.inf for w, s, t in zip(waits, steals, walls, strict=True)]


def arm_contention(timing: ev.TimingRecorded, cpus: int) -> list[ArmContention]:
    """Both arms' contention, for the arms that recorded it."""
    out = []
    for label in timing.targets:
        shares = delayed_shares(timing, label, cpus)
        if shares:
            out.append(ArmContention(label=label, median_share=round(statistics.median(shares), 6),
                                     max_share=round(max(shares), 6), runs=len(shares)))
    return out


def contention_reason(timing: ev.TimingRecorded | None, cpus: int) -> str | None:
    """Why the campaign was timed on a machine too busy to trust, or None."""
    if timing is None:
        return None
    arms = arm_contention(timing, cpus)
    busy = [a for a in arms if a.median_share > CONTENDED_SHARE]
    if not busy:
        return None
    each = ", ".join(f"{a.label} {a.median_share:.0%}" for a in arms)
    return (f"the machine was busy during the timed runs: they waited for a CPU a median {each} of their "
            f"wall time (above {CONTENDED_SHARE:.0%}), so the timings are of other work's load as much as of "
            "the code: rerun the campaign on a quiet machine")
