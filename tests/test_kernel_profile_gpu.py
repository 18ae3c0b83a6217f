"""The real torch runner end to end; runs only where torch sees an NVIDIA GPU and NVML answers."""

from __future__ import annotations

import json

import pytest

from pw.cli import main

torch = pytest.importorskip("torch", reason="torch is not installed (CI has no GPU stack)")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def test_single_gemm_row_round_trip(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PW_PROFILE_TIMEOUT_S", "2")
    spec = json.dumps({"m": 2048, "n": 2048, "k": 4096, "dtype": "bf16"})
    db = str(tmp_path / "profile.db")
    assert main(["kernel-profile", "run", "single_gemm", "--backend", "torch", "--spec", spec, "--db", db,
                 "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    r = body["results"][0]
    assert r["status"] == "ok" and r["metrics"]["time_ms"] > 0 and r["metrics"]["energy_j"] > 0
    assert main(["kernel-profile", "count-missing", "single_gemm", "--backend", "torch", "--spec", spec, "--db", db,
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing_count"] == 0
