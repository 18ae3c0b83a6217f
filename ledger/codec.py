"""Canonical encoding of ledger lines and their hash chain.

A line is the msgspec JSON of an `Envelope` (fields in declaration order, no spaces, UTF-8) whose
last field is `hash`. `hash` is the sha256 of the same line with the hash field removed, i.e. of
`line[:-HASH_SUFFIX_LEN] + b"}"`, so checking a line needs no re-encoding. `prev` is the previous
line's `hash` (GENESIS for the first line), which makes the file a tamper-evident chain.
"""

from __future__ import annotations

import gc
import hashlib
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Union

import msgspec

from ledger.errors import LedgerCorrupt, NewerLedger
from ledger.events import EVENT_TYPES, Envelope, Payload
from ledger.upcast import upcast

HASH_KEY = b',"hash":"'
HASH_SUFFIX_LEN = len(HASH_KEY) + 64 + len(b'"}')

_encoder = msgspec.json.Encoder()


class _Header(msgspec.Struct, gc=False):
    """The fields verification needs; decoding only these keeps replay fast."""

    seq: int
    type: str
    v: int
    key: str | None
    batch: int
    prev: str
    hash: str


class _RawEnvelope(msgspec.Struct, gc=False):
    seq: int
    id: str
    type: str
    v: int
    at: str
    actor: str
    cause: str | None
    key: str | None
    batch: int
    data: msgspec.Raw
    prev: str
    hash: str


_header_decoder = msgspec.json.Decoder(_Header)
_raw_envelope_decoder = msgspec.json.Decoder(_RawEnvelope)
_payload_decoders: dict[type, msgspec.json.Decoder] = {}


def seal(envelope: Envelope) -> bytes:
    """Encode an envelope (its `hash` ignored) as one canonical, hashed, newline-terminated line."""
    unsealed = _encoder.encode(msgspec.structs.replace(envelope, hash="") if envelope.hash else envelope)
    # The hash covers the line without `,"hash":""`, i.e. `unsealed[:-11] + b"}"`; the line is
    # `unsealed` with the digest written into the empty string.
    digest = hashlib.sha256(unsealed[: -len(b',"hash":""}')] + b"}").hexdigest().encode()
    return b"".join((unsealed[:-2], digest, b'"}\n'))


def line_digest_ok(line: bytes) -> bool:
    """True when `line` (without its newline) carries the sha256 of its own hashless body."""
    if len(line) <= HASH_SUFFIX_LEN or not line.endswith(b'"}') or line[-HASH_SUFFIX_LEN:-66] != HASH_KEY:
        return False
    return hashlib.sha256(line[:-HASH_SUFFIX_LEN] + b"}").hexdigest().encode() == line[-66:-2]


def decode_header(line: bytes) -> _Header:
    return _header_decoder.decode(line)


def decode_header_lines(block: bytes) -> list[_Header]:
    """Headers of every line of `block` in one call. NB: msgspec skips blank lines and accepts
    several values on one line, so callers must check the count against the lines they hash."""
    return _header_decoder.decode_lines(block)


def decode_envelope(line: bytes) -> Envelope:
    """Decode a whole line into an Envelope whose `data` is the current-version typed payload."""
    try:
        raw = _raw_envelope_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise LedgerCorrupt(f"event: not a valid envelope ({exc})") from None
    return Envelope(
        seq=raw.seq,
        id=raw.id,
        type=raw.type,
        v=raw.v,
        at=raw.at,
        actor=raw.actor,
        cause=raw.cause,
        key=raw.key,
        batch=raw.batch,
        data=decode_payload(raw.type, raw.v, raw.data, seq=raw.seq),
        prev=raw.prev,
        hash=raw.hash,
    )


