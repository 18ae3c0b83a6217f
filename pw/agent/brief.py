"""The agent brief: decisive measurements, exact source ranges, trust requirements, next command.

`render_brief` is pure; `fit_brief` drops the lowest-priority lines until the text fits the token
budget (320 o200k_base tokens, counted by a real tokenizer). The numbers behind every line go to
`agent-brief.json`; expanded diagnostics go to `agent-view.json`, read through `pw inspect`.

`render_brief` never fails: when the essential lines alone exceed the budget (a long run path,
suite paths, a templated kernel name), it names the run by where the brief lives, then shortens the
essential lines and points at `pw inspect`, and last cuts the text at the budget. A brief that
says less is still a brief; a start that dies with a traceback leaves nothing to read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

TOKEN_BUDGET = 320
KERNEL_FINDING = 0.10  # a kernel share at least this large is stated as a finding


class BriefLine(msgspec.Struct, frozen=True):
    text: str
    priority: int  # 0 = never dropped; higher numbers are dropped first


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _small_pct(x: float) -> str:
    """A share that may be tiny (a kernel's of a run): two significant digits under 0.1%, not 0.0%."""
    return f"{100 * x:.2g}%" if 0 < x < 0.001 else _pct(x)


# Said instead of the run directory's path when that path is too long for the budget (the brief lives in it).
RUN_HERE = "the directory holding this brief"


_OF = {"region": "the timed region", "wall": "the wall time", "span": "the host's CUDA span"}


def _device_hotspot(hs: dict, where: str, adapter: str) -> str:
    """A device-time hotspot with what its ceiling is of (`ceiling_of`, `ceiling_share`, as the
    hotspot rule recorded them): its share of device time, and of the region or the run."""
    of = _OF.get(hs.get("ceiling_of") or "", "")
    share = hs.get("ceiling_share")
    text = f"Hotspot ({adapter}): {hs['name']}{where} = {_pct(hs['share'])} of device time"
    if share is not None and of:
        text += f", {_small_pct(share)} of {of}"
    if hs.get("ceiling"):
        text += f"; Amdahl ceiling {hs['ceiling']:.2f}x of {of or 'the run'}"
    else:
        text += f"; no Amdahl ceiling (it is all of {of or 'the run'})"
    return text


def _limiter(g: dict) -> str:
    """One limiter statement: the counters' limiter, with the roofline's bound only where it agrees
    (a "memory-throughput bound" limiter beside "roofline: compute-bound" says two things)."""
    limiter = g["limiter"]
    roof = ""
    if g.get("kernel_ceiling") and g.get("program_ceiling"):
        bound = g.get("bound")
        said = next((b for b in ("memory", "compute", "latency") if f"{b}-throughput bound" in limiter
                     or f"{b} bound" in limiter), None)
        agrees = bound and (said is None or said == bound)
        roof = (f"; roofline: {bound + '-bound, ' if agrees else ''}kernel ceiling {g['kernel_ceiling']:.1f}x, "
                f"program {g['program_ceiling']:.2f}x")
    return f"Limiter of {g['kernel']} (ncu): {limiter}{roof}"


def _kernel_finding(split: dict) -> str:
    """The OS kernel's share, in the words of what measured it: a sampler's frames, or the rusage
    of the timed runs (then no sample was taken)."""
    causes = sorted(((v, c) for c, v in split.get("kernel_causes", {}).items() if c != "other"), reverse=True)
    top = f" (mostly {causes[0][1]})" if causes else ""
    if split.get("source"):  # rusage: CPU seconds, not samples
        return f"Finding: {_pct(split['kernel'])} of the CPU time is system time (rusage of the timed runs){top}"
    return f"Finding: {_pct(split['kernel'])} of samples in the OS kernel{top}, not in your code"


def _wall_part(hs: dict) -> str:
    """For device time, the share of the host's span the ceiling was taken from (device work can
    hide behind host work, so the device share alone would promise too much): `span_share`, as the
    hotspot rule recorded it (`HotspotSelected.span_share`; None for any other profile)."""
    if hs.get("span_share") is None or not hs.get("ceiling"):
        return ""
    return f" ({_pct(hs['span_share'])} of the host's CUDA span)"


def brief_lines(n: dict[str, Any], *, run_ref: str | None = None) -> list[BriefLine]:
    """The candidate lines of the brief from its numbers (see `agent-brief.json`).

    `run_ref` names the run in the next command; the default is the run directory's path."""
    hs = n["hotspot"]
    # A refreshed brief (after a verified candidate) describes the current best, not the baseline.
    current = n.get("current")
    subject = (f"Current best {current} ({n['cumulative']:.3g}x over baseline)" if current and n.get("cumulative")
               else f"Current best {current}" if current else "Baseline")
    lines = [
        BriefLine(f"ProfileWeaver brief · run {n['run_id']} · workload {n['workload']}", 0),
        BriefLine(
            f"{subject}: {n['metric']} {n['baseline_mean_s']:.4g} s over {n['baseline_runs']} runs "
            f"(CV {_pct(n['baseline_cv'] or 0.0)}); oracle: {n['oracle']}",
            0,
        ),
        BriefLine(_hotspot_line(n, hs), 0),
    ]
    return lines + _finding_lines(n) + _source_lines(n, hs) + _closing_lines(n, current, run_ref)


def _hotspot_line(n: dict[str, Any], hs: dict[str, Any]) -> str:
    where = f" {hs['file']}:{hs['line_start']}-{hs['line_end']}" if hs.get("file") else ""
    if hs.get("ceiling_of"):  # a device-time hotspot that says what its ceiling is of
        return _device_hotspot(hs, where, f"{n['adapter']}, {n['adapter_mode'] or 'default'}")
    if n.get("judged_on") and n["judged_on"] == hs.get("name"):
        # Its share is of the whole run, but the run is judged on its cost alone: no ceiling applies.
        return (f"Hotspot ({n['adapter']}, {n['adapter_mode'] or 'default'}): {hs['name']}{where} = "
                f"{_pct(hs['share'])} of {hs['metric']} of the whole run; judged on its own cost (no Amdahl ceiling)")
    if hs.get("ceiling") and hs.get("file"):
        return (f"Hotspot ({n['adapter']}, {n['adapter_mode'] or 'default'}): {hs['name']}{where} = "
                f"{_pct(hs['share'])} of {hs['metric']}{_wall_part(hs)}; Amdahl ceiling {hs['ceiling']:.2f}x")
    return (f"Hotspot ({n['adapter']}): {hs['name']} = {_pct(hs['share'])} of {hs['metric']}"
            + (f"; Amdahl ceiling {hs['ceiling']:.2f}x" if hs.get("ceiling") else ""))


def _finding_lines(n: dict[str, Any]) -> list[BriefLine]:
    """What the profile found beside the hotspot: warnings, the GPU's limiter, findings, set-up."""
    lines = []
    if (n.get("region") or {}).get("warning"):  # must be said: the metric may not time the kernel
        lines.append(BriefLine(f"Warning: {n['region']['warning']}", 0))
    if n.get("gpu", {}).get("timeline"):
        lines.append(BriefLine(f"Timeline: {n['gpu']['timeline']}", 0))
    elif n.get("gpu"):
        lines.append(BriefLine(_limiter(n["gpu"]), 0))
    for i, f in enumerate(n.get("findings") or []):
        lines.append(BriefLine(f"Finding: {f}", 1 if i == 0 else 4))
    if n.get("beside"):  # the hotspot sets up the data: name what the user may want judged instead
        b = n["beside"]
        lines.append(BriefLine(f"Beside it: {b['name']} = {_pct(b['share'])}; the hotspot looks like set-up: to judge "
                               f"campaigns on {b['name']}'s own cost, `pw start --operation {b['name']}`", 1))
    split = n.get("time_split") or {}
    if split.get("kernel", 0.0) >= KERNEL_FINDING:  # a finding, never the hotspot: said, kept short
        lines.append(BriefLine(_kernel_finding(split), 1))
    pb = n.get("profiling_build") or {}
    if pb.get("same_code") is False:  # must be said: lines come from code that is not the timed code
        lines.append(BriefLine(f"Caution: lines come from a -g build whose code differs: {pb['note']}", 0))
    return lines


def _source_lines(n: dict[str, Any], hs: dict[str, Any]) -> list[BriefLine]:
    """Where to read: the hot lines, the ranked mechanisms, the slices and the data path."""
    lines = []
    slices_dir = n.get("slices_dir", "source-slices/")
    if n.get("hot_lines"):
        shown = ", ".join(f"{h['line']} ({_pct(h['share'])})" for h in n["hot_lines"][:2])
        lines.append(BriefLine(f"Hot lines in {hs['file']}: {shown}", 1))
    for i, m in enumerate(n.get("mechanisms", [])[:3]):
        where = ", ".join(m.get("evidence", [])[:2])
        text = f"{m['id']} ({m['score']:.2f})" + (f": {where}" if where else "")
        lines.append(BriefLine(f"Mechanism {i + 1}: {text}", 1 if i == 0 else 3 + i))
    slices = n.get("slices", [])
    if slices:
        # The hotspot's slice is essential; the others are droppable, so long suite paths cannot push
        # the essentials over the budget.
        first = slices[0]
        lines.append(BriefLine(f"Read {slices_dir}: {first['path'].removeprefix(slices_dir)} "
                               f"({first['range']})", 0))
        if len(slices) > 1:
            shown = "; ".join(f"{s['path'].removeprefix(slices_dir)} ({s['range']})" for s in slices[1:3])
            lines.append(BriefLine(f"Then: {shown}", 2))
        if len(slices) > 3:
            lines.append(BriefLine("Also: " + "; ".join(f"{s['path']}" for s in slices[3:6]), 6))
    for f in n.get("frontier", [])[:2]:
        lines.append(BriefLine(f"Data path: {f}", 2))
    return lines


def _closing_lines(n: dict[str, Any], current: str | None, run_ref: str | None) -> list[BriefLine]:
    """What may be edited, what verified needs, and the next command."""
    never = n.get("never_editable") or []
    # The harness and shared code are named on the essential line: an agent must not "fix" the timer.
    shared = [f for f in never if not f.endswith(("Makefile", "CMakeLists.txt"))] or never  # build files: implied
    never_text = f"; never: {', '.join(shared[:3])}" if shared else ""
    return [
        BriefLine(f"Edit only: {', '.join(n['editable'][:6])} (in the workspace `pw prepare` makes){never_text}", 0),
        BriefLine(
            f"Verified needs all 6 gates: correctness (oracle{'+holdouts' if n.get('holdouts') else ''}), "
            "significance (>=5 pairs, 95% CI>1.01), mechanism (hotspot's code carries >50% of the saving), "
            "no collateral, attribution, reproducible.",
            0,
        ),
        BriefLine(f"Next (RUN={run_ref or n['run_dir']}): pw prepare RUN --candidate "
                  f"ID:{'current' if current else 'baseline'}:MECHANISM; pw evaluate RUN ID", 0),
    ]


# The shortened brief's essential lines are cut to at most this many characters (a path, a name, an
# oracle statement can each be long), each step shorter; the hotspot line is cut only at the last.
# What was cut is in agent-brief.json and `pw inspect`.
SHORT_LINE_CHARS = (160, 120, 90)
GATES_SHORT = ("Verified needs all 6 gates: correctness, significance, mechanism, no collateral, attribution, "
               "reproducible.")
POINTER = "(Shortened: agent-brief.json and `pw inspect RUN` have the rest.)"


def _cut(text: str, chars: int | None) -> str:
    return text if chars is None or len(text) <= chars else text[: chars - 1].rstrip() + "…"


def _short_form(text: str) -> str:
    """An essential line's short form: what it says without the explanations an agent can look up."""
    if text.startswith("Verified needs all 6 gates"):
        return GATES_SHORT
    if text.startswith("Edit only: "):
        return text.replace(" (in the workspace `pw prepare` makes)", "")
    if text.startswith("Limiter of "):
        text = text.replace(" (4 is ideal for 4-byte words)", "")
        return re.sub(r", program [0-9.]+x$", "", text)
    return text


def shortened(lines: list[BriefLine], chars: int | None = None) -> list[BriefLine]:
    """The essential lines in their short forms (``_short_form``); with ``chars``, each cut to that
    many characters (the hotspot line only at the shortest step), and a pointer to what was cut
    before the next command. The optional lines as they were (fit_brief drops them first)."""
    out = []
    for line in lines:
        if line.priority != 0:
            out.append(line)
            continue
        text = _short_form(line.text)
        if text.startswith("Next ("):
            if chars is not None:
                out.append(BriefLine(POINTER, 0))
            out.append(line)  # the command is the brief's point: never cut
            continue
        spare = text.startswith("Hotspot ") and chars is not None and chars > SHORT_LINE_CHARS[-1]
        out.append(BriefLine(text if spare else _cut(text, chars), 0))
    return out


def _hard_cut(text: str, count: Callable[[str], int], budget: int) -> tuple[str, int]:
    """The first lines of ``text`` that fit, the last of them cut by characters when even one does
    not: the brief always exists and never exceeds the budget."""
    kept: list[str] = []
    for row in text.splitlines():
        trial = "\n".join([*kept, row]) + "\n"
        if count(trial) <= budget:
            kept.append(row)
            continue
        lo, hi = 0, len(row)
        while lo < hi:  # the longest prefix of this row that still fits
            mid = (lo + hi + 1) // 2
            if count("\n".join([*kept, row[:mid] + "…"]) + "\n") <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            kept.append(row[:lo] + "…")
        break
    body = "\n".join(kept) + "\n"
    return body, count(body)


def render_brief(n: dict[str, Any], count: Callable[[str], int], budget: int = TOKEN_BUDGET) -> tuple[str, int]:
    """The fitted brief; it never fails. A run directory whose path alone would push the essentials
    over the budget is named by where the brief lives instead, so a deep `--runs-dir` cannot make
    `pw start` fail; essentials still over it are shortened (``shortened``), then cut (``_hard_cut``)."""
    full, here = brief_lines(n), brief_lines(n, run_ref=RUN_HERE)
    # The run's own path is worth more than the long forms; the long forms more than cut lines.
    attempts = [full, shortened(full), here, shortened(here), *(shortened(here, c) for c in SHORT_LINE_CHARS)]
    for attempt in attempts:
        try:
            return fit_brief(attempt, count, budget)
        except ValueError:
            continue
    essential = [line for line in attempts[-1] if line.priority == 0]
    # The next command first: what an agent must not lose is what to run.
    ordered = essential[-1:] + essential[:-1]
    return _hard_cut("\n".join(line.text for line in ordered), count, budget)


def fit_brief(lines: list[BriefLine], count: Callable[[str], int], budget: int = TOKEN_BUDGET) -> tuple[str, int]:
    """Drop the highest-priority-number lines (later ones first) until the text fits."""
    kept = list(lines)
    while True:
        text = "\n".join(line.text for line in kept) + "\n"
        tokens = count(text)
        if tokens <= budget:
            return text, tokens
        droppable = [i for i, line in enumerate(kept) if line.priority > 0]
        if not droppable:
            raise ValueError(f"the brief's essential lines take {tokens} tokens, over the budget of {budget}")
        worst = max(droppable, key=lambda i: (kept[i].priority, i))
        del kept[worst]
