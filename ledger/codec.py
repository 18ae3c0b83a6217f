"""Canonical encoding of ledger lines and their hash chain.

A line is the msgspec JSON of an `Envelope` (fields in declaration order, no spaces, UTF-8) whose
last field is `hash`. `hash` is the sha256 of the same line with the hash field removed, i.e. of
`line[:-HASH_SUFFIX_LEN] + b"}"`, so checking a line needs no re-encoding. `prev` is the previous
line's `hash` (GENESIS for the first line), which makes the file a tamper-evident chain.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ledger.errors import LedgerCorrupt
from ledger.events import EVENT_TYPES, Envelope, Payload
from ledger.upcast import upcast

HASH_SUFFIX_LEN = len(b',"hash":"') + 64 + len(b'"}')

_encoder = msgspec.json.Encoder()


class _Header(msgspec.Struct):
    """The fields verification needs; decoding only these keeps replay fast."""

    seq: int
    type: str
    v: int
    key: str | None
    batch: int
    prev: str
    hash: str


class _RawEnvelope(msgspec.Struct):
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
    unsealed = _encoder.encode(msgspec.structs.replace(envelope, hash=""))
    # Drop `,"hash":""}` and re-close: that is exactly the byte string the hash covers.
    body = unsealed[: -len(b',"hash":""}')] + b"}"
    digest = hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}\n'


def line_digest_ok(line: bytes) -> bool:
    """True when `line` (without its newline) carries the sha256 of its own hashless body."""
    if len(line) <= HASH_SUFFIX_LEN or not line.endswith(b'"}'):
        return False
    body = line[:-HASH_SUFFIX_LEN] + b"}"
    claimed = line[-HASH_SUFFIX_LEN + len(b',"hash":"') : -2]
    return hashlib.sha256(body).hexdigest().encode() == claimed


def decode_header(line: bytes) -> _Header:
    return _header_decoder.decode(line)


def decode_envelope(line: bytes) -> Envelope:
    """Decode a whole line into an Envelope whose `data` is the current-version typed payload."""
    raw = _raw_envelope_decoder.decode(line)
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
        raise LedgerCorrupt(
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
        try:
            data = upcast(type_name, version, cls.VERSION, dict(data))
        except KeyError as exc:
            raise LedgerCorrupt(f"{where}: no upcaster for {type_name} v{exc.args[0][1]}", seq=seq) from None
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise LedgerCorrupt(f"{where}: {type_name} payload invalid: {exc}", seq=seq) from None


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON for projections: Struct fields in declaration order, dict keys sorted."""
    return msgspec.json.format(msgspec.json.encode(obj, order="deterministic"), indent=2) + b"\n"
