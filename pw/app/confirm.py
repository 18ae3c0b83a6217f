"""`pw confirm RUN ID [--fresh]`: the final word on a candidate.

By default it reuses the profiled pairs already collected and recomputes the judgement from the
ledger (`WinnerConfirmed`). `--fresh` runs a new profiled campaign first (the confirmation minimum of
pairs, the hybrid arm again where the evaluation had one). In winner-confirmation mode the screening
pair was exploratory, so confirmation always runs the full campaign. With `profiling.cadence:
winner-only` the exact-count channel and the GPU counters deferred at evaluation are captured here.

Then a few **unprofiled** pairs: the user runs the program without a profiler, so the report shows
the speedup measured that way beside the profiled one, and says when the two disagree beyond their
intervals. They are recorded (purpose "unprofiled") and read by no gate.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np

from ledger import events as ev
from ledger.errors import RejectedCommand, WorkloadError
from projections.state import RunState
from pw.app import campaign, diagnosis, hybrid, profiled, timing_blocks
from pw.app.evaluate import merged_profiles
from pw.app.judging import judge_recorded
from pw.app.resume import evaluation_lock
from pw.app.run import RunHandle
from pw.app.targets import reference_target, run_checks, secret_seed, tool_versions, workspace_target
from pw.rules import stopping
from pw.rules.candidates import check_id
from pw.workload import steps as execute
from pw.workload import workspace

# Unprofiled pairs `pw confirm` adds so the report can show the speedup without a profiler.
UNPROFILED_PAIRS = 5


class ConfirmResult(msgspec.Struct, frozen=True):
    id: str
    fresh: bool
    launched: bool
    status: str
    reasons: list[str]
    speedup: float | None
    interval: list[float] | None
    gates: list[ev.GateResult]
    reprofiled: bool = False  # captured what `profiling.cadence: winner-only` deferred
    unprofiled: float | None = None  # the speedup over the unprofiled pairs (geometric mean)


def _checked_target(handle: RunHandle, state: RunState, cid: str) -> execute.Target:
    cand = state.candidates[cid]
    target = workspace_target(handle, state, cid)
    if workspace.tree_digest(target.src_dir, target.files) != cand.diff.source_sha256:
        raise RejectedCommand(f"candidate {cid!r} was edited after its evaluation; evaluate it again first")
    built = state.builds.get(cid)
    if built is None or built.outcome != "ok" or execute.binary_digest(target) != built.binary_sha256:
        raise RejectedCommand(f"candidate {cid!r}: its build tree no longer holds the binary that was timed")
    return target


def _campaign(handle: RunHandle, state: RunState, cid: str, target: execute.Target, progress) -> RunState:
    """A new profiled campaign with the stricter confirmation minimum, the hybrid arm as before."""
    contract = state.run.contract
    cand = state.candidates[cid]
    reference = reference_target(handle, state, cand)
    last = next((t for t in reversed(state.timings) if t.targets[-1] == cid and t.purpose != "unprofiled"), None)
    attribution = last.attribution if last is not None and last.attribution is not None else \
        profiled.attribution_for(handle, state, cid, target)
    arm = hybrid.recorded_arm(handle, state, cid) if last is not None and stopping.labels_of(last)[1] else None
    if attribution is not None and attribution.hybrid is None:  # a campaign recorded before the hybrid's own part
        attribution = hybrid.with_its_own_side(handle, state, cid, attribution, arm)
    arms = [target] + ([arm] if arm is not None else [])
    low = max(timing_blocks.CONFIRMATION_MIN_PAIRS, contract.sampling.pairs)
    params = timing_blocks.campaign_params(contract.sampling, min_pairs=low,
                                           max_pairs=max(contract.sampling.max_pairs, low))
    progress(f"confirmation: {params.min_pairs} to {params.max_pairs} pairs")
    result = timing_blocks.run_adaptive(
        contract, reference, target, params,
        seed=campaign.campaign_seed(state.run.run_id, cid, cand.diff.attempt, f"confirmation-{state.head.seq}"),
        purpose="confirmation", host=state.run.host.hostname, scratch=handle.path / "scratch" / cid,
        tool_versions=tool_versions(state), progress=progress,
        checks=run_checks(handle, state, [t.label for t in arms]), input_seed=secret_seed(),
        profiling=profiled.profiling_for(handle, state, reference, arms, attribution), hybrid=arm,
        cpus=state.run.host.cpus,
    )
    if result.failure is not None:
        handle.record(state, [result.failure])
        raise WorkloadError(
            f"confirmation campaign for {cid!r} failed: {result.failure.failure_class}: {result.failure.message}; "
            "no confirmation recorded", failure_class=result.failure.failure_class)
    return handle.record(state, [result.timing, *merged_profiles(handle.evidence, result.timing)])


def _unprofiled(handle: RunHandle, state: RunState, cid: str, target: execute.Target, verdict_interval,
                progress) -> tuple[RunState, float | None]:
    """UNPROFILED_PAIRS pairs without a profiler, and their comparison with the profiled verdict
    (recorded; read by no gate, shown in the report)."""
    import math

    from pw.stats.paired import t_interval_log

    contract = state.run.contract
    reference = reference_target(handle, state, state.candidates[cid])
    progress(f"{UNPROFILED_PAIRS} unprofiled pairs (the program as the user runs it)")
    result = campaign.run_pairs(
        contract, reference, target, pairs=UNPROFILED_PAIRS,
        seed=campaign.campaign_seed(state.run.run_id, cid, state.candidates[cid].diff.attempt,
                                    f"unprofiled-{state.head.seq}"),
        purpose="unprofiled", exploratory=False, host=state.run.host.hostname, scratch=handle.path / "scratch" / cid,
        tool_versions=tool_versions(state), progress=progress, checks=run_checks(handle, state, [cid]),
        input_seed=secret_seed(),
    )
    if result.failure is not None:
        return handle.record(state, [result.failure]), None
    t = result.timing
    state = handle.record(state, [t])
    d = [math.log(b / c) for b, c in zip(t.samples[reference.label], t.samples[cid]) if b > 0 and c > 0]
    if len(d) < 2:
        return state, None
    m, _sd, lo, hi = (float(x) for x in t_interval_log(np.asarray(d), 0.95))
    est, low, high = math.exp(m), math.exp(lo), math.exp(hi)
    if contract.metric.kind == "operation":
        # Unprofiled pairs time the whole process (no profile, no operation's cost): compare them with
        # the profiled campaign's whole-process times, not with the operation's verdict.
        verdict_interval = _whole_process_interval(handle, state, cid, reference.label)
    disagrees = False
    if verdict_interval:
        centre = math.sqrt(verdict_interval[0] * verdict_interval[1])
        disagrees = not (verdict_interval[0] <= est <= verdict_interval[1]) and not (low <= centre <= high)
    state = handle.record(state, [ev.UnprofiledCompared(id=cid, timing_seq=state.head.seq, pairs=len(d),
                                                        speedup=round(est, 6), interval=[round(low, 6), round(high, 6)],
                                                        disagrees=disagrees)])
    return state, round(est, 6)


def _whole_process_interval(handle: RunHandle, state: RunState, cid: str, ref: str) -> list[float] | None:
    """The 95% t-interval of the reference-over-candidate ratio of whole-process wall times in the
    candidate's latest profiled campaign (every part of it), or None."""
    import math

    from pw.stats.paired import t_interval_log

    items = [(e.seq, e.data) for e in handle.events()]
    found = next(((seq, t) for seq, t in reversed(items) if isinstance(t, ev.TimingRecorded)
                  and t.targets[-1] == cid and t.profiler is not None), None)
    if found is None:
        return None
    whole = stopping.merged_timing(items, *found)
    walls = zip(whole.samples.get(f"{ref}:wall_s", []), whole.samples.get(f"{cid}:wall_s", []))
    d = [math.log(b / c) for b, c in walls if b > 0 and c > 0]
    if len(d) < 2:
        return None
    _m, _sd, lo, hi = (float(x) for x in t_interval_log(np.asarray(d), 0.95))
    return [math.exp(lo), math.exp(hi)]


