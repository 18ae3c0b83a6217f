"""Content-addressed raw evidence under `runs/<id>/raw/`.

Raw tool output, logs and normalized profiles are stored once under their sha256 and referenced
from events by that hash. Files are written atomically and never deleted or rewritten, so an
auditor can always recompute what an event claims from the bytes it names.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ledger.errors import InputError
from ledger.files import write_atomic

_HEX = frozenset("0123456789abcdef")


class EvidenceStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path_for(self, digest: str) -> Path:
        if len(digest) != 64 or not set(digest) <= _HEX:
            raise InputError(f"evidence id {digest!r}: expected a sha256 hex digest")
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = self.path_for(digest)
        if target.exists():
            return digest
        write_atomic(target, data)
        return digest

    def get(self, digest: str) -> bytes:
        path = self.path_for(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"evidence {digest[:12]}: missing from {self.root}") from None
        return data

    def has(self, digest: str) -> bool:
        return self.path_for(digest).is_file()

    def check(self, digest: str) -> bool:
        """True when the stored bytes still hash to their name (evidence was not edited)."""
        return hashlib.sha256(self.get(digest)).hexdigest() == digest
