"""Preflight: compilers, Python, GPU, and each profiler's real usability, cached by a key.

The key hashes the host, the tool versions (cheap `--version` calls) and the workload's source
digest; the expensive part — a real probe run of every profiler — is reused from the cache when
the key matches, and the event says `cached: true`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from ledger import events as ev
from pw.workload import host


def probe_profilers() -> list[ev.ProfilerProbe]:
    from adapters.registry import installed_adapters

    probes = []
    for adapter in installed_adapters():
        u = adapter.probe()
        probes.append(
            ev.ProfilerProbe(
                name=adapter.spec.name, usable=u.usable, version=u.version or None, mode=u.mode or None, reason=u.reason
            )
        )
    return probes


def cache_key(host_info: ev.Host, tools: list[ev.ToolInfo], workload_digest: str) -> str:
    h = hashlib.sha256()
    h.update(msgspec.json.encode(host_info))
    h.update(msgspec.json.encode(tools))
    h.update(workload_digest.encode())
    h.update(os.environ.get("PATH", "").encode())  # a different PATH can hide or reveal a profiler
    return h.hexdigest()


def with_sandbox(result: ev.PreflightCompleted) -> ev.PreflightCompleted:
    """The sandbox found now (probed for real, ~10 ms, never taken from the cache: a sandbox that
    stopped working must not be reported as there)."""
    from pw.workload import containment

    found = containment.probe()
    return msgspec.structs.replace(
        result, sandbox=containment.describe(found) if found.sandbox is not None else None,
        sandbox_reasons=list(found.reasons),
    )


def run_preflight(host_info: ev.Host, workload_digest: str, cache_dir: Path) -> ev.PreflightCompleted:
    compilers = [host.tool_version(name) for name in host.COMPILERS]
    profiler_tools = [host.tool_version(name) for name in host.PROFILER_TOOLS]
    key = cache_key(host_info, compilers + profiler_tools, workload_digest)
    cached = cache_dir / f"{key}.json"
    if cached.is_file():
        try:
            previous = msgspec.json.decode(cached.read_bytes(), type=ev.PreflightCompleted)
            return with_sandbox(msgspec.structs.replace(previous, cached=True))
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # a damaged cache entry is simply recomputed
    result = ev.PreflightCompleted(
        cache_key=key,
        cached=False,
        compilers=[c for c in compilers if c.path is not None],
        python=host_info.python,
        gpu=host.gpu_name(),
        profilers=probe_profilers(),
    )
    from projections.materialize import write_atomic

    write_atomic(cached, msgspec.json.encode(result))
    return with_sandbox(result)
