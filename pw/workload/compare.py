"""Correctness: compare a run's output with its reference, numbers within a stated tolerance.

Pure comparison functions; the runner that produces outputs lives in `pw.workload.steps`.
Tokens that parse as numbers compare as |got - want| <= atol + rtol * |want|; every other token
must match exactly; lines that carry the ROI metric are skipped (they are timing, not output).
"""

from __future__ import annotations

import math
import re

import msgspec


class Comparison(msgspec.Struct, frozen=True):
    passed: bool
    detail: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    lines: int = 0  # non-empty reference lines compared (0: the comparison covered nothing)
    fields: int = 0  # tokens in them


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        pass
    # C99 hex floats (printf "%a", e.g. -0x1.8cd255afae7e3p+13): exact, and cheap for a program to
    # print in bulk; they compare as numbers like any other.
    if "0x" in token[:3].lower() and "p" in token.lower():
        try:
            return float.fromhex(token)
        except ValueError:
            return None
    return None


def _lines(text: str, skip: re.Pattern[str] | None) -> list[tuple[int, list[str]]]:
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if skip is not None and skip.search(line):
            continue
        tokens = line.split()
        if tokens:
            out.append((i, tokens))
    return out


def _without_lines_matching(text: str, pattern: re.Pattern[str]) -> str:
    """`text` without the lines where `pattern` is found (one scan of the whole text, not one search
    per line: a full result has a million lines and one metric line)."""
    parts, last = [], 0
    for m in pattern.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start < last:  # a second match on a line already removed
            continue
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end + 1
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _identical(got: str, want: str, skip_pattern: str | None) -> Comparison | None:
    """The fast path for a full result of millions of numbers: when the outputs are the same text
    once the skipped (metric) lines are removed, they match, and counting is all that is left."""
    if skip_pattern:
        skip = re.compile(skip_pattern)
        got, want = _without_lines_matching(got, skip), _without_lines_matching(want, skip)
    if got != want:
        return None
    lines = sum(1 for ln in want.splitlines() if ln and not ln.isspace())
    return Comparison(True, f"{lines} lines match (max rel err 0)", 0.0, 0.0, lines=lines, fields=len(want.split()))


def compare_text(got: str, want: str, *, rtol: float, atol: float, skip_pattern: str | None = None) -> Comparison:
    """Token-wise comparison of two outputs; the first mismatch is named by line and token."""
    same = _identical(got, want, skip_pattern)
    if same is not None:
        return same
    skip = re.compile(skip_pattern) if skip_pattern else None
    got_lines, want_lines = _lines(got, skip), _lines(want, skip)
    max_abs = max_rel = 0.0
    for (gno, gtok), (_, wtok) in zip(got_lines, want_lines):
        if len(gtok) != len(wtok):
            return Comparison(False, f"line {gno}: {len(gtok)} fields, reference has {len(wtok)}", max_abs, max_rel)
        if gtok == wtok:
            # Identical text is identical numbers (a NaN token equals itself too): only differing
            # tokens need parsing, which keeps a full result of half a million numbers cheap.
            continue
        for g, w in zip(gtok, wtok):
            if g == w:
                continue
            gv, wv = _number(g), _number(w)
            if gv is None or wv is None:
                if g != w:
                    return Comparison(False, f"line {gno}: got {g!r}, reference {w!r}", max_abs, max_rel)
                continue
            if math.isnan(wv) and math.isnan(gv):
                continue
            err = abs(gv - wv)
            if not err <= atol + rtol * abs(wv):  # `not <=` so NaN fails
                return Comparison(
                    False,
                    f"line {gno}: got {g}, reference {w} (|diff| {err:.3g} > atol {atol:g} + rtol {rtol:g}*|ref|)",
                    max(max_abs, err),
                    max_rel,
                )
            max_abs = max(max_abs, err)
            if wv != 0:
                max_rel = max(max_rel, err / abs(wv))
    if len(got_lines) != len(want_lines):
        return Comparison(
            False, f"{len(got_lines)} output lines, reference has {len(want_lines)}", max_abs, max_rel
        )
    fields = sum(len(tokens) for _, tokens in want_lines)
    return Comparison(True, f"{len(want_lines)} lines match (max rel err {max_rel:.3g})", max_abs, max_rel,
                      lines=len(want_lines), fields=fields)
