"""A FAKE kernel-profile runner for tests only: no GPU, deterministic numbers.

Registered only by tests, through `pw.kernel_profile.registry.install`; product code never names
it. It runs in the real worker process and its results take the real event path, so the tests
exercise everything but CUDA. `behavior` picks a failure to provoke: "ok", "error" (the runner
raises), "crash" (the worker process dies mid-spec), "unencodable" (a result that is not plain data).
"""

from __future__ import annotations

import os
from typing import Annotated, Literal

import msgspec

from ledger.kernel_events import SampleStats, Telemetry
from pw.kernel_profile.protocol import Measurement
from pw.kernel_profile.registry import COMMON_PROVENANCE, Entry, one_gpu


class FakeArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rows: Annotated[int, msgspec.Meta(gt=0)]
    cols: Annotated[int, msgspec.Meta(gt=0)]
    dtype: Literal["bf16", "fp16", "fp32"]
    behavior: Literal["ok", "error", "crash", "unencodable"] = "ok"


def fake_runner(ctx, *, rows: int, cols: int, dtype: str, behavior: str) -> Measurement:
    if behavior == "crash":
        os._exit(3)
    if behavior == "error":
        raise RuntimeError("fake runner asked to fail")
    t_ms = rows * cols * 1e-6 + (0.5 if dtype == "fp32" else 0.25)
    stats = SampleStats(n=10, median_ms=t_ms, mean_ms=t_ms, q1_ms=t_ms, q3_ms=t_ms, rel_stdev=0.0,
                        gpu_time_s=t_ms * 10 / 1e3, stop_reason="converged")
    prov = {f: "fake" for f in COMMON_PROVENANCE}
    if behavior == "unencodable":
        prov["torch"] = object()  # what a runner returning a library object instead of text does
    prov["worker_gpus"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    counter = os.environ.get("PW_FAKE_RUN_LOG")
    if counter:  # lets a test see how many specs were really measured
        with open(counter, "a") as f:
            f.write(f"{rows},{cols},{dtype}\n")
    return Measurement(metrics={"time_ms": t_ms, "tflops": 1.0, "memory_bandwidth_gbps": 2.0, "energy_j": 0.1},
                       stats=stats, telemetry=Telemetry(sm_clock_mhz=1980.0, samples=1), provenance=prov,
                       device_name="Fake GPU")


FAKE_ENTRY = Entry("fake_matrix", "fake", "compute", FakeArgs, "tests.kernel_profile_fake:fake_runner",
                   "none (test fake)", one_gpu, "fake-1", "FAKE: deterministic numbers for tests; never a product row")
