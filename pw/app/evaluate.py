"""`pw evaluate RUN ID`: diff, build, holdouts, oracle, the hybrid arm, one profiled campaign, verdict.

One kind of run: the campaign's every timed run is a profiled run, so the speedup, the mechanism
and no collateral come from the same runs (``pw.app.campaign``), and the campaign stops when the
speedup and the mechanism are decided or its budget ends. Each stage's events are appended as soon as
the stage is done, so an interrupted evaluation keeps its evidence and a second `pw evaluate`
continues the same attempt from the last recorded stage (``resume``); the judgement
(CandidateEvaluated, GatesEvaluated, VerdictReached) is one atomic batch computed by
``pw.rules.judge`` from the ledger and evidence alone, the same function `pw audit` runs again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from ledger import events as ev
from ledger.errors import InputError, RejectedCommand, WorkloadError
from projections.state import RunState
from pw.agent.source import regions
from pw.agent.source.claims import claim_findings
from pw.app import campaign, diagnosis, hybrid, profiled, timing_blocks, warm
from pw.app.judging import judge_candidate
from pw.app.resume import Attempt, attempt_in_progress, evaluation_lock
from pw.app.run import RunHandle
from pw.app.targets import (
    candidate_target,
    ensure_baseline_built,
    reference_target,
    run_checks,
    secret_seed,
    stable_reference,
    tool_versions,
)
from pw.rules import candidates
from pw.rules.judge import same_image
from pw.workload import correctness, diffing, workspace
from pw.workload import steps as execute


class EvaluateResult(msgspec.Struct, frozen=True):
    id: str
    attempt: int
    status: str
    reasons: list[str]
    repairable: bool
    speedup: float | None
    interval: list[float] | None
    gates: list[ev.GateResult]
    exploratory: bool
    patch: str
    repairs_left: int
    n_pairs: int | None = None
    stop: str | None = None  # an adaptive campaign's stop: decided, margin, budget or misfit
    more_pairs: int | None = None  # after a spent budget: pairs the current variance suggests
    reference: str = "baseline"  # what `speedup` is over: the baseline, or a chained candidate's parent
    cumulative: float | None = None  # over the baseline, along the chain (interval approximate)
    cumulative_interval: list[float] | None = None
    brief: str | None = None  # after a verified verdict: the refreshed brief for the next idea
    set_aside: int | None = None  # pairs the load set aside (their arms' load unbalanced)
    resumed: list[str] = []  # stages an interrupted attempt had recorded and this one reused
    notes: list[str] = []  # what the command did other than asked (a `--more N` beyond the cap)


def draw_fresh_holdouts(handle: RunHandle, state: RunState, target: str, binary_sha256: str | None):
    """(state, inputs): fresh inputs from the manifest's generators, drawn now and recorded as
    `HoldoutsDrawn`; no event and no inputs without generators."""
    from pw.workload.holdouts import draw_holdouts, drawn_from

    generators = drawn_from(state.run.contract)
    if not generators:
        return state, []
    seed = secret_seed()
    inputs = draw_holdouts(generators, seed)
    state = handle.record(state, [ev.HoldoutsDrawn(target=target, binary_sha256=binary_sha256, seed=seed,
                                                   inputs=inputs)])
    return state, inputs


def evaluate(
    handle: RunHandle,
    cid: str,
    progress: Callable[[str], None] = lambda _m: None,
    *,
    max_pairs: int | None = None,
    max_time_s: float | None = None,
    until: Literal["oracle"] | None = None,
) -> EvaluateResult | None:
    """The candidate's evaluation, to its verdict. ``until="oracle"`` (a batch's build pass,
    ``pw.app.batch``) stops once the oracle has passed and returns None: the attempt is left open, as
    an interrupted one is, and the next `evaluate` of the candidate continues it with the campaign. A
    candidate judged before that (refused edits, a failed build or oracle) returns its result."""
    candidates.check_id(cid)
    with evaluation_lock(handle, cid), handle.stage():
        state, found = attempt_in_progress(handle, handle.refresh(), cid)
        if found is not None:
            return _continue(handle, state, cid, found, progress, max_pairs=max_pairs, max_time_s=max_time_s,
                             until=until)
        cand, attempt = candidates.decide_evaluate(state, cid)
        ws = handle.path / cand.prepared.workspace
        if not ws.is_dir():
            raise InputError(f"{ws}: the candidate's workspace is missing; restore it or prepare a new candidate")
        files = workspace.source_files(ws)
        progress("diff")
        tree = diffing.diff_against_manifest(handle.evidence, cand.prepared.parent_manifest_sha256, ws, files)
        patch_sha = handle.evidence.put(tree.patch)  # the projections copy it to variants/<id>.patch
        mine = profiled.tree_files(ws, files)
        refused = candidates.refused_edits(tree.changed, state.run.contract) + regions.line_control(mine, tree.patch)
        claim = cand.prepared.mechanism
        findings = claim_findings(claim, profiled.parent_files(handle, cand.prepared.parent_manifest_sha256),
                                  mine, tree.patch)
        state = handle.record(state, [ev.CandidateDiffRecorded(
            id=cid, attempt=attempt, patch_sha256=patch_sha, changed=tree.changed, refused=refused,
            source_sha256=workspace.tree_digest(ws, files),
        ), ev.ClaimChecked(id=cid, attempt=attempt, claim=claim, findings=findings)])
        if refused:
            return _judged(handle, state, cid, attempt, progress)
        step = Attempt(cid=cid, attempt=attempt, recorded=frozenset({"diff"}))
        return _continue(handle, state, cid, step, progress, max_pairs=max_pairs, max_time_s=max_time_s,
                         until=until)


def _continue(handle: RunHandle, state: RunState, cid: str, step: Attempt, progress, *,
              max_pairs: int | None, max_time_s: float | None,
              until: Literal["oracle"] | None = None) -> EvaluateResult | None:
    """The stages of ``step`` not recorded yet, in order; each recorded stage is reused as it is
    (the build only after its tree still hashes to what was built)."""
    contract = state.run.contract
    cand = state.candidates[cid]
    ws = handle.path / cand.prepared.workspace
    files = workspace.source_files(ws)
    if workspace.tree_digest(ws, files) != cand.diff.source_sha256:
        raise RejectedCommand(f"candidate {cid!r} was edited since its interrupted evaluation began; "
                              f"evaluate it again after `pw prepare` or restore its workspace")
    target = candidate_target(handle, state, cid, ws, files)
    if until is None:
        warm.start()  # what the judgement needs, loaded while the build and the oracle run
    resumed = sorted(step.recorded - {"diff"})
    if resumed:
        progress(f"continuing attempt {step.attempt}: {', '.join(resumed)} already recorded")
    if "build" not in step.recorded or not _build_still_there(state, target):
        progress("build")
        built = execute.build(contract, target, handle.evidence, handle.logs)
        state = handle.record(state, [built])
        if built.outcome != "ok":
            return _judged(handle, state, cid, step.attempt, progress, resumed)
    built = state.builds[cid]
    reference = reference_target(handle, state, state.candidates[cid])
    if "oracle" not in step.recorded:
        baseline = ensure_baseline_built(handle, state)
        # Only now, with the candidate built and hashed, are its holdout inputs drawn (and recorded);
        # an interrupted attempt's are kept while the executable they were drawn for is the one built.
        if "holdouts" in step.recorded and step.holdouts_for == built.binary_sha256:
            fresh = step.holdouts
        else:
            state, fresh = draw_fresh_holdouts(handle, state, cid, built.binary_sha256)
        progress("oracle")
        oracle = correctness.check(
            contract, target, handle.path / "baseline", handle.path / "scratch" / cid, handle.evidence,
            stable_reference=stable_reference(handle, state), baseline=baseline, fresh=fresh,
            allowed=list(state.oracles["baseline"].left_behind) if "baseline" in state.oracles else [],
        )
        state = handle.record(state, [oracle.event] + ([oracle.fault] if oracle.fault else []))
        if not oracle.event.passed:
            return _judged(handle, state, cid, step.attempt, progress, resumed)
    else:
        fresh = step.holdouts
    if until == "oracle":
        return None  # built and correct: the attempt stays open for its campaign (a batch's build pass)
    # Its reference's own code and data: no timing can show it faster, and the judge rejects it as no
    # effect without one (gate rules 13 on), so its campaign is not run.
    parent = state.candidates[cid].prepared.resolved_parent
    why = same_image(state.builds.get(parent), built, parent)
    if why is not None:
        progress(f"timing skipped: {why}")
        return _judged(handle, state, cid, step.attempt, progress, resumed)
    handle.materialize(state)  # the campaign is the long stage: what came before is written out first
    if "timing" not in step.recorded:
        state = _time(handle, state, cid, step, target, reference, fresh, progress,
                      max_pairs=max_pairs, max_time_s=max_time_s)
    if "diagnosis" not in step.recorded and state.candidates[cid].prepared is not None:
        state = _diagnose(handle, state, cid, target, progress)
    return _judged(handle, state, cid, step.attempt, progress, resumed)


def _build_still_there(state: RunState, target: execute.Target) -> bool:
    built = state.builds.get(target.label)
    return (built is not None and built.outcome == "ok" and target.build_dir.is_dir()
            and execute.binary_digest(target) == built.binary_sha256)


def _time(handle: RunHandle, state: RunState, cid: str, step: Attempt, target: execute.Target,
          reference: execute.Target, fresh: list[list[str]], progress, *, max_pairs: int | None,
          max_time_s: float | None) -> RunState:
    """The candidate's campaign (one profiled pair when screening for winner-confirmation); a hybrid
    arm the interrupted attempt already prepared is reused, not prepared (and recorded) again."""
    contract = state.run.contract
    attempt = step.attempt
    attribution = profiled.attribution_for(handle, state, cid, target)
    if "hybrid" in step.recorded:
        arm = hybrid.recorded_arm(handle, state, cid) if step.hybrid == "built" else None
    else:
        state, arm = hybrid.prepare(handle, state, cid, attempt, target, attribution, fresh, reference, progress)
    attribution = hybrid.with_its_own_side(handle, state, cid, attribution, arm)
    arms = [target] + ([arm] if arm is not None else [])
    profiling = profiled.profiling_for(handle, state, reference, arms, attribution)
    seed = campaign.campaign_seed(state.run.run_id, cid, attempt, "screening")
    scratch = handle.path / "scratch" / cid
    checks = run_checks(handle, state, [t.label for t in arms])
    common = dict(host=state.run.host.hostname, scratch=scratch, tool_versions=tool_versions(state),
                  progress=progress, input_seed=secret_seed(), checks=checks, profiling=profiling, hybrid=arm)
    if contract.sampling.mode == "winner-confirmation":  # one exploratory pair; the campaign comes at confirm
        progress("timing 1 exploratory pair")
        result = campaign.run_pairs(contract, reference, target, pairs=1, seed=seed, purpose="screening",
                                    exploratory=True, **common)
    else:
        params = timing_blocks.campaign_params(contract.sampling, max_pairs=max_pairs, max_time_s=max_time_s)
        result = timing_blocks.run_adaptive(contract, reference, target, params, seed=seed, purpose="screening",
                                            cpus=state.run.host.cpus, **common)
    if result.failure is not None:
        return handle.record(state, [result.failure])
    return handle.record(state, [result.timing, *merged_profiles(handle.evidence, result.timing)])


def merged_profiles(evidence, timing: ev.TimingRecorded) -> list[ev.ProfileNormalized]:
    """Each arm's profile over all its timed runs (what the report, `pw inspect` and the refreshed
    brief show of it): the runs' profiles summed, recorded with their parts."""
    from ledger.profile import decode_profile, encode_profile, merge_profiles, mergeable

    if timing.profiler is None:
        return []
    out = []
    for label in timing.targets:
        runs = timing.runs.get(label, [])
        parts = [decode_profile(evidence.get(r.profile)) for r in runs]
        if not parts or not all(mergeable(p) for p in parts):
            continue  # a device timeline's runs are read run by run (pw.rules.judge_pairs), never summed
        merged = merge_profiles(parts)
        primary = merged.primary_metric
        out.append(ev.ProfileNormalized(adapter=timing.profiler.adapter, target=label,
                                        profile_sha256=evidence.put(encode_profile(merged)), primary_metric=primary,
                                        total=merged.totals.get(primary, 0.0), parts=[r.profile for r in runs]))
    return out


