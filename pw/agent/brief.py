"""The agent brief: decisive measurements, exact source ranges, trust requirements, next command.

`render_brief` is pure; `fit_brief` drops the lowest-priority lines until the text fits the token
budget (320 o200k_base tokens, counted by a real tokenizer). The numbers behind every line go to
`agent-brief.json`; expanded diagnostics go to `agent-view.json`, read through `pw inspect`.
"""

from __future__ import annotations

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


# Said instead of the run directory's path when that path is too long for the budget (the brief lives in it).
RUN_HERE = "the directory holding this brief"


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
    slices_dir = n.get("slices_dir", "source-slices/")
    lines = [
        BriefLine(f"ProfileWeaver brief · run {n['run_id']} · workload {n['workload']}", 0),
        BriefLine(
            f"{subject}: {n['metric']} {n['baseline_mean_s']:.4g} s over {n['baseline_runs']} runs "
            f"(CV {_pct(n['baseline_cv'] or 0.0)}); oracle: {n['oracle']}",
            0,
        ),
        BriefLine(
            f"Hotspot ({n['adapter']}, {n['adapter_mode'] or 'default'}): {hs['name']} "
            f"{hs['file']}:{hs['line_start']}-{hs['line_end']} = {_pct(hs['share'])} of {hs['metric']}"
            f"{_wall_part(hs)}; Amdahl ceiling {hs['ceiling']:.2f}x" if hs.get("ceiling") and hs.get("file") else
            f"Hotspot ({n['adapter']}): {hs['name']} = {_pct(hs['share'])} of {hs['metric']}"
            + (f"; Amdahl ceiling {hs['ceiling']:.2f}x" if hs.get("ceiling") else ""),
            0,
        ),
    ]
    if n.get("gpu", {}).get("timeline"):
        lines.append(BriefLine(f"Timeline: {n['gpu']['timeline']}", 0))
    elif n.get("gpu"):
        g = n["gpu"]
        roof = (f"; roofline: {g['bound']}-bound, kernel ceiling {g['kernel_ceiling']:.1f}x, "
                f"program {g['program_ceiling']:.2f}x") if g.get("kernel_ceiling") and g.get("program_ceiling") else ""
        lines.append(BriefLine(f"Limiter of {g['kernel']} (ncu): {g['limiter']}{roof}", 0))
    if n.get("beside"):  # the hotspot sets up the data: name what the user may want judged instead
        b = n["beside"]
        lines.append(BriefLine(f"Beside it: {b['name']} = {_pct(b['share'])}; the hotspot looks like set-up: to judge "
                               f"campaigns on {b['name']}'s own cost, `pw start --operation {b['name']}`", 1))
    split = n.get("time_split") or {}
    if split.get("kernel", 0.0) >= KERNEL_FINDING:  # a finding, never the hotspot: said, kept short
        causes = sorted(((v, c) for c, v in split.get("kernel_causes", {}).items() if c != "other"), reverse=True)
        top = f" (mostly {causes[0][1]})" if causes else ""
        lines.append(BriefLine(f"Finding: {_pct(split['kernel'])} of samples in the OS kernel{top}, not in your code", 1))
    pb = n.get("profiling_build") or {}
    if pb.get("same_code") is False:  # must be said: lines come from code that is not the timed code
        lines.append(BriefLine(f"Caution: lines come from a -g build whose code differs: {pb['note']}", 0))
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
    never = n.get("never_editable") or []
    # The harness and shared code are named on the essential line: an agent must not "fix" the timer.
    shared = [f for f in never if not f.endswith(("Makefile", "CMakeLists.txt"))] or never  # build files: implied
    never_text = f"; never: {', '.join(shared[:3])}" if shared else ""
    lines += [
        BriefLine(f"Edit only: {', '.join(n['editable'][:6])} (in the workspace `pw prepare` makes){never_text}", 0),
    ]
    lines += [
        BriefLine(
            f"Verified needs all 6 gates: correctness (oracle{'+holdouts' if n.get('holdouts') else ''}), "
            "significance (>=5 pairs, 95% CI>1.01), mechanism (hotspot's code carries >50% of the saving), "
            "no collateral, attribution, reproducible.",
            0,
        ),
        BriefLine(f"Next (RUN={run_ref or n['run_dir']}): pw prepare RUN --candidate "
                  f"ID:{'current' if current else 'baseline'}:MECHANISM; pw evaluate RUN ID", 0),
    ]
    return lines


def render_brief(n: dict[str, Any], count: Callable[[str], int], budget: int = TOKEN_BUDGET) -> tuple[str, int]:
    """The fitted brief. A run directory whose path alone would push the essentials over the budget is
    named by where the brief lives instead, so a deep `--runs-dir` cannot make `pw start` fail."""
    try:
        return fit_brief(brief_lines(n), count, budget)
    except ValueError:
        return fit_brief(brief_lines(n, run_ref=RUN_HERE), count, budget)


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
