"""Small helpers every verb uses: opening a run's ledger, printing results."""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from ledger.errors import InputError, LedgerCorrupt, TornTail
from ledger.store import Ledger
from pw.runpath import RunDir, resolve_run


def open_run(arg: str) -> tuple[RunDir, Ledger]:
    run = resolve_run(arg)
    return run, Ledger(run.ledger_path)


def checked_events(run: RunDir, ledger: Ledger, *, until: int | None = None, ledger_path=None):
    """All events, or one clear error naming the ledger and what is wrong with it."""
    path = ledger_path or run.ledger_path
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file, expected a ProfileWeaver ledger")
    try:
        return ledger.events(until=until)
    except TornTail as exc:
        if exc.seq == 1:
            raise InputError(f"{path}: not a ProfileWeaver ledger (first line is not a valid event)") from None
        raise InputError(
            f"{path}: torn tail at byte {exc.offset} (an interrupted append); "
            f"run `pw repair {run.path}` to quarantine it"
        ) from None
    except LedgerCorrupt as exc:
        if exc.seq == 1:
            raise InputError(f"{path}: not a ProfileWeaver ledger ({exc})") from None
        raise


def print_json(obj: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(obj) + b"\n")
    sys.stdout.flush()


def print_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)
