"""The append-only ledger file: locking, sequence checks, idempotency, fsync, torn tails, repair.

Writers take an exclusive `flock` on the ledger file, readers a shared one, so a reader never sees
half of a batch that is being written. A crash can still leave a partial tail; every scan finds it
(a last line without its newline, a last line that fails its hash, or a batch whose `batch`
countdown never reached 0) and reports its byte offset. `repair` moves exactly those bytes to a
quarantine file beside the ledger and records a `LedgerRepaired` event.
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from ledger import anchor
from ledger.codec import (
    HASH_KEY,
    HASH_SUFFIX_LEN,
    check_block,
    decode_block,
    decode_envelope,
    decode_header,
    decode_header_lines,
    line_digest_ok,
    seal,
)
from ledger.errors import (
    ConcurrencyError,
    DiskError,
    InputError,
    LedgerCorrupt,
    NewerLedger,
    TornTail,
    disk_error,
)
from ledger.events import EVENT_TYPES, GENESIS, Envelope, LedgerRepaired, Payload
from ledger.files import refused_writes

_CHUNK = 1 << 20
# Replay reads and decodes blocks of whole lines of about this size.
_BLOCK = 4 << 20


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Byte maps that set the UUID version (4) and RFC 4122 variant bits; `translate` applies them to
# every id of a batch in C, which a per-byte Python loop made a tenth of a batched append's cost.
_UUID_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_UUID_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


def new_event_id() -> str:
    """A random (version 4) UUID as 32 hex digits, as `uuid.uuid4().hex` gives it."""
    return new_event_ids(1)[0]


def new_event_ids(n: int) -> list[str]:
    """`n` random UUID4 hex ids from one draw of the OS's randomness (one syscall, not `n`)."""
    raw = bytearray(os.urandom(16 * n))
    raw[6::16] = raw[6::16].translate(_UUID_VERSION_4)
    raw[8::16] = raw[8::16].translate(_UUID_VARIANT)
    hexed = raw.hex()
    return [hexed[i : i + 32] for i in range(0, 32 * n, 32)]


class Head(msgspec.Struct, frozen=True):
    """The last complete event: what a projection is stamped with."""

    seq: int
    hash: str


class Verified(msgspec.Struct, frozen=True):
    """Result of walking the chain. `ok` is False when a torn tail or a corrupt line was found."""

    ok: bool
    events: int
    head: Head
    first_bad_seq: int | None = None
    torn_offset: int | None = None
    message: str = ""


class _Cursor:
    """What a scan knows at the end of the last complete, verified batch."""

    __slots__ = ("offset", "seq", "hash", "keys")

    def __init__(self) -> None:
        self.offset = 0
        self.seq = 0
        self.hash = GENESIS
        self.keys: dict[str, list[tuple[int, int]]] = {}


def _iter_lines(f, start: int) -> Iterator[tuple[int, bytes, bool]]:
    """Yield (offset, line without newline, complete) from `start` to end of file."""
    f.seek(start)
    offset = start
    pending = b""
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        buf = pending + chunk if pending else chunk
        begin = 0
        while True:
            nl = buf.find(b"\n", begin)
            if nl < 0:
                break
            yield offset, buf[begin:nl], True
            offset += nl - begin + 1
            begin = nl + 1
        pending = buf[begin:]
    if pending:
        yield offset, pending, False


class _Decoded:
    """Typed events a scan decoded on its way, so a full read parses each line only once.

    `envelopes` are the complete batches from `start` up to `end` (byte offsets); whatever the
    scan verified beyond `end` (the careful path's share) is decoded separately.
    """

    __slots__ = ("envelopes", "start", "end")

    def __init__(self, start: int) -> None:
        self.envelopes: list[Envelope] = []
        self.start = self.end = start


def _scan(f, cursor: _Cursor, *, size: int, sink: _Decoded | None = None) -> None:
    """Advance `cursor` over every complete batch after it; raise on a torn tail or corruption.

    Only whole batches move the cursor, so a batch interrupted by a crash is never accepted. The
    fast path checks exactly what the careful path checks, block by block; at its first doubt it
    stops at the last good batch and the careful path takes over from there to name the problem.
    """
    if cursor.offset < size:
        _scan_blocks(f, cursor, size=size, sink=sink)
    if cursor.offset < size:
        _scan_lines(f, cursor, size=size)


