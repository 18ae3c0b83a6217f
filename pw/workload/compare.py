"""Correctness: compare a run's output with its reference, numbers within a stated tolerance.

Pure comparison functions; the runner that produces outputs lives in `pw.workload.steps`.
Tokens that parse as numbers compare as |got - want| <= atol + rtol * |want|; every other token
must match exactly; lines that carry the ROI metric are skipped (they are timing, not output).
A run's output is more than stdout: benchmark suites dump their arrays to stderr and leave stdout
empty, and programs write result files. `Streams` holds all three; `compare_streams` checks each
named stream and says which one differed ("stderr line 3: ...").
"""

from __future__ import annotations

import math
import re

import msgspec
import numpy as np


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


def pattern_lines(text: str, pattern: str | None) -> frozenset[int]:
    """1-based numbers of the lines a match of ``pattern`` spans, found in the whole text (one scan;
    ``^``/``$`` anchor at each line): a timer whose label and number sit on two lines skips both."""
    if not pattern:
        return frozenset()
    out: set[int] = set()
    line, at = 1, 0  # the line number at offset `at` (matches come in order: one pass over the text)
    for m in re.compile(pattern, re.MULTILINE).finditer(text):
        line += text.count("\n", at, m.start())
        last = line + text.count("\n", m.start(), max(m.start(), m.end() - 1))
        out.update(range(line, last + 1))
        at = m.start()
    return frozenset(out)


def _lines(text: str, skip: frozenset[int]) -> list[tuple[int, list[str]]]:
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if i in skip:
            continue
        tokens = line.split()
        if tokens:
            out.append((i, tokens))
    return out


def _without_lines(text: str, skip: frozenset[int]) -> str:
    """``text`` without the numbered lines (an empty set: the text itself, nothing copied)."""
    if not skip:
        return text
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True), start=1) if i not in skip)


def _identical(got: str, want: str, skip_got: frozenset[int], skip_want: frozenset[int]) -> Comparison | None:
    """The fast path for a full result of millions of numbers: when the outputs are the same text
    once the skipped (metric, varying) lines are removed, they match, and counting is all that is left."""
    got, want = _without_lines(got, skip_got), _without_lines(want, skip_want)
    if got != want:
        return None
    lines = sum(1 for ln in want.splitlines() if ln and not ln.isspace())
    return Comparison(True, f"{lines} lines match (max rel err 0)", 0.0, 0.0, lines=lines, fields=field_count(want))


def field_count(text: str) -> int:
    """``len(text.split())`` without making the strings (3x faster on a result of half a million
    numbers, which is compared after every timed run): a field starts at a byte above the space
    that follows one at or below it. str.split() splits on \\t\\n\\v\\f\\r, \\x1c-\\x1f and the
    space; text with another control byte, or not ASCII, is split as it is."""
    if not text.isascii():
        return len(text.split())
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    if b.size == 0:
        return 0
    if np.any((b < 9) | ((b > 13) & (b < 28))):
        return len(text.split())
    space = b <= 32
    return int(np.count_nonzero(space[:-1] & ~space[1:])) + int(not space[0])


def compare_text(got: str, want: str, *, rtol: float, atol: float, skip_pattern: str | None = None,
                 vary: frozenset[int] | list[int] | tuple[int, ...] = frozenset()) -> Comparison:
    """Token-wise comparison of two outputs; the first mismatch is named by line and token. Lines
    where ``skip_pattern`` is found (the metric's), and the numbered lines in ``vary`` (lines the
    baseline itself does not repeat between identical runs: its timers), are not compared."""
    vary = frozenset(vary)
    skip_got, skip_want = pattern_lines(got, skip_pattern) | vary, pattern_lines(want, skip_pattern) | vary
    same = _identical(got, want, skip_got, skip_want)
    if same is not None:
        return same
    got_lines, want_lines = _lines(got, skip_got), _lines(want, skip_want)
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


# --- several streams ------------------------------------------------------------------------------

STREAMS = ("stdout", "stderr", "files")
_BUNDLE_MAGIC = "pw-streams-v1\n"


class _Bundle(msgspec.Struct, frozen=True):
    """A bundle as stored before varying lines were kept (and still, when none vary): the same bytes."""

    stdout: str
    stderr: str = ""
    files: dict[str, str] = {}


class Streams(msgspec.Struct, frozen=True):
    """What a run produced: its stdout, its stderr and the files it created in its working tree
    (path relative to the build tree -> text). ``vary``: stream -> 1-based numbers of the lines the
    baseline does not repeat between identical runs (timers), which no comparison with this bundle
    checks; found by ``varying_lines`` at ``pw start``, carried by every bundle compared with it."""

    stdout: str
    stderr: str = ""
    files: dict[str, str] = {}
    vary: dict[str, list[int]] = {}


def encode_streams(s: Streams) -> bytes:
    body = s if s.vary else _Bundle(stdout=s.stdout, stderr=s.stderr, files=s.files)
    return _BUNDLE_MAGIC.encode() + msgspec.json.encode(body, order="deterministic")


def is_bundle(data: bytes | str) -> bool:
    return (data.decode(errors="replace") if isinstance(data, bytes) else data).startswith(_BUNDLE_MAGIC)


def decode_streams(data: bytes | str) -> Streams:
    """A stored bundle; anything else is the stdout of a run recorded before bundles existed."""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    if text.startswith(_BUNDLE_MAGIC):
        return msgspec.json.decode(text[len(_BUNDLE_MAGIC):].encode(), type=Streams)
    return Streams(stdout=text)


