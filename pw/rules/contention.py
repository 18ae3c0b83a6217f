"""Whether the machine was too busy for a campaign's timings to say anything about the code.

A paired campaign's statistics assume that run-to-run noise is independent of the arm. A busy
machine breaks that in a way no interval sees: a second timed workload on the same cores (another
agent's campaign, a build) alternates its own heavy and light runs, and for a stretch of pairs
its heavy runs can fall on one arm. On this 2-core host, with other jobs running, a no-op of
series-c was *verified* at 1.058x: six pairs in a row had the baseline 8-20% slower in both run
orders (benchmarks/real_aa.py); campaigns run beside the same jobs waited 44-58% of their wall
time for a CPU.

pw's launcher reports, for each timed run, how long the program's main thread was runnable but
waiting for a CPU (``run_queue_s``, from /proc/PID/schedstat) and how much CPU time the hypervisor
took from the machine meanwhile (``steal_s``, from /proc/stat, summed over the virtual CPUs). The
*waited share* of a run is (run_queue_s + steal_s / cpus) / wall_s: the part of its wall time in
which it could not run because of someone else's load. The launcher also reports the CPU time
the machine's other work used while the run ran (``others_cpu_s``, /proc/stat's busy time less
the program's own): on a machine whose CPUs are hyperthreads of shared cores, other work slows a
run without making it wait. When either arm's median waited share exceeds CONTENDED_SHARE, or
its median share of the other CPUs' time used by other work exceeds OTHERS_SHARE, the campaign
decides nothing (gate rules 8: faster, slower and no effect become inconclusive): the timings
are of the load.

Pure: reads recorded samples only.
"""

from __future__ import annotations

import math
import statistics

import msgspec

from ledger import events as ev

# Above this median share of its wall time spent waiting for a CPU, a run was timed on a busy
# machine. A quiet host measures well under 1%; campaigns beside other jobs here, 44-58%.
CONTENDED_SHARE = 0.10
# Above this median share of the *other* CPUs' time used by other work while a run ran, the run
# shared the machine: on this 2-vCPU host a divide-bound loop ran 2x slower beside a busy loop on
# the other vCPU (hyperthreads of one core), with no run-queue wait at all, and a no-op was decided
# 14% slower in 7 pairs at 1-2% wait.
OTHERS_SHARE = 0.25
RUN_QUEUE, STEAL, OTHERS, WALL = "run_queue_s", "steal_s", "others_cpu_s", "wall_s"
# Whose CPU time a run used (pw.campaign/5): its main thread's, and its whole family's.
MAIN_CPU, FAMILY_CPU = "main_cpu_s", "family_cpu_s"


class ArmContention(msgspec.Struct, frozen=True):
    """One arm's contention, as medians over its timed runs: the share of wall time it waited for
    a CPU, and the share of the other CPUs' time other work used (None where not recorded)."""

    label: str
    waited: float
    others: float | None
    runs: int


def _per_run(samples: dict[str, list[float]], label: str, key: str, n: int) -> list[float] | None:
    values = samples.get(f"{label}:{key}")
    return list(values) if values is not None and len(values) == n else None


def timing_cpus(timing: ev.TimingRecorded, run_cpus: int) -> int:
    """The CPUs of the machine a campaign ran on: a scheduler's node's own (`--remote`), else the run's."""
    node = timing.conditions.node if timing.conditions is not None else None
    return node.host.cpus if node is not None else run_cpus


def where_timed(timing: ev.TimingRecorded) -> str | None:
    """"n1 (host vm, 2 CPUs; Slurm job 12, partition pw, exclusive)" for a campaign a scheduler
    placed; None for one on the run's own host."""
    node = timing.conditions.node if timing.conditions is not None else None
    return node.describe() if node is not None else None


