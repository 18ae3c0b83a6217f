"""The cache on disk: `profile.db` (the projection) beside its ledger `<stem>.ledger.jsonl`.

Default place: `$PW_PROFILE_DB`, else `$XDG_CACHE_HOME/profileweaver/kernel-profile/profile.db`
(`~/.cache/...` without XDG_CACHE_HOME). `--db PATH` takes a task-scoped database instead; its
ledger is written beside it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

import msgspec

from ledger.errors import InputError
from ledger.kernel_events import KernelMeasured, KernelMeasurementFailed
from ledger.store import Ledger
from projections import kernel_profile_db, kernel_profile_sqlite
from pw.kernel_profile.registry import Entry

_prov_decoder = msgspec.json.Decoder(dict[str, str])


def default_db() -> Path:
    env = os.environ.get("PW_PROFILE_DB")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "profileweaver" / "kernel-profile" / "profile.db"


class Cache:
    def __init__(self, db: str | os.PathLike | None) -> None:
        self.db = Path(db) if db else default_db()
        if self.db.is_dir():
            raise InputError(f"--db {self.db}: is a directory (expected a SQLite file path, e.g. {self.db}/profile.db)")
        self.ledger = Ledger(self.db.with_name(self.db.stem + ".ledger.jsonl"))

    # --- projection ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Rewrite profile.db when it is not the projection of the ledger's head."""
        if not self.ledger.exists():
            return
        head = self.ledger.head()
        if kernel_profile_sqlite.head_of(self.db) != (head.seq, head.hash):
            self.rebuild()

    def rebuild(self) -> None:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.db.with_name(f".{self.db.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two writers never interleave; the later head wins
            state = kernel_profile_db.fold(self.ledger.events())
            kernel_profile_sqlite.write(self.db, state)
        finally:
            os.close(lock)

    def append(self, events: list[KernelMeasured | KernelMeasurementFailed]) -> None:
        if events:
            self.ledger.append(events, expected_seq=None, actor="kernel-profile")
            self.rebuild()

    # --- lookup -------------------------------------------------------------------------------

    def rows(self, entry: Entry, gpu_name: str, *, full: bool) -> dict[tuple, dict]:
        """Rows of one table for (gpu_name, backend), keyed by the args tuple (bools as 0/1)."""
        self.sync()
        if not self.db.is_file():
            return {}
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            exists = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (entry.table,)).fetchone()
            if not exists:
                return {}
            names = entry.arg_names
            cols = "*" if full else ", ".join(['"' + n + '"' for n in names] + ["profiler_revision", "provenance"])
            cur = con.execute(f'SELECT {cols} FROM "{entry.table}" WHERE gpu_name=? AND backend=?',
                              (gpu_name, entry.backend))
            header = [d[0] for d in cur.description]
            pos = [header.index(n) for n in names]
            return {tuple(r[p] for p in pos): dict(zip(header, r)) for r in cur}
        except sqlite3.DatabaseError as exc:
            raise InputError(f"--db {self.db}: not a readable kernel-profile database ({exc})") from None
        finally:
            con.close()


def key_for(spec) -> tuple:
    return tuple(int(v) if isinstance(v, bool) else v for v in (getattr(spec, n) for n in spec.__struct_fields__))


def verify(entry: Entry, row: dict) -> str | None:
    """Why a row is not a hit (incomplete provenance, another profiler revision), or None."""
    if row.get("profiler_revision") != entry.profiler_revision:
        return f"profiler revision {row.get('profiler_revision')!r}, current {entry.profiler_revision!r}"
    prov = _prov_decoder.decode(row.get("provenance") or "{}")
    absent = [f for f in entry.provenance_fields if not prov.get(f)]
    return f"provenance lacks {', '.join(absent)}" if absent else None