def _scan_blocks(f, cursor: _Cursor, *, size: int, sink: _Decoded | None) -> None:
    """The fast path of `_scan`: headers of a block in one msgspec call, then hash and chain checks.

    With a `sink`, each block is decoded into typed envelopes instead of bare headers (they carry
    every header field), and the complete batches go to the sink: verify and read in one parse.
    """
    seq, prev = cursor.seq, cursor.hash
    expect_more, batch_keys, batch_events = 0, [], []
    offset = cursor.offset  # of the next line
    sha256, types = hashlib.sha256, EVENT_TYPES
    f.seek(offset)
    carry = b""
    remaining = size - offset
    while remaining > 0:
        chunk = f.read(min(_BLOCK, remaining))
        if not chunk:
            return
        remaining -= len(chunk)
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n") + 1
        block, carry = buf[:cut], buf[cut:]
        if not block:
            continue
        try:
            headers = decode_header_lines(block) if sink is None else decode_block(block)
        except (msgspec.DecodeError, msgspec.ValidationError, LedgerCorrupt):
            return
        lines = block.split(b"\n")
        lines.pop()
        if len(lines) != len(headers):
            return  # a blank line or two values on one line: let the careful path say which
        for line, header in zip(lines, headers):
            n = len(line)
            if (
                n <= HASH_SUFFIX_LEN
                or line[-HASH_SUFFIX_LEN:-66] != HASH_KEY
                or line[-2:] != b'"}'
                or sha256(line[:-HASH_SUFFIX_LEN] + b"}").hexdigest().encode() != line[-66:-2]
                or header.seq != seq + 1
                or header.prev != prev
                or (expect_more and header.batch != expect_more - 1)
            ):
                return
            cls = types.get(header.type)
            if cls is None or header.v > cls.VERSION:
                return
            seq, prev = header.seq, header.hash
            if header.key is not None:
                batch_keys.append((header.key, offset, n))
            if sink is not None:
                batch_events.append(header)
            offset += n + 1
            expect_more = header.batch
            if expect_more == 0:
                for key, off, length in batch_keys:
                    cursor.keys.setdefault(key, []).append((off, length))
                cursor.offset, cursor.seq, cursor.hash = offset, seq, prev
                batch_keys = []
                if sink is not None:
                    sink.envelopes += batch_events
                    sink.end = offset
                    batch_events = []


def _scan_lines(f, cursor: _Cursor, *, size: int) -> None:
    """The careful path of `_scan`: line by line, naming the first problem and its offset."""
    seq, prev = cursor.seq, cursor.hash
    batch_start, batch_keys = cursor.offset, []
    expect_more = 0
    for offset, line, complete in _iter_lines(f, cursor.offset):
        is_last = offset + len(line) + (1 if complete else 0) >= size
        if not complete:
            raise TornTail(f"ledger: incomplete last line at byte {offset}", seq=seq + 1, offset=batch_start)
        problem, intact, error = _check_line(line, seq + 1, prev)
        if problem is None:
            header = decode_header(line)
            if expect_more and header.batch != expect_more - 1:
                problem = f"batch broken: expected {expect_more - 1} more events, line says {header.batch}"
        if problem is not None:
            # Only damage can be a torn append; a whole, hashed line that does not fit (a newer
            # version, a broken chain) is corruption even at the end, and repair must not drop it.
            if is_last and not intact:
                raise TornTail(f"ledger: last event at byte {offset} {problem}", seq=seq + 1, offset=batch_start)
            raise error(f"ledger: event seq {seq + 1} at byte {offset} {problem}", seq=seq + 1, offset=offset)
        seq, prev = header.seq, header.hash
        if header.key is not None:
            batch_keys.append((header.key, offset, len(line)))
        expect_more = header.batch
        if expect_more == 0:
            for key, off, length in batch_keys:
                cursor.keys.setdefault(key, []).append((off, length))
            cursor.offset, cursor.seq, cursor.hash = offset + len(line) + 1, seq, prev
            batch_start, batch_keys = cursor.offset, []
    if expect_more:
        raise TornTail(
            f"ledger: batch starting at byte {batch_start} is incomplete ({expect_more} events missing)",
            seq=cursor.seq + 1,
            offset=batch_start,
        )


