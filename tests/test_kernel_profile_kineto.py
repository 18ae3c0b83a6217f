"""The Kineto reader and the per-invocation sum, on hand-checked records and on a real window
recorded on an H200 (tests/data/kernel-profile-h200/kineto_raw.json, when present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.gpu_activity import KernelActivity
from pw.kernel_profile import kineto

DATA = Path(__file__).parent / "data" / "kernel-profile-h200"


def raw(name, start, dur, device_type="DeviceType.CUDA", annotation=False):
    return {"name": name, "device_type": device_type, "device_index": 0, "stream": 7, "correlation_id": start,
            "start_ns": start, "duration_ns": dur, "user_annotation": annotation}


def test_reader_keeps_kernels_only_in_gpu_order():
    events = [raw("gemm", 300, 50), raw("cudaLaunchKernel", 90, 5, "DeviceType.CPU"), raw("fill", 100, 20),
              raw("Memcpy HtoD (Pageable -> Device)", 10, 4), raw("my_range", 0, 999, annotation=True)]
    got = kineto.kernels_from_raw(events)
    assert [k.name for k in got] == ["fill", "gemm"]
    assert got[1] == KernelActivity(name="gemm", start_ns=300, end_ns=350, stream=7, correlation_id=300)


def test_per_invocation_sums_the_invocation_and_excludes_the_flush():
    recs = []
    t = 0
    for i in range(3):
        for name, dur in (("flush", 40), ("a", 10 + i), ("b", 5)):
            recs.append(KernelActivity(name=name, start_ns=t, end_ns=t + dur))
            t += 100
    assert kineto.per_invocation(recs, per_call=2, separator=1, n=3) == [15, 16, 17]


def test_an_unstable_launch_sequence_is_an_error():
    recs = [KernelActivity(name="x", start_ns=i, end_ns=i + 1) for i in range(5)]
    with pytest.raises(ValueError, match="not stable"):
        kineto.per_invocation(recs, per_call=1, separator=1, n=3)


def test_name_filter_drops_foreign_kernels():
    recs = [KernelActivity(name=n, start_ns=i * 10, end_ns=i * 10 + 3) for i, n in enumerate(["f", "x", "g", "f", "g"])]
    assert kineto.per_invocation(recs, per_call=1, separator=1, n=2, names={"f", "g"}) == [3, 3]


@pytest.mark.skipif(not (DATA / "kineto_raw.json").exists(), reason="no recorded H200 Kineto window")
def test_recorded_h200_window_splits_into_three_gemms():
    doc = json.loads((DATA / "kineto_raw.json").read_text())
    recs = kineto.kernels_from_raw(doc["events"])
    # The recorded window: 3 x [zero_() of a 256 MiB buffer, one 1024^3 bf16 matmul].
    assert len(recs) == 6
    fills = [r for r in recs[0::2]]
    gemms = [r for r in recs[1::2]]
    assert all("Fill" in r.name for r in fills) and all("Fill" not in r.name for r in gemms)
    per = kineto.per_invocation(recs, per_call=1, separator=1, n=3)
    assert per == [g.end_ns - g.start_ns for g in gemms]
    # A 1024^3 bf16 GEMM (2.1 GFLOP) on an H200 takes a few microseconds, not ms or ns.
    assert all(2_000 < p < 100_000 for p in per)
