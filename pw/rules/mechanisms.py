"""The mechanism catalog: measured metrics and syntax facts -> ranked, portable mechanism classes.

Benchmark-agnostic by construction. The only inputs are access facts (from `pw.agent.source.patterns`)
and a dict of measurements; candidate descriptions written by an agent are never an input, so their
vocabulary cannot leak into a hypothesis. Descriptions are fixed templates per class; the only
names they carry are symbols that identify an emitted slice or a measured operation.

Classes:
- transaction-waste: memory traffic moves whole lines/sectors but uses a fraction of each
  (strided or uncoalesced access, cache-line drag);
- data-layout: records (array of structs) of which the hot loop touches a few fields;
- dependent-lookup: the address of one load comes from another (index arrays, pointer chasing) or a
  membership test scans a sequence;
- residency: the data re-used by the loop nest does not stay in cache between reuses;
- work-reuse: the same work or load is repeated (quadratic nesting, repeated lookups, accumulation
  through memory).

Scoring (a ranking aid, not a probability): each class gets a fact strength (1 - prod(1 - w)) over its
facts, weighted by how hot each fact's line is when per-line shares are given, and a metric strength
(the strongest relevant metric, mapped to [0, 1] by the thresholds below). Evidence strength is
1 - (1 - 0.6 fact)(1 - 0.6 metric), and the score is that times the hotspot's share of run time.
Classes whose metric cannot tell them apart from the others (data-layout, dependent-lookup,
work-reuse) need at least one syntax fact; a metric alone only supports them once a fact does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import msgspec

CLASSES = ("transaction-waste", "data-layout", "dependent-lookup", "residency", "work-reuse")

DESCRIPTIONS = {
    "transaction-waste": "Accesses to {symbols} in {where} move whole cache lines or memory transactions but use "
    "a small part of each; make consecutive iterations touch consecutive addresses (loop order, "
    "blocking or a transposed copy).",
    "data-layout": "The loop in {where} reads {symbols} as records and uses few of their fields; store the hot "
    "fields contiguously (split hot from cold, structure of arrays).",
    "dependent-lookup": "In {where}, {symbols} is reached through a dependent lookup (an address loaded first, or "
    "a linear scan per test); use a direct index or a hashed/sorted structure, or prefetch.",
    "residency": "Data re-used in {where} ({symbols}) does not stay in cache between reuses; shrink the working "
    "set per pass (tiling, blocking, fusing passes over the same data).",
    "work-reuse": "{where} repeats work or loads on {symbols} that an earlier iteration already did; hoist the "
    "invariant part, keep the value in a register/local, or cache the result.",
}

# Facts -> (class, weight). Weight 0 means the fact does not support the class.
FACT_WEIGHTS: dict[str, dict[str, float]] = {
    "strided": {"transaction-waste": 1.0, "residency": 0.35},
    "aos-field": {"data-layout": 1.0, "transaction-waste": 0.5},
    "indirect": {"dependent-lookup": 1.0, "transaction-waste": 0.25},
    "linear-membership": {"dependent-lookup": 1.0, "work-reuse": 0.5},
    "quadratic-nesting": {"work-reuse": 0.8, "residency": 0.2},
    "repeated-attribute-lookup": {"work-reuse": 0.5},
    "reduction-dependency": {"work-reuse": 0.4},  # only accumulation through memory (tag "memory")
}
NEEDS_FACT = frozenset({"data-layout", "dependent-lookup", "work-reuse"})


class MetricSpec(msgspec.Struct, frozen=True):
    """How one measured metric maps to a strength in [0, 1]: linear between `low` and `high`."""

    description: str
    low: float
    high: float
    classes: dict[str, float]  # class -> relevance
    inverted: bool = False  # strength grows as the value falls (hit rates, efficiencies)


# Thresholds are coarse on purpose: they rank, they do not diagnose alone.
METRICS: dict[str, MetricSpec] = {
    "d1_misses_per_instruction": MetricSpec(
        "first-level data cache misses per instruction", 0.002, 0.05,
        {"transaction-waste": 0.6, "data-layout": 0.6, "residency": 0.3, "dependent-lookup": 0.3}),
    "ll_misses_per_instruction": MetricSpec(
        "last-level cache misses per instruction", 0.0005, 0.02,
        {"residency": 0.9, "transaction-waste": 0.4, "data-layout": 0.4, "dependent-lookup": 0.6}),
    "sectors_per_request": MetricSpec(
        "memory sectors moved per load/store request (4 is fully coalesced 32-bit)", 4.0, 32.0,
        {"transaction-waste": 1.0, "data-layout": 0.7}),
    "global_load_efficiency": MetricSpec(
        "share of fetched global-load bytes that were used", 0.2, 0.9,
        {"transaction-waste": 1.0, "data-layout": 0.7}, inverted=True),
    "l2_hit_rate": MetricSpec(
        "L2 cache hit rate", 0.3, 0.9, {"residency": 0.8}, inverted=True),
    "working_set_over_cache": MetricSpec(
        "working set size divided by cache capacity", 1.0, 16.0, {"residency": 1.0}),
    "ipc": MetricSpec(
        "instructions per cycle", 0.3, 1.5, {"dependent-lookup": 0.4, "residency": 0.3}, inverted=True),
}
# Derived metrics: sum(numerator counts) / denominator, when measured. Count ids follow ledger/metrics.py
# (callgrind's D1mr/D1mw/DLmr... arrive as d1_read_misses, d1_write_misses, ll_misses).
COUNT_RATIOS: dict[str, tuple[tuple[str, ...], str]] = {
    "d1_misses_per_instruction": (("d1_read_misses", "d1_write_misses"), "instructions"),
    "ll_misses_per_instruction": (("ll_misses",), "instructions"),
    "ipc": (("instructions",), "cycles"),
    "working_set_over_cache": (("working_set_bytes",), "cache_bytes"),
}


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "metric" or "fact"
    name: str  # metric id or fact kind
    value: float | None = None
    where: str = ""  # file:line for facts, the measured operation for metrics
    detail: str = ""


class Mechanism(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # one of CLASSES
    score: float
    description: str
    evidence: tuple[Evidence, ...]
    symbols: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()  # file:line of supporting facts


def _clamp(x: float) -> float:
    return max(0.0, min(1.0, x)) if math.isfinite(x) else 0.0


def _derived(measurements: Mapping[str, object]) -> dict[str, float]:
    values: dict[str, float] = {}
    for name in METRICS:
        value = measurements.get(name)
        if isinstance(value, (int, float)) and math.isfinite(value):
            values[name] = float(value)
        elif name in COUNT_RATIOS:
            numerators, denominator = COUNT_RATIOS[name]
            tops = [measurements.get(k) for k in numerators]
            bottom = measurements.get(denominator)
            counted = [float(t) for t in tops if isinstance(t, (int, float))]
            if counted and isinstance(bottom, (int, float)) and bottom > 0:
                values[name] = sum(counted) / float(bottom)
    return values


def metric_strength(name: str, value: float) -> float:
    spec = METRICS[name]
    if spec.high == spec.low:
        return 0.0
    strength = (value - spec.low) / (spec.high - spec.low)
    return _clamp(1.0 - strength if spec.inverted else strength)


def _line_weights(measurements: Mapping[str, object]) -> dict[int, float]:
    shares = measurements.get("line_shares")
    if not isinstance(shares, Mapping) or not shares:
        return {}
    numeric = {int(k): float(v) for k, v in shares.items() if isinstance(v, (int, float)) and v >= 0}
    top = max(numeric.values(), default=0.0)
    return {line: share / top for line, share in numeric.items()} if top > 0 else {}


def _fact_weight(fact, klass: str) -> float:
    weight = FACT_WEIGHTS.get(fact.kind, {}).get(klass, 0.0)
    if fact.kind == "reduction-dependency" and "memory" not in getattr(fact, "tags", ()):
        return 0.0  # a scalar accumulator is a latency chain, not repeated work
    if fact.kind == "aos-field":
        touched, declared = getattr(fact, "fields_touched", 0), getattr(fact, "fields_declared", 0)
        waste = 1.0 - touched / declared if declared and touched else 0.5
        weight *= waste
    if "type-unknown" in getattr(fact, "tags", ()):
        weight *= 0.5  # the container might already be hashed
    return weight


def rank_mechanisms(facts: Iterable, measurements: Mapping[str, object]) -> list[Mechanism]:
    """Mechanism classes supported by the evidence, best first (ties broken by class id).

    `facts`: AccessFact-like objects (kind, file, line, detail, symbol, tags, fields_touched,
    fields_declared). `measurements` keys (all optional): `hotspot_share` in [0, 1],
    `hotspot_symbol` (the measured operation's name), `line_shares` {line: share}, any metric id in
    METRICS, or the raw counts in COUNT_RATIOS from which those are derived.
    """
    facts = sorted(facts, key=lambda f: (f.file, f.line, f.kind, f.symbol))
    share_value = measurements.get("hotspot_share")
    share = _clamp(float(share_value)) if isinstance(share_value, (int, float)) else 1.0
    operation = measurements.get("hotspot_symbol")
    operation = operation if isinstance(operation, str) and operation else ""
    metrics = _derived(measurements)
    line_weights = _line_weights(measurements)

    ranked: list[Mechanism] = []
    for klass in CLASSES:
        supporting = []
        miss = 1.0
        for fact in facts:
            weight = _fact_weight(fact, klass)
            if weight <= 0:
                continue
            if line_weights:
                weight *= 0.25 + 0.75 * line_weights.get(fact.line, 0.0)
            miss *= 1.0 - _clamp(weight)
            supporting.append(fact)
        fact_strength = 1.0 - miss
        contributing = sorted(
            ((METRICS[name].classes.get(klass, 0.0) * metric_strength(name, value), name)
             for name, value in metrics.items()),
            key=lambda item: (-item[0], item[1]),
        )
        contributing = [(strength, name) for strength, name in contributing if strength > 0][:3]
        metric_value = contributing[0][0] if contributing else 0.0
        if klass in NEEDS_FACT and not supporting:
            continue
        if fact_strength <= 0 and metric_value <= 0:
            continue
        evidence_strength = 1.0 - (1.0 - 0.6 * fact_strength) * (1.0 - 0.6 * metric_value)
        score = round(share * evidence_strength, 4)
        evidence: list[Evidence] = []
        if isinstance(share_value, (int, float)):
            evidence.append(Evidence(kind="metric", name="hotspot_share", value=round(float(share_value), 6),
                                     where=operation, detail="share of run time in the measured hotspot"))
        evidence.extend(Evidence(kind="metric", name=name, value=round(metrics[name], 6), where=operation,
                                 detail=METRICS[name].description) for _, name in contributing)
        evidence.extend(Evidence(kind="fact", name=f.kind, where=f"{f.file}:{f.line}", detail=f.detail)
                        for f in supporting[:6])
        symbols = tuple(dict.fromkeys(f.symbol for f in supporting if f.symbol))[:4]
        lines = tuple(dict.fromkeys(f"{f.file}:{f.line}" for f in supporting))
        ranked.append(Mechanism(id=klass, score=score, description=_describe(klass, symbols, operation, lines),
                                evidence=tuple(evidence), symbols=symbols, lines=lines))
    ranked.sort(key=lambda m: (-m.score, CLASSES.index(m.id)))
    return ranked


def _describe(klass: str, symbols: Sequence[str], operation: str, lines: Sequence[str]) -> str:
    where = operation or (lines[0] if lines else "the hotspot")
    shown = ", ".join(symbols) if symbols else "its data"
    return DESCRIPTIONS[klass].format(symbols=shown, where=where)


# --- GPU rewrites: which counters show each mechanism -----------------------------------------------
#
# A GPU candidate states its mechanism in words ("data reuse: shared-memory tiled GEMM"). The hotspot
# kernel's device time falling is the mechanism; a hardware counter of that kernel (Nsight Compute,
# one filtered launch in the parent and in the candidate) says why. Each class lists the counters
# that show it, in the order they explain it best, and the way each must move. The classes are read
# from the stated mechanism, the one whose keyword appears earliest in the text first; the counter
# credited is the first, class by class, that moved its way by more than GPU_COUNTER_MIN_CHANGE
# between the two captures, else the one that came closest (so the gate can say it did not move),
# else the first one either capture lacks (so the gate can say which is missing).

#: Same threshold as pw.rules.gates.GPU_COUNTER_MIN_CHANGE: counters of one launch repeat to well
#: under 1% for the same binary and input; 5% leaves room for clocks and replay variation.
GPU_COUNTER_MIN_CHANGE = 0.05


class GpuClass(msgspec.Struct, frozen=True, kw_only=True):
    """A GPU mechanism class: the words that name it and the counters that show it."""

    id: str
    keywords: tuple[str, ...]
    counters: tuple[tuple[str, str], ...]  # (metric id, "down" | "up"), best explanation first
    description: str


GPU_CLASSES: tuple[GpuClass, ...] = (
    GpuClass(id="coalescing", keywords=("coalesc", "contiguous access", "consecutive thread", "warp per row",
                                        "warp-per-row", "unit stride", "unit-stride", "thread mapping"),
             counters=(("global_load_sectors_per_request", "down"), ("global_store_sectors_per_request", "down")),
             description="consecutive threads touch consecutive addresses: fewer 32-byte sectors per request"),
    GpuClass(id="data-reuse", keywords=("data reuse", "reuse", "tiled", "tiling", "tile", "shared memory",
                                        "shared-memory", "smem", "register block", "blocking", "cache block"),
             counters=(("global_load_requests", "down"), ("l2_bytes", "down"), ("dram_bytes", "down"),
                       ("shared_load_wavefronts", "up")),
             description="each element fetched from global memory serves several uses (staged in shared memory "
                         "or registers): fewer global load requests, fewer L2 and DRAM bytes, shared-memory "
                         "traffic instead"),
    GpuClass(id="atomics", keywords=("privatiz", "atomic", "warp-level reduction", "warp reduction"),
             counters=(("global_atomic_requests", "down"),),
             description="fewer global atomics (privatized per block or reduced within a warp first)"),
    GpuClass(id="fusion", keywords=("fusion", "fuse", "fused"),
             counters=(("dram_bytes", "down"), ("kernel_launches", "down")),
             description="one pass over the data instead of several: fewer DRAM bytes and launches"),
    GpuClass(id="occupancy", keywords=("occupancy", "launch bounds", "__launch_bounds__", "register pressure",
                                       "block size"),
             counters=(("achieved_occupancy_pct", "up"),),
             description="more warps resident per multiprocessor to hide latency"),
    GpuClass(id="divergence", keywords=("diverge", "branch", "predicat", "warp-uniform", "uniform control"),
             counters=(("threads_per_instruction", "up"), ("branch_uniformity_pct", "up")),
             description="the threads of a warp take the same path: more active threads per instruction"),
    GpuClass(id="launches", keywords=("graph", "launch", "batch"),
             counters=(("launch_api_calls", "down"),),
             description="fewer launch calls on the host (a CUDA graph, batched or fused launches)"),
)


class CounterFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The counter a GPU mechanism names, on the hotspot kernel, parent vs candidate; the same
    fields, in the same order, as ``pw.rules.gates.CounterFacts``, which this stands in for."""

    metric: str
    before: float | None
    after: float | None
    direction: str  # "down" | "up"
    mechanism: str = ""


def gpu_classes_of(mechanism: str) -> list[GpuClass]:
    """The classes a stated mechanism names, the one named earliest in the text first (ties: catalog order)."""
    text = mechanism.lower()
    found = []
    for order, klass in enumerate(GPU_CLASSES):
        # A keyword starts a word ("tile" in "tiled", never in "volatile").
        at = [m.start() for k in klass.keywords if (m := re.search(r"(?<![a-z0-9])" + re.escape(k), text))]
        if at:
            found.append((min(at), order, klass))
    return [klass for _, _, klass in sorted(found, key=lambda f: (f[0], f[1]))]


def _moved(before: float, after: float, direction: str) -> float:
    """The relative change in the class's direction (positive: its way)."""
    change = (after - before) / (abs(before) or 1.0)
    return -change if direction == "down" else change


def gpu_counter_facts(mechanism: str, before: Mapping[str, float], after: Mapping[str, float]) -> CounterFacts | None:
    """The counter ``mechanism`` (the candidate's stated mechanism) is credited with, read from the
    parent's and the candidate's GPU metrics (Nsight Compute diagnostic + timeline totals); None: no
    class names it. See the comment above ``GPU_CLASSES`` for the choice."""
    classes = gpu_classes_of(mechanism)
    if not classes:
        return None
    closest: tuple[float, str, str] | None = None
    missing: tuple[str, str] | None = None
    for klass in classes:
        for metric, direction in klass.counters:
            b, a = before.get(metric), after.get(metric)
            if b is None or a is None:
                missing = missing or (metric, direction)
                continue
            moved = _moved(float(b), float(a), direction)
            if moved >= GPU_COUNTER_MIN_CHANGE:
                return CounterFacts(metric=metric, before=float(b), after=float(a), direction=direction,
                                    mechanism=mechanism)
            if closest is None or moved > closest[0]:
                closest = (moved, metric, direction)
    if closest is not None:
        _, metric, direction = closest
        return CounterFacts(metric=metric, before=float(before[metric]), after=float(after[metric]),
                            direction=direction, mechanism=mechanism)
    metric, direction = missing  # type: ignore[misc]  # every class lists at least one counter
    return CounterFacts(metric=metric, before=before.get(metric), after=after.get(metric), direction=direction,
                        mechanism=mechanism)


def gpu_counters_needed(mechanism: str) -> list[str]:
    """The metric ids a capture must hold to judge ``mechanism`` (every counter of its classes)."""
    return list(dict.fromkeys(m for klass in gpu_classes_of(mechanism) for m, _ in klass.counters))