def _check_line(line: bytes, seq: int, prev: str) -> tuple[str | None, bool, type[LedgerCorrupt]]:
    """Why this line cannot be event `seq` after `prev` (None when it can); whether the line itself is
    intact (its hash matches and it decodes), i.e. cannot be the debris of a torn append; and the
    error that says so (a newer version is its own kind: nothing is wrong with the file)."""
    if not line_digest_ok(line):
        return "fails its hash (damaged or not a ledger line)", False, LedgerCorrupt
    try:
        header = decode_header(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "is not a valid event envelope", False, LedgerCorrupt
    if header.seq != seq:
        return f"has seq {header.seq}, expected {seq}", True, LedgerCorrupt
    if header.prev != prev:
        return "does not chain to the previous event (prev hash differs)", True, LedgerCorrupt
    cls = EVENT_TYPES.get(header.type)
    if cls is None:
        return f"has unknown event type {header.type!r}", True, LedgerCorrupt
    if header.v > cls.VERSION:
        return (
            f"is {header.type} v{header.v}, newer than this ProfileWeaver understands (v{cls.VERSION}); "
            "upgrade ProfileWeaver"
        ), True, NewerLedger
    return None, True, LedgerCorrupt


class Ledger:
    """One append-only JSONL ledger. Cheap to construct; files are opened per operation."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = new_event_id,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._new_id = new_id
        self._cursor = _Cursor()

    # --- reading ------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.is_file()

    @contextmanager
    def _open_shared(self):
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            raise InputError(f"{self.path}: no ledger here (expected a run directory with ledger.jsonl)") from None
        except IsADirectoryError:
            raise InputError(f"{self.path}: is a directory, expected a ledger.jsonl file") from None
        with f:
            fcntl.flock(f, fcntl.LOCK_SH)
            yield f

    def head(self) -> Head:
        """The last complete event; raises TornTail/LedgerCorrupt when the file is damaged."""
        with self._open_shared() as f:
            self._refresh(f)
            return Head(self._cursor.seq, self._cursor.hash)

    def read(self, *, until: int | None = None) -> Iterator[Envelope]:
        """Stream every event (typed, upcast) after verifying the whole chain first.

        Verification runs before the first event is yielded so a consumer never folds events
        from a ledger that turns out to be corrupt further on.
        """
        with self._open_shared() as f:
            self._refresh(f)
            for env in _decode_range(f, 0, self._cursor.offset):
                if until is not None and env.seq > until:
                    return
                yield env

    def events(self, *, until: int | None = None) -> list[Envelope]:
        """All events as a list, verified and decoded in one parse of each line not yet verified.

        Decoding runs with the cyclic garbage collector paused: decoded events are long-lived and
        acyclic (plain data), so collecting while they are being built only re-walks them, again
        and again as they age through the generations; on a 100k-event ledger that cost more than
        the decoding itself. The collector is left as the caller had it: a library call makes no
        process-wide change (no `gc.freeze`, which would also hide every other object of the process
        from the collector for good).
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            with self._open_shared() as f:
                fresh = self._refresh(f, decode=True)
                out = list(_decode_range(f, 0, fresh.start))
                out += fresh.envelopes
                out += _decode_range(f, fresh.end, self._cursor.offset)
        finally:
            if enabled:
                gc.enable()
        if until is not None:
            # seq is 1-based and contiguous (the scan checked it), so event `s` is out[s - 1].
            del out[max(until, 0) :]
        return out

    def read_lenient(self) -> list[Envelope]:
        """Every line that still decodes, ignoring hashes and the chain: for an auditor who wants to
        say which verdict a tampered ledger no longer supports, after `verify` has said it is
        tampered. Never used to decide anything."""
        out = []
        with self._open_shared() as f:
            for _, line, complete in _iter_lines(f, 0):
                if not complete:
                    break
                try:
                    out.append(decode_envelope(line))
                except (msgspec.DecodeError, msgspec.ValidationError, LedgerCorrupt):
                    continue
        return out

    def verify(self) -> Verified:
        """Walk the chain from the start; name the first bad seq or the torn tail's offset."""
        cursor = _Cursor()
        try:
            with self._open_shared() as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return Verified(ok=False, events=0, head=Head(0, GENESIS), message="ledger is empty")
                _scan(f, cursor, size=size)
        except TornTail as exc:
            return Verified(False, cursor.seq, Head(cursor.seq, cursor.hash), torn_offset=exc.offset, message=str(exc))
        except LedgerCorrupt as exc:
            return Verified(False, cursor.seq, Head(cursor.seq, cursor.hash), first_bad_seq=exc.seq, message=str(exc))
        self._cursor = cursor  # a read right after a full verify need not hash the file again
        return Verified(True, cursor.seq, Head(cursor.seq, cursor.hash))

    def _refresh(self, f, *, decode: bool = False) -> _Decoded:
        """Verify what was appended since the last scan; with `decode`, keep its typed events."""
        size = os.fstat(f.fileno()).st_size
        if size < self._cursor.offset:
            self._cursor = _Cursor()  # the file shrank (repaired elsewhere): start over
        sink = _Decoded(self._cursor.offset)
        if size > self._cursor.offset:
            _scan(f, self._cursor, size=size, sink=sink if decode else None)
        return sink

    # --- writing ------------------------------------------------------------------------------

    def append(
        self,
        payloads: Payload | Sequence[Payload],
        *,
        expected_seq: int | None,
        actor: str = "cli",
        cause: str | None = None,
        key: str | None = None,
    ) -> list[Envelope]:
        """Append one event or an atomic batch; fsync before returning.

        `expected_seq` is the head seq the caller decided against (0 for a new ledger); a
        different head raises ConcurrencyError and writes nothing. `None` appends at any head
        (only for events that do not depend on state). With `key`, a batch already appended under
        the same key is returned instead and nothing is written.
        """
        batch = [payloads] if isinstance(payloads, Payload) else list(payloads)
        if not batch:
            return []
        created = not self.path.exists()
        with refused_writes(self.path):
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if created:
                with refused_writes(self.path.parent):
                    _fsync_dir(self.path.parent)
            with os.fdopen(fd, "r+b", closefd=False) as f:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    self._refresh(f)
                    if key is not None and key in self._cursor.keys:
                        return [decode_envelope(_read_at(f, off, n)) for off, n in self._cursor.keys[key]]
                    if expected_seq is not None and expected_seq != self._cursor.seq:
                        raise ConcurrencyError(
                            f"{self.path}: ledger moved on (head seq {self._cursor.seq}, expected {expected_seq}); "
                            "nothing was written",
                            expected=expected_seq,
                            actual=self._cursor.seq,
                        )
                    envelopes, blob = self._encode_batch(batch, actor=actor, cause=cause, key=key)
                    start = self._cursor.offset
                    _write_batch(fd, blob, start, self.path)
                    self._advance(envelopes, blob, start, key)
                    anchor.note(self.path, envelopes[-1].seq, envelopes[-1].hash)  # kept when the command ends
                    return envelopes
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _encode_batch(self, batch, *, actor, cause, key):
        # Encoding allocates only acyclic objects; pausing the cyclic collector keeps a large batch
        # from re-walking every object the caller holds (it doubled the cost of a 1000-event batch).
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._encode_batch_paused(batch, actor=actor, cause=cause, key=key)
        finally:
            if enabled:
                gc.enable()

    def _encode_batch_paused(self, batch, *, actor, cause, key):
        seq, prev = self._cursor.seq, self._cursor.hash
        at = self._clock()
        ids = new_event_ids(len(batch)) if self._new_id is new_event_id else [self._new_id() for _ in batch]
        envelopes, lines = [], []
        for i, payload in enumerate(batch):
            env = Envelope(
                seq=seq + 1,
                id=ids[i],
                type=payload.TYPE,
                v=payload.VERSION,
                at=at,
                actor=actor,
                cause=cause,
                key=key,
                batch=len(batch) - 1 - i,
                data=payload,
                prev=prev,
            )
            line = seal(env)
            digest = line[-HASH_TAIL:-3].decode()
            envelopes.append(msgspec.structs.replace(env, hash=digest))
            lines.append(line)
            seq, prev = seq + 1, digest
        blob = b"".join(lines)
        # Read the batch back before writing it: an event that would not decode (a NaN encoded as
        # null, a value outside its declared range, an unregistered type) must not poison the
        # ledger for every later reader.
        try:
            check_block(blob)
        except LedgerCorrupt as exc:
            raise InputError(f"{self.path}: event not appended, it would not read back ({exc})") from None
        return envelopes, blob

    def _advance(self, envelopes: list[Envelope], blob: bytes, start: int, key: str | None) -> None:
        if key is not None:
            offsets, off = [], start
            for line in blob.splitlines(keepends=True):
                offsets.append((off, len(line) - 1))
                off += len(line)
            self._cursor.keys[key] = offsets
        self._cursor.offset = start + len(blob)
        self._cursor.seq = envelopes[-1].seq
        self._cursor.hash = envelopes[-1].hash

    # --- repair -------------------------------------------------------------------------------

    def repair(self, *, actor: str = "cli") -> LedgerRepaired | None:
        """Quarantine a torn tail and record it; None when the ledger was intact.

        Corruption before the tail is not repairable (it would drop complete events): it raises.
        """
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            cursor = _Cursor()
            size = os.fstat(f.fileno()).st_size
            try:
                _scan(f, cursor, size=size)
                return None
            except TornTail as exc:
                offset = exc.offset if exc.offset is not None else cursor.offset
                reason = str(exc)
            f.seek(offset)
            torn = f.read()
            digest = hashlib.sha256(torn).hexdigest()
            quarantine = self.path.with_name(f"{self.path.name}.torn-{offset}-{digest[:12]}")
            try:
                with refused_writes(quarantine), open(quarantine, "wb") as q:
                    q.write(torn)
                    q.flush()
                    os.fsync(q.fileno())
                    _fsync_dir(self.path.parent)
            except BaseException:
                quarantine.unlink(missing_ok=True)  # the ledger is untouched until the copy is whole
                raise
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
            fcntl.flock(f, fcntl.LOCK_UN)
        self._cursor = _Cursor()
        event = LedgerRepaired(
            offset=offset, length=len(torn), quarantine=quarantine.name, torn_sha256=digest, reason=reason
        )
        self.append(event, expected_seq=cursor.seq, actor=actor)
        return event


HASH_TAIL = len(b'"}\n') + 64


def _decode_range(f, start: int, end: int) -> Iterator[Envelope]:
    """Typed events of the verified byte range [start, end), a block of whole lines at a time."""
    f.seek(start)
    carry, pos = b"", start
    while pos < end:
        chunk = f.read(min(_BLOCK, end - pos))
        if not chunk:
            break
        pos += len(chunk)
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n") + 1
        block, carry = buf[:cut], buf[cut:]
        if block:
            yield from decode_block(block)


def _write_batch(fd: int, blob: bytes, start: int, path: Path) -> None:
    """All of `blob` at the end of the file (which is `start` bytes long) and fsynced, or none of it:
    a full disk takes a write in part, so a short write is continued and a refused one cut back to
    `start`, and the error names the ledger (a batch is all-or-none to every reader)."""
    try:
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, start)
            os.fsync(fd)
        except OSError:
            pass  # left as it is, the partial batch is a torn tail: every scan refuses it, repair removes it
        err = disk_error(exc, path)
        if err is None:
            raise
        raise DiskError(path, err.errno, kept="nothing of this append was kept, every earlier event is intact") from None


def _read_at(f, offset: int, length: int) -> bytes:
    f.seek(offset)
    return f.read(length)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
