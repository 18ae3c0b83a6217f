"""The common normalized profile: one shape for every profiler (after Hatchet's call tree).

Every adapter turns its tool's raw output into a ``Profile``; everything downstream (hotspot
selection, profile diff, the mechanism gate) reads only this shape.

Self vs inclusive, for any metric id:
- **self**: cost spent in the operation's own code (for samplers: samples whose *leaf* frame is the
  operation; for callgrind: instructions executed in the function's own body).
- **inclusive**: self plus everything it called (for samplers: samples where the operation appears
  *anywhere* on the stack, counted once per sample even under recursion; for callgrind: self plus the
  inclusive cost of its calls to other functions).
So ``sum(op.self_metrics[m]) == totals[m]`` for sampled metrics, and ``inclusive >= self`` always.

``line_start``/``line_end`` with ``line_span == "observed"`` are the lowest and highest source line at
which cost was observed in this capture, **not** the definition range of the function (samplers and
callgrind only see executed lines; a function's ``def`` line or closing brace may never appear).
``"definition"`` is reserved for adapters that read the definition range from debug info or source.

Encoding is canonical: ``encode_profile`` sorts operations (descending self of the primary metric,
i.e. ``metrics[0]``, then id), lines (file, line, operation) and edges (caller, callee) and writes
msgspec JSON with sorted dict keys, so equal profiles give byte-identical output.
"""

from __future__ import annotations

from typing import Literal

import msgspec

PROFILE_VERSION = 1

Granularity = Literal["process", "function", "line", "kernel", "timeline"]
GRANULARITIES: tuple[str, ...] = ("process", "function", "line", "kernel", "timeline")
OperationKind = Literal["function", "kernel", "memcpy", "memset", "region", "other", "allocation"]
LineSpan = Literal["observed", "definition"]


class Operation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A function (CPU) or kernel (GPU) with its costs.

    ``id`` is stable across captures of the same program: ``name@file`` with ``file`` relative to the
    source root when the code lies in it, else ``name@[module]`` (module = binary/library basename or
    Python module path), so baseline and candidate profiles line up by id.
    """

    id: str
    name: str
    kind: OperationKind
    module: str
    file: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    self_metrics: dict[str, float] = {}
    inclusive_metrics: dict[str, float] = {}
    line_span: LineSpan = "observed"


class LineCost(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Self cost at one source line (file relative to the source root) inside one operation."""

    file: str
    line: int
    operation: str
    self_metrics: dict[str, float] = {}


