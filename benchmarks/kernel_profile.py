"""Kernel-profile cache benchmarks. Output ends in key=value lines.

    python benchmarks/kernel_profile.py                 # CPU: count-missing on 100,000 specs
    python benchmarks/kernel_profile.py --device OUT    # GPU host: the device scenario of issue #15
    python benchmarks/kernel_profile.py --device OUT --one-gpu-compare   # and 1 GPU vs 2 GPUs
    python benchmarks/kernel_profile.py --recorded      # the H200 run kept in tests/data, summarized

The device scenario runs the real CLI (`python -m pw.cli kernel-profile ...`) as a user would and
keeps every output under OUT: the cache ledger, profile.db, the snapshots and the JSON answers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def gemm_specs(count: int = 200) -> list[dict]:
    """GEMMs of about 0.1 to 0.5 ms at ~700 TFLOP/s (all >= 50 us), bf16 and fp16, deterministic."""
    out = []
    for dtype in ("bf16", "fp16"):
        for m in (1024, 2048, 3072, 4096, 6144, 8192):
            for n in (2048, 3072, 4096, 5120, 6144, 8192, 10240, 12288):
                for k in (2048, 3072, 4096, 6144, 8192):
                    if 3.5e10 <= m * n * k <= 1.6e11:
                        out.append({"m": m, "n": n, "k": k, "dtype": dtype})
    assert len(out) >= count, len(out)
    step = (len(out) - 1) / max(count - 1, 1)
    return [out[int(i * step)] for i in range(count)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cpu_count_missing() -> None:
    from pw.kernel_profile import registry, service, specs
    from pw.kernel_profile.cache import Cache

    entry = registry.lookup("single_gemm", "torch")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "specs.json"
        rows = [{"m": 64 + i % 1000, "n": 128 + i // 1000, "k": 4096, "dtype": "bf16"} for i in range(100_000)]
        path.write_text(json.dumps(rows))
        cache = Cache(Path(tmp) / "profile.db")
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            parsed = specs.parse(entry, spec=None, specs_path=str(path))
            body = service.count_missing(entry, parsed, service.GpuKey("H200", "argument"), cache)
            best = min(best, time.perf_counter() - t0)
        assert body["missing_count"] == 100_000
        # The same specs against a database that holds a verified row for every one of them.
        from ledger.kernel_events import KernelMeasured, SampleStats, Telemetry

        prov = {f: "x" for f in entry.provenance_fields}
        stats = SampleStats(n=10, median_ms=1.0, mean_ms=1.0, q1_ms=1.0, q3_ms=1.0, rel_stdev=0.001,
                            gpu_time_s=0.5, stop_reason="converged", statistic="mean", rel_ci_half_width=0.004)
        cache.ledger.append([KernelMeasured(
            table="single_gemm", backend="torch", gpu_name="H200", arg_names=list(entry.arg_names),
            arg_values=[r["m"], r["n"], r["k"], r["dtype"]], metrics={"time_ms": 1.0}, stats=stats,
            telemetry=Telemetry(), provenance=prov, profiler_revision=entry.profiler_revision) for r in rows],
            expected_seq=None)
        t0 = time.perf_counter()
        cache.rebuild()
        rebuild_s = time.perf_counter() - t0
        hits = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            parsed = specs.parse(entry, spec=None, specs_path=str(path))
            body = service.count_missing(entry, parsed, service.GpuKey("H200", "argument"), cache)
            hits = min(hits, time.perf_counter() - t0)
        assert body["missing_count"] == 0
        # And through the whole CLI process (interpreter start and imports included).
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pw.cli", "kernel-profile", "count-missing", "single_gemm", "--backend",
                        "torch", "--specs", str(path), "--gpu-name", "H200", "--db", str(cache.db), "--json"],
                       check=True, cwd=ROOT, capture_output=True)
        cli = time.perf_counter() - t0
    print(f"count_missing_100k_specs_empty_db_s={best:.3f}")
    print(f"count_missing_100k_specs_100k_rows_s={hits:.3f}")
    print(f"rebuild_100k_rows_s={rebuild_s:.3f}")
    print(f"count_missing_100k_cli_process_s={cli:.3f}")
    print("count_missing_100k_target_s=1.0")


def cli(out: Path, name: str, argv: list[str], env_extra: dict | None = None,
        limit_s: float = 300) -> tuple[int, dict, float]:
    env = dict(os.environ, **(env_extra or {}))
    t0 = time.perf_counter()
    # stderr streams through (progress lines); stdout is the JSON answer. Its own session, so a
    # step past its limit is killed with its workers.
    p = subprocess.Popen([sys.executable, "-m", "pw.cli", "kernel-profile", *argv], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=None, text=True, start_new_session=True)
    try:
        stdout, _ = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        stdout, _ = p.communicate()
    wall = time.perf_counter() - t0
    (out / f"{name}.json").write_text(stdout)
    try:
        body = json.loads(stdout) if stdout.strip() else {}
    except json.JSONDecodeError:
        body = {}
    print(f"# {name}: rc={p.returncode} wall={wall:.1f}s", flush=True)
    return p.returncode, body, wall


def device(out: Path, one_gpu_compare: bool, count: int = 200, short: bool = False,
           fill_limit_s: float = 400) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "cache" / "profile.db"
    specs = gemm_specs(count)
    spec_file = out / "gemm_specs.json"
    spec_file.write_text(json.dumps(specs))
    kv: dict[str, object] = {}
    base = ["--db", str(db), "--json"]
    rc, body, _ = cli(out, "list", ["list", "--json"])
    kv["list_entries"] = len(body.get("entries", []))
    rc, body, _ = cli(out, "count_before", ["count-missing", "single_gemm", "--backend", "torch", "--specs",
                                            str(spec_file), *base])
    kv["count_missing_before"] = body.get("missing_count")
    rc, body, wall = cli(out, "fill_gemm", ["run", "single_gemm", "--backend", "torch", "--specs", str(spec_file),
                                          "--output-dir", str(out / "snap_fill_gemm"), *base], limit_s=fill_limit_s)
    kv.update(fill_gemm_rc=rc, fill_gemm_wall_s=round(wall, 2), fill_gemm_measure_wall_s=body.get("measure_wall_s"),
              fill_gemm_devices=",".join(map(str, body.get("devices", []))), fill_gemm_gpu_name=body.get("gpu_name"),
              fill_gemm_missing=body.get("missing_count"), fill_gemm_failed=body.get("failed_count"))
    results = body.get("results", [])
    long = [r for r in results if r.get("status") == "ok" and r["metrics"]["time_ms"] >= 0.05]
    if long:
        rel = sorted(r["stats"]["rel_stdev"] for r in long)
        kv.update(gemm_ge50us_specs=len(long), gemm_ge50us_rel_stdev_median=round(rel[len(rel) // 2], 5),
                  gemm_ge50us_rel_stdev_max=round(rel[-1], 5),
                  gemm_ge50us_converged=sum(r["stats"]["stop_reason"] == "converged" for r in long),
                  gemm_ge50us_rel_stdev_le_0p5pct=sum(r["stats"]["rel_stdev"] <= 0.005 for r in long))
        tf = sorted(r["metrics"]["tflops"] for r in long)
        kv.update(gemm_tflops_median=round(tf[len(tf) // 2], 1), gemm_tflops_max=round(tf[-1], 1))
    rc, body, _ = cli(out, "count_after", ["count-missing", "single_gemm", "--backend", "torch", "--specs",
                                           str(spec_file), *base])
    kv["count_missing_after"] = body.get("missing_count")
    rc, body, _ = cli(out, "query_gemm", ["query", "single_gemm", "--backend", "torch", "--specs", str(spec_file), *base])
    kv.update(query_rc=rc, query_results=len(body.get("results", [])),
              query_ok=sum(r["status"] == "ok" for r in body.get("results", [])))
    before = sha(db)
    fresh_specs = out / "fresh5.json"
    fresh_specs.write_text(json.dumps(specs[:2]))
    rc, body, _ = cli(out, "fresh5", ["run", "single_gemm", "--backend", "torch", "--specs", str(fresh_specs),
                                      "--fresh", *base], limit_s=45)
    kv.update(fresh_rc=rc, fresh_ok=sum(r["status"] == "ok" for r in body.get("results", [])),
              fresh_db_sha_unchanged=sha(db) == before)
    for table, spec_list in (
        ("rmsnorm", [{"tokens": t, "hidden": h, "dtype": "bf16"} for t in (4096, 16384) for h in (4096, 8192)]),
        ("attention", [{"batch": 4, "heads": 32, "seq_len": s, "head_dim": 128, "causal": c, "dtype": "bf16"}
                       for s in (1024, 4096) for c in (False, True)]),
    ):
        spec_list = spec_list[-2:] if short else spec_list
        p = out / f"{table}.json"
        p.write_text(json.dumps(spec_list))
        rc, body, _ = cli(out, f"fill_{table}", ["run", table, "--backend", "torch", "--specs", str(p),
                                                 "--output-dir", str(out / f"snap_{table}"), *base], limit_s=45)
        kv[f"{table}_rc"] = rc
        kv[f"{table}_ok"] = sum(r["status"] == "ok" for r in body.get("results", []))
    ar = out / "all_reduce.json"
    ar.write_text(json.dumps([{"message_size_bytes": s, "num_gpus": 2, "dtype": "bf16"}
                              for s in ((64 << 20,) if short else (1 << 20, 16 << 20, 256 << 20, 1 << 30))]))
    rc, body, _ = cli(out, "fill_all_reduce", ["run", "all_reduce", "--backend", "nccl", "--specs", str(ar),
                                               "--output-dir", str(out / "snap_all_reduce"), *base], limit_s=60)
    kv["all_reduce_rc"] = rc
    for r in body.get("results", []):
        if r.get("status") == "ok":
            size = r["args"]["message_size_bytes"]
            kv[f"all_reduce_{size}B_busbw_gbps"] = round(r["metrics"]["busbw_gbps"], 1)
    rc, body, _ = cli(out, "measure", ["measure", "single_gemm", "--backend", "torch", "--spec",
                                       json.dumps({"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"}),
                                       "--duration-s", "2", "--output-dir", str(out / "measure_gemm"), "--json"], limit_s=45)
    kv.update(measure_rc=rc, measure_files=",".join(body.get("files", [])))
    # Rebuild profile.db from a copy of the cache ledger elsewhere: byte-identical?
    from pw.kernel_profile.cache import Cache

    re_db = out / "rebuilt" / "profile.db"
    re_db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(db.with_name("profile.ledger.jsonl"), re_db.with_name("profile.ledger.jsonl"))
    Cache(re_db).rebuild()
    kv.update(rebuild_byte_identical=sha(re_db) == sha(db), profile_db_sha256=sha(db))
    import sqlite3

    kv["sqlite_version"] = sqlite3.sqlite_version
    for k, v in kv.items():
        print(f"{k}={v}", flush=True)
    if one_gpu_compare:
        # One GPU on every other spec of the same set (same size distribution), --fresh so the
        # cache is untouched; compared per spec with the two-GPU fill above.
        half = out / "gemm100_every_other.json"
        half.write_text(json.dumps(specs[::2]))
        rc, body, wall = cli(out, "fill1gpu", ["run", "single_gemm", "--backend", "torch", "--specs", str(half),
                                               "--fresh", "--db", str(out / "onegpu" / "profile.db"), "--json"],
                             {"PW_PROFILE_GPUS": "0"})
        two = kv["fill_gemm_measure_wall_s"] / count if kv.get("fill_gemm_measure_wall_s") else None
        one = body.get("measure_wall_s", 0) / 100 if body.get("measure_wall_s") else None
        print(f"one_gpu_100spec_rc={rc}")
        print(f"one_gpu_100spec_measure_wall_s={body.get('measure_wall_s')}")
        print(f"one_gpu_s_per_spec={one}")
        print(f"two_gpu_s_per_spec={two}")
        print(f"two_gpu_speedup={(one / two) if one and two else None}")


def recorded(data: Path) -> None:
    """key=value lines of the device run kept under tests/data/kernel-profile-h200 (no GPU needed)."""
    fill = json.loads((data / "fill_gemm.json").read_text())
    res = [r for r in fill["results"] if r["status"] == "ok"]
    rel = sorted(r["stats"]["rel_stdev"] for r in res)
    per_spec = sorted(r["stats"]["gpu_time_s"] for r in res)
    print(f"recorded_gemm_specs={len(fill['results'])}")
    print(f"recorded_gemm_fill_measure_wall_s={fill['measure_wall_s']}")
    print(f"recorded_gemm_fill_devices={','.join(map(str, fill['devices']))}")
    print(f"recorded_gemm_time_ms_min={min(r['metrics']['time_ms'] for r in res):.4f}")
    print(f"recorded_gemm_rel_stdev_median={rel[len(rel) // 2]:.4f}")
    print(f"recorded_gemm_rel_stdev_le_0p5pct={sum(v <= 0.005 for v in rel)}")
    print(f"recorded_gemm_timed_gpu_s_median={per_spec[len(per_spec) // 2]:.3f}")
    print(f"recorded_gemm_tflops_median={sorted(r['metrics']['tflops'] for r in res)[len(res) // 2]:.1f}")
    print(f"recorded_count_missing_after={json.loads((data / 'count_after.json').read_text())['missing_count']}")
    print(f"recorded_fresh_persisted={json.loads((data / 'fresh.json').read_text())['persisted']}")
    summary = json.loads((data / "measure_gemm" / "summary.json").read_text())
    print(f"recorded_measure_launches={summary['launches']}")
    print(f"recorded_measure_rel_stdev={summary['stats']['rel_stdev']:.4f}")
    print(f"recorded_measure_power_w={summary['telemetry']['power_w']:.0f}")


def kineto_fixture(path: Path) -> None:
    """Raw Kineto fields of one real window (3 x [L2 flush, 1024^3 bf16 GEMM]): a CI fixture for the reader."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from pw.kernel_profile import kineto

    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    buf = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            buf.zero_()
            a @ a
        torch.cuda.synchronize()
    raw = [kineto.raw_fields(ev) for ev in prof.profiler.kineto_results.events()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "events": raw},
                               indent=1))
    print(f"kineto_fixture_events={len(raw)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kineto-fixture", metavar="PATH")
    ap.add_argument("--recorded", nargs="?", const="kernel-profile-h200", metavar="DIR",
                    help="summarize a recorded H200 run under tests/data (default kernel-profile-h200; "
                         "kernel-profile-h200-fill200 is the 200-spec one-GPU fill)")
    ap.add_argument("--device", metavar="OUT")
    ap.add_argument("--one-gpu-compare", action="store_true")
    ap.add_argument("--gemm-count", type=int, default=200)
    ap.add_argument("--fill-limit-s", type=float, default=400)
    ap.add_argument("--short", action="store_true", help="one spec each of rmsnorm/attention/all_reduce")
    a = ap.parse_args()
    if a.recorded:
        recorded(ROOT / "tests" / "data" / a.recorded)
    elif a.kineto_fixture:
        kineto_fixture(Path(a.kineto_fixture))
    elif a.device:
        device(Path(a.device), a.one_gpu_compare, a.gemm_count, a.short, a.fill_limit_s)
    else:
        cpu_count_missing()
