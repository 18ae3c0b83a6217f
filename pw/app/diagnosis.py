"""The exact-count channel beside the timed one: a candidate's diagnosis-adapter reprofile.

Every timed run is profiled by the discovery adapter (``pw.app.campaign``), and the gates read
those. When the baseline's diagnosis climbed to another adapter (callgrind's exact per-line
instructions, callgrind-cachesim's cache misses), the candidate is profiled with it too, once, so
the report shows that noise-free channel's before and after (hotspot Ir) beside the timed one,
provided its estimated cost fits ``routing.REPROFILE_BUDGET_S``; no gate reads it. A GPU hotspot
diagnosed with Nsight Compute gets the same filtered capture on the candidate: the counters say why
the kernel's device time fell.

- **Reuse by hash.** A candidate whose built executable is byte-identical to one already profiled
  with the same adapter reuses that capture's raw evidence instead of running the profiler again:
  the capture is recorded with ``reused_from`` and the same ``executable_sha256``; `pw audit`
  checks that the source capture exists, holds the same executable hash and the same raw evidence.
- **Observed overhead.** Every capture records its profiled wall against the candidate's
  uninstrumented timed wall (``ProfileCaptured.overhead``), which `projections.overhead` folds.
"""

from __future__ import annotations

from ledger import events as ev
from pw.workload import capture as profiling
from pw.workload.steps import Target


def reusable_source(state, adapter: str, exe: str | None, label: str) -> ev.ProfileCaptured | None:
    """The latest capture with ``adapter`` of another target whose executable hashed to ``exe``."""
    if exe is None:
        return None
    found = None
    for cap in state.captures.values():
        if cap.adapter == adapter and cap.target != label and cap.executable_sha256 == exe:
            found = cap if cap.reused_from is None else found or cap
    return found


def reuse_source(state, timed: Target, adapter: str) -> ev.ProfileCaptured | None:
    """The capture ``timed``'s reprofile with ``adapter`` would reuse, if any."""
    return reusable_source(state, adapter, profiling.executable_digest(state.run.contract, timed), timed.label)


def capture_or_reuse(handle, state, timed: Target, profiled: Target, adapter: str, progress, *,
                     reuse: bool = True, source_root: str | None = None,
                     argv: list[str] | None = None) -> profiling.ProfileResult:
    """``profiled`` (the timed build, or its -g twin) captured with ``adapter``, or ``timed``'s
    byte-identical executable's earlier capture reused; the overhead and the hash recorded either way."""
    from projections.overhead import timed_wall

    contract = state.run.contract
    exe = profiling.executable_digest(contract, timed)
    source = reuse_source(state, timed, adapter) if reuse else None
    if source is not None:
        progress(f"reprofile with {adapter}: executable identical to {source.target}'s, reusing its profile")
        return profiling.reuse(contract, profiled, source, handle.evidence)
    result = profiling.capture(contract, profiled, adapter, handle.evidence, handle.path / "scratch",
                               source_root=source_root, argv=argv)
    return profiling.measured(result, timed_wall(state.timings, timed.label, contract.metric.kind), exe)


def diagnosis_adapter(handle, state, discovery: str, progress=lambda _m: None) -> str | None:
    """The adapter that answered the baseline's diagnosis (not the discovery one, not Nsight
    Compute, which has its own filtered path), when the cost model allows a candidate reprofile."""
    from adapters.registry import installed_specs
    from pw.app.overheads import factors_for
    from pw.app.profile_baseline import baseline_runtime
    from pw.rules import routing

    answered = [p.adapter for p in state.profiles.values() if p.target == "baseline"
                and p.adapter not in (discovery, "ncu")]
    if not answered:
        return None
    runtime = baseline_runtime(state)
    overheads = factors_for(handle.path, runtime, handle.events())  # other runs' and this run's captures
    chosen, why = routing.reprofile_adapters(discovery, answered[-1], runtime, installed_specs(), overheads)
    if answered[-1] not in chosen:
        progress(f"no {answered[-1]} reprofile: {why}")
        return None
    return answered[-1]


def diagnose(handle, state, target: Target, progress, *, reuse: bool = True):
    """The candidate's capture with the baseline's diagnosis adapter, recorded (or the state as it
    was when there is none or it does not fit the budget)."""
    from pw.workload import workspace

    discovery = state.routing.get("discovery")
    adapter = diagnosis_adapter(handle, state, discovery.chosen if discovery else "", progress)
    if adapter is None:
        return state
    progress(f"exact-count channel: {adapter}")
    before = workspace.snapshot(target.build_dir)
    result = capture_or_reuse(handle, state, target, target, adapter, progress, reuse=reuse)
    for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
        (target.build_dir / rel).unlink(missing_ok=True)
    return handle.record(state, [result.captured, result.normalized])


def gpu_counters(handle, state, target: Target, progress):
    """A GPU hotspot diagnosed with Nsight Compute at baseline gets the same filtered capture on the
    candidate, so the report can say which counter moved (why the kernel's device time fell)."""
    from pw.workload import workspace

    hot = state.hotspot
    if hot is None or not any(n.target == "baseline" and n.adapter == "ncu" for n in state.profiles.values()):
        return state
    launches = 0
    base = state.profiles.get(f"baseline:{state.routing['discovery'].chosen}") if "discovery" in state.routing else None
    if base is not None:
        from ledger.profile import decode_profile

        op = decode_profile(handle.evidence.get(base.profile_sha256)).operation(hot.operation)
        launches = int(op.self_metrics.get("kernel_launches", 0)) if op is not None else 0
    progress("counters with ncu")
    before = workspace.snapshot(target.build_dir)
    result = profiling.capture(state.run.contract, target, "ncu", handle.evidence, handle.path / "scratch",
                               focus=(hot.name, launches))
    for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
        (target.build_dir / rel).unlink(missing_ok=True)
    return handle.record(state, [result.captured, result.normalized])
