"""NVML, through pynvml (nvidia-ml-py): idle-GPU detection, device names, telemetry and energy.

Imported only where a GPU is expected; without NVML every caller gets one `ToolError`.
"""

from __future__ import annotations

import re
import threading
import time

from ledger.errors import ToolError

# Idle means: little memory held and no utilization over a short window.
IDLE_MEMORY_BYTES = 2 << 30
IDLE_UTIL_PCT = 5
IDLE_WINDOW_S = 0.3


class NvmlUnavailable(ToolError):
    """No NVML here; the caller adds what the user can do instead (it knows what was asked)."""


def _nvml():
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("NVML is not available (no pynvml module)") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML did not initialise ({exc}): no NVIDIA driver here?") from None
    return pynvml


def normalize_gpu_name(raw: str) -> str:
    """The database key for a device name: the vendor prefix dropped, words joined by '-'.

    Form factors stay apart (H100 SXM, PCIe and NVL differ in clocks, power and memory, so their
    rows must not mix); the SXM H100 reports itself as 'H100 80GB HBM3', named here H100-SXM.
    """
    name = re.sub(r"^NVIDIA\s+", "", raw.strip())
    name = re.sub(r"\s+", "-", name)
    aliases = {"H100-80GB-HBM3": "H100-SXM", "H100-SXM5-80GB": "H100-SXM", "H200-141GB-HBM3e": "H200"}
    return aliases.get(name, name)


def device_count() -> int:
    return _nvml().nvmlDeviceGetCount()


def device_name(index: int) -> str:
    nv = _nvml()
    name = nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(index))
    return name.decode() if isinstance(name, bytes) else name


def idle_devices(indices: list[int] | None = None) -> tuple[list[int], dict[int, str]]:
    """Devices that look idle, and for the others why not (memory used, utilization)."""
    nv = _nvml()
    indices = list(range(nv.nvmlDeviceGetCount())) if indices is None else indices
    handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in indices}
    peak_util = {i: 0 for i in indices}
    peak_mem = {i: 0 for i in indices}
    end = time.monotonic() + IDLE_WINDOW_S
    while True:
        for i, h in handles.items():
            peak_util[i] = max(peak_util[i], nv.nvmlDeviceGetUtilizationRates(h).gpu)
            peak_mem[i] = max(peak_mem[i], nv.nvmlDeviceGetMemoryInfo(h).used)
        if time.monotonic() >= end:
            break
        time.sleep(0.05)
    idle, busy = [], {}
    for i in indices:
        if peak_mem[i] <= IDLE_MEMORY_BYTES and peak_util[i] <= IDLE_UTIL_PCT:
            idle.append(i)
        else:
            busy[i] = f"{peak_mem[i] / 2**30:.1f} GiB used, {peak_util[i]}% utilization"
    return idle, busy


def memory_total_bytes(index: int) -> int | None:
    """The device's memory (bytes), or None where NVML does not say."""
    nv = _nvml()
    try:
        return int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(index)).total)
    except (nv.NVMLError, AttributeError):
        return None


def power_limit_w(index: int) -> float | None:
    """The enforced power limit (W), or None where the device or a virtualisation layer hides it."""
    nv = _nvml()
    try:
        return nv.nvmlDeviceGetEnforcedPowerLimit(nv.nvmlDeviceGetHandleByIndex(index)) / 1000.0
    except nv.NVMLError:
        return None


def driver_version() -> str:
    v = _nvml().nvmlSystemGetDriverVersion()
    return v.decode() if isinstance(v, bytes) else v


class Sampler:
    """NVML telemetry of one device on a background thread at `hz` (the seed's 20 Hz default)."""

    FIELDS = ("t_s", "power_w", "sm_clock_mhz", "mem_clock_mhz", "gpu_util_pct", "mem_util_pct",
              "temperature_c", "throttle_mask", "energy_mj")

    def __init__(self, index: int, hz: float = 20.0) -> None:
        self._nv = _nvml()
        self._h = self._nv.nvmlDeviceGetHandleByIndex(index)
        self._period = 1.0 / hz
        self.rows: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = 0.0

    def _get(self, fn, *args, scale: float = 1.0) -> float:
        """One reading; NaN where this device or virtualisation layer does not report it."""
        try:
            return float(fn(self._h, *args)) * scale
        except self._nv.NVMLError:
            return float("nan")

    def read(self) -> tuple:
        nv = self._nv
        try:
            util = nv.nvmlDeviceGetUtilizationRates(self._h)
            gpu_util, mem_util = float(util.gpu), float(util.memory)
        except nv.NVMLError:
            gpu_util = mem_util = float("nan")
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return (
            round(time.monotonic() - self._t0, 4),
            self._get(nv.nvmlDeviceGetPowerUsage, scale=1e-3),
            self._get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
            self._get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
            gpu_util, mem_util,
            self._get(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
            self._get(reasons),
            self._get(nv.nvmlDeviceGetTotalEnergyConsumption),
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.rows.append(self.read())
            self._stop.wait(self._period)

    def __enter__(self) -> Sampler:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.rows.append(self.read())

    def energy_mj(self) -> float:
        return self._get(self._nv.nvmlDeviceGetTotalEnergyConsumption)