def _diagnose(handle: RunHandle, state: RunState, cid: str, target: execute.Target, progress) -> RunState:
    """The exact-count channel and, for a GPU hotspot, the counters (winner-only: at confirm)."""
    if state.run.contract.profiling.cadence != "every-candidate" or not state.timings or \
            state.timings[-1].targets[-1] != cid:
        return state
    state = diagnosis.diagnose(handle, state, target, progress)
    if state.run.contract.sampling.mode == "winner-confirmation":
        return state  # candidate NCU replay is deferred until the winner is known (pw confirm)
    return diagnosis.gpu_counters(handle, state, target, progress)


def _judged(handle: RunHandle, state: RunState, cid: str, attempt: int, progress,
            resumed: list[str] = ()) -> EvaluateResult:  # type: ignore[assignment]
    run = state.run
    progress("gates")
    state = handle.record(state, judge_candidate(handle, cid))
    brief = None
    if state.candidates[cid].verdict.status == "verified":
        state, brief = refresh_brief(handle, state, cid, progress)
    verdict = state.candidates[cid].verdict
    gates = state.candidates[cid].gates
    repairs_left = max(0, run.budgets.repairs - max(0, state.candidates[cid].failed_attempts - 1))
    shutil.rmtree(handle.path / "scratch" / cid, ignore_errors=True)
    return EvaluateResult(
        id=cid, attempt=attempt, status=verdict.status, reasons=verdict.reasons, repairable=verdict.repairable,
        speedup=verdict.speedup, interval=verdict.interval, gates=gates.gates if gates else [],
        exploratory=verdict.exploratory,
        patch=str(handle.path / "variants" / f"{cid}.patch"), repairs_left=repairs_left,
        **_campaign_fields(state.candidates[cid].evaluation), **_cumulative_fields(state, cid),
        brief=brief, resumed=list(resumed),
    )