def decode_payload(type_name: str, version: int, data: Any, *, seq: int | None = None) -> Payload:
    """Typed payload from raw JSON bytes (or a dict), upcast from older versions."""
    cls = EVENT_TYPES.get(type_name)
    where = f"event seq {seq}" if seq is not None else "event"
    if cls is None:
        raise LedgerCorrupt(f"{where}: unknown event type {type_name!r}", seq=seq)
    if version > cls.VERSION:
        raise NewerLedger(
            f"{where}: {type_name} v{version} is newer than this ProfileWeaver understands "
            f"(v{cls.VERSION}); upgrade ProfileWeaver",
            seq=seq,
        )
    if isinstance(data, msgspec.Raw) and version == cls.VERSION:
        decoder = _payload_decoders.get(cls)
        if decoder is None:
            decoder = _payload_decoders[cls] = msgspec.json.Decoder(cls)
        try:
            return decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise LedgerCorrupt(f"{where}: {type_name} payload invalid: {exc}", seq=seq) from None
    if isinstance(data, msgspec.Raw):
        data = msgspec.json.decode(data)
    if version < cls.VERSION:
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"{where}: {type_name} v{version} payload is not an object", seq=seq)
        try:
            data = upcast(type_name, version, cls.VERSION, dict(data))
        except KeyError as exc:
            raise LedgerCorrupt(f"{where}: no upcaster for {type_name} v{exc.args[0][1]}", seq=seq) from None
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise LedgerCorrupt(f"{where}: {type_name} payload invalid: {exc}", seq=seq) from None


# --- bulk decoding -------------------------------------------------------------------------------
#
# Replaying a long ledger line by line spends most of its time in Python calls. msgspec can decode
# a whole block of lines in one call if each line's type is known from the line itself: one struct
# per event type, tagged by the envelope's `type` field, whose `v` is pinned to the current version.
# Anything that does not fit (an older version to upcast, a damaged line) sends the block through
# `decode_envelope` line by line, which gives the same result or the same precise error.


# The envelope fields `decode_block` copies; if the envelope changes shape it falls back to the
# line-by-line path until this list is updated.
_ENVELOPE_FIELDS = ("seq", "id", "type", "v", "at", "actor", "cause", "key", "batch", "data", "prev", "hash")


def _block_decoder_for(types: tuple[tuple[str, type[Payload]], ...]):
    hints = typing.get_type_hints(Envelope)
    members = []
    for name, cls in types:
        fields = []
        for field in Envelope.__struct_fields__:
            if field == "type":
                continue  # the tag
            annotation = hints[field]
            if field == "data":
                annotation = cls
            elif field == "v":
                annotation = Literal[cls.VERSION]  # older versions take the upcasting path
            fields.append((field, annotation))
        members.append(msgspec.defstruct(f"_Line{name}", fields, tag_field="type", tag=name, frozen=True, gc=False))
    decoder = msgspec.json.Decoder(Union[tuple(members)]) if len(members) > 1 else msgspec.json.Decoder(members[0])
    return decoder, {member: name for member, (name, _) in zip(members, types)}


_block_cache: dict[tuple, Any] = {}


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Decoding allocates many objects that all survive; collecting in the middle only walks them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _block_decoder():
    types = tuple(EVENT_TYPES.items())
    cached = _block_cache.get(types)
    if cached is None:
        _block_cache.clear()
        cached = _block_cache[types] = _block_decoder_for(types)
    return cached


def decode_block(block: bytes) -> list[Envelope]:
    """Every line of `block` (complete `\n`-terminated lines) as an Envelope, as `decode_envelope`
    would give it, in one msgspec call where possible."""
    decoder, tags = _block_decoder()
    if Envelope.__struct_fields__ != _ENVELOPE_FIELDS:
        return [decode_envelope(line) for line in block.split(b"\n")[:-1]]
    try:
        with _gc_paused():
            rows = decoder.decode_lines(block)
            # Positional: the order is _ENVELOPE_FIELDS, checked above.
            envelopes = [
                Envelope(r.seq, r.id, tags[type(r)], r.v, r.at, r.actor, r.cause, r.key, r.batch, r.data, r.prev, r.hash)
                for r in rows
            ]
    except (msgspec.DecodeError, msgspec.ValidationError):
        envelopes = None
    if envelopes is not None and len(envelopes) == block.count(b"\n"):
        return envelopes
    return [decode_envelope(line) for line in block.split(b"\n")[:-1]]


def check_block(block: bytes) -> None:
    """Raise LedgerCorrupt, naming the line, if any line of `block` would not decode.

    The decoded objects are dropped at once (inside the GC pause, so they cost no collection):
    this is the price of never writing an event that a reader cannot read back.
    """
    decoder, _ = _block_decoder()
    try:
        with _gc_paused():
            decoded = len(decoder.decode_lines(block))
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = -1
    if decoded != block.count(b"\n"):
        for line in block.split(b"\n")[:-1]:
            decode_envelope(line)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON for projections: Struct fields in declaration order, dict keys sorted."""
    return msgspec.json.format(msgspec.json.encode(obj, order="deterministic"), indent=2) + b"\n"
