"""Idle-GPU detection and GPU keys, against a stand-in pynvml module (CI has no driver)."""

from __future__ import annotations

import sys
import types

import pytest

from ledger.errors import InputError, ToolError
from pw.kernel_profile import executor, nvml, service


def fake_pynvml(devices: list[dict]) -> types.ModuleType:
    """The few NVML calls we use, answering from `devices` (name, used bytes, utilization %)."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    m.NVMLError = NVMLError
    m.nvmlInit = lambda: None
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: devices[h]["name"]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=devices[h]["used"],
                                                                 total=devices[h].get("total", 141 << 30))
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=devices[h]["util"], memory=0)
    return m


@pytest.fixture
def gpus(monkeypatch):
    def install(devices):
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(devices))
        monkeypatch.delenv("PW_PROFILE_GPUS", raising=False)
        monkeypatch.setattr(nvml, "IDLE_WINDOW_S", 0.0)

    return install


def test_busy_devices_are_left_out_and_said_why(gpus):
    gpus([{"name": "NVIDIA H200", "used": 0, "util": 0},
          {"name": "NVIDIA H200", "used": 40 << 30, "util": 97},
          {"name": "NVIDIA H200", "used": 500 << 20, "util": 0}])
    d = executor.choose_devices()
    assert d.indices == [0, 2] and not d.pinned and d.warnings == []
    assert "40.0 GiB used, 97% utilization" in d.busy[1]
    with pytest.raises(ToolError, match=r"needs 3 idle GPU\(s\), found 2 .*GPU 1: 40.0 GiB used"):
        executor.plan([3], d)


def test_pinning_bypasses_the_idle_guard_with_a_warning(gpus, monkeypatch):
    gpus([{"name": "NVIDIA H200", "used": 40 << 30, "util": 97}])
    monkeypatch.setenv("PW_PROFILE_GPUS", "0")
    d = executor.choose_devices()
    assert d.indices == [0] and d.pinned and "bypasses the idle-GPU guard" in d.warnings[0]


def test_gpu_key_is_the_normalized_device_name_unless_given(gpus):
    gpus([{"name": "NVIDIA H100 80GB HBM3", "used": 0, "util": 0}])
    key = service.resolve_gpu(None)
    assert (key.name, key.source, key.device_name) == ("H100-SXM", "resolved", "NVIDIA H100 80GB HBM3")
    assert service.resolve_gpu("H100") == service.GpuKey("H100", "argument")


def test_mixed_gpus_need_an_explicit_key(gpus):
    gpus([{"name": "NVIDIA H100 PCIe", "used": 0, "util": 0}, {"name": "NVIDIA H100 NVL", "used": 0, "util": 0}])
    with pytest.raises(InputError, match="GPUs here differ"):
        service.resolve_gpu(None)


@pytest.mark.parametrize("raw, key", [
    ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA H100 NVL", "H100-NVL"), ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA H200 NVL", "H200-NVL"),
])
def test_form_factors_stay_distinct_keys(raw, key):
    assert nvml.normalize_gpu_name(raw) == key


def test_without_nvml_each_hint_names_the_missing_piece(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.delenv("PW_PROFILE_GPUS", raising=False)
    with pytest.raises(ToolError, match="cannot read the GPU name: NVML is not available.*pass --gpu-name NAME"):
        service.resolve_gpu(None)
    with pytest.raises(ToolError, match="cannot find idle GPUs.*set PW_PROFILE_GPUS.*pass --gpu-name"):
        executor.choose_devices()
    # Devices pinned and still no name: the hint is --gpu-name, never "set PW_PROFILE_GPUS" again.
    monkeypatch.setenv("PW_PROFILE_GPUS", "0,1")
    with pytest.raises(ToolError) as exc:
        service.resolve_gpu(None)
    assert "pinned devices (PW_PROFILE_GPUS=0,1)" in exc.value.message and "pass --gpu-name NAME" in exc.value.message
    assert "set PW_PROFILE_GPUS" not in exc.value.message
    d = executor.choose_devices()  # pinning itself needs no NVML (and cannot read the memory size)
    assert d.indices == [0, 1] and d.memory_bytes is None


def test_device_memory_comes_from_nvml(gpus):
    gpus([{"name": "NVIDIA H200", "used": 0, "util": 0, "total": 141 << 30},
          {"name": "NVIDIA H200", "used": 0, "util": 0, "total": 80 << 30}])
    assert executor.choose_devices().memory_bytes == 80 << 30  # the smallest of the chosen devices
