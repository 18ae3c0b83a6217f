"""The base of every event payload, alone so that event modules can share it without cycles."""

from __future__ import annotations

from typing import ClassVar

import msgspec


class Payload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1
