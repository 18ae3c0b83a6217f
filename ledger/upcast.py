"""Pure upcasters from older payload versions to the current one.

`UPCASTERS[(type, v)]` turns a version-`v` payload dict into a version-`v + 1` dict. They are
applied in a chain at decode time only; the ledger on disk is never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _note_v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Note v0 (the pre-release format) called its text field `message`."""
    out = {k: v for k, v in data.items() if k != "message"}
    out["text"] = data.get("message", "")
    return out


# The rule v1 readers applied: a rejection whose reasons start with one of these is one an edit
# can address. History, frozen here: v2 verdicts record `repairable` and nothing else parses reasons.
_V1_REPAIRABLE_PREFIXES = ("build-failed", "oracle-failed", "crashed", "timeout", "launch-failed", "edit-refused")


def _verdict_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """VerdictReached v1 implied repairability by its reasons' prefixes; v2 records it as a field."""
    reasons = data.get("reasons")
    reasons = reasons if isinstance(reasons, list) else []  # a malformed payload fails validation, not here
    out = dict(data)
    out["repairable"] = data.get("status") == "rejected" and any(
        isinstance(r, str) and r.startswith(_V1_REPAIRABLE_PREFIXES) for r in reasons
    )
    return out


def _split(text: Any, sep: str) -> list[str]:
    return [s for s in text.split(sep) if s] if isinstance(text, str) else []


def _versions_v1(text: Any) -> dict[str, str]:
    """v1 tool versions: "name=version; name=version", with "None" for an unknown version."""
    out = {}
    for part in _split(text, "; "):
        name, eq, version = part.partition("=")
        if eq:
            out[name] = "" if version == "None" else version
    return dict(sorted(out.items()))


def _timing_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """TimingRecorded v1 kept its conditions as strings; v2 types them. v1's top-level
    `inputs_sha256` held a binary's digest, not the inputs', so no inputs digest carries over."""
    c = data.get("conditions")
    c = c if isinstance(c, dict) else {}
    targets = data.get("targets") if isinstance(data.get("targets"), list) else []
    arms: dict[str, Any] = {}
    if "binary_sha256" in c and targets:  # the baseline-variance stage: one arm, one binary
        arms[targets[0]] = {"binary_before": c["binary_sha256"], "binary_after": c["binary_sha256"]}
    for role, label in zip(("baseline", "candidate"), targets):
        if f"{role}_binary_before" in c:
            arms[label] = {"binary_before": c.get(f"{role}_binary_before"),
                           "binary_after": c.get(f"{role}_binary_after")}
    warmup = c.get("warmup_runs", "0")
    out = {k: v for k, v in data.items() if k != "inputs_sha256"}
    out["conditions"] = {
        "host": c.get("host", ""),
        "argv": _split(c.get("argv", ""), " "),
        "metric": c.get("metric", ""),
        "tool_versions": _versions_v1(c.get("tool_versions", "")),
        "warmup_runs": int(warmup) if isinstance(warmup, str) and warmup.isdigit() else 0,
        "arms": arms,
        "side_effects": _split(c.get("side_effects", ""), "; "),
    }
    return out


# Every adapter of the v1 era (perf, callgrind, callgrind-cachesim, py-spy) could reprofile; frozen
# here as history, so an old capture is judged by what was true when it was made.
def _capture_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "can_reprofile": True}


def _capture_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """v2 captures recorded no overhead, executable hash or reuse: none is known."""
    return {**data, "timed_wall_s": None, "overhead": None, "executable_sha256": None, "reused_from": None}


def _routing_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v1 routing used the declared overhead factors only."""
    return {**data, "overheads": {}}


def _normalized_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """ProfileNormalized v1 was always one capture's profile: no parts."""
    return {**data, "parts": []}


# The device-time metrics of the v1 era (the GPU timelines' `gpu_time_ns`): history, frozen here.
_V1_DEVICE_METRICS = ("gpu_time_ns",)


def _hotspot_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """HotspotSelected v1 did not record the share of the host's span a device-time ceiling was
    taken from; its ceiling 1 / (1 - s) holds it: s = 1 - 1 / ceiling (what v1's brief said). When
    that is the device share itself, the profile recorded no span (the ceiling came from ``share``),
    so none is claimed; without a finite ceiling none is known."""
    out = dict(data)
    ceiling, share = data.get("amdahl_ceiling"), data.get("share")
    span = None
    if (data.get("metric") in _V1_DEVICE_METRICS and isinstance(ceiling, (int, float)) and ceiling >= 1.0
            and isinstance(share, (int, float))):  # a malformed payload fails validation, not here
        s = round(1.0 - 1.0 / ceiling, 6)
        span = None if abs(s - share) <= 1e-5 else s
    out["span_share"] = span
    return out


def _kernel_measured_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """KernelMeasured v1 rows reported the median of their launches and had no interval (the
    per-launch stopping rule); v2 names the statistic."""
    stats = data.get("stats")
    if not isinstance(stats, dict):
        return data  # a malformed payload fails validation, not here
    return {**data, "stats": {**stats, "statistic": "median"}}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("Note", 0): _note_v0_to_v1,
    ("VerdictReached", 1): _verdict_v1_to_v2,
    ("TimingRecorded", 1): _timing_v1_to_v2,
    ("ProfileCaptured", 1): _capture_v1_to_v2,
    ("ProfileCaptured", 2): _capture_v2_to_v3,
    ("RoutingDecided", 1): _routing_v1_to_v2,
    ("ProfileNormalized", 1): _normalized_v1_to_v2,
    ("HotspotSelected", 1): _hotspot_v1_to_v2,
    ("KernelMeasured", 1): _kernel_measured_v1_to_v2,
}


def upcast(type_name: str, version: int, target: int, data: dict[str, Any]) -> dict[str, Any]:
    """Apply the chain `version -> target`; a missing link is a KeyError naming it."""
    while version < target:
        data = UPCASTERS[(type_name, version)](data)
        version += 1
    return data
