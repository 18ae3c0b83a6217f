"""The registry: one entry per (table, backend).

An entry's args schema is a msgspec Struct whose field names are at once the runner's keyword
arguments, the table's key columns in declaration order and the keys a spec may carry. Nothing
else names them, so the three cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from ledger.errors import InputError

Dtype = Literal["bf16", "fp16", "fp32"]
# Every integer is bounded by what the runner and SQLite can hold: a tensor dimension by CUDA's and
# cuBLAS's 32-bit sizes, a byte count by SQLite's INTEGER (int64). A spec beyond a device's memory
# passes here and is refused before measuring (`Entry.device_bytes` against the device's memory).
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
Positive = Annotated[int, msgspec.Meta(gt=0, le=INT32_MAX)]
ByteCount = Annotated[int, msgspec.Meta(gt=0, le=INT64_MAX)]

COMPUTE_METRICS = ("time_ms", "tflops", "memory_bandwidth_gbps", "energy_j")
COMM_METRICS = ("time_ms", "algbw_gbps", "busbw_gbps", "message_size_bytes", "energy_j")

# What a row must record before a consumer may call it a hit (the seed's "row provenance").
COMMON_PROVENANCE = (
    "backend", "algorithm", "layout", "numerics", "shape", "gpu_name", "profiler_revision",
    "torch", "cuda", "driver", "input_construction", "timer",
)


class _Args(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every args schema."""


class SingleGemmArgs(_Args, frozen=True):
    m: Positive
    n: Positive
    k: Positive
    dtype: Dtype


class RmsNormArgs(_Args, frozen=True):
    tokens: Positive
    hidden: Positive
    dtype: Dtype


class AttentionArgs(_Args, frozen=True):
    batch: Positive
    heads: Positive
    seq_len: Positive
    head_dim: Positive
    causal: bool
    dtype: Dtype


class AllReduceArgs(_Args, frozen=True):
    message_size_bytes: ByteCount
    num_gpus: Annotated[int, msgspec.Meta(ge=2, le=INT32_MAX)]
    dtype: Dtype


class TritonGemmArgs(_Args, frozen=True):
    m: Positive
    n: Positive
    k: Positive
    dtype: Literal["bf16", "fp16"]  # the kernel's tl.dot runs 16-bit inputs with fp32 accumulation


def one_gpu(args: msgspec.Struct) -> int:
    return 1


def num_gpus_field(args: msgspec.Struct) -> int:
    return int(args.num_gpus)


_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def gemm_bytes(args) -> int:
    """A, B and C of one GEMM."""
    return (args.m * args.k + args.k * args.n + args.m * args.n) * _BYTES[args.dtype]


def rmsnorm_bytes(args) -> int:
    return (2 * args.tokens * args.hidden + args.hidden) * _BYTES[args.dtype]


def attention_bytes(args) -> int:
    """q, k, v and the output (flash kernels keep no seq_len x seq_len matrix)."""
    return 4 * args.batch * args.heads * args.seq_len * args.head_dim * _BYTES[args.dtype]


def all_reduce_bytes(args) -> int:
    return int(args.message_size_bytes)  # per rank, on each rank's own GPU


@dataclass(frozen=True)
class Entry:
    table: str
    backend: str
    kernel_kind: Literal["compute", "comm"]
    args: type[msgspec.Struct]
    runner: str  # "module:function", imported inside the worker only
    env: str  # the worker environment the runner needs
    gpu_count: Callable[[msgspec.Struct], int]
    profiler_revision: str
    description: str
    provenance_fields: tuple[str, ...] = COMMON_PROVENANCE
    device_bytes: Callable[[msgspec.Struct], int] | None = None  # device memory one spec needs, at least

    @property
    def metric_family(self) -> tuple[str, ...]:
        return COMM_METRICS if self.kernel_kind == "comm" else COMPUTE_METRICS

    @property
    def arg_names(self) -> tuple[str, ...]:
        return self.args.__struct_fields__

    def describe(self) -> dict:
        hints = msgspec.json.schema(self.args)
        props = hints["$defs"][self.args.__name__]["properties"] if "$defs" in hints else hints["properties"]
        return {
            "table": self.table,
            "backend": self.backend,
            "kernel_kind": self.kernel_kind,
            "args": [{"name": n, "schema": props[n]} for n in self.arg_names],
            "metric_family": list(self.metric_family),
            "env": self.env,
            "runner": self.runner,
            "gpu_count_fn": f"{self.gpu_count.__module__}:{self.gpu_count.__name__}",
            "profiler_revision": self.profiler_revision,
            "provenance_fields": list(self.provenance_fields),
            "autotuned": "autotune" in self.provenance_fields,
            "description": self.description,
        }


