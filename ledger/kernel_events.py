"""Events of the kernel-profile cache's own ledger (docs/kernel-profile.md).

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
    """Per-invocation times (CUPTI kernel records summed over one logical invocation), in ms.

    Two figures of spread, never to be confused: `rel_stdev` is the spread of single launches (a
    property of the kernel on this board: 1-6% on a power-capped H200), `rel_ci_half_width` the
    precision of the reported time (what the stopping rule bounds). v1 rows (the per-launch rule)
    have neither `statistic` nor an interval: their upcast says "median" and leaves the rest empty.
    """

    n: int
    median_ms: float
    mean_ms: float
    q1_ms: float
    q3_ms: float
    rel_stdev: float  # per-launch spread: sample standard deviation (ddof=1) over the mean
    gpu_time_s: float  # the summed invocation time the stopping rule counted
    stop_reason: StopReason
    statistic: Literal["mean", "median"]  # which of the above the row's time_ms reports
    rel_ci_half_width: float | None = None  # 95% interval half-width of the reported time, over it
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    ci_method: str = ""  # how the interval was computed (batch means: batches, size, their lag-1)
    lag1_autocorr: float | None = None  # of the per-launch series: near 1, launches are not independent
    stop_rule: str = ""  # the rule the row stopped under, in words


class Telemetry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """NVML readings over the timing window: medians of clocks, max temperature, mean power, and the
    OR of every throttle-reason bit seen (NVML's clocks-event-reasons mask). `power_capped` is True
    when any reading in the window had the software power cap or the hardware power brake bit set;
    `power_cap_fraction` says for how many of the readings."""

    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_mask: int | None = None
    samples: int = 0
    sm_clock_min_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_limit_w: float | None = None  # NVML's enforced power limit
    power_capped: bool | None = None
    power_cap_fraction: float | None = None


class KernelMeasured(Payload, frozen=True, kw_only=True):
    """One measured row: a (table, backend, gpu_name, args) key and what was measured for it."""

    TYPE = "KernelMeasured"
    VERSION = 2  # v2: SampleStats.statistic and the interval fields, Telemetry's clock range and power cap
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
