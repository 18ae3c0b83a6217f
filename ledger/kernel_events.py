"""Events of the kernel-profile cache's own ledger (DESIGN.md §13).

A measurement is an event; `profile.db` is their projection (`projections/kernel_profile_db.py`).
The events carry the args' names in the table's declaration order beside their values, so the
projection can lay out the table's key columns without importing the registry (nothing in
`projections/` imports `pw`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ledger.payload import Payload

ArgValue = int | float | str | bool
StopReason = Literal["converged", "timeout", "fixed"]


class SampleStats(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Per-invocation times (CUPTI kernel records summed over one logical invocation), in ms."""

    n: int
    median_ms: float
    mean_ms: float
    q1_ms: float
    q3_ms: float
    rel_stdev: float  # sample standard deviation (ddof=1) over the mean
    gpu_time_s: float  # the summed invocation time the stopping rule counted
    stop_reason: StopReason


class Telemetry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """NVML readings over the timing window: medians of clocks, max temperature, mean power, and the
    OR of every throttle-reason bit seen (NVML's clocks-event-reasons mask)."""

    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_mask: int | None = None
    samples: int = 0


class KernelMeasured(Payload, frozen=True, kw_only=True):
    """One measured row: a (table, backend, gpu_name, args) key and what was measured for it."""

    TYPE = "KernelMeasured"
    table: str
    backend: str
    gpu_name: str
    arg_names: list[str]
    arg_values: list[ArgValue]
    metrics: dict[str, float]
    stats: SampleStats
    telemetry: Telemetry
    provenance: dict[str, str]
    profiler_revision: str
    device_index: int = 0
    batch_id: str = ""


class KernelMeasurementFailed(Payload, frozen=True, kw_only=True):
    """A spec whose runner failed or whose worker died; recorded for audit, never a row."""

    TYPE = "KernelMeasurementFailed"
    table: str
    backend: str
    gpu_name: str
    arg_names: list[str]
    arg_values: list[ArgValue]
    error: str  # class of failure: runner_error, worker_crash, timeout, ...
    message: str
    batch_id: str = ""


KERNEL_EVENT_TYPES: tuple[type[Payload], ...] = (KernelMeasured, KernelMeasurementFailed)
