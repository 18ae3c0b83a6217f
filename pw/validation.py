"""Decode JSON into our msgspec types with errors that name the file, the field and the expectation.

msgspec says `Expected `float`, got `str` - at `$.run.timeout_s``; people and agents want
`profileweaver.json: run.timeout_s: expected a number > 0, got "ten"`.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from ledger.errors import InputError

T = TypeVar("T")

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_TYPE_WORDS = {
    "float": "a number",
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _field_path(path: str) -> str:
    """`$.build[0].argv` -> `build[0].argv`."""
    return path.lstrip(".") or "(top level)"


def _value_at(doc: Any, path: str) -> Any:
    cur = doc
    for key, idx in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        try:
            cur = cur[key] if key else cur[int(idx)]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return cur


_MISSING = object()


def _humanize(message: str) -> str:
    message = message.strip()
    m = re.match(r"Expected `([^`]+)`(.*?)(?:, got `([^`]+)`)?$", message)
    if m:
        expected = " or ".join(_TYPE_WORDS.get(t.strip(), t.strip()) for t in m.group(1).split("|"))
        constraint = m.group(2).strip()
        text = f"expected {expected}"
        if constraint:
            text += f" {constraint}"
        return text
    m = re.match(r"Object missing required field `([^`]+)`", message)
    if m:
        return f"missing required field {m.group(1)!r}"
    m = re.match(r"Object contains unknown field `([^`]+)`", message)
    if m:
        return f"unknown field {m.group(1)!r}"
    m = re.match(r"Invalid enum value (.*)", message)
    if m:
        return f"invalid value {m.group(1)}"
    return message[0].lower() + message[1:] if message else "invalid"


def decode_as(data: bytes, typ: type[T], *, name: str) -> T:
    """Decode `data` (JSON bytes) as `typ`; a bad document raises one InputError line."""
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(f"{name}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{name}: not valid JSON (nested too deeply)") from None
    return convert_as(doc, typ, name=name)


def convert_as(doc: Any, typ: type[T], *, name: str) -> T:
    try:
        return msgspec.convert(doc, typ)
    except msgspec.ValidationError as exc:
        m = _AT.match(str(exc))
        path = (m.group("path") or "") if m else ""
        message = _humanize(m.group("msg") if m else str(exc))
        got = _value_at(doc, path) if path else _MISSING
        field = _field_path(path)
        if "unknown field" in message or "missing required field" in message:
            where = f"{field}: " if path else ""
            raise InputError(f"{name}: {where}{message}") from None
        suffix = "" if got is _MISSING else f", got {_short(got)}"
        raise InputError(f"{name}: {field}: {message}{suffix}") from None


def _short(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
