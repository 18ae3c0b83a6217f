"""CI replay of the first device runs (tests/data/kernel-profile-h200/: 20 gemm specs on two H200s,
with all_reduce; tests/data/kernel-profile-h200-fill200/: 200 gemm specs on one H200 in one `run
--specs` call; see each device.json): the recorded cache ledger rebuilds the rows the device wrote,
and the recorded answers agree with what the rebuilt database says.

Both were measured under revision 1 of the runners (the median of launches, stopped on their
per-launch spread), so today they are rows that no lookup may call a hit: `unverified`, each with
its reason. Their database is of the first layout (fewer stat and telemetry columns): a rebuild
today writes more columns, and must agree on every column the device's database has."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger.store import Ledger
from projections import kernel_profile_db, materialize_kernel_profile
from pw.kernel_profile import registry, service, specs
from pw.kernel_profile.cache import Cache

DATA = Path(__file__).parent / "data" / "kernel-profile-h200"
FILL200 = Path(__file__).parent / "data" / "kernel-profile-h200-fill200"
RECORDED = [d for d in (DATA, FILL200) if (d / "profile.ledger.jsonl").exists()]
pytestmark = pytest.mark.skipif(not RECORDED, reason="no recorded device run")
META = json.loads((DATA / "device.json").read_text()) if (DATA / "device.json").exists() else {}
SQLITE_VERSION_BYTES = slice(96, 100)  # the header field naming the library that last wrote the file


@pytest.mark.parametrize("data", RECORDED, ids=lambda d: d.name)
def test_rebuild_of_the_recorded_ledger_prefix_is_the_device_db_byte_for_byte(tmp_path, data):
    meta = json.loads((data / "device.json").read_text())
    head = materialize_kernel_profile.head_of(data / "profile.db")
    assert head is not None and head[0] == meta["db_head_seq"]
    events = Ledger(data / "profile.ledger.jsonl").events(until=head[0])
    db = tmp_path / "profile.db"
    materialize_kernel_profile.write(db, kernel_profile_db.fold(events))
    if meta.get("db_format", 1) < materialize_kernel_profile.DB_FORMAT:
        assert old_columns_agree(db, data / "profile.db") > 0
        return
    ours, theirs = bytearray(db.read_bytes()), bytearray((data / "profile.db").read_bytes())
    if sqlite3.sqlite_version != meta["sqlite_version"] and ours != theirs:
        # Another SQLite library lays pages out its own way (the device had 3.45, CI may have 3.40):
        # then the same statements and rows, in order, are what must agree; on the device itself
        # the rebuild was byte-identical (bench.txt).
        with sqlite3.connect(db) as a, sqlite3.connect(data / "profile.db") as b:
            assert list(a.iterdump()) == list(b.iterdump())
        return
    if sqlite3.sqlite_version != meta["sqlite_version"]:
        ours[SQLITE_VERSION_BYTES] = theirs[SQLITE_VERSION_BYTES] = b"\0\0\0\0"
    assert ours == theirs


def old_columns_agree(ours: Path, theirs: Path) -> int:
    """Every table and column of the older database `theirs` reads the same in `ours`; rows compared."""
    compared = 0
    with sqlite3.connect(ours) as a, sqlite3.connect(theirs) as b:
        tables = [r[0] for r in b.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        assert tables == [r[0] for r in a.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for t in tables:
            cols = ", ".join(f'"{d[0]}"' for d in b.execute(f'SELECT * FROM "{t}" LIMIT 0').description)
            old = b.execute(f'SELECT {cols} FROM "{t}" ORDER BY rowid').fetchall()
            assert a.execute(f'SELECT {cols} FROM "{t}" ORDER BY rowid').fetchall() == old
            compared += len(old)
    return compared


def test_full_rebuild_is_deterministic_and_holds_every_table(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        shutil.copy(DATA / "profile.ledger.jsonl", tmp_path / name / "profile.ledger.jsonl")
        Cache(tmp_path / name / "profile.db").rebuild()
    assert (tmp_path / "a" / "profile.db").read_bytes() == (tmp_path / "b" / "profile.db").read_bytes()
    with sqlite3.connect(tmp_path / "a" / "profile.db") as con:
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                  for t in ("single_gemm", "rmsnorm", "attention", "all_reduce")}
    assert counts == {"single_gemm": 20, "rmsnorm": 2, "attention": 2, "all_reduce": 1}


@pytest.mark.parametrize("data", RECORDED, ids=lambda d: d.name)
def test_the_fixture_is_still_written_in_version_1(data):
    lines = [json.loads(x) for x in (data / "profile.ledger.jsonl").read_text().splitlines()]
    assert {x["v"] for x in lines if x["type"] == "KernelMeasured"} == {1}
    assert all("statistic" not in x["data"]["stats"] for x in lines if x["type"] == "KernelMeasured")


@pytest.mark.parametrize("data", RECORDED, ids=lambda d: d.name)
def test_recorded_fill_answers_every_spec_and_revision_1_rows_are_no_longer_hits(tmp_path, data):
    shutil.copy(data / "profile.ledger.jsonl", tmp_path / "profile.ledger.jsonl")
    cache = Cache(tmp_path / "profile.db")
    entry = registry.lookup("single_gemm", "torch")
    batch = specs.parse(entry, spec=None, specs_path=str(data / "gemm_specs.json"))
    gpu = service.GpuKey("H200", "argument")
    assert json.loads((data / "count_before.json").read_text())["missing_count"] == len(batch)
    assert json.loads((data / "count_after.json").read_text())["missing_count"] == 0
    counted = service.count_missing(entry, batch, gpu, cache)
    assert counted["absent_count"] == 0 and counted["unverified_count"] == counted["missing_count"] == len(batch)
    body = service.query(entry, batch, gpu, cache)
    recorded = json.loads((data / "query_gemm.json").read_text())
    assert len(body["results"]) == len(batch) == len(recorded["results"])
    assert [r["metrics"] for r in body["results"]] == [r["metrics"] for r in recorded["results"]]
    assert recorded["gpu_name"] == "H200" and recorded["gpu_name_source"] == "resolved"
    for r in body["results"]:
        m, st = r["metrics"], r["stats"]
        assert r["status"] == "unverified"
        assert r["unverified_reason"] == "profiler revision 'torch-cupti-1', current 'torch-cupti-2'"
        assert st["statistic"] == "median" and m["time_ms"] == st["median_ms"]  # the v1 upcast says what it was
        assert st["rel_ci_half_width"] is None  # revision 1 never computed the precision of its time
        assert m["time_ms"] >= 0.05 and m["energy_j"] > 0 and 0 < m["tflops"] < 1000
        assert st["n"] >= 10 and st["stop_reason"] in ("converged", "timeout")
        assert st["q1_ms"] <= st["median_ms"] <= st["q3_ms"]
        assert (st["stop_reason"] == "converged") == (st["rel_stdev"] <= 0.005 and st["gpu_time_s"] >= 0.5)
        assert r["telemetry"]["sm_clock_mhz"] > 0
        assert {"torch", "cuda", "driver", "algorithm", "timer", "kernels", "device_name"} <= set(r["provenance"])


@pytest.mark.parametrize("data", RECORDED, ids=lambda d: d.name)
def test_recorded_fresh_run_measured_without_persisting(data):
    fresh = json.loads((data / "fresh.json").read_text())
    assert fresh["persisted"] is False and fresh["mode"] == "fresh"
    assert [r["source"] for r in fresh["results"]] == ["fresh", "fresh"]
    batches = [json.loads(line)["data"]["batch_id"] for line in (data / "profile.ledger.jsonl").read_text().splitlines()]
    assert fresh["batch_id"] not in batches  # no event of that run reached the ledger


def test_recorded_all_reduce_follows_nccl_tests_definitions(tmp_path):
    shutil.copy(DATA / "profile.ledger.jsonl", tmp_path / "profile.ledger.jsonl")
    entry = registry.lookup("all_reduce", "nccl")
    spec = entry.args(message_size_bytes=64 << 20, num_gpus=2, dtype="bf16")
    body = service.query(entry, [spec], service.GpuKey("H200", "argument"), Cache(tmp_path / "profile.db"))
    r = body["results"][0]
    assert r["status"] == "unverified" and "nccl-cupti-1" in r["unverified_reason"]
    m, n = r["metrics"], r["args"]["num_gpus"]
    algbw = r["args"]["message_size_bytes"] / (m["time_ms"] / 1e3) / 1e9
    assert m["message_size_bytes"] == 64 << 20
    assert m["algbw_gbps"] == pytest.approx(algbw)
    assert m["busbw_gbps"] == pytest.approx(algbw * 2 * (n - 1) / n)


def test_recorded_snapshot_and_measure_outputs():
    snap = DATA / "snap_fill_gemm"
    assert sorted(p.name for p in snap.iterdir()) == ["curve.json", "job.meta.json", "request.json", "results.json"]
    curve = json.loads((snap / "curve.json").read_text())
    assert curve["axes"] == {"x": "m", "y": "n", "facets": ["k", "dtype"]} and curve["fixedArgs"] == {}
    assert len(curve["points"]) == 20
    att = json.loads((DATA / "snap_attention" / "curve.json").read_text())
    assert att["axes"]["x"] == "causal" and set(att["fixedArgs"]) == {"batch", "heads", "seq_len", "head_dim", "dtype"}
    out = DATA / "measure_gemm"
    assert sorted(p.name for p in out.iterdir()) == [
        "runtime.png", "runtimes.csv", "summary.json", "telemetry.csv", "telemetry.png"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["launches"] == summary["stats"]["n"] == len((out / "runtimes.csv").read_text().splitlines()) - 1
    assert summary["telemetry"]["samples"] == len((out / "telemetry.csv").read_text().splitlines()) - 1
    assert summary["window_s"] >= 2.0


def test_the_200_spec_fill_was_one_call_on_one_gpu_and_the_device_checks_held():
    fill = json.loads((FILL200 / "fill_gemm.json").read_text())
    assert fill["spec_count"] == 200 and fill["missing_before"] == 200 and fill["measured_count"] == 200
    assert fill["failed_count"] == 0 and fill["devices"] == [0]
    assert len({r["batch_id"] if "batch_id" in r else fill["batch_id"] for r in fill["results"]}) == 1
    lines = dict(line.split("=", 1) for line in (FILL200 / "bench.txt").read_text().splitlines() if "=" in line)
    assert lines["count_missing_after"] == "0" and lines["query_results"] == lines["query_ok"] == "200"
    assert lines["fresh_db_sha_unchanged"] == "True" and lines["rebuild_byte_identical"] == "True"
    assert set(lines["measure_files"].split(",")) == {p.name for p in (FILL200 / "measure_gemm").iterdir()}
    with sqlite3.connect(FILL200 / "profile.db") as con:
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in ("single_gemm", "rmsnorm", "attention")}
    assert counts == json.loads((FILL200 / "device.json").read_text())["tables"]
