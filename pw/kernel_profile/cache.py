"""The cache on disk: `profile.db` (the projection) beside its ledger `<stem>.ledger.jsonl`, and the
autotune cache `<stem>.autotune/` that the workers share.

Default place: `$PW_PROFILE_DB`, else `$XDG_CACHE_HOME/profileweaver/kernel-profile/profile.db`
(`~/.cache/...` without XDG_CACHE_HOME). `--db PATH` takes a task-scoped database instead; its
ledger is written beside it.

The database is trusted only as the projection of its ledger, checked by every verb (`check`):
the database records the ledger head it was built from; the ledger's last line (its own hash
verified, read from the end of the file) must be that head, and the ledger file must be the one a
full verification last saw (size, mtime, inode, kept in `.<db>.verified`). Anything else (an append
by another writer, an edit, a forgery, a copy) costs one full verification of the hash chain, after
which the database is rebuilt when the ledger extends the head it was built from, and refused, with
the reason, when the ledger is damaged, rewritten, shorter than the database, or missing.
"""

from __future__ import annotations

import fcntl
import gc
import os
import sqlite3
import tempfile
from pathlib import Path

import msgspec

from ledger.codec import decode_header, line_digest_ok
from ledger.errors import InputError, LedgerCorrupt, TornTail
from ledger.events import Envelope
from ledger.kernel_events import KernelMeasured, KernelMeasurementFailed
from ledger.store import Ledger
from projections import kernel_profile_db, materialize_kernel_profile
from pw.kernel_profile.registry import Entry

_prov_decoder = msgspec.json.Decoder(dict[str, str])


def default_db() -> Path:
    env = os.environ.get("PW_PROFILE_DB")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "profileweaver" / "kernel-profile" / "profile.db"


class _Memo(msgspec.Struct, frozen=True):
    """What a full verification of the ledger saw: the file (size, mtime, inode) and its head."""

    size: int
    mtime_ns: int
    ino: int
    head_seq: int
    head_hash: str