def refresh_brief(handle: RunHandle, state: RunState, cid: str, progress) -> tuple[RunState, str | None]:
    """After a verified verdict: where the time goes in `cid` now. Its campaign's profile (every
    timed run's, summed) gives the hotspot and the remaining Amdahl ceiling; the source locator
    runs on its workspace for new targets and slices; the brief (same token budget) says what the
    next `ID:current:...` idea starts from. Recorded as SourceTargetsEmitted/BriefEmitted for `cid`;
    written as candidates/<id>/agent-brief.txt."""
    import statistics

    from ledger.profile import decode_profile
    from projections.state import cumulative
    from pw.app.profile_baseline import source_and_brief
    from pw.rules import hotspot as hs

    cand = state.candidates[cid]
    prof = next((p for p in state.profiles.values() if p.target == cid), None)
    if prof is None:
        return state, None
    profile = decode_profile(handle.evidence.get(prof.profile_sha256))
    target = candidate_target(handle, state, cid, handle.path / cand.prepared.workspace,
                              workspace.source_files(handle.path / cand.prepared.workspace))
    editable = {f for f in target.files if candidates.is_editable(f, state.run.contract)}
    metric = state.run.contract.metric
    try:
        # A run judged on one operation's cost stays on it: the next idea is for that operation, not for
        # the set-up the run does not judge (which a candidate would be "slower" in).
        hot = hs.select_named(profile, metric.operation) if metric.kind == "operation" and metric.operation \
            else hs.select_hotspot(profile, editable)
    except ValueError:
        return state, None
    progress("brief for the current best")
    timing = next((t for t in reversed(state.timings) if t.targets[-1] == cid), None)
    xs = list(timing.samples.get(cid, [])) if timing else []
    cum = cumulative(state, cid)
    extra = {"current": cid, "cumulative": cum.speedup if cum else None,
             "baseline_mean_s": round(statistics.fmean(xs), 6) if xs else 0.0, "baseline_runs": len(xs),
             "baseline_cv": round(statistics.stdev(xs) / statistics.fmean(xs), 6) if len(xs) > 1 else None}
    events = source_and_brief(handle, state, target, hot, profile, profile, prof.adapter, label=cid,
                              slices_dir=f"candidates/{cid}/source-slices/", extra=extra)
    state = handle.record(state, events)
    return state, str(handle.path / "candidates" / cid / "agent-brief.txt")


