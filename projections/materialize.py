"""The one place projections touch the disk: atomic writes of rendered files.

Each file is written to a temporary name in the run directory, fsynced, and renamed over the old
one, so a reader sees the old file or the new one, never a mix.

`materialize` does it under the run's projection lock, for the ledger's head at that moment: two
processes that append one after the other and then write their projections in the opposite order
would otherwise leave the older state on disk. Holding the lock also means no other writer is
half-way through a file, so temporary files left by a writer that was killed can be removed.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ledger.errors import DiskError
from ledger.evidence import EvidenceStore
from ledger.files import refused_writes, write_atomic
from ledger.store import Ledger
from projections import documents, formats, state

LOCK_NAME = ".projections.lock"


@contextmanager
def projection_lock(run_dir: Path) -> Iterator[None]:
    with refused_writes(run_dir / LOCK_NAME):
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Materialized(NamedTuple):
    state: state.RunState  # the head the files were rendered from
    files: list[str]  # every projection of that state
    written: list[str]  # those whose bytes changed on disk


def materialize(run_dir: Path, ledger: Ledger, run_state: state.RunState | None = None) -> Materialized:
    """Write every projection of the ledger's current head.

    `run_state` is what the caller folded; it is used when it is still the head (the usual case,
    no re-read), and replaced by a fresh fold when another process appended in the meantime.
    """
    try:
        with projection_lock(run_dir):
            head = ledger.head()
            if run_state is None or (run_state.head.seq, run_state.head.hash) != (head.seq, head.hash):
                run_state = state.fold(ledger.read())
            files = render_all(run_dir, run_state)
            written = write_all(run_dir, files)
            remove_stray_temporaries(run_dir, files)
    except DiskError as exc:
        # The events are on disk; only files rebuilt from them are behind.
        raise exc.with_resume(f"pw rebuild {run_dir}", kept="the ledger holds every event, only the files "
                              "rebuilt from it are behind") from None
    return Materialized(run_state, sorted(files), written)


def remove_stray_temporaries(run_dir: Path, names: Iterable[str]) -> list[str]:
    """Delete the hidden temporary files `write_atomic` leaves when killed before its rename.
    Only call with the projection lock held: otherwise one may be a live write."""
    removed = []
    for name in names:
        target = run_dir / name
        if not target.parent.is_dir():
            continue
        for stray in target.parent.glob(f".{target.name}.*"):
            stray.unlink(missing_ok=True)
            removed.append(stray.relative_to(run_dir).as_posix())
    return removed


def render_all(run_dir: Path, run_state: state.RunState) -> dict[str, bytes]:
    """Every run file of the state: the rendered documents and the copies of evidence they name
    (read from the run's raw/ store, whose files are checked against their names)."""
    files = documents.render(run_state)
    copies = documents.evidence_copies(run_state)
    if copies:
        evidence = EvidenceStore(run_dir / "raw")
        for name, sha in copies.items():
            files[name] = evidence.get(sha)
    return files


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


class Comparison(NamedTuple):
    divergence: str | None  # the first file that is neither today's rebuild nor an older format's
    older: dict[str, int]  # file -> the older projection format whose rendering of this ledger it is


def compare(run_dir: Path, files: dict[str, bytes], names: Iterable[str] | None = None) -> Comparison:
    """Compare the projection files on disk with their rebuild. A file that differs is recognised as an
    older format's (`projections.formats`) only when it is byte for byte what that format renders
    from the same ledger; any other difference is a divergence."""
    older: dict[str, int] = {}
    for name in names if names is not None else files:
        path = run_dir / name
        try:
            on_disk = path.read_bytes()
        except FileNotFoundError:
            version = formats.absent_in(name)
            if version is None or not _older_run(run_dir, files, older):
                return Comparison(f"{name}: missing on disk (the ledger supports it)", older)
            older[name] = version
            continue
        if on_disk == files[name]:
            continue
        version = formats.recognise(name, on_disk, files[name])
        if version is None:
            return Comparison(f"{name}: differs from its rebuild from the ledger (stale or edited; "
                              f"nor is it what an older projection format wrote)", older)
        older[name] = version
    return Comparison(None, older)


def _older_run(run_dir: Path, files: dict[str, bytes], older: dict[str, int]) -> bool:
    """Whether the run's files were written by an older format: some file the current format renders
    differently is on disk in an older format's bytes. A file missing from a run written in today's
    format was deleted, not never written."""
    if older:
        return True
    for name, data in files.items():
        path = run_dir / name
        if path.is_file():
            on_disk = path.read_bytes()
            if on_disk != data and formats.recognise(name, on_disk, data) is not None:
                return True
    return False


def first_divergence(run_dir: Path, files: dict[str, bytes], names: Iterable[str] | None = None) -> str | None:
    """The first projection file whose disk bytes are neither the rebuild's nor an older format's
    rendering of the same ledger, described in one line."""
    return compare(run_dir, files, names).divergence
