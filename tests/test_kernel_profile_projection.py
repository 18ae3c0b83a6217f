"""The cache ledger -> profile.db projection: last write wins, pure fold, deterministic bytes."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import Note
from ledger.kernel_events import KernelMeasured, KernelMeasurementFailed, SampleStats, Telemetry
from projections import kernel_profile_db, materialize_kernel_profile
from tests.conftest import deterministic_ledger


def measured(m: int, t: float, gpu: str = "H200") -> KernelMeasured:
    return KernelMeasured(
        table="single_gemm", backend="torch", gpu_name=gpu, arg_names=["m", "n", "k", "dtype"],
        arg_values=[m, 64, 64, "bf16"], metrics={"time_ms": t, "tflops": 1.0, "memory_bandwidth_gbps": 2.0,
                                                  "energy_j": 0.5},
        stats=SampleStats(n=10, median_ms=t, mean_ms=t, q1_ms=t, q3_ms=t, rel_stdev=0.001, gpu_time_s=0.5,
                          stop_reason="converged", statistic="mean", rel_ci_half_width=0.004),
        telemetry=Telemetry(sm_clock_mhz=1980.0, throttle_mask=4, samples=3),
        provenance={"torch": "2.11", "algorithm": "cublas"}, profiler_revision="torch-cupti-2")


def test_last_measurement_of_a_key_wins_and_failures_are_not_rows(tmp_path):
    led = deterministic_ledger(tmp_path / "profile.ledger.jsonl")
    led.append([measured(1, 1.0), measured(2, 2.0)], expected_seq=None)
    led.append(KernelMeasurementFailed(table="single_gemm", backend="torch", gpu_name="H200",
                                       arg_names=["m", "n", "k", "dtype"], arg_values=[3, 64, 64, "bf16"],
                                       error="runner_error", message="x"), expected_seq=None)
    led.append([measured(1, 1.5), Note(text="kept for audit")], expected_seq=None)
    state = kernel_profile_db.fold(led.events())
    rows = state.tables["single_gemm"].rows
    assert {k: r.event.metrics["time_ms"] for k, r in rows.items()} == {
        ("H200", "torch", 1, 64, 64, "bf16"): 1.5, ("H200", "torch", 2, 64, 64, "bf16"): 2.0}
    assert len(state.failures) == 1 and state.head_seq == 5
    db = tmp_path / "profile.db"
    materialize_kernel_profile.write(db, state)
    with sqlite3.connect(db) as con:
        got = con.execute("SELECT m, time_ms, stop_reason, throttle_mask, ledger_seq FROM single_gemm ORDER BY m").fetchall()
        assert got == [(1, 1.5, "converged", 4, 4), (2, 2.0, "converged", 4, 2)]
        schema = con.execute("SELECT sql FROM sqlite_master WHERE name='single_gemm'").fetchone()[0]
        assert 'UNIQUE(gpu_name, backend, "m", "n", "k", "dtype")' in schema
    assert materialize_kernel_profile.head_of(db) == (state.head_seq, state.head_hash)


def test_an_arg_named_like_a_row_column_is_refused(tmp_path):
    from projections.kernel_profile_db import TableRows

    try:
        materialize_kernel_profile.table_sql("t", TableRows(arg_names=("m", "power_w")))
    except ValueError as exc:
        assert "power_w" in str(exc)
    else:
        raise AssertionError("a clashing arg name was accepted")


def test_foreign_event_is_refused(tmp_path):
    from tests.conftest import make_run_started

    led = deterministic_ledger(tmp_path / "l.jsonl")
    led.append(make_run_started(), expected_seq=0)
    try:
        kernel_profile_db.fold(led.events())
    except ValueError as exc:
        assert "does not belong" in str(exc)
    else:
        raise AssertionError("a run event folded into a kernel cache")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.floats(0.01, 10), st.sampled_from(["H200", "H100-SXM"])),
                min_size=1, max_size=12))
def test_rebuild_is_byte_identical_and_independent_of_db_history(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("kp")
    led = deterministic_ledger(tmp / "profile.ledger.jsonl")
    for m, t, gpu in ops:
        led.append(measured(m, t, gpu), expected_seq=None)
    state = kernel_profile_db.fold(led.events())
    a, b = tmp / "a.db", tmp / "b.db"
    materialize_kernel_profile.write(a, state)
    materialize_kernel_profile.write(b, kernel_profile_db.fold(led.events()))
    materialize_kernel_profile.write(b, state)  # overwriting an existing file changes nothing either
    assert a.read_bytes() == b.read_bytes()
    with sqlite3.connect(a) as con:
        assert con.execute("SELECT count(*) FROM single_gemm").fetchone()[0] == len({(m, g) for m, _, g in ops})


def test_incomplete_provenance_is_unverified_in_count_missing_and_query(tmp_path):
    from pw.kernel_profile import registry, service
    from pw.kernel_profile.cache import Cache

    entry = registry.lookup("single_gemm", "torch")
    full = {f: "x" for f in entry.provenance_fields}
    cache = Cache(tmp_path / "profile.db")
    a, b = measured(1, 1.0), measured(2, 1.0)
    import msgspec

    a = msgspec.structs.replace(a, provenance=full)
    b = msgspec.structs.replace(b, provenance={**full, "driver": ""})
    cache.append([a, b])
    specs = [entry.args(m=1, n=64, k=64, dtype="bf16"), entry.args(m=2, n=64, k=64, dtype="bf16"),
             entry.args(m=3, n=64, k=64, dtype="bf16")]
    gpu = service.GpuKey("H200", "argument")
    counted = service.count_missing(entry, specs, gpu, cache)
    assert (counted["missing_count"], counted["absent_count"], counted["unverified_count"]) == (2, 1, 1)
    body = service.query(entry, specs, gpu, cache)
    assert [r["status"] for r in body["results"]] == ["ok", "unverified", "missing"]
    assert body["results"][1]["unverified_reason"] == "provenance lacks driver"
