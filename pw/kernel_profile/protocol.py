"""What the parent sends a worker process and what the worker prints back (JSON lines)."""

from __future__ import annotations

import msgspec

from ledger.kernel_events import SampleStats, Telemetry


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The measurement rules (seed: 'Timer.cupti'), the same for every spec of a call.

    The stopping rule bounds the reported time's precision (`target_rel_ci`: the relative half-width
    of its 95% batch-means interval), not the spread of single launches (see timing.py)."""

    clear_l2: bool = True
    cuda_graph: bool = False
    target_rel_ci: float = 0.005
    min_gpu_time_s: float = 0.5
    min_samples: int = 10
    timeout_s: float = 10.0  # per spec, timing phase; past it the row records stop_reason "timeout"
    energy_window_s: float = 1.0


class JobSpec(msgspec.Struct, frozen=True):
    index: int
    args: dict


class Job(msgspec.Struct, frozen=True, kw_only=True):
    table: str
    backend: str
    runner: str
    settings: Settings
    specs: list[JobSpec]
    nvml_indices: list[int] = []
    autotune_dir: str = ""  # the autotune cache shared by every worker and run of this database
    autotune_store: bool = True  # False for --fresh: use stored tunings, store none
    mode: str = "cache"  # or "measure": the diagnostic window of `pw kernel-profile measure`
    measure_dir: str = ""
    duration_s: float = 10.0
    telemetry_hz: float = 20.0


class Measurement(msgspec.Struct, frozen=True, kw_only=True):
    """What a runner returns for one spec."""

    metrics: dict[str, float]
    stats: SampleStats
    telemetry: Telemetry
    provenance: dict[str, str]
    device_name: str = ""


class Started(msgspec.Struct, frozen=True, tag="started"):
    index: int


class Done(msgspec.Struct, frozen=True, tag="done"):
    index: int
    measurement: Measurement
    wall_s: float


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    index: int
    error: str  # runner_error, worker_crash, timeout, unavailable
    message: str


WorkerLine = Started | Done | Failed
