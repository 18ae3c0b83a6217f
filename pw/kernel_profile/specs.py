"""Spec input: `--spec JSON` (repeatable) or `--specs PATH` holding a JSON object, a JSON list,
`{"specs": [...]}`, or JSON lines. A spec holds exactly the entry's args fields; everything else is
refused with an error that names the spec and the field: an unknown or missing field, a value out
of its bounds, and a key given twice (JSON parsers keep the last one silently; a spec that says
`"m": 1` and `"m": 2` is a mistake, not a choice). NaN and infinities are not JSON and never pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

from ledger.errors import InputError
from pw.kernel_profile.registry import Entry, all_arg_fieldsets

T = TypeVar("T")

# Fields that choose where a spec goes rather than what it is; they belong on the command line.
ROUTING_FIELDS = ("backend", "table", "gpu_name", "gpu", "device", "db")


def parse(entry: Entry, *, spec: list[str] | None, specs_path: str | None) -> list[msgspec.Struct]:
    """The specs of one call, typed, in input order (duplicates kept: one result per spec)."""
    if spec and specs_path:
        raise InputError("--spec and --specs: give one of them, not both")
    if spec:
        items, where = [], "--spec"
        for i, text in enumerate(spec):
            try:
                items.append(_loads(text))
            except ValueError as exc:
                raise InputError(f"--spec #{i + 1}: not valid JSON ({exc}); expected one JSON object") from None
        return _typed(entry, items, where)
    if specs_path:
        return _from_file(entry, Path(specs_path))
    raise InputError("--spec or --specs: one is required (the specs to look up or measure)")


def _from_file(entry: Entry, path: Path) -> list[msgspec.Struct]:
    where = f"--specs {path}"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{where}: no such file (expected a JSON or JSONL file of specs)") from None
    except IsADirectoryError:
        raise InputError(f"{where}: is a directory (expected a JSON or JSONL file of specs)") from None
    # Fast path: the whole file decodes straight into the args type (100,000 specs in ~50 ms), when
    # counting the key tokens proves that no spec repeats a key (else the slow path names it).
    for shape in (list[entry.args], _Wrapped[entry.args], entry.args):  # type: ignore[index]
        try:
            got = msgspec.json.decode(data, type=shape)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        got = got.specs if isinstance(got, _Wrapped) else got
        specs = got if isinstance(got, list) else [got]
        if not specs:
            raise InputError(f"{where}: holds no specs (expected at least one)")
        if _keys_once(entry, data, len(specs)):
            return specs
        break
    # Slow path: find the first problem and name it.
    try:
        doc = _loads(data)
    except ValueError:
        doc = _jsonl(data, where)
    if isinstance(doc, _Duplicated) and "specs" in doc.duplicates:
        raise InputError(f"{where}: duplicate key 'specs' (expected one list of specs)")
    if isinstance(doc, dict) and set(doc) == {"specs"}:
        doc = doc["specs"]
        if not isinstance(doc, list):
            raise InputError(f"{where}: 'specs' must be a JSON list of spec objects")
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise InputError(f"{where}: holds no specs (expected at least one)")
    return _typed(entry, items, where)


class _Wrapped(msgspec.Struct, Generic[T], frozen=True, forbid_unknown_fields=True):
    specs: list[T]


def _keys_once(entry: Entry, data: bytes, count: int) -> bool:
    """True when `data`, which decoded to `count` specs of `entry`, cannot hold a repeated key.

    Every key of such a document is an args field (or `specs`), and a required field appears in
    every spec: if each field's quoted name occurs exactly `count` times, no spec has it twice. A
    quoted name can also be a string value, or a key written with escapes (`"\\u006d"` for `"m"`): both only
    make the check fail, sending the file to the slow path, which decides exactly. A field with a
    default may be absent from some specs, so a file that uses one goes to the slow path too.
    """
    if b"\\" in data or data.count(b'"specs"') > 1:
        return False
    names = entry.arg_names
    required = len(names) - len(entry.args.__struct_defaults__)
    for i, name in enumerate(names):
        seen = data.count(b'"' + name.encode() + b'"')
        if (i < required and seen != count) or (i >= required and seen):
            return False
    return True


class _Duplicated(dict):
    """A JSON object that gave a key more than once (the value kept is the last, as JSON parsers do)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        return dict(pairs)
    out = _Duplicated(pairs)
    out.duplicates = sorted({k for k in keys if keys.count(k) > 1})
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str | bytes):
    """Python's JSON parser, told to keep every repeated key in sight and to refuse NaN/Infinity."""
    return json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)


def _jsonl(data: bytes, where: str) -> list:
    out = []
    for n, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(_loads(line))
        except ValueError as exc:
            raise InputError(f"{where}: line {n} is not valid JSON ({exc}); expected a JSON object, a JSON list, "
                             '{"specs": [...]} or one JSON object per line') from None
    return out


def _typed(entry: Entry, items: list, where: str) -> list[msgspec.Struct]:
    names = entry.arg_names
    expected = f"{entry.table}/{entry.backend} args: {', '.join(names)}"
    others = all_arg_fieldsets()
    # Fields with a default in the schema may be left out; every other field is required.
    required = names[: len(names) - len(entry.args.__struct_defaults__)]
    out = []
    for i, item in enumerate(items):
        label = f"{where} spec[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{label}: expected a JSON object of {expected}; got {type(item).__name__}")
        if isinstance(item, _Duplicated):
            raise InputError(f"{label}: duplicate key {item.duplicates[0]!r} (each field once; {expected})")
        for key in item:
            if key in ROUTING_FIELDS:
                hint = f"pass --{key.replace('_', '-')}" if key in ("backend", "gpu_name", "db") else "one table per call"
                raise InputError(f"{label}: field {key!r} is a routing field, not an arg ({hint}; {expected})")
        keys = frozenset(item)
        if keys != frozenset(names) and keys in others:
            raise InputError(f"{label}: fields ({', '.join(item)}) belong to {others[keys]}, not {entry.table}/"
                             f"{entry.backend}: mixed batch (one table/backend per call)")
        for key in item:
            if key not in names:
                raise InputError(f"{label}: unknown field {key!r} ({expected})")
        for key in required:
            if key not in item:
                raise InputError(f"{label}: missing field {key!r} ({expected})")
        try:
            out.append(msgspec.convert(item, entry.args, strict=True))
        except msgspec.ValidationError as exc:
            msg = str(exc)
            field = msg.rsplit("at `$.", 1)[-1].rstrip("`") if "at `$." in msg else "?"
            raise InputError(f"{label}: field {field!r}: {msg.split(' - at ')[0]} ({expected})") from None
    return out


def key_of(spec: msgspec.Struct) -> tuple:
    return tuple(getattr(spec, n) for n in spec.__struct_fields__)


def as_dict(spec: msgspec.Struct) -> dict:
    return {n: getattr(spec, n) for n in spec.__struct_fields__}
