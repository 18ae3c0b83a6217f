"""Decode JSON into our msgspec types with errors that name the file, the field and the expectation.

msgspec says `Expected `float`, got `str` - at `$.run.timeout_s``; people and agents want
`profileweaver.json: run.timeout_s: expected a number > 0, got "ten"`.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar, get_args, get_origin

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
    """Decode `data` (JSON bytes) as `typ`; a bad document raises one InputError line.

    The one path for user input: not JSON, not an object where a Struct is expected, a missing or
    unsupported `version`, then any field msgspec rejects, each named as `name: field: problem`.
    """
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(f"{name}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{name}: not valid JSON (nested too deeply)") from None
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
        if not isinstance(doc, dict):
            raise InputError(f"{name}: expected a JSON object at the top level, got {_json_kind(doc)}")
        _check_version(doc, typ, name)
    return convert_as(doc, typ, name=name)


def _check_version(doc: dict, typ: type[msgspec.Struct], name: str) -> None:
    """A versioned document (a Struct with a required `version`) is judged by its version first:
    without a known one, no other field can be interpreted, so it is the error worth reporting."""
    field = next((f for f in msgspec.structs.fields(typ) if f.encode_name == "version" and f.required), None)
    if field is None:
        return
    allowed = get_args(field.type) if get_origin(field.type) is Literal else ()
    expected = " or ".join(_short(v) for v in allowed)
    if "version" not in doc:
        hint = f" (expected {expected})" if expected else ""
        raise InputError(f"{name}: missing required field 'version'{hint}")
    got = doc["version"]
    if allowed and not any(type(got) is type(v) and got == v for v in allowed):  # 1.0 and true are not 1
        raise InputError(f"{name}: version: expected {expected}, got {_short(got)}")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", type(None): "null"}.get(type(value), type(value).__name__)


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