def _cumulative_fields(state: RunState, cid: str) -> dict:
    from projections.state import cumulative

    cum = cumulative(state, cid)
    return {
        "reference": state.candidates[cid].verdict.reference,
        "cumulative": cum.speedup if cum else None,
        "cumulative_interval": cum.interval if cum else None,
    }


def _campaign_fields(evaluation) -> dict:
    analysis = (evaluation.analysis if evaluation is not None else None) or {}
    c = analysis.get("campaign") or {}
    return {"n_pairs": analysis.get("n_pairs"), "stop": c.get("stop"), "more_pairs": c.get("more_pairs"),
            "set_aside": c.get("set_aside")}


#: The most pairs `--more` adds when its suggestion is larger (a suggestion to follow, not a wish).
MORE_CAP = 60


def more(
    handle: RunHandle,
    cid: str,
    pairs: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    *,
    max_time_s: float | None = None,
) -> EvaluateResult:
    """`pw evaluate RUN ID --more [N]`: continue the candidate's campaign by up to N pairs, when it is
    inconclusive or its mechanism was left undecided by the budget (proposed).

    The new pairs follow the same seeded order (and the same arms: the hybrid too), are recorded as
    a part that continues the last one, and the whole campaign is judged again: the anytime-valid
    intervals stay valid however many times a campaign is continued.
    """
    from pw.rules import stopping

    candidates.check_id(cid)
    with evaluation_lock(handle, cid), handle.stage():
        state = handle.refresh()
        cand, seq, timing = _continuable(handle, state, cid)
        contract = state.run.contract
        done = len(timing.samples[timing.targets[0]])
        record = timing.campaign
        suggested = None
        if pairs is not None and pairs < 1:
            raise InputError(f"--more {pairs}: expected a number of pairs >= 1")
        notes = []
        if pairs is None:
            suggested = (cand.evaluation.analysis or {}).get("campaign", {}).get("more_pairs") if cand.evaluation else None
            pairs = min(suggested or contract.sampling.max_pairs, MORE_CAP)
        elif pairs > MORE_CAP:
            # What a verdict's reason suggests may be more than one call runs: it runs the cap, and says so.
            notes.append(f"--more {pairs}: continued by {MORE_CAP} pairs, the most one call runs; run it again "
                         "for more")
            pairs = MORE_CAP
        progress(f"--more {pairs} pairs" + (f" (the current variance suggests {suggested})" if suggested else ""))
        params = msgspec.structs.replace(
            stopping.params_of(record), max_pairs=done + pairs,
            max_time_s=float(contract.sampling.max_time_s if max_time_s is None else max_time_s),
        )
        if not params.max_time_s > 0:
            raise InputError(f"--max-time {max_time_s!r}: expected a number of seconds > 0")
        ws = handle.path / cand.prepared.workspace
        files = workspace.source_files(ws)
        if workspace.tree_digest(ws, files) != cand.diff.source_sha256:
            raise RejectedCommand(f"candidate {cid!r} was edited after its evaluation; its campaign cannot be continued")
        target = candidate_target(handle, state, cid, ws, files)
        arm = timing.conditions.arms.get(cid)
        if arm is None or execute.binary_digest(target) != arm.binary_after:
            raise RejectedCommand(f"candidate {cid!r}: its build tree no longer holds the binary that was timed")
        reference = reference_target(handle, state, cand)
        labels = stopping.labels_of(timing)
        arm_h = hybrid.recorded_arm(handle, state, cid) if labels[1] is not None else None
        profiling = profiled.profiling_for(handle, state, reference, [target] + ([arm_h] if arm_h else []),
                                           timing.attribution) if timing.profiler is not None else None
        result = timing_blocks.run_adaptive(
            contract, reference, target, params, seed=timing.seed, purpose=timing.purpose,
            host=state.run.host.hostname, scratch=handle.path / "scratch" / cid, tool_versions=tool_versions(state),
            progress=progress, earlier=timing, continues=seq, input_seed=timing.conditions.input_seed,
            checks=run_checks(handle, state, [cid] + ([arm_h.label] if arm_h else [])), profiling=profiling,
            hybrid=arm_h, cpus=state.run.host.cpus,
        )
        if result.failure is not None:
            handle.record(state, [result.failure])
            raise WorkloadError(
                f"continuing the campaign of {cid!r} failed: {result.failure.failure_class}: {result.failure.message}",
                failure_class=result.failure.failure_class,
            )
        state = handle.record(state, [result.timing])
        whole = stopping.merge([timing, result.timing])
        state = handle.record(state, merged_profiles(handle.evidence, whole))
        judged = _judged(handle, state, cid, cand.diff.attempt, progress)
        return msgspec.structs.replace(judged, notes=notes) if notes else judged


