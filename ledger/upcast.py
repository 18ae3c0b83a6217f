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


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("Note", 0): _note_v0_to_v1,
    ("VerdictReached", 1): _verdict_v1_to_v2,
}


def upcast(type_name: str, version: int, target: int, data: dict[str, Any]) -> dict[str, Any]:
    """Apply the chain `version -> target`; a missing link is a KeyError naming it."""
    while version < target:
        data = UPCASTERS[(type_name, version)](data)
        version += 1
    return data
