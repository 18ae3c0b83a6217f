"""Profile diff: what changed between a baseline profile and a candidate's reprofile, for one metric.

Pure: two ``ledger.profile.Profile`` values in, one ``ProfileDiff`` out (no files, clock, randomness or
logging). The mechanism and no-collateral gates (``pw.rules.gates``) read only this shape, and the diff is
recorded with them so an auditor can recompute both.

Conventions (deltas are ``after - before``, so a saving is a negative delta; ``shrink`` is the
opposite sign, ``before - after``):

- An operation present in only one profile counts as 0 in the other (``present`` says which).
- Where a profile gives no inclusive value of the metric for an operation, its self value stands in
  (a flat profile: the operation called nothing that was measured).
- Totals are ``Profile.totals[metric]``, or the sum of the operations' self values when the tool gave
  no total.
- ``relative`` is ``delta / before``; None when ``before`` is 0 (a new operation).
- Operations are ranked by ``|self delta|`` descending, ties by id; lines by ``|delta|`` then
  (file, line); remaining leverage by candidate self share descending, then id. Equal inputs give an
  equal diff, byte for byte once encoded.

The hotspot's *family* in the candidate (``HotspotDelta.family``): ids alone let a rename or a
wrapper make the hotspot vanish (``matmul`` renamed, or calling a new ``mm_kernel``: the baseline's
cost is gone and "explains 540% of the saving"). So candidate operations are matched to the hotspot
by name, by source location (same file, overlapping line range), as callees of a family member that
the baseline did not have, and as operations new in the hotspot's file. Every rule can only add to
the hotspot's cost after the change, never take from it: a wrong match makes the mechanism harder
to show, not easier. ``family_after`` is that cost: the larger of the members' summed self values
and the largest member's inclusive value (with call stacks a wrapper's inclusive cost already holds
its callee; without them the self values add up).
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from ledger.metrics import KNOWN_METRICS
from ledger.profile import Operation, Profile

DEFAULT_TOP_LINES = 20
DEFAULT_TOP_LEVERAGE = 5

Presence = Literal["both", "baseline", "candidate"]


class OperationDelta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    id: str
    name: str
    present: Presence
    self_before: float
    self_after: float
    self_delta: float
    self_relative: float | None
    inclusive_before: float
    inclusive_after: float
    inclusive_delta: float
    inclusive_relative: float | None
    share_before: float  # self_before / baseline total (0 when the total is 0)
    # Self sample counts behind a sampled metric (the Poisson noise band needs them); None when the
    # profile has no "samples" metric (exact counters such as callgrind's instructions).
    samples_before: float | None = None
    samples_after: float | None = None


class LineDelta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Self cost at one source line, summed over the operations seen there (inlining can put several)."""

    file: str
    line: int
    operations: list[str]
    before: float
    after: float
    delta: float


