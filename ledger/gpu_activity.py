"""GPU activity records: the one shape every CUDA tracer is read into.

CUPTI is the single source of GPU timestamps on NVIDIA hardware; our own activity-injection library,
the torch profiler (Kineto) and Nsight Systems' SQLite export all carry CUPTI activity records. Each
backend's reader turns its raw evidence into these records, and everything downstream (the
timeline profile of ``pw start`` and the kernel-profile cache's measured rows) reads only them, so
there is one CUPTI layer, not one per consumer.

Times are CUPTI's: nanoseconds on the GPU timestamp clock, comparable within one capture only.
"""

from __future__ import annotations

from typing import Literal

import msgspec

MemcpyKind = Literal["HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "other"]
SyncKind = Literal["event", "stream_wait_event", "stream", "context", "other"]


class KernelActivity(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="kernel", kw_only=True):
    name: str  # mangled when the tracer gives it mangled; ``demangled`` beside it when known
    demangled: str | None = None
    start_ns: int
    end_ns: int
    device: int = 0
    stream: int = 0
    correlation_id: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    registers_per_thread: int = 0
    static_shared_bytes: int = 0
    dynamic_shared_bytes: int = 0


class MemcpyActivity(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="memcpy", kw_only=True):
    copy_kind: MemcpyKind
    bytes: int
    start_ns: int
    end_ns: int
    device: int = 0
    stream: int = 0
    correlation_id: int = 0


class MemsetActivity(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="memset", kw_only=True):
    bytes: int
    start_ns: int
    end_ns: int
    device: int = 0
    stream: int = 0
    correlation_id: int = 0


class SyncActivity(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="sync", kw_only=True):
    sync_kind: SyncKind
    start_ns: int
    end_ns: int
    stream: int = 0
    correlation_id: int = 0


class ApiActivity(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="api", kw_only=True):
    """A CUDA runtime or driver API call on the host (cudaLaunchKernel, cudaMemcpy, ...)."""

    name: str
    start_ns: int
    end_ns: int
    thread: int = 0
    correlation_id: int = 0


GpuActivity = KernelActivity | MemcpyActivity | MemsetActivity | SyncActivity | ApiActivity

_LINE_DECODER = msgspec.json.Decoder(GpuActivity)


def decode_activity_line(line: bytes) -> GpuActivity:
    """One JSON-lines record (``{"type": "kernel", ...}``) as a typed activity."""
    return _LINE_DECODER.decode(line)


def encode_activities(records: list[GpuActivity]) -> bytes:
    """Canonical JSON lines: one record a line, in the order given."""
    enc = msgspec.json.Encoder()
    return b"".join(enc.encode(r) + b"\n" for r in records)
