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


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def _lines(text: str, skip: re.Pattern[str] | None) -> list[tuple[int, list[str]]]:
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if skip is not None and skip.search(line):
            continue
        tokens = line.split()
        if tokens:
            out.append((i, tokens))
    return out


def compare_text(got: str, want: str, *, rtol: float, atol: float, skip_pattern: str | None = None) -> Comparison:
    """Token-wise comparison of two outputs; the first mismatch is named by line and token."""
    skip = re.compile(skip_pattern) if skip_pattern else None
    got_lines, want_lines = _lines(got, skip), _lines(want, skip)
    max_abs = max_rel = 0.0
    for (gno, gtok), (_, wtok) in zip(got_lines, want_lines):
        if len(gtok) != len(wtok):
            return Comparison(False, f"line {gno}: {len(gtok)} fields, reference has {len(wtok)}", max_abs, max_rel)
        for g, w in zip(gtok, wtok):
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
    return Comparison(True, f"{len(want_lines)} lines match (max rel err {max_rel:.3g})", max_abs, max_rel)