def arm_of(timing: ev.TimingRecorded, label: str, cpus: int) -> ArmContention | None:
    """``label``'s contention, or None when the campaign did not record the run queue for every
    run (older runs, a kernel without scheduler statistics)."""
    walls = timing.samples.get(f"{label}:{WALL}")
    if not walls:
        return None
    n, cpus = len(walls), max(1, cpus)
    waits = _per_run(timing.samples, label, RUN_QUEUE, n)
    if waits is None:
        return None
    steals = _per_run(timing.samples, label, STEAL, n) or [0.0] * n
    others = _per_run(timing.samples, label, OTHERS, n)
    waited = [(w + max(0.0, s) / cpus) / t if t > 0 else math.inf for w, s, t in zip(waits, steals, walls, strict=True)]
    other = None
    if others is not None:
        other = [o / (t * max(1, cpus - 1)) if t > 0 else math.inf for o, t in zip(others, walls, strict=True)]
    return ArmContention(label=label, waited=round(statistics.median(waited), 6),
                         others=None if other is None else round(statistics.median(other), 6), runs=n)


def arm_contention(timing: ev.TimingRecorded, cpus: int) -> list[ArmContention]:
    """Both arms' contention, for the arms that recorded it."""
    return [a for label in timing.targets if (a := arm_of(timing, label, cpus)) is not None]


def is_busy(arm: ArmContention) -> bool:
    return arm.waited > CONTENDED_SHARE or (arm.others is not None and arm.others > OTHERS_SHARE)


def contention_reason(timing: ev.TimingRecorded | None, cpus: int) -> str | None:
    """Why the campaign was timed on a machine too busy to trust, or None."""
    if timing is None:
        return None
    arms = arm_contention(timing, cpus)
    if not any(is_busy(a) for a in arms):
        return None
    each = "; ".join(f"{a.label} waited {a.waited:.0%} of its wall time for a CPU"
                     + ("" if a.others is None else f", other work used {a.others:.0%} of the other CPUs")
                     for a in arms)
    return (f"the machine was busy during the timed runs (medians: {each}; limits {CONTENDED_SHARE:.0%} and "
            f"{OTHERS_SHARE:.0%}), so the timings are of other work's load as much as of the code: rerun the "
            "campaign on a quiet machine")


# --- gate rules 19: load is measured per pair, not vetoed --------------------------------------------
#
# What biases a paired ratio is load that differs between a pair's two arms (a burst that hits one of
# them), not load as such: steady load slows both arms alike and cancels out of their ratio. So a pair
# counts when its arms' loads are balanced, whatever their level, and the campaign runs on inside its
# budget until the pairs it admitted decide. A run's load is the share of its wall time it waited for a
# CPU (run queue, and the hypervisor's steal spread over the CPUs) plus the share of the other CPUs'
# time that other work used while it ran; a pair's imbalance is the largest difference between any two
# of its arms. MAX_LOAD_IMBALANCE comes from A/A campaigns under a bounded load generator
# (benchmarks/load_balance.py): the imbalance beyond which the A/A pairs' log ratios spread more than
# the quiet host's.
MAX_LOAD_IMBALANCE = 0.15


def run_loads(samples: dict[str, list[float]], label: str, cpus: int) -> list[float] | None:
    """Each run's load (the comment above), or None where the runs did not record it."""
    walls = samples.get(f"{label}:{WALL}")
    if not walls:
        return None
    n, cpus = len(walls), max(1, cpus)
    waits = _per_run(samples, label, RUN_QUEUE, n)
    if waits is None:
        return None
    steals = _per_run(samples, label, STEAL, n) or [0.0] * n
    others = _per_run(samples, label, OTHERS, n) or [0.0] * n
    return [((w + max(0.0, s) / cpus) / t + o / (t * max(1, cpus - 1))) if t > 0 else math.inf
            for w, s, o, t in zip(waits, steals, others, walls, strict=True)]


def admitted_pairs(samples: dict[str, list[float]], labels: list[str], cpus: int,
                   max_imbalance: float | None) -> list[bool]:
    """Which pairs count: those whose arms' loads differ by at most ``max_imbalance`` (every pair
    when it is None or a run did not record its load)."""
    n = len(samples.get(labels[0], []))
    loads = [run_loads(samples, label, cpus) for label in labels]
    if max_imbalance is None or any(x is None or len(x) != n for x in loads):
        return [True] * n
    return [max(x[i] for x in loads) - min(x[i] for x in loads) <= max_imbalance for i in range(n)]  # type: ignore[index]


