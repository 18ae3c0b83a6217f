"""A FAKE kernel-profile runner for tests only: no GPU, deterministic numbers.

Registered only by tests, through `pw.kernel_profile.registry.install`; product code never names
it. It runs in the real worker process and its results take the real event path, so the tests
exercise everything but CUDA. `behavior` picks a failure to provoke: "ok", "error" (the runner
raises), "crash" (the worker process dies mid-spec), "unencodable" (a result that is not plain data),
"nan" (a NaN metric), or "autotune" (the runner tunes through the worker's autotune cache, keyed
like the Triton runner: cols and rows rounded up to a power of two; tuning sleeps
PW_FAKE_TUNE_S, default 0.3 s, and logs "tune,<key>" in PW_FAKE_RUN_LOG).
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Literal

import msgspec

from ledger.kernel_events import SampleStats, Telemetry
from pw.kernel_profile.autotune_cache import Tuned
from pw.kernel_profile.protocol import Measurement
from pw.kernel_profile.registry import COMMON_PROVENANCE, INT64_MAX, Entry, one_gpu


class FakeArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rows: Annotated[int, msgspec.Meta(gt=0, le=INT64_MAX)]
    cols: Annotated[int, msgspec.Meta(gt=0, le=INT64_MAX)]
    dtype: Literal["bf16", "fp16", "fp32"]
    behavior: Literal["ok", "error", "crash", "unencodable", "nan", "autotune"] = "ok"


def _log(line: str) -> None:
    counter = os.environ.get("PW_FAKE_RUN_LOG")
    if counter:  # lets a test see how many specs were really measured (or tuned)
        with open(counter, "a") as f:
            f.write(line + "\n")


def _hold() -> None:
    """PW_FAKE_SLEEP_S: seconds each spec takes (a fill's wall time that is not the runner's own
    CPU); PW_FAKE_GATE: a file each spec waits for (at most 120 s), so a test can act on a job
    whose tasks have started and not finished (scancel one, store a conflicting row)."""
    gate = os.environ.get("PW_FAKE_GATE")
    if gate:
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
    time.sleep(float(os.environ.get("PW_FAKE_SLEEP_S", "0")))


def fake_runner(ctx, *, rows: int, cols: int, dtype: str, behavior: str) -> Measurement:
    if behavior == "crash":
        os._exit(3)
    if behavior == "error":
        raise RuntimeError("fake runner asked to fail")
    t_ms = rows * cols * 1e-6 + (0.5 if dtype == "fp32" else 0.25)
    stats = SampleStats(n=10, median_ms=t_ms, mean_ms=t_ms, q1_ms=t_ms, q3_ms=t_ms, rel_stdev=0.0,
                        gpu_time_s=t_ms * 10 / 1e3, stop_reason="converged", statistic="mean",
                        rel_ci_half_width=0.001, ci_low_ms=t_ms * 0.999, ci_high_ms=t_ms * 1.001,
                        ci_method="fake", stop_rule="fake")
    prov = {f: "fake" for f in COMMON_PROVENANCE}
    if behavior == "unencodable":
        prov["torch"] = object()  # what a runner returning a library object instead of text does
    if behavior == "autotune":
        bucket = 1 << max(0, (rows - 1).bit_length())

        def tune() -> Tuned:
            _log(f"tune,{bucket},{cols},{dtype}")
            time.sleep(float(os.environ.get("PW_FAKE_TUNE_S", "0.3")))
            return Tuned({"BLOCK": 64 if cols > 8 else 32}, 2, {"BLOCK=32": 1.0, "BLOCK=64": None})

        tuning = ctx.autotune.get("fake_kernel/1", {"ROWS_BUCKET": bucket, "COLS": cols, "dtype": dtype}, "FAKE",
                                  {"fake": os.environ.get("PW_FAKE_LIBRARY_VERSION", "1")}, tune)
        prov.update(tuning.provenance())
    prov["worker_gpus"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    _hold()
    _log(f"{rows},{cols},{dtype}")
    metrics = {"time_ms": t_ms, "tflops": 1.0, "memory_bandwidth_gbps": 2.0, "energy_j": 0.1}
    if behavior == "nan":
        metrics["tflops"] = float("nan")
    return Measurement(metrics=metrics, stats=stats, telemetry=Telemetry(sm_clock_mhz=1980.0, samples=1),
                       provenance=prov, device_name="Fake GPU")


def fake_bytes(args: FakeArgs) -> int:
    return args.rows * args.cols * 4


FAKE_ENTRY = Entry("fake_matrix", "fake", "compute", FakeArgs, "tests.kernel_profile_fake:fake_runner",
                   "none (test fake)", one_gpu, "fake-1", "FAKE: deterministic numbers for tests; never a product row",
                   device_bytes=fake_bytes)


if __name__ == "__main__":  # `python -m tests.kernel_profile_fake kernel-profile ...`: the CLI with the fake
    import sys

    from pw.cli import main
    from pw.kernel_profile import registry

    registry.install(FAKE_ENTRY)
    sys.exit(main(sys.argv[1:]))
