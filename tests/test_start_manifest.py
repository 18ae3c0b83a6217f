"""Malformed `profileweaver.json`: `pw start` answers with one line naming the file, exit 2, no
traceback, and creates no run directory. Nothing is built: validation comes first."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pw.workload.manifest import load_manifest

BASE = {
    "version": 1,
    "name": "fuzz",
    "source": {"editable": ["main.c"]},
    "build": [{"argv": ["cc", "-o", "main", "main.c"], "timeout_s": 30}],
    "run": {"argv": ["./main"], "timeout_s": 5},
    "inputs": [],
    "metric": {"kind": "wall"},
    "oracle": {"kind": "stdout", "reference": "ref.txt", "rtol": 1e-9, "atol": 0.0},
    "sampling": {"mode": "standard", "pairs": 5},
    "profiling": {"cadence": "every-candidate"},
}

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# Field -> what a valid value looks like; the fuzzer puts anything else there.
VALID = {
    ("version",): lambda v: type(v) is int and v == 1,
    ("name",): lambda v: isinstance(v, str) and 1 <= len(v) <= 64,
    ("source",): lambda v: isinstance(v, dict),
    ("source", "editable"): _str_list,
    ("source", "root"): lambda v: isinstance(v, str),
    ("source", "exclude"): _str_list,
    ("run",): lambda v: isinstance(v, dict),
    ("run", "argv"): _str_list,
    ("run", "timeout_s"): lambda v: _number(v) and v > 0,
    ("run", "cwd"): lambda v: isinstance(v, str),
    ("run", "env"): lambda v: isinstance(v, dict),
    ("build",): lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    ("build", 0, "argv"): _str_list,
    ("build", 0, "timeout_s"): lambda v: _number(v) and v > 0,
    ("inputs",): _str_list,
    ("metric",): lambda v: isinstance(v, dict),
    ("oracle",): lambda v: isinstance(v, dict),
    ("oracle", "rtol"): lambda v: _number(v) and v >= 0,
    ("oracle", "atol"): lambda v: _number(v) and v >= 0,
    ("oracle", "holdout"): lambda v: isinstance(v, list) and not v,
    ("sampling", "pairs"): lambda v: _number(v) and float(v).is_integer() and 5 <= v <= 200,
    ("profiling",): lambda v: isinstance(v, dict),
}
ENUMS = {
    ("metric", "kind"): {"wall", "roi"},
    ("metric", "unit"): {"s", "ms", "us", "ns"},
    ("oracle", "kind"): {"exit", "stdout", "file", "command", "stable"},
    ("sampling", "mode"): {"standard", "winner-confirmation"},
    ("profiling", "cadence"): {"every-candidate", "winner-only"},
}
REQUIRED = [("version",), ("name",), ("source",), ("run",), ("source", "editable"), ("run", "argv"),
            ("build", 0, "argv"), ("oracle", "reference")]
STRUCTS = [(), ("source",), ("run",), ("build", 0), ("metric",), ("oracle",), ("sampling",), ("profiling",)]
KNOWN = {
    (): set(BASE) | {"inputs"},
    ("source",): {"editable", "root", "exclude"},
    ("run",): {"argv", "cwd", "env", "timeout_s"},
    ("build", 0): {"argv", "cwd", "env", "timeout_s"},
    ("metric",): {"kind", "pattern", "json_key", "unit"},
    ("oracle",): {"kind", "reference", "path", "argv", "rtol", "atol", "holdout"},
    ("sampling",): {"mode", "pairs"},
    ("profiling",): {"cadence"},
}
PATHS = [("source", "root"), ("run", "cwd"), ("build", 0, "cwd"), ("oracle", "reference"),
         ("source", "editable", 0), ("inputs", 0)]


def _set(doc, path, value):
    doc = copy.deepcopy(doc)
    cur = doc
    for key in path[:-1]:
        cur = cur[key]
    if isinstance(cur, list) and path[-1] == len(cur):
        cur.append(value)
    else:
        cur[path[-1]] = value
    return doc


def _delete(doc, path):
    doc = copy.deepcopy(doc)
    cur = doc
    for key in path[:-1]:
        cur = cur[key]
    del cur[path[-1]]
    return doc


@pytest.fixture
def fuzz_start(tmp_path, pw_cli):
    """Write the given manifest bytes and run `pw start` on it; check the answer is one line, exit 2,
    naming profileweaver.json, with no run directory created. Returns the stderr line."""
    wl = tmp_path / "wl"
    wl.mkdir()
    (wl / "main.c").write_text("int main(void) { return 0; }\n")
    (wl / "ref.txt").write_text("\n")
    runs = tmp_path / "runs"

    def run(raw: bytes) -> str:
        (wl / "profileweaver.json").write_bytes(raw)
        r = pw_cli("start", "--workload", wl, "--runs-dir", runs, "--no-profile")
        assert r.code == 2, (raw[:300], r)
        assert "Traceback" not in r.err
        assert r.err.endswith("\n") and r.err.count("\n") == 1, (raw[:300], r.err)
        assert "profileweaver.json" in r.err, (raw[:300], r.err)
        assert r.out == ""
        assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
        assert sorted(p.name for p in wl.iterdir()) == ["main.c", "profileweaver.json", "ref.txt"]
        return r.err

    return run


def _bytes(doc) -> bytes:
    return json.dumps(doc).encode()


def test_base_manifest_is_valid(tmp_path):
    """Every fuzzed manifest below is this valid one with exactly one thing broken."""
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "ref.txt").write_text("\n")
    (tmp_path / "profileweaver.json").write_bytes(_bytes(BASE))
    contract, _ = load_manifest(tmp_path)
    assert contract.run.timeout_s == 5


def test_timeout_given_as_text_names_the_field(fuzz_start):
    err = fuzz_start(_bytes(_set(BASE, ("run", "timeout_s"), "ten")))
    assert "run.timeout_s" in err and "expected a number" in err
    assert '"ten"' in err


@FUZZ
@given(data=st.data())
def test_wrong_types_in_known_fields(fuzz_start, data):
    path = data.draw(st.sampled_from(sorted(VALID, key=str)), label="field")
    value = data.draw(json_values.filter(lambda v: not VALID[path](v)), label="value")
    err = fuzz_start(_bytes(_set(BASE, path, value)))
    assert ".".join(str(p) for p in path if isinstance(p, str)).split(".")[0] in err or "(top level)" in err


@FUZZ
@given(path=st.sampled_from(REQUIRED))
def test_missing_required_fields(fuzz_start, path):
    err = fuzz_start(_bytes(_delete(BASE, path)))
    assert path[-1] in err


@FUZZ
@given(where=st.sampled_from(STRUCTS), key=st.text(min_size=1, max_size=12), value=json_values)
def test_unknown_fields(fuzz_start, where, key, value):
    if key in KNOWN[where]:
        key = key + "_unknown"
    err = fuzz_start(_bytes(_set(BASE, (*where, key), value)))
    assert "unknown field" in err


@FUZZ
@given(data=st.data())
def test_bad_enum_values(fuzz_start, data):
    path = data.draw(st.sampled_from(sorted(ENUMS)), label="field")
    value = data.draw((st.text(max_size=12) | json_values).filter(lambda v: not (isinstance(v, str) and v in ENUMS[path])), label="value")
    err = fuzz_start(_bytes(_set(BASE, path, value)))
    assert ".".join(path) in err


@FUZZ
@given(where=st.sampled_from([("run", "timeout_s"), ("build", 0, "timeout_s")]),
       value=st.integers(max_value=0) | st.floats(max_value=0.0, allow_nan=False, allow_infinity=False))
def test_non_positive_timeouts(fuzz_start, where, value):
    err = fuzz_start(_bytes(_set(BASE, where, value)))
    assert "timeout_s" in err


_names = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/"), min_size=1, max_size=8)
bad_paths = st.one_of(
    _names.map(lambda s: "/" + s),
    _names.map(lambda s: "../" + s),
    _names.map(lambda s: f"{s}/../../{s}"),
    _names.map(lambda s: f"{s}/.."),
    st.sampled_from(["/", "..", "/etc/passwd", "../../..", "a/\x00b"]),
)


@FUZZ
@given(where=st.sampled_from(PATHS), value=bad_paths)
@example(where=("source", "editable", 0), value="")
@example(where=("source", "editable", 0), value=".")
@example(where=("source", "editable", 0), value="a**")
def test_paths_outside_the_workload(fuzz_start, where, value):
    # source.root may name an ancestor (a suite's root, issue 13): `..`, `../..` are legitimate there.
    assume(not (where == ("source", "root") and value.split("/")[0] == ".."
                and set(value.split("/")) <= {"..", "."}))
    err = fuzz_start(_bytes(_set(BASE, where, value)))
    assert ".".join(str(p) for p in where if isinstance(p, str)).split(".")[0] in err


@FUZZ
@given(where=st.sampled_from([("run",), ("build", 0)]), field=st.sampled_from(["argv", "env"]),
       text=st.text(max_size=6))
def test_strings_exec_cannot_take(fuzz_start, where, field, text):
    if field == "argv":
        value = ["./main", text + "\x00"]
    else:
        value = {text + "=": "x"}
    err = fuzz_start(_bytes(_set(BASE, (*where, field), value)))
    assert field in err


@FUZZ
@given(value=json_values.filter(lambda v: not isinstance(v, dict)))
def test_top_level_not_an_object(fuzz_start, value):
    err = fuzz_start(_bytes(value))
    assert "expected a JSON object" in err


@FUZZ
@given(raw=st.binary(max_size=64))
@example(raw=b"")
@example(raw=b"\xef\xbb\xbf{}")
@example(raw=b"[" * 100_000)
@example(raw=b'{"version": 1e999}')
@example(raw=_bytes(BASE).replace(b'"fuzz"', b'"fu\xff\xfezz"'))
@example(raw=_bytes(BASE)[:-5])
def test_garbage_bytes(fuzz_start, raw):
    fuzz_start(raw)



@pytest.mark.parametrize("version", [2, 1.0, True, "1"])
def test_an_unsupported_version_is_reported_before_anything_else(fuzz_start, version):
    err = fuzz_start(_bytes({**_set(BASE, ("version",), version), "from_the_future": {}}))
    assert "version: expected 1, got" in err and "from_the_future" not in err


def test_a_missing_version_says_which_is_expected(fuzz_start):
    err = fuzz_start(_bytes({**_delete(BASE, ("version",)), "from_the_future": {}}))
    assert "missing required field 'version' (expected 1)" in err
