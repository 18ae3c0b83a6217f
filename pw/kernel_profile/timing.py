"""The timer inside a torch worker: CUPTI kernel records (read through Kineto) summed over one
logical invocation, under the stopping rule, plus the NVML energy window.

The stopping rule bounds the precision of the reported time, not the spread of single launches:
sampling stops when the 95% interval of the mean launch time (batch means, `precision.py`) is
within `target_rel_ci` of it, with at least `min_samples` launches and `min_gpu_time_s` of summed
GPU time, or when `timeout_s` has passed. A row reports the mean (what a sum of launches costs) and
keeps the median, quartiles and per-launch spread beside it.

Runs only in a worker process with torch and a GPU. Everything that is not the invocation
(allocation, compilation, the correctness check, synchronization, the L2 flush) happens outside
the summed records: setup before the window, the flush's own kernels excluded by position.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ledger.kernel_events import SampleStats, Telemetry
from pw.kernel_profile import kineto, precision
from pw.kernel_profile.protocol import Settings

MAX_BATCH = 20_000  # invocations per profiler session (bounds Kineto's buffers)
# NVML clocks-event-reason bits that mean "held back by power": the software power cap (0x4) and
# the hardware power brake (0x80).
POWER_CAP_BITS = 0x4 | 0x80


def stop_rule(s: Settings) -> str:
    return (f"rel. 95% CI half-width of the mean <= {s.target_rel_ci:.2%} with >= {s.min_samples} launches "
            f"and >= {s.min_gpu_time_s:g} s GPU time, or {s.timeout_s:g} s timeout")


def converged(ns: list[int], prec: precision.Precision, s: Settings) -> bool:
    return (len(ns) >= max(s.min_samples, 2) and sum(ns) / 1e9 >= s.min_gpu_time_s
            and prec.rel_half_width <= s.target_rel_ci)


def sample_stats(ns: list[int], stop_reason: str, settings: Settings | None = None) -> SampleStats:
    """Mean (the reported time) with its batch-means interval, median, quartiles (numpy's linear
    interpolation) and the per-launch relative stdev."""
    a = np.asarray(ns, dtype=np.float64) / 1e6
    mean = float(a.mean())
    rel = float(a.std(ddof=1) / mean) if a.size > 1 and mean > 0 else math.inf
    q1, med, q3 = (float(x) for x in np.quantile(a, [0.25, 0.5, 0.75]))
    prec = precision.mean_interval(a)
    finite = math.isfinite(prec.half_width)
    return SampleStats(n=int(a.size), median_ms=med, mean_ms=mean, q1_ms=q1, q3_ms=q3, rel_stdev=rel,
                       gpu_time_s=float(a.sum() / 1e3), stop_reason=stop_reason,  # type: ignore[arg-type]
                       statistic="mean", rel_ci_half_width=prec.rel_half_width if finite else None,
                       ci_low_ms=prec.low if finite else None, ci_high_ms=prec.high if finite else None,
                       ci_method=prec.method,
                       lag1_autocorr=prec.lag1, stop_rule=stop_rule(settings) if settings else "")


def telemetry_of(rows: list[tuple], power_limit_w: float | None = None) -> Telemetry:
    """Median clocks and their range, max temperature, mean power against the enforced limit, OR of
    throttle bits and how often the power cap held the clock back; NaN readings ignored."""
    if not rows:
        return Telemetry(power_limit_w=power_limit_w)
    a = np.asarray([r[1:8] for r in rows], dtype=np.float64)

    def agg(fn, col):
        v = a[:, col][~np.isnan(a[:, col])]
        return float(fn(v)) if v.size else None

    mask = None
    capped = readings = 0
    for r in rows:
        if not math.isnan(r[7]):
            bits = int(r[7])
            mask = (mask or 0) | bits
            readings += 1
            capped += bool(bits & POWER_CAP_BITS)
    return Telemetry(power_w=agg(np.mean, 0), sm_clock_mhz=agg(np.median, 1), mem_clock_mhz=agg(np.median, 2),
                     temperature_c=agg(np.max, 5), throttle_mask=mask, samples=len(rows),
                     sm_clock_min_mhz=agg(np.min, 1), sm_clock_max_mhz=agg(np.max, 1), power_limit_w=power_limit_w,
                     power_capped=capped > 0 if readings else None,
                     power_cap_fraction=capped / readings if readings else None)


class Timer:
    """Times one callable on the current CUDA device."""

    def __init__(self, settings: Settings, nvml_index: int) -> None:
        import torch

        self.torch = torch
        self.s = settings
        self.nvml_index = nvml_index
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        # Twice the L2 written between launches evicts whatever the last invocation left there.
        self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda") if settings.clear_l2 else None

    def flush(self) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def prepare(self, fn: Callable[[], object]) -> Callable[[], object]:
        """Warm up (compilation, heuristics, workspace allocation) and, with cuda_graph, capture."""
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        if not self.s.cuda_graph:
            return fn
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
        return graph.replay

    def _window(self, call: Callable[[], object], n: int, flush: bool) -> list:
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                if flush:
                    self.flush()
                call()
            torch.cuda.synchronize()
        return kineto.kernels(prof)

    def calibrate(self, call: Callable[[], object]) -> tuple[int, int, list[str]]:
        """Kernels per invocation and per flush, and the invocation's kernel names."""
        per_call = self._window(call, 1, False)
        flush = self._window(lambda: None, 1, True) if self.flush_buf is not None else []
        if not per_call:
            raise RuntimeError("the invocation launched no kernel that CUPTI saw")
        self.names = {k.name for k in per_call} | {k.name for k in flush}
        return len(per_call), len(flush), [k.name for k in per_call]

    def samples(self, call: Callable[[], object], per_call: int,
                per_flush: int) -> tuple[list[int], str, precision.Precision]:
        """Per-invocation ns, in profiler windows, until the stopping rule holds or the timeout passes.

        Each next window is sized to reach what is still missing: the GPU time, or the launches the
        interval needs at the current spread (at most doubling the sample, since a short series'
        interval is itself noisy), and never much past the timeout.
        """
        s = self.s
        ns: list[int] = []
        start = time.monotonic()
        batch = max(s.min_samples, 10)
        flush = self.flush_buf is not None
        while True:
            t0 = time.monotonic()
            recs = self._window(call, batch, flush)
            wall_per = (time.monotonic() - t0) / batch
            ns += kineto.per_invocation(recs, per_call=per_call, separator=per_flush if flush else 0,
                                        n=batch, names=self.names)
            prec = precision.mean_interval(ns)
            if converged(ns, prec, s):
                return ns, "converged", prec
            elapsed = time.monotonic() - start
            if elapsed >= s.timeout_s:
                return ns, "timeout", prec
            mean_s = sum(ns) / len(ns) / 1e9
            for_time = (s.min_gpu_time_s - sum(ns) / 1e9) / max(mean_s, 1e-7)
            for_precision = min(precision.samples_needed(len(ns), prec.rel_half_width, s.target_rel_ci), len(ns))
            left = (s.timeout_s - elapsed) / max(wall_per, 1e-7)
            want = min(max(for_time, for_precision), left)
            batch = int(min(MAX_BATCH, max(s.min_samples, math.ceil(want))))

    def energy_j(self, call: Callable[[], object], est_s: float, sampler) -> float:
        """Joules per invocation from NVML's total-energy counter over back-to-back repetitions
        filling at least `energy_window_s` (the counter's resolution needs a long window)."""
        torch = self.torch
        reps = max(1, math.ceil(self.s.energy_window_s / max(est_s, 1e-7)))
        total_reps = 0
        torch.cuda.synchronize()
        e0 = sampler.energy_mj()
        t0 = time.monotonic()
        while True:
            for _ in range(reps):
                call()
            torch.cuda.synchronize()
            total_reps += reps
            if time.monotonic() - t0 >= self.s.energy_window_s:
                break
            reps = max(1, reps // 4)
        e1 = sampler.energy_mj()
        return (e1 - e0) / 1000.0 / total_reps
