"""The one place projections touch the disk: atomic writes of rendered files.

Each file is written to a temporary name in the run directory, fsynced, and renamed over the old
one, so a reader sees the old file or the new one, never a mix.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ledger.files import write_atomic
from ledger.store import Ledger
from projections import documents, state


def rebuild_in_memory(ledger: Ledger, *, until: int | None = None) -> tuple[state.RunState, dict[str, bytes]]:
    run_state = state.fold(ledger.read(until=until))
    return run_state, documents.render(run_state)


def write_all(run_dir: Path, files: dict[str, bytes]) -> list[str]:
    """Write every file whose bytes differ from what is on disk; return the names written."""
    written = []
    for name, data in files.items():
        path = run_dir / name
        try:
            if path.read_bytes() == data:
                continue
        except FileNotFoundError:
            pass
        write_atomic(path, data)
        written.append(name)
    return written


def first_divergence(run_dir: Path, files: dict[str, bytes], names: Iterable[str] | None = None) -> str | None:
    """The first projection file whose disk bytes differ from the rebuild, described in one line."""
    for name in names if names is not None else files:
        path = run_dir / name
        try:
            on_disk = path.read_bytes()
        except FileNotFoundError:
            return f"{name}: missing on disk (the ledger supports it)"
        if on_disk != files[name]:
            return f"{name}: differs from its rebuild from the ledger (stale or edited)"
    return None
