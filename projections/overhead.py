"""Observed profiler overhead: a pure fold of recorded captures (routing's measured costs).

Every `ProfileCaptured` (v3) records the profiled wall and the same target's uninstrumented timed
wall; their ratio is the adapter's observed overhead on that capture. This projection folds them,
over one run's events or several runs' together, per adapter: every (timed wall, ratio) point and
their median. It is the only place a measured overhead lives: nothing writes it elsewhere, and
rebuilding it is replaying the ledgers. Reused captures (no profiler ran) and captures without a
timed wall are left out.

A ratio holds the tool's fixed set-up too, so it depends on the program's length (perf measured
x5.8 on a 54 ms program and x44 on a 10 ms one): routing uses only the points measured on programs
within a factor ``NEAR`` of the runtime it is costing (``factors``), the declared default otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

from ledger import events as ev

NEAR = 2.0  # a point informs the cost of a program between timed/NEAR and timed*NEAR long


class Observed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    adapter: str
    captures: int  # how many captures measured it
    factor: float  # median of wall_s / timed_wall_s over those captures
    low: float
    high: float
    points: list[tuple[float, float]] = []  # (timed wall s, ratio) of each capture, by timed wall


def observed_overheads(envelopes: Iterable[ev.Envelope]) -> dict[str, Observed]:
    """The measured overhead factor of every adapter that has at least one measured capture."""
    seen: dict[str, list[tuple[float, float]]] = {}
    for env in envelopes:
        data = env.data
        if isinstance(data, ev.ProfileCaptured) and data.reused_from is None and data.overhead and data.timed_wall_s:
            seen.setdefault(data.adapter, []).append((float(data.timed_wall_s), float(data.overhead)))
    out = {}
    for name, pts in sorted(seen.items()):
        xs = [r for _, r in pts]
        out[name] = Observed(adapter=name, captures=len(xs), factor=round(float(np.median(xs)), 3),
                             low=round(min(xs), 3), high=round(max(xs), 3), points=sorted(pts))
    return out


def factors(observed: dict[str, Observed], runtime_s: float) -> dict[str, float]:
    """The measured factors routing uses for a program of ``runtime_s`` (``routing.route(overheads=...)``):
    per adapter, the median ratio of the captures of programs within ``NEAR`` of that length; an
    adapter with none keeps its declared factor (absent here)."""
    out = {}
    for name, o in observed.items():
        near = [r for t, r in o.points if t / NEAR <= runtime_s <= t * NEAR]
        if near:
            out[name] = round(float(np.median(near)), 3)
    return out


def timed_wall(timings: Iterable[ev.TimingRecorded], label: str, metric_kind: str) -> float | None:
    """The mean uninstrumented wall of ``label``'s latest timed runs: a campaign's ``label:wall_s``
    samples, else its metric samples when the metric is wall time; None when never timed."""
    for t in reversed(list(timings)):
        xs = t.samples.get(f"{label}:wall_s") or (t.samples.get(label) if metric_kind == "wall" else None)
        if xs:
            return round(float(np.mean(xs)), 6)
    return None

