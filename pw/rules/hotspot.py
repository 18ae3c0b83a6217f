"""Choose the hotspot from a normalized profile: the costliest operation in the editable tree.

Pure. The share is the operation's inclusive cost over the program total in the profile's primary
metric; the Amdahl ceiling is the whole-program speedup if that cost fell to zero, 1 / (1 - share).
"""

from __future__ import annotations

from ledger import events as ev
from ledger.profile import Operation, Profile


def amdahl_ceiling(share: float) -> float | None:
    return None if share >= 1.0 else 1.0 / (1.0 - share)


def select_hotspot(profile: Profile, editable_files: set[str]) -> ev.HotspotSelected:
    """The editable operation with the largest self cost (ties by id); falls back to any operation."""
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0)
    ops = [op for op in profile.operations if op.file in editable_files] or list(profile.operations)
    if not ops or total <= 0:
        raise ValueError("the profile has no operations with cost; cannot choose a hotspot")
    hot: Operation = min(ops, key=lambda o: (-o.self_metrics.get(metric, 0.0), o.id))
    # Inclusive cost bounds what a rewrite of this function (and what it calls) can save.
    inclusive = hot.inclusive_metrics.get(metric, hot.self_metrics.get(metric, 0.0))
    share = min(1.0, inclusive / total)
    return ev.HotspotSelected(
        operation=hot.id,
        name=hot.name,
        file=hot.file,
        line_start=hot.line_start,
        line_end=hot.line_end,
        metric=metric,
        share=round(share, 6),
        amdahl_ceiling=None if amdahl_ceiling(share) is None else round(amdahl_ceiling(share), 6),
    )


def hot_lines(profile: Profile, operation: str, *, top: int = 8) -> list[int]:
    """The operation's costliest source lines (for the locator's focus window)."""
    metric = profile.primary_metric
    lines = sorted(profile.lines_of(operation), key=lambda lc: (-lc.self_metrics.get(metric, 0.0), lc.line))
    return sorted(lc.line for lc in lines[:top])
