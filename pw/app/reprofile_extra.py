"""What a candidate's reprofile adds beyond the discovery adapter (issue 17):

- **Reuse by hash.** A candidate whose built executable is byte-identical to one already profiled
  with the same adapter (the baseline's, a parent's, another candidate's) reuses that capture's raw
  evidence instead of running the profiler again: the capture is recorded with ``reused_from`` (the
  source target) and the same ``executable_sha256``, normalized again under the candidate's label;
  `pw audit` checks that the source capture exists, holds the same executable hash and the same raw
  evidence. Only the executable file is hashed (a comment-only edit that compiles to the same bytes
  reuses; a Python script, whose interpreter is on PATH, never does).
- **The diagnosis adapter too.** When the baseline's diagnosis climbed to another adapter
  (callgrind's exact per-line instructions), the candidate is reprofiled with it as well, so the
  gates and the report show the diagnosis metric before and after (hotspot Ir), provided its
  estimated cost (measured overhead once known) fits ``routing.REPROFILE_BUDGET_S``.
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
    overheads = factors_for(handle.path, runtime, handle.ledger.events())  # other runs' and this run's captures
    chosen, why = routing.reprofile_adapters(discovery, answered[-1], runtime, installed_specs(), overheads)
    if answered[-1] not in chosen:
        progress(f"no {answered[-1]} reprofile: {why}")
        return None
    return answered[-1]