def _continuable(handle: RunHandle, state: RunState, cid: str):
    """The candidate, and the seq and merged parts of its campaign, when `--more` may continue it:
    a campaign that ran out of its budget, undecided (inconclusive) or with the mechanism undecided."""
    from pw.rules import stopping

    cand = state.candidates.get(cid)
    if cand is None or cand.verdict is None or cand.diff is None:
        raise RejectedCommand(f"candidate {cid!r} has no evaluation to continue; run `pw evaluate {handle.path} {cid}`")
    items = [(e.seq, e.data) for e in handle.events()]
    last = None
    for s, d in items:
        if isinstance(d, ev.CandidateDiffRecorded) and d.id == cid:
            last = None
        elif isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid and d.purpose != "unprofiled":
            last = (s, d)
    if last is None or last[1].campaign is None or last[1].campaign.stop != "budget":
        raise RejectedCommand(
            f"candidate {cid!r} is {cand.verdict.status}: --more continues a campaign whose budget ran out "
            "before it decided (the speedup, or the mechanism); its last campaign stopped "
            f"{'for ' + last[1].campaign.stop if last and last[1].campaign else 'without a stopping rule'}"
        )
    return cand, last[0], stopping.merged_timing(items, *last)


def scratch_of(handle: RunHandle, cid: str) -> Path:
    return handle.path / "scratch" / cid
