"""The shared path of every compute runner: untimed setup and check, CUPTI timing, NVML energy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pw.kernel_profile.protocol import Measurement
from pw.kernel_profile.runners.context import Context

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class Invocation:
    fn: Callable[[], object]  # the production public callable, inputs bound; nothing else inside
    flops: float
    bytes_moved: float
    provenance: dict[str, str]  # algorithm, layout, numerics, input_construction
    check: Callable[[], None] | None = None  # raises on a wrong result; never timed


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def library_provenance(ctx: Context) -> dict[str, str]:
    import torch

    from pw.kernel_profile import nvml

    return {
        "torch": str(torch.__version__),
        "cuda": str(torch.version.cuda),
        "driver": nvml.driver_version(),
        "cudnn": str(torch.backends.cudnn.version()),
    }


def measure(ctx: Context, inv: Invocation) -> Measurement:
    import torch

    from pw.kernel_profile import nvml
    from pw.kernel_profile.timing import Timer, sample_stats, telemetry_of

    s = ctx.settings
    timer = ctx.cache.get("timer")
    if timer is None:
        timer = ctx.cache["timer"] = Timer(s, ctx.nvml_indices[0])
    if inv.check is not None:
        inv.check()
    call = timer.prepare(inv.fn)
    per_call, per_flush, names = timer.calibrate(call)
    with nvml.Sampler(ctx.nvml_indices[0], hz=20) as sampler:
        ns, reason, _ = timer.samples(call, per_call, per_flush)
    stats = sample_stats(ns, reason, s)
    energy = timer.energy_j(call, stats.mean_ms / 1e3, sampler)
    t_s = stats.mean_ms / 1e3  # the reported time: the mean launch, whose interval the rule bounded
    prov = {
        **inv.provenance,
        **library_provenance(ctx),
        "timer": (f"cupti-kineto sum of {per_call} kernel(s)/invocation; "
                  f"l2={'cold' if s.clear_l2 else 'warm'}; graph={'on' if s.cuda_graph else 'off'}"),
        "kernels": " | ".join(sorted(set(names))),
    }
    return Measurement(
        metrics={"time_ms": stats.mean_ms, "tflops": inv.flops / t_s / 1e12,
                 "memory_bandwidth_gbps": inv.bytes_moved / t_s / 1e9, "energy_j": energy},
        stats=stats, telemetry=telemetry_of(sampler.rows, nvml.power_limit_w(ctx.nvml_indices[0])), provenance=prov,
        device_name=torch.cuda.get_device_name(),
    )
