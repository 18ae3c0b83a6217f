"""How a campaign's timed runs are profiled: which adapter, and how each run's cost is split.

One kind of run (gate rules 19): every timed run of every arm runs under the timed profiler of the
program's language (``pw.rules.routing.timed_profiler``: perf for native code, py-spy for Python,
CUPTI for CUDA), and each run's profile is reduced by the candidate's ``Attribution``: the hotspot's
code in the reference's tree, and in the candidate's the hotspot's code plus every function and line
its patch changed (``pw.agent.source.regions``).
"""

from __future__ import annotations

import msgspec

from adapters.registry import adapter_by_name
from ledger import events as ev
from projections.state import RunState
from pw.agent.source import regions
from pw.app.campaign import Profiling
from pw.app.run import RunHandle
from pw.rules import routing
from pw.workload import debug_build
from pw.workload import steps as execute
from pw.workload.capture import language_of


def timed_adapter(state: RunState) -> str | None:
    """The adapter every timed run of this run is profiled with: the one `pw start` profiled the
    baseline's timed runs with, so every campaign of a run profiles alike (None: none usable)."""
    recorded = next((t.profiler.adapter for t in state.timings if t.purpose == "baseline-variance"
                     and t.profiler is not None), None)
    if recorded is not None:
        return recorded
    return usable_timed_adapter(state)


def usable_timed_adapter(state: RunState) -> str | None:
    from adapters.base import Usability

    usable = {p.name: Usability(usable=p.usable, reason=p.reason, version=p.version or "", mode=p.mode or "")
              for p in (state.preflight.profilers if state.preflight else [])}
    contract = state.run.contract
    return routing.timed_profiler(language_of(contract.run.argv, contract.source.editable), usable)


def tree_files(root, files: list[str]) -> dict[str, bytes]:
    """The readable files of a tree (relative path -> bytes): what the parsers read."""
    out = {}
    for rel in files:
        try:
            out[rel] = (root / rel).read_bytes()
        except OSError:
            continue
    return out


def parent_files(handle: RunHandle, manifest_sha: str) -> dict[str, bytes]:
    """The parent's stored source (its manifest: relative path -> content sha256) as bytes."""
    manifest: dict[str, str] = msgspec.json.decode(handle.evidence.get(manifest_sha))
    return {rel: handle.evidence.get(sha) for rel, sha in sorted(manifest.items())}


def attribution_for(handle: RunHandle, state: RunState, cid: str, candidate: execute.Target) -> ev.Attribution | None:
    """What counts as the hotspot's part in each arm of ``cid``'s campaign (None without a hotspot)."""
    hot = state.hotspot
    cand = state.candidates[cid]
    if hot is None or cand.diff is None:
        return None
    patch = handle.evidence.get(cand.diff.patch_sha256)
    return regions.attribution(hot.operation, hot.name, hot.file,
                               parent_files(handle, cand.prepared.parent_manifest_sha256),
                               tree_files(candidate.src_dir, candidate.files), patch)


def profiling_for(handle: RunHandle, state: RunState, reference: execute.Target, arms: list[execute.Target],
                  attribution: ev.Attribution | None) -> Profiling | None:
    """The profiling of a campaign over ``reference`` and ``arms`` (None: no timed profiler here,
    and the campaign times unprofiled pairs, whose mechanism cannot be shown)."""
    name = timed_adapter(state)
    if name is None:
        return None
    adapter = adapter_by_name(name)
    if adapter.timed_wrap("/nonexistent") is None:
        return None
    roots = {}
    twins = {}
    for t in [reference, *arms]:
        twin = debug_build.twin(state.run.contract, t, handle.evidence, handle.logs, handle.path / "scratch")
        if twin is not None:  # a build without debug info: its lines (and so the root) are the twin's
            twins[str(t.build_dir.resolve())] = str(twin.resolve())
        roots[t.label] = str((twin or t.build_dir).resolve())
    adapter.use_debug_twins(twins)
    return Profiling(name, adapter, handle.evidence, attribution, roots)


def operation_attribution(state: RunState, baseline: execute.Target) -> ev.Attribution | None:
    """For a metric that is one operation's cost, what its code is in the baseline's tree (the
    baseline's timed runs at `pw start` time it); None for any other metric."""
    metric = state.run.contract.metric
    if metric.kind != "operation" or not metric.operation:
        return None
    name = metric.operation
    found = [r for r in regions.function_regions(tree_files(baseline.src_dir, baseline.files)) if r.name == name]
    side = ev.CodeSide(regions=found, operations=[] if found else [name])
    return ev.Attribution(hotspot_operation=name, hotspot=side, changed=side, reach=side)