class CallEdge(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """caller -> callee, with the callee's inclusive cost when reached through this caller."""

    caller: str
    callee: str
    metrics: dict[str, float] = {}


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    version: int = PROFILE_VERSION
    tool: str
    tool_version: str
    target: str
    granularity: list[Granularity]
    metrics: list[str]
    totals: dict[str, float]
    operations: list[Operation] = []
    lines: list[LineCost] = []
    edges: list[CallEdge] = []

    @property
    def primary_metric(self) -> str:
        return self.metrics[0]

    def operation(self, op_id: str) -> Operation | None:
        for op in self.operations:
            if op.id == op_id:
                return op
        return None

    def top_operations(self, n: int = 10, metric: str | None = None) -> list[Operation]:
        """The ``n`` operations with the largest self value of ``metric`` (default: primary)."""
        m = metric or self.primary_metric
        return sorted(self.operations, key=lambda o: (-o.self_metrics.get(m, 0.0), o.id))[:n]

    def lines_of(self, op_id: str) -> list[LineCost]:
        return [lc for lc in self.lines if lc.operation == op_id]


_ENCODER = msgspec.json.Encoder(order="deterministic")


def canonical(p: Profile) -> Profile:
    """A copy of ``p`` with lists in canonical order (pure; ``p`` is not changed)."""
    m = p.metrics[0] if p.metrics else ""
    ops = sorted(p.operations, key=lambda o: (-o.self_metrics.get(m, 0.0), o.id))
    lines = sorted(p.lines, key=lambda lc: (lc.file, lc.line, lc.operation))
    edges = sorted(p.edges, key=lambda e: (e.caller, e.callee))
    return msgspec.structs.replace(p, operations=ops, lines=lines, edges=edges)


def encode_profile(p: Profile) -> bytes:
    """Canonical JSON bytes of ``p`` (deterministic order; see module docstring)."""
    return _ENCODER.encode(canonical(p))


def decode_profile(data: bytes) -> Profile:
    """Decode a profile; raises ``msgspec.ValidationError`` on bad input or an unknown version."""
    p = msgspec.json.decode(data, type=Profile)
    if p.version != PROFILE_VERSION:
        raise msgspec.ValidationError(
            f"profile version {p.version} is not supported; expected {PROFILE_VERSION}")
    return p


def mergeable(p: Profile) -> bool:
    """Whether ``p`` is a sampled profile, whose every metric is a sum over its samples (so the
    profiles of several runs of one program add up to the profile of all their samples)."""
    return "samples" in p.metrics


def merge_profiles(parts: list[Profile]) -> Profile:
    """One profile of every sample of ``parts`` (profiles of separate runs of one target, by one
    tool): totals, self and inclusive values, line costs and call edges add; an operation's observed
    line range is the union of its ranges. Pure and order-preserving (values are summed in the order
    of ``parts``), so the same parts give the same bytes. Raises ValueError for no parts, parts of
    different tools or targets, or a profile that is not sampled (``mergeable``)."""
    if not parts:
        raise ValueError("no profiles to merge")
    first = parts[0]
    if len(parts) == 1:
        return canonical(first)
    for p in parts:
        if not mergeable(p):
            raise ValueError(f"{p.tool} profile of {p.target} is not sampled: its values do not add across runs")
        if (p.tool, p.target) != (first.tool, first.target):
            raise ValueError(f"cannot merge a {p.tool} profile of {p.target} with a {first.tool} profile of {first.target}")

    def add(into: dict[str, float], values: dict[str, float]) -> None:
        for m, v in values.items():
            into[m] = into.get(m, 0.0) + v

    metrics: list[str] = []
    totals: dict[str, float] = {}
    ops: dict[str, list] = {}  # id -> [Operation (first seen), self, inclusive, line_start, line_end]
    lines: dict[tuple[str, int, str], dict[str, float]] = {}
    edges: dict[tuple[str, str], dict[str, float]] = {}
    for p in parts:
        metrics += [m for m in p.metrics if m not in metrics]
        add(totals, p.totals)
        for o in p.operations:
            slot = ops.setdefault(o.id, [o, {}, {}, None, None])
            add(slot[1], o.self_metrics)
            add(slot[2], o.inclusive_metrics)
            starts = [x for x in (slot[3], o.line_start) if x is not None]
            ends = [x for x in (slot[4], o.line_end) if x is not None]
            slot[3], slot[4] = (min(starts) if starts else None), (max(ends) if ends else None)
        for lc in p.lines:
            add(lines.setdefault((lc.file, lc.line, lc.operation), {}), lc.self_metrics)
        for e in p.edges:
            add(edges.setdefault((e.caller, e.callee), {}), e.metrics)
    granularity = [g for g in GRANULARITIES if any(g in p.granularity for p in parts)]
    return canonical(Profile(
        tool=first.tool, tool_version=first.tool_version, target=first.target, granularity=granularity,  # type: ignore[arg-type]
        metrics=metrics, totals=totals,
        operations=[msgspec.structs.replace(o, self_metrics=s, inclusive_metrics=i, line_start=lo, line_end=hi)
                    for o, s, i, lo, hi in ops.values()],
        lines=[LineCost(file=f, line=ln, operation=op, self_metrics=v) for (f, ln, op), v in lines.items()],
        edges=[CallEdge(caller=a, callee=b, metrics=v) for (a, b), v in edges.items()],
    ))
