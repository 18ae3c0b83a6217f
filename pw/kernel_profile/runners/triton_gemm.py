"""single_gemm through a Triton kernel autotuned with `triton.autotune`, its tuning kept in the
database's autotune cache (`pw/kernel_profile/autotune_cache.py`) so that no worker and no later
run tunes the same key again.

The shape key is (M rounded up to a power of two, N, K, dtype), as serving-time autotuners key on
a bucket of batch sizes: one tuning serves every M of its bucket. Tuning (compiling and
benchmarking every config, done by Triton's own autotuner) happens before the CUPTI window; the
timed callable is the JIT kernel launched with the chosen config, the same launch whether the
config was tuned in this process or read from the cache. Imported only inside a worker.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from pw.kernel_profile.autotune_cache import Tuned, config_text
from pw.kernel_profile.runners.compute import Invocation
from pw.kernel_profile.runners.context import Context

KERNEL_ID = "pw.triton_gemm/1"  # bump with the kernel's source or its config list
TILE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")
LAUNCH_KEYS = ("num_warps", "num_stages", "num_ctas")


def _config(bm: int, bn: int, bk: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps,
                         num_stages=stages)


# Tiles a Hopper SM can hold (shared memory per stage x stages under 228 KiB), large and small.
CONFIGS = [
    _config(128, 256, 64, 8, 3),
    _config(256, 128, 64, 8, 3),
    _config(128, 128, 64, 8, 4),
    _config(128, 128, 64, 4, 4),
    _config(64, 256, 64, 4, 4),
    _config(128, 64, 64, 4, 4),
]


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            M_BUCKET, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B, fp32 accumulation; programs walk tiles in groups of GROUP_M rows for L2 reuse.
    M_BUCKET only keys the autotuner."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_m[:, None] * stride_cm + out_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(out_m[:, None] < M) & (out_n[None, :] < N))


_autotuned = triton.autotune(configs=CONFIGS, key=["M_BUCKET", "N", "K"])(_matmul)


def m_bucket(m: int) -> int:
    return 1 << max(0, (m - 1).bit_length())


def _grid(m: int, n: int):
    return lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)


def _config_dict(cfg: triton.Config) -> dict[str, int]:
    out = {k: int(cfg.kwargs[k]) for k in TILE_KEYS}
    out.update({k: int(getattr(cfg, k)) for k in LAUNCH_KEYS})
    return out


def versions() -> dict[str, str]:
    import torch

    from pw.kernel_profile import nvml

    return {"triton": triton.__version__, "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
            "driver": nvml.driver_version()}


def single_gemm(ctx: Context, *, m: int, n: int, k: int, dtype: str):
    import torch

    from pw.kernel_profile import nvml
    from pw.kernel_profile.runners.torch_ops import gemm_inputs

    a, b, c = gemm_inputs(m, n, k, dtype)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            m_bucket(m))
    grid = _grid(m, n)

    def tune() -> Tuned:
        _autotuned[grid](*args)  # Triton compiles and benchmarks every config, keeps the fastest
        torch.cuda.synchronize()
        timings = {config_text(_config_dict(cfg)): (float(t[0]) if math.isfinite(t[0]) else None)
                   for cfg, t in getattr(_autotuned, "configs_timings", {}).items()}  # None: did not run
        return Tuned(_config_dict(_autotuned.best_config), len(CONFIGS), timings)

    gpu = nvml.normalize_gpu_name(torch.cuda.get_device_name())
    tuning = ctx.autotune.get(KERNEL_ID, {"M_BUCKET": m_bucket(m), "N": n, "K": k, "dtype": dtype}, gpu,
                              versions(), tune)
    chosen = dict(tuning.entry.config)
    launch = {k: chosen.pop(k) for k in LAUNCH_KEYS}

    def fn():
        _matmul[grid](*args, **chosen, **launch)

    def check():
        # The timed launch itself, against an fp64 oracle on its first and last 64 x 64 blocks (the
        # last one crosses the partial tiles at the edges, where a wrong mask shows).
        c.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        rows, cols = min(m, 64), min(n, 64)
        for rs, cs in ((slice(0, rows), slice(0, cols)), (slice(m - rows, m), slice(n - cols, n))):
            ref = a[rs].double() @ b[:, cs].double()
            err = ((c[rs, cs].double() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
            if not err <= 2e-2:  # NaN (an unwritten element) fails too
                raise RuntimeError(f"triton single_gemm check failed: relative error {err:.3g} > 0.02")

    es = a.element_size()
    return Invocation(
        fn=fn, flops=2.0 * m * n * k, bytes_moved=float((m * k + k * n + m * n) * es),
        provenance={"algorithm": f"Triton tiled matmul ({KERNEL_ID}), grouped tile order, fp32 accumulate",
                    "layout": "A row-major m x k, B row-major k x n, C row-major m x n",
                    "numerics": f"{dtype} inputs/outputs, fp32 accumulate (tl.dot)",
                    "input_construction": "torch.randn, cuda Generator seed 0", "triton": triton.__version__,
                    **tuning.provenance()},
        check=check)
