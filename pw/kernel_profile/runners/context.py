"""What a worker hands every runner: the settings, its NVML device and a shared timer."""

from __future__ import annotations

from dataclasses import dataclass, field

from pw.kernel_profile.protocol import Settings


@dataclass
class Context:
    settings: Settings
    nvml_indices: list[int]
    cache: dict = field(default_factory=dict)  # per-worker objects (the timer and its flush buffer)
