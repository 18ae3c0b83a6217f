"""The brief for a profile imported through a partial adapter (`pw import`): pure text from the
normalized profile, the adapter's own findings and its declared gate limits.

Like agent-brief.txt it holds only what an agent needs to act: the decisive numbers with their
units (and whether they are time), exact source ranges it can open, what the evidence can and cannot
prove, and the next command. It stays within the same 320-token budget; items are dropped from the
end of each list until it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ledger.metrics import KNOWN_METRICS
from ledger.profile import Profile

BUDGET = 320
_TIME_KINDS = ("time",)


def _num(value: float, unit: str) -> str:
    if unit == "B":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B"
    if unit == "1":
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"
    return f"{value:.3g} {unit}"


def _where(op, profile: Profile) -> str:
    if not op.file:
        return ""
    own = profile.lines_of(op.id)
    # rank by the first of the profile's metrics its lines carry (GPU lines carry PC samples, not time)
    metric = next((m for m in profile.metrics if any(m in lc.self_metrics for lc in own)), profile.primary_metric)
    lines = sorted(own, key=lambda lc: (-lc.self_metrics.get(metric, 0.0), lc.line))
    if lines:
        return f" at {op.file}:{lines[0].line}"
    if op.line_start:
        return f" at {op.file}:{op.line_start}"
    return f" in {op.file}"


def render(profile: Profile, *, adapter: str, tool: str, source: str, gate_limits: Mapping[str, str],
           ceiling: str, findings: Sequence[str], run: str, count: Callable[[str], int],
           budget: int = BUDGET) -> tuple[str, int]:
    """The brief and its token count (``count``: the o200k counter)."""
    metric = profile.primary_metric
    spec = KNOWN_METRICS[metric]
    is_time = spec.kind in _TIME_KINDS
    total = profile.totals.get(metric, 0.0)
    nature = "time" if is_time else f"{spec.kind}, NOT time" + (", a model estimate" if spec.simulated else "")
    head = [f"Imported {adapter} profile ({tool} ran elsewhere; pw cannot rerun it) from {source}",
            f"Metric: {metric} ({nature})"]
    meaning = f"Means: {spec.description}"
    extra = [f"{m} = {_num(profile.totals[m], KNOWN_METRICS[m].unit)}" for m in profile.metrics[1:]
             if profile.totals.get(m) and KNOWN_METRICS[m].kind != "ratio"]
    if spec.kind != "ratio":
        head.append(f"Total {_num(total, spec.unit)}" + (f"; {', '.join(extra[:3])}" if extra else ""))
    ops = []
    for i, op in enumerate(profile.top_operations(5), 1):
        value = op.self_metrics.get(metric, 0.0)
        if value <= 0:
            continue
        share = f"{value / total:.0%} ({_num(value, spec.unit)})" if spec.kind != "ratio" and total > 0 \
            else _num(value, spec.unit)
        ops.append(f"  {i}. {op.name}: {share}{_where(op, profile)}")
    limits = [f"  {gate}: {why}" for gate, why in sorted(gate_limits.items())]
    tail = [f"Trust: ceiling {ceiling}. This evidence can never pass:", *limits,
            "Correctness and significance come from pw evaluate (oracle, paired timing); only a reprofile "
            "by the run's own profiler can show the hotspot shrink.",
            f"Next: pw prepare {run} --candidate ID:baseline:MECHANISM, edit, then pw evaluate {run} ID"]
    said = [f"  {f}" for f in findings]

    def text(n_ops: int, n_said: int, explain: bool = True) -> str:
        body = head[:2] + ([meaning] if explain else []) + head[2:] + ["Top by " + metric + ":"] + ops[:n_ops]
        if said[:n_said]:
            body += ["Tool says:"] + said[:n_said]
        return "\n".join(body + tail) + "\n"

    n_ops, n_said, explain = len(ops), len(said), True
    out = text(n_ops, n_said)
    while count(out) > budget and (n_ops > 1 or n_said > 0 or explain):
        if n_said > 0 and (n_said >= n_ops or n_ops <= 1):
            n_said -= 1
        elif n_ops > 1:
            n_ops -= 1
        else:
            explain = False
        out = text(n_ops, n_said, explain)
    return out, count(out)
