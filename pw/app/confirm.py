"""`pw confirm RUN ID [--fresh]`: the final word on a candidate.

By default it reuses the paired samples and the reprofile already collected and launches no
process: the judgement is recomputed from the ledger and recorded as `WinnerConfirmed`. `--fresh`
runs a new multi-pair campaign and a reprofile first. In winner-confirmation mode the screening
samples are exploratory (one pair), so confirmation always runs the configured multi-pair campaign
and the full profile for the chosen winner.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ledger import events as ev
from ledger.errors import RejectedCommand, WorkloadError
from pw.app import campaign, timing_blocks
from pw.app.judging import judge_recorded
from pw.app.run import RunHandle
from pw.workload import workspace


class ConfirmResult(msgspec.Struct, frozen=True):
    id: str
    fresh: bool
    launched: bool
    status: str
    reasons: list[str]
    speedup: float | None
    interval: list[float] | None
    gates: list[ev.GateResult]
    reprofiled: bool = False  # captured the reprofile that `profiling.cadence: winner-only` deferred


def confirm(handle: RunHandle, cid: str, *, fresh: bool, progress: Callable[[str], None] = lambda _m: None) -> ConfirmResult:
    from pw.rules.candidates import check_id

    check_id(cid)
    state = handle.state()
    cand = state.candidates.get(cid)
    if cand is None or cand.verdict is None:
        raise RejectedCommand(f"candidate {cid!r} has no evaluation to confirm; run `pw evaluate {handle.path} {cid}` first")
    if cand.verdict.status == "rejected":
        raise RejectedCommand(f"candidate {cid!r} was rejected ({'; '.join(cand.verdict.reasons)[:160]}); nothing to confirm")
    contract = state.run.contract
    needs_campaign = fresh or contract.sampling.mode == "winner-confirmation"
    launched = False
    if needs_campaign:
        from pw.app.evaluate import (
            candidate_target,
            recheck_baseline,
            reference_target,
            reprofile,
            run_checks,
            secret_seed,
            tool_versions,
        )

        ws = handle.path / cand.prepared.workspace
        files = workspace.source_files(ws)
        if workspace.tree_digest(ws, files) != cand.diff.source_sha256:
            raise RejectedCommand(f"candidate {cid!r} was edited after its evaluation; evaluate it again first")
        target = candidate_target(handle, cid, ws, files)
        baseline = reference_target(handle, state, cand)
        # The same adaptive campaign as screening, with the stricter confirmation minimum.
        low = max(timing_blocks.CONFIRMATION_MIN_PAIRS, contract.sampling.pairs)
        params = timing_blocks.campaign_params(
            contract.sampling, min_pairs=low, max_pairs=max(contract.sampling.max_pairs, low)
        )
        scratch = handle.path / "scratch" / cid
        progress(f"confirmation: {params.min_pairs} to {params.max_pairs} pairs")
        result = timing_blocks.run_adaptive(
            contract, baseline, target, params,
            seed=campaign.campaign_seed(state.run.run_id, cid, cand.diff.attempt, f"confirmation-{state.head.seq}"),
            purpose="confirmation", host=state.run.host.hostname, scratch=scratch,
            tool_versions=tool_versions(state), progress=progress, checks=run_checks(handle, state, cid),
            input_seed=secret_seed(),
        )
        launched = True
        if result.failure is not None:
            handle.record(state, [result.failure])
            raise WorkloadError(
                f"confirmation campaign for {cid!r} failed: {result.failure.failure_class}: {result.failure.message}; "
                "no confirmation recorded",
                failure_class=result.failure.failure_class,
            )
        else:
            state = handle.record(state, [result.timing])
            state = recheck_baseline(handle, state, baseline, result.timing, scratch, progress)
            state = reprofile(handle, state, target, progress, reuse=not fresh)  # --fresh: a profiler runs
    reprofiled = False
    if not needs_campaign and not any(p.target == cid for p in state.profiles.values()):
        # `profiling.cadence: winner-only` deferred the reprofile to here: capture it now (the timing
        # samples are reused), instead of judging the mechanism gate without one.
        state = _deferred_reprofile(handle, state, cid, cand, progress)
        reprofiled = True
    j = judge_recorded(handle.ledger.events(), cid, handle.evidence)
    if j.profile_diff is not None:
        handle.evidence.put(j.profile_diff)
    confirmed = ev.WinnerConfirmed(
        id=cid, fresh=needs_campaign, status=j.verdict.status, reasons=j.verdict.reasons,
        speedup=j.verdict.speedup, interval=j.verdict.interval, timing_seq=j.evaluated.timing_seq,
        reference=j.verdict.reference,
    )
    batch: list[ev.Payload] = [confirmed]
    if needs_campaign or reprofiled:  # new evidence gets its own gate record, so audit can recompute it
        batch = [j.gates, confirmed]
    state = handle.record(state, batch)
    return ConfirmResult(
        id=cid, fresh=needs_campaign, launched=launched, status=confirmed.status, reasons=confirmed.reasons,
        speedup=confirmed.speedup, interval=confirmed.interval, gates=j.gates.gates, reprofiled=reprofiled,
    )


def _deferred_reprofile(handle: RunHandle, state, cid: str, cand, progress):
    from pw.app.evaluate import candidate_target, reprofile
    from pw.workload import steps as execute

    ws = handle.path / cand.prepared.workspace
    files = workspace.source_files(ws)
    if workspace.tree_digest(ws, files) != cand.diff.source_sha256:
        raise RejectedCommand(f"candidate {cid!r} was edited after its evaluation; evaluate it again first")
    target = candidate_target(handle, cid, ws, files)
    built = state.builds.get(cid)
    if built is None or built.outcome != "ok" or execute.binary_digest(target) != built.binary_sha256:
        raise RejectedCommand(f"candidate {cid!r}: its build tree no longer holds the binary that was timed")
    progress("capturing the reprofile deferred by profiling.cadence winner-only")
    return reprofile(handle, state, target, progress)
