"""The measure diagnostic, inside a worker: one continuous CUPTI window of `duration_s` recording
every launch, NVML telemetry on a background thread, and the files of `pw kernel-profile measure`.

Nothing here touches the cache. The summed-per-invocation times use the same reader and the same
flush exclusion as the cache's timer; with --no-clear-l2 the launches run back to back (warm L2),
which is what surfaces sustained power and clock drift.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from ledger.kernel_events import SampleStats, Telemetry
from pw.kernel_profile import kineto
from pw.kernel_profile.protocol import Job, Measurement
from pw.kernel_profile.runners.context import Context


def run_window(ctx: Context, inv, job: Job) -> Measurement:
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    from pw.kernel_profile import nvml
    from pw.kernel_profile.runners.compute import library_provenance
    from pw.kernel_profile.timing import Timer, sample_stats, telemetry_of

    out = Path(job.measure_dir)
    s = ctx.settings
    timer = Timer(s, ctx.nvml_indices[0])
    if inv.check is not None:
        inv.check()
    call = timer.prepare(inv.fn)
    per_call, per_flush, names = timer.calibrate(call)
    flush = timer.flush_buf is not None
    launches = 0
    with nvml.Sampler(ctx.nvml_indices[0], hz=job.telemetry_hz) as sampler:
        torch.cuda.synchronize()
        e0 = sampler.energy_mj()
        t0 = time.monotonic()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            while time.monotonic() - t0 < job.duration_s:
                for _ in range(64):  # check the clock every 64 launches, not every one
                    if flush:
                        timer.flush()
                    call()
                launches += 64
            torch.cuda.synchronize()
        window_s = time.monotonic() - t0
        e1 = sampler.energy_mj()
    recs = [r for r in kineto.kernels(prof) if r.name in timer.names]
    ns = kineto.per_invocation(recs, per_call=per_call, separator=per_flush if flush else 0, n=launches)
    step = per_call + (per_flush if flush else 0)
    starts = [recs[i * step + (per_flush if flush else 0)].start_ns for i in range(launches)]
    base = starts[0]
    with open(out / "runtimes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["launch", "t_s", "duration_ns"])
        for i, (st, d) in enumerate(zip(starts, ns)):
            w.writerow([i, f"{(st - base) / 1e9:.6f}", d])
    with open(out / "telemetry.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(nvml.Sampler.FIELDS)
        w.writerows(sampler.rows)
    stats: SampleStats = sample_stats(ns, "fixed", s)
    tel: Telemetry = telemetry_of(sampler.rows, nvml.power_limit_w(ctx.nvml_indices[0]))
    a = np.asarray(ns, dtype=np.float64) / 1e6
    tenth = max(1, len(a) // 10)
    plots = _plots(out, starts, ns, sampler.rows)
    summary = {
        "kernels_per_invocation": per_call, "flush_kernels_excluded": per_flush if flush else 0,
        "kernel_names": sorted(set(names)), "launches": launches, "window_s": round(window_s, 4),
        "clear_l2": s.clear_l2, "cuda_graph": s.cuda_graph,
        "stats": {f: getattr(stats, f) for f in stats.__struct_fields__},
        "drift": {"first_tenth_median_ms": float(np.median(a[:tenth])),
                  "last_tenth_median_ms": float(np.median(a[-tenth:]))},
        "telemetry": {f: getattr(tel, f) for f in tel.__struct_fields__},
        "telemetry_hz": job.telemetry_hz,
        # The window's energy includes the flush kernels when L2 is cleared; per invocation it is
        # an upper bound then, exact with --no-clear-l2.
        "energy_j_per_launch": (e1 - e0) / 1000.0 / launches, "energy_includes_flush": flush,
        "plots": plots, "device_name": torch.cuda.get_device_name(), **library_provenance(ctx),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    t_s = stats.mean_ms / 1e3
    return Measurement(metrics={"time_ms": stats.mean_ms, "tflops": inv.flops / t_s / 1e12,
                                "memory_bandwidth_gbps": inv.bytes_moved / t_s / 1e9,
                                "energy_j": summary["energy_j_per_launch"]},
                       stats=stats, telemetry=tel, provenance=inv.provenance,
                       device_name=summary["device_name"])


def _plots(out: Path, starts: list[int], ns: list[int], rows: list[tuple]) -> dict:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {"runtime.png": "skipped: matplotlib not installed", "telemetry.png": "skipped: matplotlib not installed"}
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot([(s - starts[0]) / 1e9 for s in starts], [d / 1e3 for d in ns], ",", alpha=0.6)
    ax.set_xlabel("time in window (s)")
    ax.set_ylabel("invocation (us, CUPTI)")
    fig.tight_layout()
    fig.savefig(out / "runtime.png", dpi=100)
    plt.close(fig)
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    t = [r[0] for r in rows]
    for ax, col, label in zip(axes, (1, 2, 6), ("power (W)", "SM clock (MHz)", "temperature (C)")):
        ax.plot(t, [r[col] for r in rows])
        ax.set_ylabel(label)
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out / "telemetry.png", dpi=100)
    plt.close(fig)
    return {"runtime.png": "written", "telemetry.png": "written"}