def confirm(handle: RunHandle, cid: str, *, fresh: bool, progress: Callable[[str], None] = lambda _m: None) -> ConfirmResult:
    check_id(cid)
    with evaluation_lock(handle, cid), handle.stage():
        state = handle.refresh()
        cand = state.candidates.get(cid)
        if cand is None or cand.verdict is None:
            raise RejectedCommand(f"candidate {cid!r} has no evaluation to confirm; run `pw evaluate {handle.path} {cid}` first")
        if cand.verdict.status == "rejected":
            raise RejectedCommand(f"candidate {cid!r} was rejected ({'; '.join(cand.verdict.reasons)[:160]}); nothing to confirm")
        contract = state.run.contract
        needs_campaign = fresh or contract.sampling.mode == "winner-confirmation"
        target = _checked_target(handle, state, cid)
        if needs_campaign:
            state = _campaign(handle, state, cid, target, progress)
        reprofiled = False
        if contract.profiling.cadence == "winner-only" or needs_campaign:
            # The exact-count channel and the counters: deferred to the winner, or fresh evidence asked for.
            before = state.head.seq
            state = diagnosis.diagnose(handle, state, target, progress, reuse=not fresh)
            state = diagnosis.gpu_counters(handle, state, target, progress)
            reprofiled = state.head.seq > before
        j = judge_recorded(handle.events(), cid, handle.evidence)
        confirmed = ev.WinnerConfirmed(
            id=cid, fresh=needs_campaign, status=j.verdict.status, reasons=j.verdict.reasons,
            speedup=j.verdict.speedup, interval=j.verdict.interval, timing_seq=j.evaluated.timing_seq,
            reference=j.verdict.reference,
        )
        batch: list[ev.Payload] = [confirmed]
        if needs_campaign or reprofiled:  # new evidence gets its own gate record, so audit can recompute it
            batch = [j.gates, confirmed]
        state = handle.record(state, batch)
        state, unprofiled = _unprofiled(handle, state, cid, target, j.verdict.interval, progress)
        return ConfirmResult(
            id=cid, fresh=needs_campaign, launched=needs_campaign, status=confirmed.status, reasons=confirmed.reasons,
            speedup=confirmed.speedup, interval=confirmed.interval, gates=j.gates.gates, reprofiled=reprofiled,
            unprofiled=unprofiled,
        )