class Cache:
    def __init__(self, db: str | os.PathLike | None) -> None:
        self.db = Path(db) if db else default_db()
        if self.db.is_dir():
            raise InputError(f"--db {self.db}: is a directory (expected a SQLite file path, e.g. {self.db}/profile.db)")
        self.ledger = Ledger(self.db.with_name(self.db.stem + ".ledger.jsonl"))
        self.memo = self.db.with_name(f".{self.db.name}.verified")
        self.lock = self.db.with_name(f".{self.db.name}.lock")
        self.autotune_dir = self.db.with_name(self.db.stem + ".autotune")

    @property
    def repair_hint(self) -> str:
        return f"pw kernel-profile repair --db {self.db}"

    # --- before any GPU work ------------------------------------------------------------------

    def check_writable(self) -> None:
        """The database, its ledger, lock, verification memo and autotune folder can all be written:
        checked before measuring, so no GPU time is spent on rows that could not be stored."""
        writable_dir(self.db.parent, f"--db {self.db}")
        for path in (self.ledger.path, self.db):
            if path.exists():
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
                except OSError as exc:
                    raise InputError(f"--db {self.db}: {path.name} cannot be written ({exc.strerror}); "
                                     "nothing was measured") from None
        if self.autotune_dir.exists():
            writable_dir(self.autotune_dir, f"--db {self.db}")

    # --- the head check -----------------------------------------------------------------------

    def check(self) -> None:
        """Make the database the current projection of the ledger, or refuse (see the module doc)."""
        db_head = self._db_head()
        try:
            st = os.stat(self.ledger.path)
        except FileNotFoundError:
            st = None
        if st is None or st.st_size == 0:
            if db_head and db_head[0] > 0:
                what = "is missing" if st is None else "is empty"
                raise InputError(
                    f"--db {self.db}: holds rows built from ledger seq {db_head[0]} but its ledger {self.ledger.path} "
                    f"{what}: nothing is rebuilt over those rows; restore the ledger from a backup, or move "
                    f"{self.db.name} aside to start an empty cache")
            return
        tail = self._tail()
        if db_head == tail and self._memo_matches(st, tail):
            return
        self._verify_and_rebuild(db_head)

    def _db_head(self) -> tuple[int, str] | None:
        if not self.db.is_file() or self.db.stat().st_size == 0:
            return None
        head = materialize_kernel_profile.head_of(self.db)
        if head is None:
            raise InputError(f"--db {self.db}: exists but is not a kernel-profile database (no ledger head "
                             "recorded in it); refusing to overwrite it: pass another --db")
        return head

    def _tail(self) -> tuple[int, str]:
        """(seq, hash) of the ledger's last line, its own hash checked, read from the file's end."""
        path = self.ledger.path
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            span = 65536
            while True:
                f.seek(max(0, size - span))
                tail = f.read()
                if not tail.endswith(b"\n"):
                    raise TornTail(f"{path}: incomplete last line (a torn append); nothing served: run "
                                   f"`{self.repair_hint}` to quarantine it")
                body = tail[:-1]
                cut = body.rfind(b"\n")
                if cut >= 0 or span >= size:
                    break
                span *= 4  # a line longer than the window read: read more
        last = body[cut + 1:]
        try:
            ok = line_digest_ok(last)
            header = decode_header(last) if ok else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            ok, header = False, None
        if not ok or header is None:
            raise TornTail(f"{path}: last line fails its hash (a torn append, or an edit); nothing served: run "
                           f"`{self.repair_hint}` to quarantine it")
        return header.seq, header.hash

    def _memo_matches(self, st: os.stat_result, tail: tuple[int, str]) -> bool:
        try:
            memo = msgspec.json.decode(self.memo.read_bytes(), type=_Memo)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return False
        return (memo.size, memo.mtime_ns, memo.ino, memo.head_seq, memo.head_hash) == (
            st.st_size, st.st_mtime_ns, st.st_ino, *tail)

    def _verify_and_rebuild(self, db_head: tuple[int, str] | None) -> None:
        before = os.stat(self.ledger.path)
        v = self.ledger.verify()
        if not v.ok:
            detail = v.message.removeprefix("ledger: ")
            if v.torn_offset is not None:
                raise TornTail(f"{self.ledger.path}: {detail}; nothing served: run `{self.repair_hint}` to "
                               "quarantine it", offset=v.torn_offset)
            raise LedgerCorrupt(f"{self.ledger.path}: {detail}: the ledger was edited or damaged, so no row of "
                                f"{self.db.name} is served; restore the ledger from a backup (repair mends only a "
                                "torn tail)", seq=v.first_bad_seq)
        events = self.ledger.events()
        head = (v.head.seq, v.head.hash)
        if db_head is not None and db_head[0] > 0:
            seq, digest = db_head
            if seq > v.head.seq:
                raise InputError(f"--db {self.db}: was built from ledger seq {seq} but {self.ledger.path} ends at seq "
                                 f"{v.head.seq}: the ledger lost events; nothing is rebuilt over those rows; restore "
                                 "the ledger from a backup")
            if events[seq - 1].hash != digest:
                raise LedgerCorrupt(f"{self.ledger.path}: event seq {seq} is not the one {self.db.name} was built "
                                    "from (the ledger was rewritten or replaced); no row is served; restore the "
                                    "ledger from a backup", seq=seq)
        if db_head != head:
            self.rebuild(events)
        else:
            self._write_memo(before, head)

    def _write_memo(self, st: os.stat_result, head: tuple[int, str]) -> None:
        """Remember what was verified; best effort (a read-only cache is verified on every call)."""
        now = os.stat(self.ledger.path)
        if (now.st_size, now.st_mtime_ns, now.st_ino) != (st.st_size, st.st_mtime_ns, st.st_ino):
            return  # it changed while being read: the next call verifies again
        memo = msgspec.json.encode(_Memo(st.st_size, st.st_mtime_ns, st.st_ino, *head))
        try:
            fd, tmp = tempfile.mkstemp(dir=self.memo.parent, prefix=self.memo.name + ".")
            os.fchmod(fd, 0o644)  # readable by whoever shares the cache, as the database is
            with os.fdopen(fd, "wb") as f:
                f.write(memo)
            os.replace(tmp, self.memo)
        except OSError:
            pass

    # --- writing ------------------------------------------------------------------------------

    def rebuild(self, events: list[Envelope] | None = None) -> None:
        """Write profile.db from the ledger (or from `events`, its verified contents)."""
        try:
            self.db.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"--db {self.db}: cannot update the database ({exc.strerror}); it is behind its "
                             "ledger and must be rebuilt in a writable place") from None
        # The fold makes a row object per event, all long-lived and acyclic: the cyclic collector
        # would only walk them again and again (half the fold's time at 100,000 rows), so it pauses
        # here, as the ledger's own decoding does, and is left as the caller had it.
        enabled = gc.isenabled()
        gc.disable()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two writers never interleave; the later head wins
            before = os.stat(self.ledger.path) if self.ledger.exists() else None
            state = kernel_profile_db.fold(self.ledger.events() if events is None else events)
            materialize_kernel_profile.write(self.db, state)
            if before is not None:
                self._write_memo(before, (state.head_seq, state.head_hash))
        except OSError as exc:
            raise InputError(f"--db {self.db}: cannot write the database ({exc.strerror})") from None
        finally:
            if enabled:
                gc.enable()
            os.close(lock)

    def append(self, events: list[KernelMeasured | KernelMeasurementFailed]) -> None:
        if events:
            self.ledger.append(events, expected_seq=None, actor="kernel-profile")
            self.rebuild()

    def repair(self) -> dict:
        """Quarantine a torn tail of the cache ledger (as `pw repair` does for a run), record it as
        `LedgerRepaired`, and rebuild the database from the mended ledger. Corruption before the
        tail is refused: mending it would drop complete events. The caller has checked that the
        file is a ledger at all (its first line is a whole event)."""
        path = self.ledger.path
        rows_before = self.row_count()
        try:
            event = self.ledger.repair(actor="kernel-profile")
        except LedgerCorrupt as exc:
            detail = str(exc).removeprefix("ledger: ")
            raise LedgerCorrupt(f"{path}: {detail}; only a torn tail can be repaired, nothing changed; restore the "
                                "ledger from a backup", seq=exc.seq, offset=exc.offset) from None
        if event is not None:
            self.rebuild()
        else:
            self.check()
        return {"ledger": str(path), "db": str(self.db), "repaired": event is not None,
                "event": msgspec.to_builtins(event) if event else None,
                "quarantine": str(path.with_name(event.quarantine)) if event else None,
                "rows_before": rows_before, "rows_after": self.row_count()}

    def row_count(self) -> int:
        """Rows of every table in the database as it is (0 without one); never checks or rebuilds."""
        if not self.db.is_file() or materialize_kernel_profile.head_of(self.db) is None:
            return 0
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT "
                                                "LIKE '\\_%' ESCAPE '\\'")]
            return sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
        finally:
            con.close()

    # --- lookup -------------------------------------------------------------------------------

    def rows(self, entry: Entry, gpu_name: str, *, full: bool) -> dict[tuple, dict]:
        """Rows of one table for (gpu_name, backend), keyed by the args tuple (bools as 0/1)."""
        cols = "*"
        return self._select(entry, gpu_name, cols, lambda header, cur: _as_dicts(entry, header, cur)) if full else {
            k: {"profiler_revision": rev, "provenance": prov} for k, (rev, prov) in self.keys(entry, gpu_name).items()}

    def keys(self, entry: Entry, gpu_name: str) -> dict[tuple, tuple[str, str]]:
        """args tuple -> (profiler_revision, provenance JSON): what `count-missing` needs, no more."""
        n = len(entry.arg_names)
        cols = ", ".join(['"' + a + '"' for a in entry.arg_names] + ["profiler_revision", "provenance"])
        return self._select(entry, gpu_name, cols, lambda header, cur: {r[:n]: r[n:] for r in cur})

    def verdicts(self, entry: Entry, gpu_name: str) -> dict[tuple, bool]:
        """args tuple -> whether the row is a hit: what `count-missing` needs, no more."""
        n = len(entry.arg_names)
        cols = ", ".join(['"' + a + '"' for a in entry.arg_names] + ["profiler_revision", "provenance"])
        check = _provenance_check(entry)
        rev = entry.profiler_revision
        return self._select(entry, gpu_name, cols,
                            lambda header, cur: {r[:n]: r[n] == rev and check(r[n + 1]) for r in cur})

    def _select(self, entry: Entry, gpu_name: str, cols: str, build):
        self.check()
        if not self.db.is_file():
            return {}
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            exists = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (entry.table,)).fetchone()
            if not exists:
                return {}
            cur = con.execute(f'SELECT {cols} FROM "{entry.table}" WHERE gpu_name=? AND backend=?',
                              (gpu_name, entry.backend))
            return build([d[0] for d in cur.description], cur)
        except sqlite3.DatabaseError as exc:
            raise InputError(f"--db {self.db}: not a readable kernel-profile database ({exc})") from None
        finally:
            con.close()