def compare_streams(got: Streams, want: Streams, streams: list[str] | tuple[str, ...], *, rtol: float,
                    atol: float, skip_pattern: str | None = None) -> Comparison:
    """Each named stream within the tolerance; the first that differs is named with its line. The
    lines ``want`` says vary run to run (``Streams.vary``) are not compared."""
    checked: list[str] = []
    max_abs = max_rel = 0.0
    lines = fields = 0
    for name in streams:
        if name == "files":
            for rel in sorted(set(got.files) | set(want.files)):
                if rel not in got.files:
                    return Comparison(False, f"file {rel}: not written (the reference run wrote it)", max_abs, max_rel)
                if rel not in want.files:
                    return Comparison(False, f"file {rel}: written, the reference run did not write it",
                                      max_abs, max_rel)
                cmp = compare_text(got.files[rel], want.files[rel], rtol=rtol, atol=atol, skip_pattern=skip_pattern)
                if not cmp.passed:
                    return Comparison(False, f"file {rel} {cmp.detail}", cmp.max_abs_err, cmp.max_rel_err)
                checked.append(f"file {rel}: {cmp.detail}")
                max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
                lines, fields = lines + cmp.lines, fields + cmp.fields
            continue
        cmp = compare_text(getattr(got, name), getattr(want, name), rtol=rtol, atol=atol, skip_pattern=skip_pattern,
                           vary=want.vary.get(name, ()))
        if not cmp.passed:
            return Comparison(False, f"{name} {cmp.detail}", cmp.max_abs_err, cmp.max_rel_err)
        checked.append(f"{name}: {cmp.detail}")
        max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
        lines, fields = lines + cmp.lines, fields + cmp.fields
    return Comparison(True, "; ".join(checked) or "no stream compared", max_abs, max_rel, lines=lines, fields=fields)


# --- lines that vary by nature ---------------------------------------------------------------------

def varying_lines(first: Streams, others: list[Streams] | tuple[Streams, ...], streams: list[str] | tuple[str, ...],
                  *, rtol: float, atol: float, skip_pattern: str | None = None) -> tuple[dict[str, list[int]], str | None]:
    """The lines of ``first`` that identical runs (``others``) do not repeat within the tolerance:
    (stream -> 1-based line numbers, None), or ({}, why) when the runs differ in a way that setting
    lines aside cannot absorb (another number of lines, another file written). Timers, rates and
    time stamps vary by nature; a result that varies is nondeterministic, and all of its lines show up here."""
    vary: dict[str, set[int]] = {}
    for name in streams:
        if name == "files":
            for other in others:
                for rel in sorted(set(first.files) | set(other.files)):
                    if first.files.get(rel) != other.files.get(rel) and not compare_text(
                            other.files.get(rel, ""), first.files.get(rel, ""), rtol=rtol, atol=atol,
                            skip_pattern=skip_pattern).passed:
                        return {}, f"file {rel} differs between identical runs"
            continue
        want = getattr(first, name)
        mine = want.splitlines()
        skipped = pattern_lines(want, skip_pattern)
        for other in others:
            theirs = getattr(other, name).splitlines()
            if len(theirs) != len(mine):
                return {}, f"{name}: {len(theirs)} lines in one run, {len(mine)} in another"
            for i, (a, b) in enumerate(zip(mine, theirs), start=1):
                if a != b and i not in skipped and not compare_text(b, a, rtol=rtol, atol=atol).passed:
                    vary.setdefault(name, set()).add(i)
    return {k: sorted(v) for k, v in sorted(vary.items())}, None


def unchecked_text(vary: dict[str, list[int]]) -> str:
    """`unchecked: stdout lines 2, 4 vary run to run (timers?)`, or '' when nothing varies."""
    if not vary:
        return ""
    parts = []
    for name, lines in vary.items():
        shown = ", ".join(str(n) for n in lines[:8]) + (f" and {len(lines) - 8} more" if len(lines) > 8 else "")
        parts.append(f"{name} line{'s' if len(lines) > 1 else ''} {shown}")
    many = len(vary) > 1 or any(len(lines) > 1 for lines in vary.values())
    return f"unchecked: {'; '.join(parts)} {'vary' if many else 'varies'} run to run (timers?)"


_LABEL_NUMBER = re.compile(r"^\s*(?P<label>[A-Za-z][^\d=]*?)\s*[:=]\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*\S*\s*$")
_BARE_NUMBER = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*[A-Za-z]{0,3}\s*$")
_LABEL_ONLY = re.compile(r"^\s*(?P<label>[A-Za-z][^\d]*?)\s*:\s*$")


def timer_labels(text: str, lines: list[int]) -> list[tuple[int, str]]:
    """(line, label) of the varying lines that read as a labelled number: `GPU Runtime: 0.00023` on
    one line, or `GPU Runtime:` above a line holding only the number. Labels that say time come
    first (`time`, `runtime`, `elapsed`, `seconds`; of those, a GPU's or kernel's first), then the others in
    output order."""
    rows = text.splitlines()
    found: list[tuple[int, str]] = []
    for n in lines:
        if not 1 <= n <= len(rows):
            continue
        m = _LABEL_NUMBER.match(rows[n - 1])
        if m:
            found.append((n, m.group("label").strip()))
        elif _BARE_NUMBER.match(rows[n - 1]) and n >= 2 and (m := _LABEL_ONLY.match(rows[n - 2])):
            found.append((n, m.group("label").strip()))
    timeish = re.compile(r"time|elapsed|second|duration|\bms\b|\bsec\b", re.IGNORECASE)
    device = re.compile(r"gpu|kernel|device|cuda", re.IGNORECASE)  # the region a GPU rewrite changes
    return sorted(found, key=lambda f: (not timeish.search(f[1]), not device.search(f[1]), f[0]))
