"""The four cache verbs as functions over (entry, specs): list, count-missing, query, run.

`query` and `count-missing` only read. `run` reads the hits, measures the misses (all specs with
`force`/`fresh`) through the executor, appends the measurements to the cache ledger, and then
answers through the same lookup `query` uses; with `fresh` nothing is appended and the answer is
the measurement itself.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass

import msgspec

from ledger.errors import InputError
from ledger.kernel_events import KernelMeasured, KernelMeasurementFailed, SampleStats, Telemetry
from pw.kernel_profile import executor, registry
from pw.kernel_profile.cache import Cache, key_for, verify
from pw.kernel_profile.protocol import Done, Failed, Settings
from pw.kernel_profile.registry import Entry
from pw.kernel_profile.specs import as_dict

STAT_FIELDS = tuple(SampleStats.__struct_fields__)
TELEMETRY_FIELDS = tuple(f for f in Telemetry.__struct_fields__ if f != "samples")


@dataclass
class GpuKey:
    name: str
    source: str  # "argument" (--gpu-name) or "resolved" (the device's name, normalized)
    device_name: str = ""


def resolve_gpu(gpu_name: str | None, devices: list[int] | None = None) -> GpuKey:
    """`--gpu-name` is a key, never a device selector; without it the devices' normalized name."""
    if gpu_name is not None:
        if not gpu_name.strip():
            raise InputError("--gpu-name: empty (expected a database GPU key such as H200)")
        return GpuKey(gpu_name.strip(), "argument")
    from pw.kernel_profile import nvml

    pinned = os.environ.get("PW_PROFILE_GPUS", "").strip()
    try:
        if devices is None:
            devices = [int(x) for x in pinned.split(",") if x.strip()] if pinned else list(range(nvml.device_count()))
        if not devices:
            raise InputError("--gpu-name: no GPU to read a name from; pass --gpu-name NAME (the database key)")
        raw = {nvml.device_name(i) for i in devices}
    except nvml.NvmlUnavailable as exc:
        # Pinning devices does not name them: the database key is what is missing.
        where = f" of the pinned devices (PW_PROFILE_GPUS={pinned})" if pinned else ""
        raise nvml.NvmlUnavailable(f"--gpu-name: cannot read the GPU name{where}: {exc}; pass --gpu-name NAME "
                                   "(the database key, e.g. H200)") from None
    except ValueError:
        raise InputError(f"PW_PROFILE_GPUS={pinned!r}: expected comma-separated device indices, e.g. 0,1") from None
    if len(raw) > 1:
        raise InputError(f"--gpu-name: the GPUs here differ ({', '.join(sorted(raw))}); pass --gpu-name")
    name = raw.pop()
    return GpuKey(nvml.normalize_gpu_name(name), "resolved", name)


def list_entries() -> list[dict]:
    return [e.describe() for e in registry.entries()]


def _row_result(entry: Entry, index: int, spec, row: dict | None, *, full: bool) -> dict:
    out: dict = {"index": index, "args": as_dict(spec)}
    if row is None:
        out["status"] = "missing"
        return out
    why = verify(entry, row)
    out["status"] = "unverified" if why else "ok"
    if why:
        out["unverified_reason"] = why
    if full:
        out["metrics"] = {m: row.get(m) for m in entry.metric_family}
        out["stats"] = {f: row.get("n_samples" if f == "n" else f) for f in STAT_FIELDS}
        out["telemetry"] = {f: row.get(f) for f in TELEMETRY_FIELDS}
        if out["telemetry"].get("power_capped") is not None:
            out["telemetry"]["power_capped"] = bool(out["telemetry"]["power_capped"])  # SQLite keeps 0/1
        out["provenance"] = json.loads(row.get("provenance") or "{}")
        out["profiler_revision"] = row.get("profiler_revision")
    return out


def _summary(entry: Entry, gpu: GpuKey, cache: Cache, specs: list, results: list[dict]) -> dict:
    return {
        "table": entry.table, "backend": entry.backend, "gpu_name": gpu.name, "gpu_name_source": gpu.source,
        "db": str(cache.db), "spec_count": len(specs),
        "missing_count": sum(r["status"] != "ok" for r in results),
        "unverified_count": sum(r["status"] == "unverified" for r in results),
    }


def count_missing(entry: Entry, specs: list, gpu: GpuKey, cache: Cache) -> dict:
    hits = cache.verdicts(entry, gpu.name)
    missing = unverified = 0
    for spec in specs:
        hit = hits.get(key_for(spec))
        if hit is None:
            missing += 1
        elif not hit:
            unverified += 1
    return {"table": entry.table, "backend": entry.backend, "gpu_name": gpu.name, "gpu_name_source": gpu.source,
            "db": str(cache.db), "spec_count": len(specs), "missing_count": missing + unverified,
            "absent_count": missing, "unverified_count": unverified}