class FamilyMember(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A candidate operation counted as the hotspot, and why (see the module docstring)."""

    id: str
    why: Literal["id", "name", "location", "new callee", "new in file"]


class HotspotDelta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    operation: str
    present: Presence | None  # None: the operation is in neither profile
    self_before: float
    self_after: float
    self_shrink: float  # before - after
    inclusive_before: float
    inclusive_after: float
    inclusive_shrink: float
    # inclusive_shrink / total shrink; None when the total did not shrink (nothing to explain)
    explained_fraction: float | None
    # The hotspot's family in the candidate and its cost there (module docstring). Defaults: diffs
    # recorded before families existed (gate rules < 3 do not read these fields).
    family: list[FamilyMember] = []
    family_after: float | None = None


class Leverage(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A next opportunity: an operation of the candidate profile and the most removing it could give."""

    operation: str
    name: str
    value: float  # self value in the candidate
    share: float  # of the candidate total
    amdahl_ceiling: float | None  # 1 / (1 - share); None when share >= 1 (unbounded)


class ProfileDiff(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    metric: str
    unit: str
    baseline_tool: str
    candidate_tool: str
    baseline_metrics: list[str]  # metric ids each profile measured (attribution reads these)
    candidate_metrics: list[str]
    total_before: float
    total_after: float
    total_delta: float
    total_relative: float | None
    operations: list[OperationDelta]
    lines: list[LineDelta]
    hotspot: HotspotDelta | None
    remaining_leverage: list[Leverage]


def common_metric(baseline: Profile, candidate: Profile) -> str:
    """The primary metric both profiles measured: the baseline's primary if the candidate has it, else
    the candidate's primary if the baseline has it, else the first baseline metric the candidate has.
    Raises ValueError naming both metric lists when they share none."""
    for m in (baseline.metrics[:1] + candidate.metrics[:1] + baseline.metrics):
        if m in baseline.metrics and m in candidate.metrics:
            return m
    raise ValueError(
        f"the profiles share no metric: baseline measured {baseline.metrics}, "
        f"candidate measured {candidate.metrics}")


def _total(p: Profile, metric: str) -> float:
    if metric in p.totals:
        return float(p.totals[metric])
    return float(math.fsum(op.self_metrics.get(metric, 0.0) for op in p.operations))


def _self(op: Operation | None, metric: str) -> float:
    return 0.0 if op is None else float(op.self_metrics.get(metric, 0.0))


def _inclusive(op: Operation | None, metric: str) -> float:
    if op is None:
        return 0.0
    if metric in op.inclusive_metrics:
        return float(op.inclusive_metrics[metric])
    return float(op.self_metrics.get(metric, 0.0))


def _relative(before: float, delta: float) -> float | None:
    return None if before == 0.0 else delta / before


def _presence(a: Operation | None, b: Operation | None) -> Presence | None:
    if a is not None and b is not None:
        return "both"
    if a is not None:
        return "baseline"
    if b is not None:
        return "candidate"
    return None


def _samples(p: Profile, op: Operation | None) -> float | None:
    if "samples" not in p.metrics:
        return None
    return _self(op, "samples")


def _op_delta(op_id: str, a: Operation | None, b: Operation | None, base: Profile, cand: Profile,
              metric: str, total_before: float) -> OperationDelta:
    sb, sa = _self(a, metric), _self(b, metric)
    ib, ia = _inclusive(a, metric), _inclusive(b, metric)
    presence = _presence(a, b)
    assert presence is not None
    return OperationDelta(
        id=op_id,
        name=(a or b).name,  # type: ignore[union-attr]
        present=presence,
        self_before=sb,
        self_after=sa,
        self_delta=sa - sb,
        self_relative=_relative(sb, sa - sb),
        inclusive_before=ib,
        inclusive_after=ia,
        inclusive_delta=ia - ib,
        inclusive_relative=_relative(ib, ia - ib),
        share_before=sb / total_before if total_before > 0 else 0.0,
        samples_before=_samples(base, a),
        samples_after=_samples(cand, b),
    )


def _overlaps(a: Operation, b: Operation) -> bool:
    if a.file is None or a.file != b.file:
        return False
    if None in (a.line_start, a.line_end, b.line_start, b.line_end):
        return False
    return a.line_start <= b.line_end and b.line_start <= a.line_end  # type: ignore[operator]


def hotspot_family(baseline: Profile, candidate: Profile, hotspot: str) -> list[FamilyMember]:
    """Candidate operations that carry the hotspot's work (module docstring), sorted by id."""
    hot = baseline.operation(hotspot)
    base_ids = {op.id for op in baseline.operations}
    found: dict[str, str] = {}
    for op in candidate.operations:
        if op.id == hotspot:
            found[op.id] = "id"
        elif hot is not None and op.name == hot.name:
            found[op.id] = "name"
        elif hot is not None and _overlaps(hot, op):
            found[op.id] = "location"
        elif hot is not None and op.id not in base_ids and hot.file is not None and op.file == hot.file:
            found[op.id] = "new in file"
    # Callees the baseline did not have, reached from a member (a wrapper's new kernel), transitively.
    callees: dict[str, list[str]] = {}
    for e in candidate.edges:
        callees.setdefault(e.caller, []).append(e.callee)
    cand_ids = {op.id for op in candidate.operations}
    todo = sorted(found)
    while todo:
        for callee in sorted(callees.get(todo.pop(), [])):
            if callee not in found and callee not in base_ids and callee in cand_ids:
                found[callee] = "new callee"
                todo.append(callee)
    return [FamilyMember(id=i, why=found[i]) for i in sorted(found)]  # type: ignore[arg-type]


def _family_after(candidate: Profile, family: list[FamilyMember], metric: str) -> float:
    ops = {op.id: op for op in candidate.operations}
    members = [ops[m.id] for m in family if m.id in ops]
    if not members:
        return 0.0
    return max(math.fsum(_self(op, metric) for op in members), max(_inclusive(op, metric) for op in members))


def _line_deltas(base: Profile, cand: Profile, metric: str, top: int) -> list[LineDelta]:
    acc: dict[tuple[str, int], list] = {}
    for side, p in ((0, base), (1, cand)):
        for lc in p.lines:
            entry = acc.setdefault((lc.file, lc.line), [0.0, 0.0, set()])
            entry[side] += float(lc.self_metrics.get(metric, 0.0))
            entry[2].add(lc.operation)
    rows = [
        LineDelta(file=f, line=ln, operations=sorted(ops), before=b, after=a, delta=a - b)
        for (f, ln), (b, a, ops) in acc.items()
    ]
    rows.sort(key=lambda r: (-abs(r.delta), r.file, r.line))
    return rows[:top]


def _leverage(cand: Profile, metric: str, top: int) -> list[Leverage]:
    total = _total(cand, metric)
    if total <= 0:
        return []
    out = []
    for op in cand.top_operations(top, metric):
        value = _self(op, metric)
        share = value / total
        out.append(Leverage(operation=op.id, name=op.name, value=value, share=share,
                            amdahl_ceiling=1.0 / (1.0 - share) if share < 1.0 else None))
    return out


def diff_profiles(
    baseline: Profile,
    candidate: Profile,
    *,
    hotspot: str | None,
    metric: str | None = None,
    top_lines: int = DEFAULT_TOP_LINES,
    top_leverage: int = DEFAULT_TOP_LEVERAGE,
) -> ProfileDiff:
    """The diff of ``candidate`` against ``baseline`` in ``metric`` (default: ``common_metric``).

    ``hotspot`` is the targeted operation id (the ``hotspot`` block is None without one). Raises
    ValueError when ``metric`` is given but one of the profiles did not measure it.
    """
    m = metric or common_metric(baseline, candidate)
    if m not in baseline.metrics or m not in candidate.metrics:
        raise ValueError(
            f"metric {m!r} must be measured by both profiles: baseline measured {baseline.metrics}, "
            f"candidate measured {candidate.metrics}")
    base_ops = {op.id: op for op in baseline.operations}
    cand_ops = {op.id: op for op in candidate.operations}
    tb, ta = _total(baseline, m), _total(candidate, m)

    ops = [_op_delta(i, base_ops.get(i), cand_ops.get(i), baseline, candidate, m, tb)
           for i in sorted(set(base_ops) | set(cand_ops))]
    ops.sort(key=lambda d: (-abs(d.self_delta), d.id))

    hot = None
    if hotspot is not None:
        a, b = base_ops.get(hotspot), cand_ops.get(hotspot)
        total_shrink = tb - ta
        inc_shrink = _inclusive(a, m) - _inclusive(b, m)
        hot = HotspotDelta(
            operation=hotspot,
            present=_presence(a, b),
            self_before=_self(a, m),
            self_after=_self(b, m),
            self_shrink=_self(a, m) - _self(b, m),
            inclusive_before=_inclusive(a, m),
            inclusive_after=_inclusive(b, m),
            inclusive_shrink=inc_shrink,
            explained_fraction=inc_shrink / total_shrink if total_shrink > 0 else None,
        )
        family = hotspot_family(baseline, candidate, hotspot)
        hot = msgspec.structs.replace(hot, family=family, family_after=_family_after(candidate, family, m))

    spec = KNOWN_METRICS.get(m)
    return ProfileDiff(
        metric=m,
        unit=spec.unit if spec else "",
        baseline_tool=baseline.tool,
        candidate_tool=candidate.tool,
        baseline_metrics=list(baseline.metrics),
        candidate_metrics=list(candidate.metrics),
        total_before=tb,
        total_after=ta,
        total_delta=ta - tb,
        total_relative=_relative(tb, ta - tb),
        operations=ops,
        lines=_line_deltas(baseline, candidate, m, top_lines),
        hotspot=hot,
        remaining_leverage=_leverage(candidate, m, top_leverage),
    )
