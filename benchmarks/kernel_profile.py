"""Kernel-profile cache benchmarks. Output ends in key=value lines.

    python benchmarks/kernel_profile.py                 # CPU: count-missing on 100,000 specs (head check on)
    python benchmarks/kernel_profile.py --quick         # the same, one repetition (CI calls this; < 20 s)
    python benchmarks/kernel_profile.py --precision OUT # GPU host: the device scenario of issue #29
    python benchmarks/kernel_profile.py --dobench PATH  # GPU host: pw's timer against triton's do_bench
    python benchmarks/kernel_profile.py --device OUT    # GPU host: the device scenario of issue #15
    python benchmarks/kernel_profile.py --device OUT --one-gpu-compare   # and 1 GPU vs 2 GPUs
    python benchmarks/kernel_profile.py --recorded      # the H200 run kept in tests/data, summarized
    python benchmarks/kernel_profile.py --recorded-precision   # the issue #29 run kept in tests/data

The device scenarios run the real CLI (`python -m pw.cli kernel-profile ...`) as a user would and
keep every output under OUT: the cache ledger, profile.db, the snapshots and the JSON answers.
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


def cpu_count_missing(quick: bool = False) -> None:
    """count-missing on 100,000 specs: against an empty database, then against one holding a verified
    row for every spec (`--quick`: for half of them, one repetition, no separate CLI process), each
    through the head check every verb pays first. A full verification of the ledger (what a verb pays
    once after another writer appended) is timed too."""
    from pw.kernel_profile import registry, service, specs
    from pw.kernel_profile.cache import Cache

    entry = registry.lookup("single_gemm", "torch")
    n_rows = 50_000 if quick else 100_000
    reps = 1 if quick else 3
    gpu = service.GpuKey("H200", "argument")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "specs.json"
        rows = [{"m": 64 + i % 1000, "n": 128 + i // 1000, "k": 4096, "dtype": "bf16"} for i in range(100_000)]
        path.write_text(json.dumps(rows))
        cache = Cache(Path(tmp) / "profile.db")
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            parsed = specs.parse(entry, spec=None, specs_path=str(path))
            body = service.count_missing(entry, parsed, gpu, cache)
            best = min(best, time.perf_counter() - t0)
        assert body["missing_count"] == 100_000
        from ledger.kernel_events import KernelMeasured, SampleStats, Telemetry

        prov = {f: "x" for f in entry.provenance_fields}
        stats = SampleStats(n=10, median_ms=1.0, mean_ms=1.0, q1_ms=1.0, q3_ms=1.0, rel_stdev=0.001,
                            gpu_time_s=0.5, stop_reason="converged", statistic="mean", rel_ci_half_width=0.004)
        cache.ledger.append([KernelMeasured(
            table="single_gemm", backend="torch", gpu_name="H200", arg_names=list(entry.arg_names),
            arg_values=[r["m"], r["n"], r["k"], r["dtype"]], metrics={"time_ms": 1.0}, stats=stats,
            telemetry=Telemetry(), provenance=prov, profiler_revision=entry.profiler_revision) for r in rows[:n_rows]],
            expected_seq=None)
        t0 = time.perf_counter()
        cache.rebuild()
        rebuild_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        cache.check()  # what every verb pays first: the database against the ledger's tail
        head_check_s = time.perf_counter() - t0
        hits = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            parsed = specs.parse(entry, spec=None, specs_path=str(path))
            body = service.count_missing(entry, parsed, gpu, cache)
            hits = min(hits, time.perf_counter() - t0)
        assert body["missing_count"] == 100_000 - n_rows
        t0 = time.perf_counter()
        assert Cache(cache.db).ledger.verify().ok
        verify_s = time.perf_counter() - t0
        cli = None
        if not quick:  # and through the whole CLI process (interpreter start and imports included)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pw.cli", "kernel-profile", "count-missing", "single_gemm",
                            "--backend", "torch", "--specs", str(path), "--gpu-name", "H200", "--db", str(cache.db),
                            "--json"], check=True, cwd=ROOT, capture_output=True)
            cli = time.perf_counter() - t0
    k = n_rows // 1000
    print(f"count_missing_100k_specs_empty_db_s={best:.3f}")
    print(f"count_missing_100k_specs_{k}k_rows_s={hits:.3f}")
    print(f"head_check_{k}k_row_ledger_s={head_check_s:.4f}")
    print(f"full_verify_{k}k_row_ledger_s={verify_s:.3f}")
    print(f"rebuild_{k}k_rows_s={rebuild_s:.3f}")
    if cli is not None:
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


# --- issue #29: precision under the new rule, pw against do_bench, the autotuned backend twice ---

DOBENCH_SHAPES = [{"m": 8192, "n": 8192, "k": 8192}, {"m": 4096, "n": 4096, "k": 4096},
                  {"m": 2048, "n": 8192, "k": 4096}]
TRITON_SPECS = [{"m": m, "n": n, "k": 4096, "dtype": "bf16"} for m, n in ((3072, 4096), (4096, 4096), (1536, 8192),
                                                                        (2048, 8192))]


def _summary_of(results: list[dict]) -> dict:
    """How many rows converged, their precision and per-launch spread, and the clock state."""
    ok = [r for r in results if r.get("status") == "ok"]
    if not ok:
        return {"rows": 0}

    def med(xs):
        xs = sorted(x for x in xs if x is not None)
        return xs[len(xs) // 2] if xs else None

    st = [r["stats"] for r in ok]
    tel = [r["telemetry"] for r in ok]
    return {
        "rows": len(ok), "converged": sum(s["stop_reason"] == "converged" for s in st),
        "rel_ci_median": med(s["rel_ci_half_width"] for s in st),
        "rel_ci_max": max(s["rel_ci_half_width"] or 0 for s in st),
        "rel_ci_le_0p5pct": sum((s["rel_ci_half_width"] or 1) <= 0.005 for s in st),
        "rel_stdev_median": med(s["rel_stdev"] for s in st), "rel_stdev_max": max(s["rel_stdev"] for s in st),
        "lag1_median": med(s["lag1_autocorr"] for s in st), "gpu_time_s_median": med(s["gpu_time_s"] for s in st),
        "launches_median": med(s["n"] for s in st),
        "sm_clock_mhz_median": med(t["sm_clock_mhz"] for t in tel),
        "sm_clock_min_mhz": min((t["sm_clock_min_mhz"] for t in tel if t["sm_clock_min_mhz"]), default=None),
        "sm_clock_max_mhz": max((t["sm_clock_max_mhz"] for t in tel if t["sm_clock_max_mhz"]), default=None),
        "mem_clock_mhz_median": med(t["mem_clock_mhz"] for t in tel),
        "power_w_median": med(t["power_w"] for t in tel), "power_limit_w": med(t["power_limit_w"] for t in tel),
        "power_capped_rows": sum(bool(t["power_capped"]) for t in tel),
    }


def precision_scenario(out: Path, count: int, timeout_s: float) -> None:
    """The device run of issue #29, through the real CLI: a `count`-GEMM fill under the precision rule,
    the Triton backend filled twice on one database (the second run re-measures with --force and must
    reuse every tuning), and the do_bench table. Every step is bounded; every answer is kept under OUT
    and every key=value line is written to OUT/bench.txt as soon as it is known."""
    out.mkdir(parents=True, exist_ok=True)
    db = out / "cache" / "profile.db"
    base = ["--db", str(db), "--json"]
    env = {"PW_PROFILE_TIMEOUT_S": str(timeout_s), "PW_PROFILE_PROGRESS": "1"}

    def note(**kv) -> None:
        with open(out / "bench.txt", "a") as f:
            for k, v in kv.items():
                print(f"{k}={v}", flush=True)
                f.write(f"{k}={v}\n")

    note(timeout_s=timeout_s, gemm_specs=count)
    specs = gemm_specs(count)
    spec_file = out / "gemm_specs.json"
    spec_file.write_text(json.dumps(specs))
    rc, body, _ = cli(out, "count_before", ["count-missing", "single_gemm", "--backend", "torch", "--specs",
                                            str(spec_file), *base])
    note(count_missing_before=body.get("missing_count"))
    rc, body, wall = cli(out, "fill_gemm", ["run", "single_gemm", "--backend", "torch", "--specs", str(spec_file),
                                          "--output-dir", str(out / "snap_fill_gemm"), *base], env, limit_s=250)
    note(fill_gemm_rc=rc, fill_gemm_wall_s=round(wall, 2), fill_gemm_measure_wall_s=body.get("measure_wall_s"),
         fill_gemm_missing=body.get("missing_count"), fill_gemm_failed=body.get("failed_count"))
    note(**{f"fill_gemm_{k}": v for k, v in _summary_of(body.get("results", [])).items()})
    rc, body, _ = cli(out, "count_after", ["count-missing", "single_gemm", "--backend", "torch", "--specs",
                                           str(spec_file), *base])
    note(count_missing_after=body.get("missing_count"))
    rc, body, _ = cli(out, "query_gemm", ["query", "single_gemm", "--backend", "torch", "--specs", str(spec_file), *base])
    note(query_results=len(body.get("results", [])), query_ok=sum(r["status"] == "ok" for r in body.get("results", [])))
    tspecs = out / "triton_specs.json"
    tspecs.write_text(json.dumps(TRITON_SPECS))
    tenv = {**env, "TRITON_CACHE_DIR": str(out / "triton-cache")}
    for name, extra in (("triton_run1", []), ("triton_run2", ["--force"])):
        rc, body, wall = cli(out, name, ["run", "single_gemm", "--backend", "triton", "--specs", str(tspecs), *extra,
                                         *base], tenv, limit_s=100)
        tuning = body.get("autotune") or {}
        note(**{f"{name}_rc": rc, f"{name}_wall_s": round(wall, 2), f"{name}_measure_wall_s": body.get("measure_wall_s"),
                f"{name}_ok": sum(r["status"] == "ok" for r in body.get("results", []))})
        note(**{f"{name}_autotune_{k}": v for k, v in tuning.items()})
        note(**{f"{name}_{k}": v for k, v in _summary_of(body.get("results", [])).items()
                if k in ("converged", "rel_ci_median", "sm_clock_mhz_median")})
    rc, body, _ = cli(out, "count_after_triton", ["count-missing", "single_gemm", "--backend", "triton", "--specs",
                                                  str(tspecs), *base])
    note(count_missing_after_triton=body.get("missing_count"))
    from pw.kernel_profile.cache import Cache

    if db.with_name("profile.ledger.jsonl").exists():
        re_db = out / "rebuilt" / "profile.db"
        re_db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(db.with_name("profile.ledger.jsonl"), re_db.with_name("profile.ledger.jsonl"))
        Cache(re_db).rebuild()
        import sqlite3

        note(rebuild_byte_identical=sha(re_db) == sha(db), profile_db_sha256=sha(db),
             sqlite_version=sqlite3.sqlite_version)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--dobench", str(out / "dobench.json"),
                            "--timeout-s", str(timeout_s)], cwd=ROOT, timeout=100, capture_output=True, text=True)
        print(p.stdout[-6000:] + p.stderr[-3000:], flush=True)
        (out / "dobench.log").write_text(p.stdout + p.stderr)
        rc = p.returncode
    except subprocess.TimeoutExpired as exc:
        (out / "dobench.log").write_text(str(exc.stdout or "") + str(exc.stderr or ""))
        rc = "timeout"
    note(dobench_rc=rc, dobench_wall_s=round(time.perf_counter() - t0, 1))


def dobench_table(path: Path, shapes: list[dict], timeout_s: float, idle_s: float = 1.0) -> None:
    """One table: the same bf16 GEMM (torch.matmul, the cache's callable) timed every way that could
    explain a gap between pw's rows and `triton.testing.do_bench`, each after `idle_s` of idle GPU and
    with NVML's clocks over its own window. Short windows first, then long ones, then do_bench again
    on the hot GPU."""
    import torch
    import triton

    from pw.kernel_profile import nvml
    from pw.kernel_profile.protocol import Settings
    from pw.kernel_profile.timing import Timer

    torch.cuda.init()
    timer = Timer(Settings(timeout_s=timeout_s), 0)
    big_flush = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")  # do_bench's own buffer size
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    rows: list[dict] = []
    for shape in shapes:  # the file is rewritten after every shape: a cut-short run keeps what it measured
        rows += _dobench_shape(shape, timer, big_flush, nvml.power_limit_w(0), g, idle_s)
        path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                    "triton": triton.__version__, "idle_s": idle_s, "timeout_s": timeout_s,
                                    "rows": rows}, indent=1))


def _dobench_shape(shape: dict, timer, big_flush, limit, g, idle_s: float) -> list[dict]:
    import numpy as np
    import torch
    import triton.testing

    from pw.kernel_profile import kineto, nvml, precision
    from pw.kernel_profile.timing import telemetry_of

    m, n, k = shape["m"], shape["n"], shape["k"]
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    own_flush = timer.flush_buf

    def fn():
        torch.matmul(a, b, out=c)

    call = timer.prepare(fn)
    per_call, per_flush, _ = timer.calibrate(call)
    est_ms = triton.testing.do_bench(fn, warmup=5, rep=20)
    warm = max(1, int(25 / est_ms))  # do_bench's 25 ms warm-up

    def cupti(window_s: float, flush_buf) -> list[float]:
        timer.flush_buf = flush_buf
        try:
            for _ in range(warm):
                call()
            left, got = max(10, int(window_s * 1e3 / est_ms)), []
            while left > 0:
                step = min(left, 20000)
                recs = timer._window(call, step, True)
                got += kineto.per_invocation(recs, per_call=per_call, separator=per_flush, n=step, names=timer.names)
                left -= step
            return [x / 1e6 for x in got]
        finally:
            timer.flush_buf = own_flush

    def events(window_s: float) -> list[float]:
        for _ in range(warm):
            call()
        count = max(10, int(window_s * 1e3 / est_ms))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        torch.cuda.synchronize()
        for i in range(count):
            timer.flush()
            starts[i].record()
            call()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def pw_row() -> list[float]:
        ns, _, _ = timer.samples(call, per_call, per_flush)
        return [x / 1e6 for x in ns]

    def do_bench(rep_ms: int = 100) -> list[float]:
        return triton.testing.do_bench(fn, rep=rep_ms, return_mode="all")

    variants = [
        ("do_bench", "triton do_bench defaults: 25 ms warm-up, 100 ms window, 256 MB flush, CUDA events", do_bench,
         idle_s),
        ("cupti_100ms", "pw's CUPTI sum and 2xL2 flush, do_bench's 100 ms window", lambda: cupti(0.1, own_flush),
         idle_s),
        ("cupti_100ms_256MB", "the same with do_bench's 256 MB flush", lambda: cupti(0.1, big_flush), idle_s),
        ("events_100ms", "CUDA events around each launch, pw's flush, 100 ms", lambda: events(0.1), idle_s),
        ("do_bench_2s", "do_bench with a 2 s window", lambda: do_bench(2000), idle_s),
        ("cupti_2s", "pw's CUPTI sum, a 2 s window", lambda: cupti(2.0, own_flush), idle_s),
        ("pw_row", f"the cache's timer and rule ({timer.s.timeout_s:g} s timeout)", pw_row, idle_s),
        ("do_bench_hot", "do_bench defaults again, right after the long windows (no idle)", do_bench, 0.0),
    ]
    rows = []
    for name, what, run, pause in variants:
        time.sleep(pause)
        with nvml.Sampler(0, hz=50) as sampler:
            t0 = time.monotonic()
            ms = np.asarray(run(), dtype=np.float64)
            wall = time.monotonic() - t0
        tel = telemetry_of(sampler.rows, limit)
        prec = precision.mean_interval(ms)
        rows.append({**shape, "dtype": "bf16", "variant": name, "what": what, "launches": int(ms.size),
                     "mean_ms": float(ms.mean()), "median_ms": float(np.median(ms)),
                     "rel_stdev": float(ms.std(ddof=1) / ms.mean()), "rel_ci_half_width": prec.rel_half_width,
                     "lag1": prec.lag1, "window_s": round(wall, 3), "sm_clock_mhz": tel.sm_clock_mhz,
                     "sm_clock_min_mhz": tel.sm_clock_min_mhz, "sm_clock_max_mhz": tel.sm_clock_max_mhz,
                     "power_w": tel.power_w, "power_limit_w": tel.power_limit_w, "power_capped": tel.power_capped,
                     "power_cap_fraction": tel.power_cap_fraction, "temperature_c": tel.temperature_c})
        r = rows[-1]
        print(f"{m}x{n}x{k} {name:<18} mean {r['mean_ms']:.4f} ms median {r['median_ms']:.4f} n={r['launches']} "
              f"sm={r['sm_clock_mhz']} W={r['power_w'] and round(r['power_w'])} capped={r['power_capped']}", flush=True)
    return rows


def recorded_precision(data: Path) -> None:
    """key=value lines of the issue #29 device run kept under tests/data (no GPU needed)."""
    lines = (data / "bench.txt").read_text().splitlines()
    for line in lines:
        if "=" in line and not line.startswith("#"):
            print(line)


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
    ap.add_argument("--quick", action="store_true", help="count-missing with one repetition of each step")
    ap.add_argument("--precision", metavar="OUT", help="the issue #29 device scenario")
    ap.add_argument("--timeout-s", type=float, default=3.0, help="--precision: per-spec timeout of the rule")
    ap.add_argument("--dobench", metavar="PATH", help="the do_bench comparison table, as JSON at PATH")
    ap.add_argument("--recorded-precision", nargs="?", const="kernel-profile-h200-precision", metavar="DIR")
    a = ap.parse_args()
    if a.recorded_precision:
        recorded_precision(ROOT / "tests" / "data" / a.recorded_precision)
    elif a.precision:
        precision_scenario(Path(a.precision), a.gemm_count if a.gemm_count != 200 else 40, a.timeout_s)
    elif a.dobench:
        dobench_table(Path(a.dobench), DOBENCH_SHAPES, a.timeout_s)
    elif a.recorded:
        recorded(ROOT / "tests" / "data" / a.recorded)
    elif a.kineto_fixture:
        kineto_fixture(Path(a.kineto_fixture))
    elif a.device:
        device(Path(a.device), a.one_gpu_compare, a.gemm_count, a.short, a.fill_limit_s)
    else:
        cpu_count_missing(a.quick)
