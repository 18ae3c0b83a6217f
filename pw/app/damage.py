"""What a person can do with a damaged ledger: which events still stand, and how to go on.

A torn tail (an interrupted append) is repaired by `pw repair`. Damage before it (a flipped byte, a
deleted or reordered line, an edit) is not: dropping it would drop complete events after it, and
nothing in the run can recreate what it said. Every verb that meets such a ledger says the same
thing: events 1..N are intact (each hashes to itself and chains to the one before), nothing from
N + 1 on can be trusted, so the run must be restored from a copy or started again.
"""

from __future__ import annotations

from pathlib import Path

from ledger import events as ev
from ledger.errors import LedgerCorrupt, PWError
from ledger.store import Ledger


def intact_up_to(exc: LedgerCorrupt) -> int:
    """The last event that still verifies: every one before the first bad seq."""
    return max((exc.seq or 1) - 1, 0)


def workload_of(ledger_path: Path) -> str | None:
    """The workload the run was started from, read from its first event when that still decodes."""
    try:
        first = next(iter(Ledger(ledger_path).read_lenient()), None)
    except (OSError, PWError):
        return None
    return first.data.workload if first is not None and isinstance(first.data, ev.RunStarted) else None


def advice(ledger_path: Path, exc: LedgerCorrupt) -> str:
    """One clause, after the damage is named: what stands and what to do."""
    n = intact_up_to(exc)
    stands = (f"events 1-{n} are intact (hashed and chained), nothing from seq {n + 1} on can be trusted"
              if n else "not even its first event can be trusted")
    workload = workload_of(ledger_path)
    again = f"`pw start --workload {workload}`" if workload else "`pw start --workload DIR`"
    return (f"{stands}; this is not a torn tail, so `pw repair` cannot fix it: restore {ledger_path.name} "
            f"from a copy of the run, or start the run again ({again})")
