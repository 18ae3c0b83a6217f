"""CI replay of the device runs on two H200s (tests/data/kernel-profile-h200/): the recorded cache
ledger rebuilds the recorded profile.db, and the recorded answers agree with it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from pw.kernel_profile import registry, service, specs
from pw.kernel_profile.cache import Cache

DATA = Path(__file__).parent / "data" / "kernel-profile-h200"
pytestmark = pytest.mark.skipif(not (DATA / "profile.ledger.jsonl").exists(), reason="no recorded device run")


def dump(db: Path) -> list:
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def test_rebuild_from_recorded_ledger_is_byte_identical(tmp_path):
    shutil.copy(DATA / "profile.ledger.jsonl", tmp_path / "profile.ledger.jsonl")
    db = tmp_path / "profile.db"
    Cache(db).rebuild()
    meta = json.loads((DATA / "device.json").read_text())
    assert dump(db) == dump(DATA / "profile.db")  # the same rows, columns and schema
    if sqlite3.sqlite_version == meta["sqlite_version"]:
        assert db.read_bytes() == (DATA / "profile.db").read_bytes()
    else:  # the header records the writing library's version; every other byte must agree
        a, b = bytearray(db.read_bytes()), bytearray((DATA / "profile.db").read_bytes())
        a[96:100] = b[96:100] = b"\0" * 4
        assert a == b


def test_recorded_fill_answers_every_spec_from_the_recorded_db(tmp_path):
    shutil.copy(DATA / "profile.ledger.jsonl", tmp_path / "profile.ledger.jsonl")
    cache = Cache(tmp_path / "profile.db")
    entry = registry.lookup("single_gemm", "torch")
    batch = specs.parse(entry, spec=None, specs_path=str(DATA / "gemm200.json"))
    assert len(batch) == 200
    gpu = service.GpuKey("H200", "argument")
    assert service.count_missing(entry, batch, gpu, cache)["missing_count"] == 0
    body = service.query(entry, batch, gpu, cache)
    assert len(body["results"]) == 200 and {r["status"] for r in body["results"]} == {"ok"}
    recorded = json.loads((DATA / "query200.json").read_text())
    assert [r["metrics"] for r in body["results"]] == [r["metrics"] for r in recorded["results"]]
    for r in body["results"]:
        m, st = r["metrics"], r["stats"]
        assert m["time_ms"] >= 0.05 and m["energy_j"] > 0 and 0 < m["tflops"] < 1000
        assert st["n"] >= 10 and st["stop_reason"] in ("converged", "timeout")
        assert st["q1_ms"] <= st["median_ms"] <= st["q3_ms"]
        assert r["telemetry"]["sm_clock_mhz"] > 0
        assert {"torch", "cuda", "driver", "algorithm", "timer", "kernels"} <= set(r["provenance"])


def test_recorded_all_reduce_follows_nccl_tests_definitions():
    body = json.loads((DATA / "fill_all_reduce.json").read_text())
    ok = [r for r in body["results"] if r["status"] == "ok"]
    assert ok
    for r in ok:
        m, n = r["metrics"], r["args"]["num_gpus"]
        algbw = r["args"]["message_size_bytes"] / (m["time_ms"] / 1e3) / 1e9
        assert m["algbw_gbps"] == pytest.approx(algbw)
        assert m["busbw_gbps"] == pytest.approx(algbw * 2 * (n - 1) / n)


def test_recorded_snapshot_and_measure_outputs():
    snap = DATA / "snap_fill200"
    assert sorted(p.name for p in snap.iterdir()) == ["curve.json", "job.meta.json", "request.json", "results.json"]
    curve = json.loads((snap / "curve.json").read_text())
    assert curve["axes"]["x"] == "m" and curve["axes"]["y"] == "n" and curve["axes"]["facets"] == ["k", "dtype"]
    summary = json.loads((DATA / "measure_gemm" / "summary.json").read_text())
    assert summary["launches"] > 100 and summary["stats"]["n"] == summary["launches"]
    assert summary["telemetry"]["samples"] > 10