def query(entry: Entry, specs: list, gpu: GpuKey, cache: Cache) -> dict:
    rows = cache.rows(entry, gpu.name, full=True)
    results = [_row_result(entry, i, s, rows.get(key_for(s)), full=True) for i, s in enumerate(specs)]
    return {**_summary(entry, gpu, cache, specs, results), "results": results}


def _events(entry: Entry, gpu: GpuKey, measured: list[tuple[dict, Done | Failed, int]], batch_id: str) -> list:
    """One event per measured key: (args, the worker's answer, the device that answered)."""
    names = list(entry.arg_names)
    out: list = []
    for a, r, device in measured:
        values = [a[n] for n in names]
        if isinstance(r, Done):
            m = r.measurement
            prov = {**m.provenance, "backend": entry.backend, "gpu_name": gpu.name,
                    "profiler_revision": entry.profiler_revision, "device_name": m.device_name,
                    "shape": ",".join(f"{n}={a[n]}" for n in names)}
            out.append(KernelMeasured(table=entry.table, backend=entry.backend, gpu_name=gpu.name, arg_names=names,
                                      arg_values=values, metrics=m.metrics, stats=m.stats, telemetry=m.telemetry,
                                      provenance=prov, profiler_revision=entry.profiler_revision,
                                      device_index=device, batch_id=batch_id))
        else:
            out.append(KernelMeasurementFailed(table=entry.table, backend=entry.backend, gpu_name=gpu.name,
                                               arg_names=names, arg_values=values, error=r.error,
                                               message=r.message, batch_id=batch_id))
    return out


def too_large(entry: Entry, args: dict, memory_bytes: int | None) -> Failed | None:
    """A spec whose tensors alone exceed the device's memory, refused before any worker starts."""
    if entry.device_bytes is None or not memory_bytes:
        return None
    need = entry.device_bytes(entry.args(**args))
    if need <= memory_bytes:
        return None
    return Failed(-1, "too_large", f"needs at least {need / 2**30:.1f} GiB of device memory for its tensors; "
                  f"the GPU has {memory_bytes / 2**30:.1f} GiB: not measured")


def autotune_summary(results: list[dict]) -> dict | None:
    """The tunings this call paid for and those it found already made, by key: a key is tuned when
    one of its rows in this call tuned it (a second spec or worker of the same key then reused it,
    as Triton's in-process cache also would), reused when every row found it stored by an earlier
    run. `saved_s` is the tuning time, as recorded when it was paid, that the reused keys cost
    nothing now."""
    keys: dict[str, dict] = {}
    for r in results:
        p = r.get("provenance") or {}
        if r.get("status") != "ok" or not p.get("autotune"):
            continue
        k = keys.setdefault(p["autotune_key"], {"tuned": False, "tuning_s": 0.0, "wait_s": 0.0})
        k["tuned"] |= p["autotune"] == "tuned"
        k["tuning_s"] = float(p.get("autotune_tuning_s") or 0)
        k["wait_s"] = max(k["wait_s"], float(p.get("autotune_wait_s") or 0))
    if not keys:
        return None
    tuned = [k["tuning_s"] for k in keys.values() if k["tuned"]]
    reused = [k["tuning_s"] for k in keys.values() if not k["tuned"]]
    return {"keys": len(keys), "tuned": len(tuned), "reused": len(reused), "tuning_s": round(sum(tuned), 3),
            "saved_s": round(sum(reused), 3), "wait_s": round(sum(k["wait_s"] for k in keys.values()), 3)}


