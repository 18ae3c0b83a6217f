"""Bounded, numbered source slices.

A slice is a one-line header `// <file>:<start>-<end> <role> <symbol>` (`#` for Python) followed by
numbered source lines. A definition longer than the per-slice limit keeps its first lines, a window
around the focus (or the hot lines) and its last line, with a marker line for each elided run that
says how many lines were left out and the full range. Every count here includes the header and the
markers, so "at most 80 lines" means the rendered text has at most 80 lines.
"""

from __future__ import annotations

from collections.abc import Sequence

HEAD_LINES = 2  # the signature usually fits in two lines
MIN_TRIMMED = 8  # below this a trimmed slice says too little to be worth its header


def comment_prefix(path: str) -> str:
    return "#" if path.endswith((".py", ".pyi")) else "//"


def plan_window(
    start: int, end: int, budget: int, focus: tuple[int, int] | None = None, hot: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """Line intervals of [start, end] to show within `budget` rendered lines (markers included)."""
    total = end - start + 1
    if budget <= 0:
        raise ValueError(f"slice budget must be positive, got {budget}")
    if total <= budget:
        return [(start, end)]
    if budget == 1:
        return []  # only the marker
    hot_inside = sorted({h for h in hot if start <= h <= end})
    if focus is None and hot_inside:
        focus = (hot_inside[0], hot_inside[-1])
    if focus is None or budget < HEAD_LINES + 5:
        return _fit([(start, start + budget - 2)], start, end, budget)  # head, then one marker
    lo, hi = max(start, focus[0]), min(end, focus[1])
    window = budget - HEAD_LINES - 1 - 2  # head, tail line, up to two markers
    if hi - lo + 1 <= window:
        spare = window - (hi - lo + 1)
        lo -= spare // 2
        hi += spare - spare // 2
    else:
        lo = _densest(lo, hi, window, hot_inside)
        hi = lo + window - 1
    # keep the window inside the body, between the head and the tail
    if lo < start + HEAD_LINES:
        hi += start + HEAD_LINES - lo
        lo = start + HEAD_LINES
    if hi > end - 1:
        lo -= hi - (end - 1)
        hi = end - 1
    lo = max(lo, start + HEAD_LINES)
    return _fit(_merge([(start, start + HEAD_LINES - 1), (lo, hi), (end, end)]), start, end, budget)


def _fit(intervals: list[tuple[int, int]], start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Shorten the longest piece until the rendering fits; a guard, the planner normally fits already."""
    while intervals and rendered_size(intervals, start, end) > budget:
        longest = max(range(len(intervals)), key=lambda i: (intervals[i][1] - intervals[i][0], -i))
        a, b = intervals[longest]
        intervals = [iv for iv in (intervals[:longest] + [(a, b - 1)] + intervals[longest + 1:]) if iv[0] <= iv[1]]
    return intervals


def _densest(lo: int, hi: int, window: int, hot: list[int]) -> int:
    """Start of the `window`-line run inside [lo, hi] holding the most hot lines (earliest on ties)."""
    inside = [h for h in hot if lo <= h <= hi]
    if not inside:
        return lo
    best, best_count = lo, -1
    for h in inside:
        first = max(lo, min(h, hi - window + 1))
        count = sum(1 for x in inside if first <= x < first + window)
        if count > best_count:
            best, best_count = first, count
    return best


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def rendered_size(intervals: list[tuple[int, int]], start: int, end: int) -> int:
    """Lines the intervals of [start, end] take when rendered: kept lines plus one marker per elided run."""
    kept = sum(b - a + 1 for a, b in intervals)
    markers, previous = 0, start - 1
    for a, b in intervals:
        markers += a > previous + 1
        previous = b
    return kept + markers + (previous < end)


def render(
    path: str,
    role: str,
    symbol: str,
    start: int,
    end: int,
    source_lines: Sequence[str],
    budget: int,
    focus: tuple[int, int] | None = None,
    hot: Sequence[int] = (),
) -> str:
    """Header plus numbered lines, at most `budget` lines in all (budget >= 2)."""
    prefix = comment_prefix(path)
    end = min(end, len(source_lines))
    header = f"{prefix} {path}:{start}-{end} {role} {symbol}"
    body_budget = budget - 1
    intervals = plan_window(start, end, body_budget, focus, hot)
    width = len(str(end))
    out = [header]
    previous = start - 1
    for a, b in intervals:
        if a > previous + 1:
            out.append(_marker(prefix, previous + 1, a - 1, path, start, end))
        out.extend(f"{n:>{width}}| {source_lines[n - 1].rstrip()}" for n in range(a, b + 1))
        previous = b
    if previous < end:
        out.append(_marker(prefix, previous + 1, end, path, start, end))
    return "\n".join(out) + "\n"


def _marker(prefix: str, a: int, b: int, path: str, start: int, end: int) -> str:
    count = b - a + 1
    return f"{prefix} ... {count} line{'s' if count != 1 else ''} elided ({a}-{b}); full range {path}:{start}-{end}"


def line_count(text: str) -> int:
    return text.count("\n")
