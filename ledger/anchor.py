"""Chain heads anchored outside the run directory: an append-only log per user.

The hash chain makes a ledger tamper-evident only to a reader who knows its head: whoever can write
the run directory can rewrite any event and re-seal every hash after it. So after each command
that appended, the ledger's head (seq and hash) is appended to a log outside every run directory
and printed (``flush``); ``pw audit`` then requires the ledger's history to extend every head
anchored for it (``divergence``), and names the first it does not. See docs/trust-model.md for
what this holds against (the agent's uid may write this log too; a printed anchor it cannot reach,
and the judge-uid set-up puts the log out of its reach).

The log (``log_path``): ``$PW_ANCHOR_LOG``, else ``$XDG_STATE_HOME/profileweaver/anchors.jsonl``,
else ``~/.local/state/profileweaver/anchors.jsonl``. One JSON object a line: the anchor format
version, the UTC time, the ledger's absolute path (the key: a copied run is another run), its seq
and hash, the command. Lines are appended whole under an exclusive lock and fsynced; a line that
does not decode is skipped when read (a torn write of this log names nothing).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec

ENV = "PW_ANCHOR_LOG"
_MAX_LINE = 1 << 16


class Anchor(msgspec.Struct, frozen=True):
    """One anchored head."""

    v: int
    at: str
    ledger: str
    seq: int
    hash: str
    command: str = ""


# Ledgers this process appended to since ``begin``: path -> (seq, hash) of the last append.
_touched: dict[str, tuple[int, str]] = {}


def log_path() -> Path:
    """Where this user's anchors go (see the module docstring)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "profileweaver" / "anchors.jsonl"


def key(ledger_path: str | os.PathLike[str]) -> str:
    """The name a ledger is anchored under: its absolute, resolved path."""
    return os.path.realpath(ledger_path)


def begin() -> None:
    """Forget what earlier work of this process appended: one command's anchors start here."""
    _touched.clear()


def note(ledger_path: str | os.PathLike[str], seq: int, digest: str) -> None:
    """Called by ``Ledger.append`` after each successful append."""
    _touched[key(ledger_path)] = (seq, digest)


def flush(command: str) -> tuple[list[Anchor], str | None]:
    """Append the head of every ledger appended to since ``begin`` to the log; (the anchors, None)
    or (the anchors that could not be kept, why not). Never raises: a command that did its work is
    not failed by its anchor (it says so instead)."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # A ledger no longer at the path it was appended at (a run directory renamed into place after
    # its first event) is anchored under its new path by the appends that follow.
    anchors = [Anchor(v=1, at=at, ledger=path, seq=seq, hash=digest, command=command)
               for path, (seq, digest) in sorted(_touched.items()) if os.path.exists(path)]
    _touched.clear()
    if not anchors:
        return [], None
    path = log_path()
    blob = b"".join(msgspec.json.encode(a) + b"\n" for a in anchors)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                blob = b"\n" + blob  # after a torn line: ours starts a line of its own
            os.write(fd, blob)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return anchors, f"cannot append to the anchor log {path}: {exc.strerror or exc}"
    return anchors, None


def read(log: Path | None = None) -> Iterable[Anchor]:
    """Every anchor of the log that decodes, oldest first (none when there is no log)."""
    path = log or log_path()
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        for line in f:
            if len(line) > _MAX_LINE:
                continue
            try:
                yield msgspec.json.decode(line, type=Anchor)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue


def anchors_for(ledger_path: str | os.PathLike[str], log: Path | None = None) -> list[Anchor]:
    """The anchors of one ledger, oldest first."""
    name = key(ledger_path)
    return [a for a in read(log) if a.ledger == name]


def parse(text: str) -> tuple[int, str]:
    """A printed anchor, ``SEQ:HASH`` (a hash prefix of at least 12 hex digits), as (seq, hash);
    ValueError naming what was expected."""
    seq, sep, digest = text.partition(":")
    digest = digest.strip().lower()
    if not sep or not seq.strip().isdigit() or len(digest) < 12 or len(digest) > 64 \
            or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{text!r}: expected SEQ:HASH as pw prints it (a hash of 12 to 64 hex digits)")
    return int(seq), digest


def divergence(heads: dict[int, str], anchors: Sequence[tuple[int, str, str]]) -> str | None:
    """Why a ledger whose event hashes by seq are ``heads`` does not extend each anchored head
    ``(seq, hash, where)`` (``where``: when and by what it was anchored), or None. A hash may be a
    prefix (a printed anchor). The latest anchor it breaks is named: the one closest to now."""
    for seq, digest, where in reversed(list(anchors)):
        have = heads.get(seq)
        if have is None:
            last = max(heads) if heads else 0
            return (f"the ledger ends at seq {last}, but seq {seq} was anchored ({where}, hash {digest[:16]}): "
                    "events were removed since")
        if not have.startswith(digest):
            return (f"event seq {seq} hashes to {have[:16]}, but {digest[:16]} was anchored ({where}): "
                    "the history was rewritten since")
    return None
