"""`pw doctor` says which profilers work here; on a machine without hardware counters perf is
usable with software events only, and doctor says so."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from pw.cli import main


def _hardware_events_supported() -> bool:
    proc = subprocess.run(["perf", "stat", "-e", "cycles", "true"], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and "not supported" not in proc.stderr


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed on this machine")
def test_doctor_reports_perf_software_events_only_without_hardware_counters(capsys):
    assert main(["doctor", "--json"]) == 0
    rows = {r["adapter"]: r for r in json.loads(capsys.readouterr().out)["adapters"]}
    perf = rows["perf"]
    assert perf["usable"], perf
    if _hardware_events_supported():
        assert perf["mode"] != "software-events-only"
    else:
        assert perf["mode"] == "software-events-only", perf


def test_doctor_lists_every_registered_adapter(capsys):
    from adapters.registry import installed_specs

    assert main(["doctor", "--json"]) == 0
    names = {r["adapter"] for r in json.loads(capsys.readouterr().out)["adapters"]}
    assert names == {s.name for s in installed_specs()}


def test_doctor_says_which_sandbox_contains_the_runs(capsys):
    from adapters import sandbox as sb

    assert main(["doctor", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["sandbox"]
    probe = sb.probe()
    assert found["usable"] == (probe.sandbox is not None)
    if probe.sandbox is not None:
        assert found["tool"] == probe.sandbox.tool and found["description"].startswith(probe.sandbox.tool)
    else:
        assert found["description"].startswith("none: ") and found["reasons"]
