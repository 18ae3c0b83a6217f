"""A candidate's Nsight Compute diagnostic against its parent's and the baseline's (pure).

`pw inspect RUN --section ncu --candidate X --group G` shows this: every counter of group G of the
candidate's filtered ncu capture beside the same counter of its parent (the candidate it was built
on, or the baseline) and of the baseline, with the differences. Inputs are the diagnostic summaries
the profile stage writes for the baseline (`agent-view.json` "ncu": kernel, limiter, groups, rules,
roofline), one per target; a target without a capture is None and its columns are null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUPS = ("memory", "compute", "occupancy", "stalls", "rules", "roofline")


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _delta(c: Any, ref: Any) -> dict[str, float | None]:
    a, b = _num(c), _num(ref)
    if a is None or b is None:
        return {"delta": None, "ratio": None}
    return {"delta": round(a - b, 6), "ratio": round(a / b, 6) if b else None}


def _row(name: str, c: Any, p: Any, b: Any) -> dict[str, Any]:
    vp, vb = _delta(c, p), _delta(c, b)
    return {"name": name, "candidate": c, "parent": p, "baseline": b,
            "vs_parent": vp["delta"], "vs_parent_ratio": vp["ratio"],
            "vs_baseline": vb["delta"], "vs_baseline_ratio": vb["ratio"]}


def compare(candidate: Mapping[str, Any], parent: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None,
            group: str | None) -> list[dict[str, Any]]:
    """The rows of one group (None: the kernel and limiter of each target)."""
    targets = {"candidate": candidate, "parent": parent, "baseline": baseline}
    if group is None:
        return [{"target": t, "kernel": (s or {}).get("kernel"), "limiter": (s or {}).get("limiter"),
                 "occupancy_limiter": (s or {}).get("occupancy_limiter")} for t, s in targets.items()]
    if group not in GROUPS:
        raise ValueError(f"unknown ncu group {group!r}; expected one of {', '.join(GROUPS)}")
    if group == "rules":
        def ident(r: Mapping[str, Any]) -> Any:
            return r.get("rule") or r.get("name")

        def names(s):
            return {ident(r) for r in (s or {}).get("rules", []) if isinstance(r, dict)}
        before, parent_names = names(baseline), names(parent)
        return [{**r, "in_parent": ident(r) in parent_names, "in_baseline": ident(r) in before}
                for r in candidate.get("rules", []) if isinstance(r, dict)]
    if group == "roofline":
        values = {t: (s or {}).get("roofline", {}) or {} for t, s in targets.items()}
    else:
        values = {t: ((s or {}).get("groups", {}) or {}).get(group, {}) or {} for t, s in targets.items()}
    keys = sorted({k for v in values.values() for k, x in v.items() if _num(x) is not None})
    return [_row(k, values["candidate"].get(k), values["parent"].get(k), values["baseline"].get(k)) for k in keys]