def writable_dir(path: Path, label: str) -> None:
    """`path` (or, where it does not exist yet, the nearest folder above it) takes a new file.

    Tried for real (a probe file made and removed): permission bits say nothing about a read-only
    mount or, for root, about anything. Nothing is left behind, not even a folder.
    """
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"{label}: {probe} is not a directory")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".pw-write-probe-")
    except OSError as exc:
        raise InputError(f"{label}: {probe} cannot be written ({exc.strerror}); nothing was measured") from None
    os.close(fd)
    os.unlink(tmp)


def _as_dicts(entry: Entry, header: list[str], cur) -> dict[tuple, dict]:
    pos = [header.index(n) for n in entry.arg_names]
    return {tuple(r[p] for p in pos): dict(zip(header, r)) for r in cur}


_HAS_BOOL: dict[type, bool] = {}
_CHECKS: dict[tuple[str, ...], object] = {}


def _provenance_check(entry: Entry):
    """A function telling whether a provenance JSON text gives every required field a value.

    msgspec decodes straight into a struct of just those fields (others skipped in C), which is
    several times faster than a dict and a Python loop: 100,000 rows in about 0.1 s.
    """
    fields = tuple(dict.fromkeys(entry.provenance_fields))
    check = _CHECKS.get(fields)
    if check is None:
        shape = msgspec.defstruct("RequiredProvenance", [(f, str, "") for f in fields])
        dec = msgspec.json.Decoder(shape)
        astuple = msgspec.structs.astuple

        def check(text: str | None) -> bool:
            return bool(text) and "" not in astuple(dec.decode(text))

        _CHECKS[fields] = check
    return check


def key_for(spec) -> tuple:
    values = msgspec.structs.astuple(spec)
    kind = type(spec)
    has_bool = _HAS_BOOL.get(kind)
    if has_bool is None:
        has_bool = _HAS_BOOL[kind] = any(f.type is bool for f in msgspec.structs.fields(kind))
    if has_bool:
        return tuple(int(v) if isinstance(v, bool) else v for v in values)  # SQLite keeps bools as 0/1
    return values


def verify(entry: Entry, row: dict) -> str | None:
    """Why a row is not a hit (incomplete provenance, another profiler revision), or None."""
    return verify_parts(entry, row.get("profiler_revision"), row.get("provenance"))


def verify_parts(entry: Entry, revision: str | None, provenance: str | None) -> str | None:
    if revision != entry.profiler_revision:
        return f"profiler revision {revision!r}, current {entry.profiler_revision!r}"
    prov = _prov_decoder.decode(provenance or "{}")
    absent = set(entry.provenance_fields).difference([k for k, v in prov.items() if v])
    return f"provenance lacks {', '.join(sorted(absent))}" if absent else None
