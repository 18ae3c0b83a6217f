"""all_reduce through torch.distributed (NCCL), one process per GPU, timed by CUPTI on every rank.

Bandwidths follow nccl-tests (doc/PERFORMANCE.md there): algbw = bytes / time; for all_reduce
busbw = algbw * 2 (n - 1) / n, the per-link load of a ring, comparable across GPU counts.
An invocation's time is the slowest rank's all_reduce kernel(s) for that invocation.
"""

from __future__ import annotations

import math
import os
import socket

from ledger.kernel_events import SampleStats
from pw.kernel_profile.protocol import Measurement, Settings
from pw.kernel_profile.runners.context import Context


def busbw_factor(num_gpus: int) -> float:
    return 2.0 * (num_gpus - 1) / num_gpus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, nbytes: int, dtype: str, settings: Settings,
          nvml_indices: list[int], queue) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from pw.kernel_profile import kineto, nvml, precision
    from pw.kernel_profile.runners.compute import torch_dtype
    from pw.kernel_profile.timing import converged

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    dt = torch_dtype(dtype)
    elems = nbytes // torch.empty(0, dtype=dt).element_size()
    x = torch.ones(elems, device="cuda", dtype=dt)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    # Correctness outside timing: a sum of ones over `world` ranks.
    y = torch.ones(min(elems, 1024), device="cuda", dtype=dt)
    dist.all_reduce(y)
    if not torch.all(y == world).item():
        raise RuntimeError("all_reduce check failed")

    def window(n: int) -> list:
        torch.cuda.synchronize()
        dist.barrier(device_ids=[rank])
        torch.cuda.synchronize()  # the barrier's own kernel finishes before the window opens
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                dist.all_reduce(x)
            torch.cuda.synchronize()
        return kineto.kernels(prof)

    per_call = len(window(1))
    ns: list[int] = []
    n = 20
    decision = torch.zeros(2, device="cuda", dtype=torch.float64)
    import time as _time

    start = _time.monotonic()
    reason = "timeout"
    while True:
        recs = window(n)
        mine = kineto.per_invocation(recs, per_call=per_call, separator=0, n=n)
        t = torch.tensor(mine, device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank bounds each invocation
        ns += [int(v) for v in t.tolist()]
        a = np.asarray(ns, dtype=np.float64)
        if rank == 0:  # the same rule as a compute row: the precision of the mean (timing.py)
            prec = precision.mean_interval(ns)
            done = converged(ns, prec, settings)
            late = _time.monotonic() - start >= settings.timeout_s
            need = max(settings.min_gpu_time_s - a.sum() / 1e9, 0.0) / max(a.mean() / 1e9, 1e-7)
            more = min(precision.samples_needed(len(ns), prec.rel_half_width, settings.target_rel_ci), len(ns))
            decision[0] = 1.0 if done else (2.0 if late else 0.0)
            decision[1] = min(20000, max(settings.min_samples, math.ceil(max(need, more))))
        dist.broadcast(decision, 0)
        if decision[0] > 0:
            reason = "converged" if decision[0] == 1.0 else "timeout"
            break
        n = int(decision[1])
    # Energy: every rank's NVML counter over the same back-to-back repetitions (>= energy window).
    mean_s = float(np.mean(ns)) / 1e9
    reps = max(1, math.ceil(settings.energy_window_s / max(mean_s, 1e-7)))
    with nvml.Sampler(nvml_indices[rank], hz=20) as sampler:
        torch.cuda.synchronize()
        dist.barrier(device_ids=[rank])
        e0 = sampler.energy_mj()
        t0 = _time.monotonic()
        for _ in range(reps):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        elapsed = _time.monotonic() - t0
        e1 = sampler.energy_mj()
    energy = torch.tensor([(e1 - e0) / 1000.0], device="cuda", dtype=torch.float64)
    dist.all_reduce(energy)
    if rank == 0:
        queue.put({"ns": ns, "reason": reason, "energy_j": float(energy.item()) / reps, "window_s": elapsed,
                   "rows": sampler.rows, "power_limit_w": nvml.power_limit_w(nvml_indices[rank]),
                   "per_call": per_call, "device_name": torch.cuda.get_device_name(),
                   "nccl": ".".join(map(str, torch.cuda.nccl.version()))})
    dist.destroy_process_group()


def all_reduce(ctx: Context, *, message_size_bytes: int, num_gpus: int, dtype: str) -> Measurement:
    import torch
    import torch.multiprocessing as mp

    from pw.kernel_profile.runners.compute import library_provenance
    from pw.kernel_profile.timing import sample_stats, telemetry_of

    if torch.cuda.device_count() < num_gpus:
        raise RuntimeError(f"all_reduce needs {num_gpus} visible GPUs, this worker sees {torch.cuda.device_count()}")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared hosts
    mp_ctx = mp.get_context("spawn")
    queue = mp_ctx.SimpleQueue()
    port = _free_port()
    procs = mp.start_processes(_rank, args=(num_gpus, port, message_size_bytes, dtype, ctx.settings,
                                            ctx.nvml_indices, queue), nprocs=num_gpus, join=False,
                               start_method="spawn")
    # Read before joining: rank 0 blocks on a full pipe until its answer is taken.
    got = None
    while got is None:
        if not queue.empty():
            got = queue.get()
        elif procs.join(timeout=0.2):
            if queue.empty():
                raise RuntimeError("all_reduce ranks exited without an answer")
    while not procs.join():
        pass
    stats: SampleStats = sample_stats(got["ns"], got["reason"], ctx.settings)
    t_s = stats.mean_ms / 1e3
    algbw = message_size_bytes / t_s / 1e9
    prov = {
        "algorithm": f"torch.distributed.all_reduce SUM, NCCL {got['nccl']} (its own algorithm choice)",
        "layout": f"one contiguous {dtype} tensor per rank, ranks on GPUs 0..{num_gpus - 1} of one host",
        "numerics": f"{dtype} sum", "input_construction": "torch.ones on every rank",
        "timer": f"cupti-kineto, max over ranks of {got['per_call']} kernel(s)/invocation, back-to-back",
        "nccl": got["nccl"], "nvls": os.environ.get("NCCL_NVLS_ENABLE", ""),
        **library_provenance(ctx),
    }
    return Measurement(
        metrics={"time_ms": stats.mean_ms, "algbw_gbps": algbw, "busbw_gbps": algbw * busbw_factor(num_gpus),
                 "message_size_bytes": float(message_size_bytes), "energy_j": got["energy_j"]},
        stats=stats, telemetry=telemetry_of(got["rows"], got["power_limit_w"]), provenance=prov,
        device_name=got["device_name"])
