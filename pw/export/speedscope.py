"""Export a normalized profile as speedscope JSON, so a person can look at a flame graph.

The common profile keeps self and inclusive costs and call edges, not whole stacks; the export is
a "sampled" profile with one synthetic stack per call path (root -> ... -> op) weighted by the
operation's self cost along that path, which speedscope's left-heavy and sandwich views render.
"""

from __future__ import annotations

from typing import Any

from ledger.profile import Profile


def _paths(profile: Profile) -> dict[str, list[str]]:
    """One caller chain per operation (the heaviest caller at each step, no cycles)."""
    metric = profile.primary_metric
    best_caller: dict[str, tuple[float, str]] = {}
    for e in profile.edges:
        w = e.metrics.get(metric, 0.0)
        if e.callee not in best_caller or w > best_caller[e.callee][0]:
            best_caller[e.callee] = (w, e.caller)
    out = {}
    for op in profile.operations:
        chain, seen, cur = [op.id], {op.id}, op.id
        while cur in best_caller and best_caller[cur][1] not in seen and len(chain) < 64:
            cur = best_caller[cur][1]
            seen.add(cur)
            chain.append(cur)
        out[op.id] = list(reversed(chain))
    return out


def to_speedscope(profile: Profile, *, name: str) -> dict[str, Any]:
    metric = profile.primary_metric
    ids = sorted({op.id for op in profile.operations} | {e.caller for e in profile.edges})
    index = {op_id: i for i, op_id in enumerate(ids)}
    by_id = {op.id: op for op in profile.operations}
    frames = []
    for op_id in ids:
        op = by_id.get(op_id)
        frame: dict[str, Any] = {"name": op.name if op else op_id}
        if op and op.file:
            frame["file"] = op.file
            if op.line_start:
                frame["line"] = op.line_start
        frames.append(frame)
    paths = _paths(profile)
    samples, weights = [], []
    for op in sorted(profile.operations, key=lambda o: o.id):
        w = op.self_metrics.get(metric, 0.0)
        if w > 0:
            samples.append([index[x] for x in paths[op.id]])
            weights.append(w)
    unit = "seconds" if metric.endswith("_s") else "none"
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": f"profileweaver ({profile.tool} {profile.tool_version})",
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": [{
            "type": "sampled", "name": f"{name} [{metric}]", "unit": unit,
            "startValue": 0, "endValue": sum(weights), "samples": samples, "weights": weights,
        }],
    }
