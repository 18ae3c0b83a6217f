"""Where one profiled run's time went, in seconds of that run (pure; gate rules 19).

Every timed run is a profiled run, so each run's normalized profile (``ledger.profile``) is split here
into the parts the gates compare across a pair: the hotspot's part (``Attribution.hotspot`` in the
reference's runs, ``Attribution.changed`` in the candidate's), each other operation, and the machine's
(samples in the OS kernel, which are never a hotspot nor a regression by themselves).

A part is code, not an operation name: the cost a sampler put on a line inside one of its function
regions or on one of its changed lines, plus the cost of its operations that carry no line
information (a kernel, a function built without line tables). Line costs are disjoint (each sample
has one leaf line), so parts never count a sample twice, and the same rule applies to both arms.

Under pw.campaign/5 a part's functions also count by name, whatever line their samples name: the
lines are the build's line tables, which the program's source writes (a red team's `#line 2` put a
fifth of the hotspot's own loop on the file's header comment, so it counted for neither side and the
hotspot seemed to shrink). A sample's function is the symbol its address lies in (or, inlined, the
function the debug information says it was inlined from), which a line directive does not move.
Code no symbol names counts with every part: a candidate can put any work there, so it is nobody's
alibi (a red team ran a third of the hotspot's rows from copies of compiled code in memfds, which
counted for neither side).

Seconds: a sampler's value (CPU time, wall samples) is a share of the run's samples, times the run's
own wall time as pw's launcher measured it; a device timeline's value (``gpu_time_ns``) is device
time already. The launcher's wall time is the program's alone, so a profiler's own start-up and
teardown never enter (it runs outside the program).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ledger.events import CodeRegion, CodeSide
from ledger.profile import Operation, Profile

# Metrics a device timeline measures in absolute time (nanoseconds of kernel execution).
DEVICE_TIME_METRICS = ("gpu_time_ns",)
# Modules that are the machine, not the program: the OS kernel (scheduler, pipes, locks, page
# clearing, interrupts). Their samples are the program's system time and the machine's load at once,
# so they are read through the launcher's paired system time instead (no-collateral).
MACHINE_MODULES = frozenset({"kernel.kallsyms", "kernel", "vmlinux"})


def is_machine(op: Operation) -> bool:
    return op.module in MACHINE_MODULES or op.id.endswith("@[kernel.kallsyms]")


def is_unnamed(op: Operation) -> bool:
    """Code of the program that no symbol names: executable memory with no file behind it (a copy
    of compiled code in a memfd or an anonymous mapping), or a module without symbols. A red team
    ran a third of the hotspot's rows from such copies, which counted for no part at all."""
    return not is_machine(op) and (op.name.startswith("[unknown]") or op.name.startswith("0x")
                                   or op.module in ("unknown", "[unknown]"))


def seconds_per_unit(profile: Profile, wall_s: float) -> float:
    """How many seconds of the run one unit of the profile's primary metric stands for."""
    if profile.primary_metric in DEVICE_TIME_METRICS:
        return 1e-9
    total = _total(profile)
    return wall_s / total if total > 0 else 0.0


def _total(profile: Profile) -> float:
    metric = profile.primary_metric
    return float(profile.totals.get(metric) or math.fsum(o.self_metrics.get(metric, 0.0) for o in profile.operations))


def sampled(profile: Profile) -> bool:
    """Whether the profile carries any cost in its primary metric (a run that ended before its
    profiler attached carries none)."""
    return _total(profile) > 0


def _in_regions(regions: Iterable[CodeRegion], file: str, line: int) -> bool:
    return any(r.file == file and r.start <= line <= r.end for r in regions)


def belongs(op: Operation, side: CodeSide) -> bool:
    """Whether an operation belongs to the side by name: a listed operation (a kernel's base name
    matches before its argument list or template), or a region's function in its file."""
    base = op.name.split("(", 1)[0].split("<", 1)[0].strip().rsplit(" ", 1)[-1]
    if op.name in side.operations or base in side.operations:
        return True
    return any(r.name in (op.name, base) and (op.file is None or r.file == op.file) for r in side.regions)


# The campaign rules before pw.campaign/5, whose reduction counts a part's code by its lines alone and
# whose operation metric counts the operation alone in the reference's runs.
BEFORE_V5 = frozenset({"pw.campaign/1", "pw.campaign/2", "pw.campaign/3", "pw.campaign/4"})


def from_v5(rule: str | None) -> bool:
    """Whether a campaign under ``rule`` is reduced as pw.campaign/5 and later rules reduce it (module
    docstring, ``operation_cost``); a timing without a campaign record predates it."""
    return rule is not None and rule not in BEFORE_V5


def side_cost(profile: Profile, side: CodeSide, *, by_name: bool = False) -> float:
    """The side's cost in the profile's primary metric (module docstring)."""
    metric = profile.primary_metric
    lines = {f: set(v) for f, v in side.lines.items()}
    named = {op.id for op in profile.operations if not is_machine(op) and (belongs(op, side) or is_unnamed(op))} \
        if by_name else set()
    counted = 0.0
    on_lines: dict[str, float] = {}
    for lc in profile.lines:
        value = lc.self_metrics.get(metric, 0.0)
        on_lines[lc.operation] = on_lines.get(lc.operation, 0.0) + value
        if lc.operation in named or lc.line in lines.get(lc.file, ()) or _in_regions(side.regions, lc.file, lc.line):
            counted += value
    for op in profile.operations:
        if is_machine(op) or not (belongs(op, side) or op.id in named):
            continue
        counted += max(0.0, op.self_metrics.get(metric, 0.0) - on_lines.get(op.id, 0.0))
    return counted


def side_seconds(profile: Profile, side: CodeSide, wall_s: float, *, by_name: bool = False) -> float:
    return round(side_cost(profile, side, by_name=by_name) * seconds_per_unit(profile, wall_s), 9)


def operation_cost(series: dict[str, float], role: str, rule: str | None) -> float:
    """One run's cost of a metric that is one operation's (``metric.kind`` "operation"), from its
    reduced series: in the candidate's runs the operation's code and the code the candidate changed
    (so work moved out of the operation counts against it). Under pw.campaign/5 the reference's runs
    count the same code as it was (``reach_s``: the operation and the functions the candidate changed),
    so both arms are read alike; before, the reference counted the operation alone, and a candidate
    that only sped up a function outside it (set-up code the run does not judge) read as the whole of
    that function's cost slower (a PolyBench lu rewrite of its zeroing loop: "0.18x")."""
    if role == "reference" and from_v5(rule) and "reach_s" in series:
        return series["reach_s"]
    return series["hot_s"]


def operation_seconds(profile: Profile, wall_s: float) -> dict[str, float]:
    """Each operation's own cost in seconds of the run (machine operations under one key,
    ``[machine]``)."""
    per = seconds_per_unit(profile, wall_s)
    metric = profile.primary_metric
    out: dict[str, float] = {}
    for op in profile.operations:
        key = "[machine]" if is_machine(op) else op.id
        out[key] = out.get(key, 0.0) + op.self_metrics.get(metric, 0.0) * per
    return {k: round(v, 9) for k, v in out.items()}
