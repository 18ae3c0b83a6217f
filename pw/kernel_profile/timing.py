"""The timer inside a torch worker: CUPTI kernel records (read through Kineto) summed over one
logical invocation, under the stopping rule of the seed, plus the NVML energy window.

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
from pw.kernel_profile import kineto
from pw.kernel_profile.protocol import Settings

MAX_BATCH = 20_000  # invocations per profiler session (bounds Kineto's buffers)


def sample_stats(ns: list[int], stop_reason: str) -> SampleStats:
    """Median, mean, quartiles (numpy's linear interpolation) and the relative sample stdev."""
    a = np.asarray(ns, dtype=np.float64) / 1e6
    mean = float(a.mean())
    rel = float(a.std(ddof=1) / mean) if a.size > 1 and mean > 0 else math.inf
    q1, med, q3 = (float(x) for x in np.quantile(a, [0.25, 0.5, 0.75]))
    return SampleStats(n=int(a.size), median_ms=med, mean_ms=mean, q1_ms=q1, q3_ms=q3, rel_stdev=rel,
                       gpu_time_s=float(a.sum() / 1e3), stop_reason=stop_reason)  # type: ignore[arg-type]


def converged(ns: list[int], s: Settings) -> bool:
    if len(ns) < max(s.min_samples, 2) or sum(ns) / 1e9 < s.min_gpu_time_s:
        return False
    a = np.asarray(ns, dtype=np.float64)
    return float(a.std(ddof=1) / a.mean()) <= s.target_rel_stdev


def telemetry_of(rows: list[tuple]) -> Telemetry:
    """Median clocks, max temperature, mean power, OR of throttle bits; NaN readings ignored."""
    if not rows:
        return Telemetry()
    a = np.asarray([r[1:8] for r in rows], dtype=np.float64)

    def agg(fn, col):
        v = a[:, col][~np.isnan(a[:, col])]
        return float(fn(v)) if v.size else None

    mask = None
    for r in rows:
        if not math.isnan(r[7]):
            mask = (mask or 0) | int(r[7])
    return Telemetry(power_w=agg(np.mean, 0), sm_clock_mhz=agg(np.median, 1), mem_clock_mhz=agg(np.median, 2),
                     temperature_c=agg(np.max, 5), throttle_mask=mask, samples=len(rows))


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

    def samples(self, call: Callable[[], object], per_call: int, per_flush: int) -> tuple[list[int], str]:
        """Per-invocation ns, in batches, until the stopping rule holds or the timeout passes."""
        s = self.s
        ns: list[int] = []
        start = time.monotonic()
        batch = max(s.min_samples, 10)
        while True:
            recs = self._window(call, batch, self.flush_buf is not None)
            ns += kineto.per_invocation(recs, per_call=per_call, separator=per_flush if self.flush_buf is not None else 0,
                                        n=batch, names=self.names)
            if converged(ns, s):
                return ns, "converged"
            if time.monotonic() - start >= s.timeout_s:
                return ns, "timeout"
            mean_s = sum(ns) / len(ns) / 1e9
            need_s = max(s.min_gpu_time_s - sum(ns) / 1e9, s.min_gpu_time_s / 4)
            batch = int(min(MAX_BATCH, max(s.min_samples, math.ceil(need_s / max(mean_s, 1e-7)))))

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
