"""The normalized profile, the metric table and the adapter registry (shared by every adapter)."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.registry import REGISTRY_PATH, installed_specs, registry_document, render_registry
from ledger.metrics import KNOWN_METRICS, metric
from ledger.profile import CallEdge, LineCost, Operation, Profile, decode_profile, encode_profile


def test_registry_json_is_generated_from_the_registry():
    assert REGISTRY_PATH.read_bytes() == render_registry(), (
        "adapters/registry.json is stale; regenerate it with: .venv/bin/python -m adapters.registry")


def test_registry_lists_unique_adapters_with_known_metrics():
    specs = installed_specs()
    names = [s.name for s in specs]
    assert names == sorted(set(names))
    doc = registry_document()
    assert doc["version"] == 1
    assert set(doc["metrics"]) == {m for s in specs for m in s.measures}
    assert doc["metrics"]["d1_read_misses"]["simulated"] is True


def test_metric_lookup_names_valid_choices():
    assert metric("cpu_time_s").unit == "s"
    with pytest.raises(KeyError, match="expected one of"):
        metric("time (inc)")
    assert {"gpu_time_ns", "dram_bytes"} <= set(KNOWN_METRICS)


def _profile(ops, lines=(), edges=()):
    return Profile(tool="t", tool_version="1", target="baseline", granularity=["function", "line"],
                   metrics=["cpu_time_s", "samples"], totals={"cpu_time_s": 3.0, "samples": 3.0},
                   operations=list(ops), lines=list(lines), edges=list(edges))


OPS = [Operation(id=f"f{i}@a.c", name=f"f{i}", kind="function", module="prog", file="a.c",
                 line_start=i, line_end=i + 2, self_metrics={"samples": float(i % 3), "cpu_time_s": i % 3 / 10},
                 inclusive_metrics={"cpu_time_s": 1.0, "samples": 3.0}) for i in range(6)]
LINES = [LineCost(file="a.c", line=i, operation=f"f{i}@a.c", self_metrics={"cpu_time_s": 0.1}) for i in range(6)]
EDGES = [CallEdge(caller=f"f{i}@a.c", callee=f"f{i + 1}@a.c", metrics={"samples": 1.0}) for i in range(5)]


def test_encoding_is_canonical_under_permutation():
    rng = random.Random(7)
    ref = encode_profile(_profile(OPS, LINES, EDGES))
    for _ in range(5):
        ops, lines, edges = OPS[:], LINES[:], EDGES[:]
        for xs in (ops, lines, edges):
            rng.shuffle(xs)
        assert encode_profile(_profile(ops, lines, edges)) == ref
    decoded = decode_profile(ref)
    # descending self of the primary metric (cpu_time_s), then id
    assert [o.id for o in decoded.operations] == ["f2@a.c", "f5@a.c", "f1@a.c", "f4@a.c", "f0@a.c", "f3@a.c"]
    assert ref.startswith(b'{"version":1,')


def test_decode_rejects_other_versions_and_unknown_fields():
    data = msgspec.json.decode(encode_profile(_profile(OPS)))
    with pytest.raises(msgspec.ValidationError, match="version 2"):
        decode_profile(msgspec.json.encode({**data, "version": 2}))
    with pytest.raises(msgspec.ValidationError):
        decode_profile(msgspec.json.encode({**data, "extra": 1}))


def test_profile_helpers():
    p = _profile(OPS, LINES)
    assert p.primary_metric == "cpu_time_s"
    assert p.top_operations(1)[0].id == "f2@a.c"
    assert p.operation("nope") is None
    assert [lc.line for lc in p.lines_of("f3@a.c")] == [3]


_metric_vals = st.dictionaries(st.sampled_from(["cpu_time_s", "samples"]),
                               st.floats(min_value=0, max_value=1e6, allow_nan=False), max_size=2)
_ops = st.lists(st.builds(Operation, id=st.text(min_size=1, max_size=8), name=st.text(max_size=5),
                          kind=st.sampled_from(["function", "kernel"]), module=st.text(max_size=5),
                          file=st.none() | st.text(max_size=5), self_metrics=_metric_vals,
                          inclusive_metrics=_metric_vals), max_size=6, unique_by=lambda o: o.id)


@settings(max_examples=60, deadline=None)
@given(_ops, st.randoms(use_true_random=False))
def test_roundtrip_and_order_independence(ops, rnd):
    p = _profile(ops)
    enc = encode_profile(p)
    assert encode_profile(decode_profile(enc)) == enc
    shuffled = ops[:]
    rnd.shuffle(shuffled)
    assert encode_profile(_profile(shuffled)) == enc


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_decode_never_crashes_on_bad_bytes(data):
    try:
        decode_profile(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
