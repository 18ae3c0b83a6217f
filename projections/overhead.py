"""Observed profiler overhead: a pure fold of recorded captures (routing's measured costs).

Every `ProfileCaptured` (v3) records the profiled wall and the same target's uninstrumented timed
wall; their ratio is the adapter's observed overhead on that capture. This projection folds them,
over one run's events or several runs' together, into one factor per adapter (the median, robust to
one odd capture). It is the only place a measured overhead lives: nothing writes it elsewhere, so
deleting it is impossible and rebuilding it is replaying the ledgers. Reused captures (no profiler
ran) and captures without a timed wall are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

from ledger import events as ev


class Observed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    adapter: str
    captures: int  # how many captures measured it
    factor: float  # median of wall_s / timed_wall_s over those captures
    low: float
    high: float


def observed_overheads(envelopes: Iterable[ev.Envelope]) -> dict[str, Observed]:
    """The measured overhead factor of every adapter that has at least one measured capture."""
    seen: dict[str, list[float]] = {}
    for env in envelopes:
        data = env.data
        if isinstance(data, ev.ProfileCaptured) and data.reused_from is None and data.overhead:
            seen.setdefault(data.adapter, []).append(float(data.overhead))
    return {
        name: Observed(adapter=name, captures=len(xs), factor=round(float(np.median(xs)), 3),
                       low=round(min(xs), 3), high=round(max(xs), 3))
        for name, xs in sorted(seen.items())
    }


def factors(observed: dict[str, Observed]) -> dict[str, float]:
    """The factors routing uses (``pw.rules.routing.route(overheads=...)``)."""
    return {name: o.factor for name, o in observed.items()}


def timed_wall(timings: Iterable[ev.TimingRecorded], label: str, metric_kind: str) -> float | None:
    """The mean uninstrumented wall of ``label``'s latest timed runs: a campaign's ``label:wall_s``
    samples, else its metric samples when the metric is wall time; None when never timed."""
    for t in reversed(list(timings)):
        xs = t.samples.get(f"{label}:wall_s") or (t.samples.get(label) if metric_kind == "wall" else None)
        if xs:
            return round(float(np.mean(xs)), 6)
    return None

