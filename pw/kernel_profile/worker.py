"""One worker process: one GPU (or one group of GPUs), its own CUDA_VISIBLE_DEVICES, many specs.

Reads a `Job` on stdin and prints one JSON line per event on stdout: `started` before a spec, then
`done` or `failed`. The parent learns from the last `started` without an answer which spec a dying
worker was measuring, so a crash fails that spec alone. The runner module is imported here, never
in the parent.
"""

from __future__ import annotations

import importlib
import math
import sys
import time
import traceback

import msgspec

from pw.kernel_profile import diagnostic
from pw.kernel_profile.autotune_cache import AutotuneCache
from pw.kernel_profile.protocol import Done, Failed, Job, Measurement, Started
from pw.kernel_profile.runners import compute
from pw.kernel_profile.runners.compute import Invocation
from pw.kernel_profile.runners.context import Context

_enc = msgspec.json.Encoder()


def _emit(line) -> None:
    sys.stdout.buffer.write(_enc.encode(line) + b"\n")
    sys.stdout.buffer.flush()


def not_finite(m: Measurement) -> str | None:
    """The first metric or statistic that is NaN or infinite ("time_ms=nan"), or None."""
    numbers = [(f"metrics.{k}", v) for k, v in m.metrics.items()]
    numbers += [(f"stats.{f}", getattr(m.stats, f)) for f in m.stats.__struct_fields__]
    numbers += [(f"telemetry.{f}", getattr(m.telemetry, f)) for f in m.telemetry.__struct_fields__]
    for name, v in numbers:
        if isinstance(v, float) and not math.isfinite(v):
            return f"{name}={v}"
    return None


def main() -> int:
    job = msgspec.json.decode(sys.stdin.buffer.read(), type=Job)
    module, func = job.runner.split(":")
    try:
        runner = getattr(importlib.import_module(module), func)
    except Exception as exc:  # an unusable environment fails every spec, visibly
        for spec in job.specs:
            _emit(Failed(spec.index, "unavailable", f"runner {job.runner} not importable: {exc}"))
        return 0
    ctx = Context(settings=job.settings, nvml_indices=job.nvml_indices or [0],
                  autotune=AutotuneCache(job.autotune_dir or None, store=job.autotune_store))
    for spec in job.specs:
        _emit(Started(spec.index))
        t0 = time.monotonic()
        try:
            m = runner(ctx, **spec.args)
            if isinstance(m, Invocation):
                m = diagnostic.run_window(ctx, m, job) if job.mode == "measure" else compute.measure(ctx, m)
            elif job.mode == "measure":
                raise RuntimeError(f"{job.table}/{job.backend} is not timed through the CUPTI timer: measure refuses it")
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
            _emit(Failed(spec.index, "runner_error", f"{type(exc).__name__}: {exc}{where}"))
            continue
        try:
            line = _enc.encode(Done(spec.index, m, round(time.monotonic() - t0, 4)))
        except (TypeError, msgspec.ValidationError) as exc:  # a runner returned something not plain data
            _emit(Failed(spec.index, "runner_error", f"result not encodable: {exc}"))
            continue
        bad = not_finite(m) if isinstance(m, Measurement) else None
        if bad:  # JSON has no NaN: it would reach the ledger as null and fail the whole batch's append
            _emit(Failed(spec.index, "not_finite", f"result not finite: {bad}"))
            continue
        sys.stdout.buffer.write(line + b"\n")
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
