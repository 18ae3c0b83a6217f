"""Torch compute runners: each builds its inputs (seeded, before any timing) and returns the
`Invocation` to time; the worker times it (`runners/compute.py`) or runs the measure window."""

from __future__ import annotations

from pw.kernel_profile.runners.compute import Invocation, torch_dtype
from pw.kernel_profile.runners.context import Context


def _gen(seed: int):
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def gemm_inputs(m: int, n: int, k: int, dtype: str):
    """A (m x k) and B (k x n) drawn from torch.randn (cuda Generator seed 0), and C (m x n) empty."""
    import torch

    dt = torch_dtype(dtype)
    g = _gen(0)
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=dt, generator=g)
    return a, b, torch.empty(m, n, device="cuda", dtype=dt)


def single_gemm(ctx: Context, *, m: int, n: int, k: int, dtype: str):
    import torch

    a, b, out = gemm_inputs(m, n, k, dtype)

    def check():
        # An independent fp64 oracle on a corner block: catches a wrong layout or dtype path.
        r = min(m, 64)
        c = min(n, 64)
        ref = a[:r].double() @ b[:, :c].double()
        got = torch.matmul(a[:r], b[:, :c]).double()
        tol = 2e-2 if dtype != "fp32" else 1e-3
        err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
        if err > tol:
            raise RuntimeError(f"single_gemm check failed: relative error {err:.3g} > {tol}")

    es = a.element_size()
    return Invocation(
        fn=lambda: torch.matmul(a, b, out=out),
        flops=2.0 * m * n * k, bytes_moved=float((m * k + k * n + m * n) * es),
        provenance={"algorithm": "torch.matmul -> cuBLAS default heuristic", "layout": "A row-major m x k, "
                    "B row-major k x n, C row-major m x n", "numerics": f"{dtype} inputs/outputs, fp32 accumulate",
                    "input_construction": "torch.randn, cuda Generator seed 0"},
        check=check)


def rmsnorm(ctx: Context, *, tokens: int, hidden: int, dtype: str):
    import torch

    dt = torch_dtype(dtype)
    g = _gen(1)
    x = torch.randn(tokens, hidden, device="cuda", dtype=dt, generator=g)
    w = torch.randn(hidden, device="cuda", dtype=dt, generator=g)
    eps = 1e-6

    def check():
        ref = x[:8].double() * torch.rsqrt(x[:8].double().pow(2).mean(-1, keepdim=True) + eps) * w.double()
        got = torch.nn.functional.rms_norm(x[:8], (hidden,), w, eps).double()
        if ((got - ref).abs().max() / ref.abs().max()).item() > 2e-2:
            raise RuntimeError("rmsnorm check failed")

    es = x.element_size()
    return Invocation(
        fn=lambda: torch.nn.functional.rms_norm(x, (hidden,), w, eps),
        flops=4.0 * tokens * hidden, bytes_moved=float((2 * tokens * hidden + hidden) * es),
        provenance={"algorithm": "torch.nn.functional.rms_norm (all launched kernels summed)",
                    "layout": "x contiguous tokens x hidden, normalized over hidden",
                    "numerics": f"{dtype}, eps=1e-6", "input_construction": "torch.randn, cuda Generator seed 1"},
        check=check)


def attention(ctx: Context, *, batch: int, heads: int, seq_len: int, head_dim: int, causal: bool, dtype: str):
    import torch
    import torch.nn.functional as F

    dt = torch_dtype(dtype)
    g = _gen(2)
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dt, generator=g) for _ in range(3))

    def check():
        sl = slice(0, 1)
        ref = F.scaled_dot_product_attention(q[sl].float(), k[sl].float(), v[sl].float(), is_causal=causal)
        got = F.scaled_dot_product_attention(q[sl], k[sl], v[sl], is_causal=causal).float()
        if (got - ref).abs().max().item() > 5e-2:
            raise RuntimeError("attention check failed against the fp32 math path")

    flops = 4.0 * batch * heads * seq_len * seq_len * head_dim * (0.5 if causal else 1.0)
    return Invocation(
        fn=lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        flops=flops, bytes_moved=float(4 * batch * heads * seq_len * head_dim * q.element_size()),
        provenance={"algorithm": "torch SDPA forward, backend chosen by torch (all kernels summed)",
                    "layout": "q, k, v contiguous (batch, heads, seq_len, head_dim)",
                    "numerics": f"{dtype}, causal={causal}", "input_construction": "torch.randn, cuda Generator seed 2"},
        check=check)
