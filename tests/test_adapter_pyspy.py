"""py-spy adapter: the shared contract on a Python workload, plus speedscope edge cases."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from adapters.pyspy import NO_FRAME, PySpyAdapter, python_module
from tests.test_adapter_contract import HOT_PY, AdapterContract, write_hot_py


class TestPySpy(AdapterContract):
    adapter_factory = PySpyAdapter
    fixture = "pyspy-hotpy-speedscope"
    source_text = HOT_PY
    source_file = "hot.py"
    hot_name = "hot_loop"
    hot_signature = "def hot_loop("

    def workload(self, tmp: Path) -> list[str]:
        # ~0.8 s: on a loaded host py-spy's sampling thread can miss all of a 0.3 s program (seen once
        # under two test workers and an evaluate: a profile with no samples)
        return [sys.executable, str(write_hot_py(tmp)), "4000000"]

    def failing_argv(self, tmp: Path) -> list[str]:
        return [str(tmp / "does-not-exist.py")]  # py-spy cannot start it (a failing *script* exits 0)


def _doc(frames, samples, weights):
    return msgspec.json.encode({"$schema": "https://www.speedscope.app/file-format-schema.json",
                                "exporter": "py-spy@0.4.3", "name": "x", "activeProfileIndex": 0,
                                "shared": {"frames": frames},
                                "profiles": [{"type": "sampled", "name": "t", "unit": "seconds",
                                              "startValue": 0, "endValue": 1,
                                              "samples": samples, "weights": weights}]})


def test_time_is_samples_over_rate_and_empty_stacks_are_kept():
    frames = [{"name": "<module>", "file": "/src/m.py", "line": 30, "col": None},
              {"name": "f", "file": "/src/m.py", "line": 12, "col": None},
              {"name": "loads", "file": "/usr/lib/python3.11/json/__init__.py", "line": 346, "col": None}]
    raw = _doc(frames, [[0, 1], [0, 1], [0, 2], []], [0.01] * 4)
    prof = PySpyAdapter().normalize({"pyspy.speedscope.json": raw}, "/src", "t")
    assert prof.totals == {"cpu_time_s": pytest.approx(0.04), "samples": 4.0}
    assert prof.operation("f@m.py").self_metrics["samples"] == 2
    assert prof.operation("<module>@m.py").inclusive_metrics["samples"] == 3
    assert prof.operation("loads@[json/__init__.py]").file is None
    assert prof.operation(NO_FRAME).self_metrics["samples"] == 1
    assert prof.tool_version == "0.4.3"


def test_python_module_labels_are_host_independent():
    assert python_module("/root/.pyenv/versions/3.11.7/lib/python3.11/ipaddress.py") == "ipaddress.py"
    assert python_module("/x/venv/lib/python3.11/site-packages/numpy/core/_methods.py") == "numpy/core/_methods.py"
    assert python_module("<frozen importlib._bootstrap>") == "<frozen importlib._bootstrap>"


def test_not_speedscope_is_a_clear_error():
    with pytest.raises(ValueError, match="not py-spy speedscope JSON"):
        PySpyAdapter().normalize({"pyspy.speedscope.json": b"a;b 3\n"}, "/src", "t")
