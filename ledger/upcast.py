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


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("Note", 0): _note_v0_to_v1,
}


def upcast(type_name: str, version: int, target: int, data: dict[str, Any]) -> dict[str, Any]:
    """Apply the chain `version -> target`; a missing link is a KeyError naming it."""
    while version < target:
        data = UPCASTERS[(type_name, version)](data)
        version += 1
    return data
