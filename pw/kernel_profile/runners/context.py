"""What a worker hands every runner: the settings, its NVML device, a shared timer and the
autotune cache of the database it measures for."""

from __future__ import annotations

from dataclasses import dataclass, field

from pw.kernel_profile.autotune_cache import AutotuneCache
from pw.kernel_profile.protocol import Settings


@dataclass
class Context:
    settings: Settings
    nvml_indices: list[int]
    cache: dict = field(default_factory=dict)  # per-worker objects (the timer and its flush buffer)
    autotune: AutotuneCache = field(default_factory=lambda: AutotuneCache(None))