def _store(cache: Cache, events: list) -> None:
    """Append to the cache ledger; a failure here (a disk that filled, a mount gone read-only
    mid-run) must not lose the GPU time: the events go to a file that the error names."""
    import tempfile

    from ledger.errors import ToolError

    try:
        cache.ledger.append(events, expected_seq=None, actor="kernel-profile")
    except OSError as exc:
        fd, salvage = tempfile.mkstemp(prefix="pw-kernel-profile-unstored-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.encode([{"type": e.TYPE, "data": e} for e in events]) + b"\n")
        raise ToolError(f"--db {cache.db}: measured {len(events)} spec(s) but could not append them to "
                        f"{cache.ledger.path} ({exc.strerror}); the measurements are kept in {salvage}") from None
    cache.rebuild()


def run(entry: Entry, specs: list, gpu_name: str | None, cache: Cache, *, force: bool, fresh: bool,
        settings: Settings, devices=None) -> dict:
    """Everything that can refuse the call (a read-only database, a lost or damaged ledger, a spec
    beyond the device's memory) is checked before any GPU work starts."""
    if force and fresh:
        raise InputError("--force and --fresh: give at most one (--fresh measures like --force and stores nothing)")
    mode = "fresh" if fresh else "force" if force else "jit-fill"
    if not fresh:
        cache.check_writable()
        cache.check()
    devices = devices or executor.choose_devices()
    gpu = resolve_gpu(gpu_name, devices.indices)
    before = count_missing(entry, specs, gpu, cache) if not fresh else None
    todo = to_measure(entry, specs, gpu, cache, everything=force or fresh)
    batch_id = uuid.uuid4().hex
    answers, where, outcome = _measure(entry, todo, settings, devices, cache, fresh)
    keys = list(todo)
    failures = [{"args": todo[k], "error": answers[k].error, "message": answers[k].message}
                for k in keys if isinstance(answers[k], Failed)]
    if fresh:
        body = _fresh_body(entry, specs, gpu, cache, answers)
    else:
        if keys:
            _store(cache, _events(entry, gpu, [(todo[k], answers[k], where.get(k, 0)) for k in keys], batch_id))
        body = query(entry, specs, gpu, cache)
        body["persisted"] = bool(keys)
        failed_by_key = {key_for(entry.args(**f["args"])): f for f in failures}
        for r in body["results"]:
            f = failed_by_key.get(key_for(entry.args(**r["args"])))
            if f and r["status"] != "ok":
                r["error"], r["message"] = f["error"], f["message"]
    tuning = autotune_summary([r for r in body["results"] if fresh or key_for(entry.args(**r["args"])) in todo])
    body.update({
        "mode": mode, "measured_count": len(keys), "failed_count": len(failures),
        "missing_before": before["missing_count"] if before else None,
        "devices": devices.indices, "devices_pinned": devices.pinned, "warnings": devices.warnings,
        "device_name": gpu.device_name or None, "batch_id": batch_id if keys else None,
        "worker_slots": {str(g): s for g, s in (outcome.slots.items() if outcome else [])},
        "measure_wall_s": round(outcome.wall_s, 3) if outcome else 0.0,
    })
    if tuning is not None:
        body["autotune"] = tuning
    return body


def to_measure(entry: Entry, specs: list, gpu, cache: Cache, *, everything: bool) -> dict[tuple, dict]:
    """Distinct keys to measure, in first-appearance order (duplicates are measured once): every
    spec, or those the cache lacks or holds a row of that fails verification."""
    todo: dict[tuple, dict] = {}
    if everything:
        for s in specs:
            todo.setdefault(key_for(s), as_dict(s))
        return todo
    rows = cache.rows(entry, gpu.name, full=False)
    for s in specs:
        row = rows.get(key_for(s))
        if row is None or verify(entry, row):
            todo.setdefault(key_for(s), as_dict(s))
    return todo


def _measure(entry: Entry, todo: dict[tuple, dict], settings: Settings, devices, cache: Cache, fresh: bool):
    """(each key's answer, the device each measured key ran on, the batch's outcome or None): specs
    too large for the devices' memory are refused without running; the rest run as one batch."""
    answers: dict[tuple, Done | Failed] = {}
    where: dict[tuple, int] = {}
    for k, a in todo.items():
        refused = too_large(entry, a, devices.memory_bytes)
        if refused is not None:
            answers[k] = refused
    dispatch = [k for k in todo if k not in answers]
    outcome = None
    if dispatch:
        outcome = executor.run_batch(entry, [todo[k] for k in dispatch], settings, devices,
                                     autotune_dir=str(cache.autotune_dir), autotune_store=not fresh)
        for i, k in enumerate(dispatch):
            answers[k] = outcome.results[i]
            where[k] = outcome.device_groups.get(i, [0])[0]
    return answers, where, outcome


def _fresh_body(entry: Entry, specs: list, gpu, cache: Cache, answers: dict[tuple, Done | Failed]) -> dict:
    """--fresh: the measurements as they came, one result per spec, nothing stored."""
    results = []
    for i, s in enumerate(specs):
        r = answers[key_for(s)]
        if isinstance(r, Done):
            m = r.measurement
            results.append(fresh_result(i, as_dict(s), {f: m.metrics.get(f) for f in entry.metric_family},
                                        m.stats, m.telemetry, m.provenance))
        else:
            results.append(missing_result(i, as_dict(s), r.error, r.message))
    return fresh_answer(entry, specs, gpu, cache, results)


def fresh_result(index: int, args: dict, metrics: dict, stats, telemetry, provenance) -> dict:
    """One measured spec of a --fresh answer (here and in a Slurm fill, pw.remote.kernel_fill)."""
    return {"index": index, "args": args, "status": "ok", "source": "fresh", "metrics": metrics,
            "stats": msgspec.to_builtins(stats), "telemetry": msgspec.to_builtins(telemetry),
            "provenance": provenance}


def missing_result(index: int, args: dict, error: str | None = None, message: str | None = None) -> dict:
    """One spec of a --fresh answer that has no measurement (and why, when it is known)."""
    return {"index": index, "args": args, "status": "missing",
            **({"error": error, "message": message} if error is not None else {})}


def fresh_answer(entry: Entry, specs: list, gpu, cache: Cache, results: list[dict]) -> dict:
    """The --fresh answer around its results: nothing was stored, so nothing is unverified."""
    return {"table": entry.table, "backend": entry.backend, "gpu_name": gpu.name, "gpu_name_source": gpu.source,
            "db": str(cache.db), "spec_count": len(specs),
            "missing_count": sum(r["status"] != "ok" for r in results), "unverified_count": 0,
            "persisted": False, "results": results}