# --- pw.campaign/4: the program's own time --------------------------------------------------------
#
# Admission by balance was measured against taking the wait out of each run: 240 A/A pairs of
# matmul-c under the load generator at 1.5 CPUs (tests/data/load-aa/pairs.json) spread 19.3% per pair
# in log wall time, and the pair's log ratio followed its arms' wait difference (correlation 0.78).
# Setting unbalanced pairs aside at 0.15 kept 60% of them at 11.8%, 15.2% per pair run (a set-aside
# pair still cost its runs); subtracting each run's own measured wait kept all at 12.7%, and after it
# no admission threshold did better per pair run (14.4-20.5%). So a campaign under
# pw.campaign/4 judges the time each run could run: its wall time less the time its program waited
# for a CPU (its main thread's run-queue time, ``running_share``), for the
# metrics pw measures itself (the whole run, and an operation's share of it); a region the program
# times by its own clock is taken as it is. On a quiet host the wait is ~0 and nothing changes.

# Metrics whose seconds are the launcher's wall time or a profile's share of it.
WAIT_REMOVABLE = ("wall_time_s", "operation_time_s")
# Per-run series measured in seconds of the run's wall time (``{label}:{key}``).
_WALL_SCALED = ("wall_s", "hot_s", "reach_s")


def running_share(samples: dict[str, list[float]], label: str, cpus: int, rule: str = "pw.campaign/4"
                  ) -> list[float] | None:
    """Each run's share of its wall time in which it was not waiting for a CPU (others' load), or
    None where the runs did not record their wait. ``cpus`` is kept for the signature of the rule's
    readers.

    The wait is the program's main thread's run-queue time (/proc/PID/schedstat, in nanoseconds):
    its own, measured for its own lifetime, so it is shorter than the run. The hypervisor's steal is
    not in it: /proc/stat counts it host-wide in 10 ms ticks, so a 3 ms run read 5 ms of "wait" and
    a share of 0, and over the first A/A recording it narrowed the spread by 0.1 point. A
    recorded wait not shorter than the run is no measurement of that run, and leaves it as recorded.

    Under pw.campaign/5 only the wait the program could not have caused itself is taken out: the
    main thread waits while *any* other task holds its CPU, and the program's own other threads and
    processes are such tasks (a red team pinned a helper thread to the main thread's CPU and had its
    work forgiven as "load"). Whatever the program's family used beyond the main thread
    (``family_cpu_s - main_cpu_s``: every thread and every process it started, orphans included)
    bounds the wait it caused, so that much of the wait stays in the run; what remains was others'.
    A run that did not record both is taken as it is."""
    del cpus
    walls = samples.get(f"{label}:{WALL}")
    if not walls:
        return None
    waits = _per_run(samples, label, RUN_QUEUE, len(walls))
    if waits is None:
        return None
    if rule != "pw.campaign/4":
        mains = _per_run(samples, label, MAIN_CPU, len(walls))
        families = _per_run(samples, label, FAMILY_CPU, len(walls))
        if mains is None or families is None:
            return [1.0] * len(walls)
        waits = [max(0.0, w - max(0.0, f - m)) for w, m, f in zip(waits, mains, families, strict=True)]
    return [1.0 - max(0.0, w) / t if 0 < t and w < t else 1.0 for w, t in zip(waits, walls, strict=True)]


def without_wait(samples: dict[str, list[float]], labels: list[str], cpus: int, metric: str,
                 rule: str = "pw.campaign/4") -> dict[str, list[float]]:
    """The samples with every arm's times taken as the time its runs could run (the comment above):
    the metric itself (when pw measured it) and each run's wall, hotspot and reach seconds are scaled
    by the run's running share under ``rule``; everything else is as recorded."""
    out = dict(samples)
    for label in labels:
        share = running_share(samples, label, cpus, rule)
        if share is None:
            continue
        keys = [f"{label}:{k}" for k in _WALL_SCALED] + ([label] if metric in WAIT_REMOVABLE else [])
        for key in keys:
            values = samples.get(key)
            if values is not None and len(values) == len(share):
                out[key] = [round(v * f, 9) for v, f in zip(values, share, strict=True)]
    return out