# Revision 2 of every runner: the reported time is the mean launch under the precision rule
# (timing.py); revision-1 rows (median, per-launch rule) read as unverified.
AUTOTUNE_PROVENANCE = ("triton", "autotune", "autotune_key", "autotune_config")

_BUILTIN = (
    Entry("single_gemm", "torch", "compute", SingleGemmArgs, "pw.kernel_profile.runners.torch_ops:single_gemm",
          "torch-cuda", one_gpu, "torch-cupti-2",
          "C = A @ B through torch.matmul (cuBLAS); A is m x k, B is k x n, row-major", device_bytes=gemm_bytes),
    Entry("single_gemm", "triton", "compute", TritonGemmArgs, "pw.kernel_profile.runners.triton_gemm:single_gemm",
          "torch-cuda-triton", one_gpu, "triton-cupti-1",
          "C = A @ B through a Triton kernel autotuned over tile configs (triton.autotune), the tuning kept "
          "in the database's autotune cache; A is m x k, B is k x n, row-major",
          provenance_fields=COMMON_PROVENANCE + AUTOTUNE_PROVENANCE, device_bytes=gemm_bytes),
    Entry("rmsnorm", "torch", "compute", RmsNormArgs, "pw.kernel_profile.runners.torch_ops:rmsnorm",
          "torch-cuda", one_gpu, "torch-cupti-2",
          "torch.nn.functional.rms_norm over the last dim of a tokens x hidden tensor (memory-bound)",
          device_bytes=rmsnorm_bytes),
    Entry("attention", "torch", "compute", AttentionArgs, "pw.kernel_profile.runners.torch_ops:attention",
          "torch-cuda", one_gpu, "torch-cupti-2",
          "torch.nn.functional.scaled_dot_product_attention forward; every kernel it launches is summed",
          device_bytes=attention_bytes),
    Entry("all_reduce", "nccl", "comm", AllReduceArgs, "pw.kernel_profile.runners.nccl_comm:all_reduce",
          "torch-cuda-nccl", num_gpus_field, "nccl-cupti-2",
          "torch.distributed.all_reduce (sum) over num_gpus ranks, one process per GPU",
          device_bytes=all_reduce_bytes),
)

_ENTRIES: dict[tuple[str, str], Entry] = {(e.table, e.backend): e for e in _BUILTIN}


def entries() -> list[Entry]:
    return [_ENTRIES[k] for k in sorted(_ENTRIES)]


def install(entry: Entry) -> Callable[[], None]:
    """Add an entry for the life of this process and return its removal.

    The one door for entries that are not built in; only tests use it (their fake runner), so a
    fake can never answer a product lookup by accident.
    """
    key = (entry.table, entry.backend)
    if key in _ENTRIES:
        raise ValueError(f"{key} is already registered")
    _ENTRIES[key] = entry
    return lambda: _ENTRIES.pop(key, None)


def lookup(table: str, backend: str | None) -> Entry:
    tables = sorted({t for t, _ in _ENTRIES})
    if table not in tables:
        raise InputError(f"table {table!r}: unknown (expected one of: {', '.join(tables)})")
    backends = sorted(b for t, b in _ENTRIES if t == table)
    if backend is None:
        raise InputError(f"--backend: required for table {table!r} (expected one of: {', '.join(backends)})")
    if backend not in backends:
        raise InputError(f"--backend {backend!r}: not registered for table {table!r} "
                         f"(expected one of: {', '.join(backends)})")
    return _ENTRIES[(table, backend)]


def all_arg_fieldsets() -> dict[frozenset[str], str]:
    """Each set of args fields -> the 'table/backend' pairs that take it (to name a mixed batch)."""
    out: dict[frozenset[str], list[str]] = {}
    for e in entries():
        out.setdefault(frozenset(e.arg_names), []).append(f"{e.table}/{e.backend}")
    return {k: " or ".join(v) for k, v in out.items()}
