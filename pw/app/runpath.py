"""Resolve the RUN argument: a run directory or any file inside one."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger.errors import InputError

LEDGER_NAME = "ledger.jsonl"
_MAX_DEPTH = 5


class RunDir(msgspec.Struct, frozen=True):
    path: Path

    @property
    def ledger_path(self) -> Path:
        return self.path / LEDGER_NAME

    @property
    def run_id(self) -> str:
        return self.path.name


def resolve_run(arg: str) -> RunDir:
    given = Path(arg)
    if not given.exists():
        raise InputError(f"RUN {arg}: no such file or directory (expected a run directory or a file inside one)")
    start = given if given.is_dir() else given.parent
    # A file inside a run sits at most a few levels down (candidates/<id>/profile/profile.json).
    for candidate in [start, *start.resolve().parents][:_MAX_DEPTH]:
        if (candidate / LEDGER_NAME).is_file():
            return RunDir(candidate)
    raise InputError(f"RUN {arg}: not inside a run directory (no {LEDGER_NAME} there or above)")
