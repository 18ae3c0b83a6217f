"""`pw evaluate RUN ID`: diff, build, oracle, paired timing, reprofile, gates, verdict.

Each step's events are appended as soon as the step is done (so an interrupted evaluation keeps
its evidence); the judgement — CandidateEvaluated, GatesEvaluated and VerdictReached — is one
atomic batch computed by `pw.rules.judge` from the ledger and evidence alone, the same function
`pw audit` runs again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.errors import InputError, RejectedCommand, ToolError, WorkloadError
from pw.app import campaign, timing_blocks
from pw.app.judging import judge_candidate
from pw.app.run import RunHandle
from pw.rules import candidates
from pw.rules.judge import same_image
from pw.workload import correctness, diffing, output_check, workspace
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


def candidate_target(handle: RunHandle, cid: str, ws: Path, files: list[str]) -> execute.Target:
    return execute.Target(label=cid, src_dir=ws, build_dir=handle.path / "build" / cid, files=files,
                          hidden=hidden_dirs(handle))


def hidden_dirs(handle: RunHandle) -> list[str]:
    """What a target's sandbox hides (the runs directory, the user's workload directory)."""
    from pw.workload import containment

    return containment.hidden_dirs(handle.path, handle.state().run.workload)


def baseline_target(handle: RunHandle) -> execute.Target:
    src = handle.path / "baseline"
    return execute.Target(
        label="baseline", src_dir=src, build_dir=handle.path / "build" / "baseline", files=workspace.source_files(src),
        hidden=hidden_dirs(handle),
    )


def tool_versions(state) -> dict[str, str]:
    """The versions in force now: compilers asked again (a cheap `--version` each, so a compiler
    upgraded since `pw start` shows up as a changed condition), profilers as probed at preflight."""
    from pw.workload import host

    pf = state.preflight
    out = {p.name: p.version or "" for p in pf.profilers} if pf else {}
    out.update({c.name: c.version or "" for c in (host.tool_version(n) for n in host.COMPILERS) if c.path is not None})
    return dict(sorted(out.items()))


def stable_reference(handle: RunHandle, state) -> str | None:
    if state.run.contract.oracle.kind not in ("stable", "baseline"):
        return None
    sha = state.oracles["baseline"].output_sha256
    return handle.evidence.get(sha).decode(errors="replace") if sha else None


def secret_seed() -> int:
    """A seed nobody can know before it is drawn (the OS's entropy), recorded once it is used."""
    import secrets

    return secrets.randbits(63)


def draw_fresh_holdouts(handle: RunHandle, state, target: str, binary_sha256: str | None):
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


def ensure_baseline_built(handle: RunHandle, state) -> execute.Target:
    """The baseline build tree must still hash to what was built; if it is gone, rebuild it identically."""
    target = baseline_target(handle)
    recorded = state.builds["baseline"].binary_sha256
    if not target.build_dir.is_dir():
        rebuilt = execute.build(state.run.contract, target, handle.evidence, handle.logs)
        if rebuilt.binary_sha256 != recorded:
            raise ToolError("the baseline build tree was missing and a rebuild does not hash the same; start a new run")
    return target


def reference_target(handle: RunHandle, state, cand) -> execute.Target:
    """What a candidate is timed against: the baseline, or for a chained candidate (parent not the
    baseline) its parent's build, reused when its tree still hashes to what was built, rebuilt
    from the parent's workspace otherwise (and refused if the rebuild hashes differently)."""
    parent = cand.prepared.resolved_parent
    if parent == "baseline":
        return ensure_baseline_built(handle, state)
    built = state.builds.get(parent)
    if built is None or built.outcome != "ok":
        raise RejectedCommand(f"parent {parent!r} has no successful build to time against; evaluate it first")
    pc = state.candidates[parent]
    ws = handle.path / pc.prepared.workspace
    target = candidate_target(handle, parent, ws, workspace.source_files(ws))
    if target.build_dir.is_dir() and execute.binary_digest(target) == built.binary_sha256:
        return target
    rebuilt = execute.build(state.run.contract, target, handle.evidence, handle.logs)
    if rebuilt.binary_sha256 != built.binary_sha256:
        raise ToolError(f"the build tree of parent {parent!r} changed and a rebuild does not hash the same; "
                        "prepare the candidate on another parent")
    return target


def evaluate(
    handle: RunHandle,
    cid: str,
    progress: Callable[[str], None] = lambda _m: None,
    *,
    max_pairs: int | None = None,
    max_time_s: float | None = None,
) -> EvaluateResult:
    state = handle.state()
    cand, attempt = candidates.decide_evaluate(state, cid)
    run = state.run
    contract = run.contract
    params = timing_blocks.campaign_params(contract.sampling, max_pairs=max_pairs, max_time_s=max_time_s)
    scratch = handle.path / "scratch" / cid
    ws = handle.path / cand.prepared.workspace
    files = workspace.source_files(ws)

    progress("diff")
    tree = diffing.diff_against_manifest(handle.evidence, cand.prepared.parent_manifest_sha256, ws, files)
    patch_sha = handle.evidence.put(tree.patch)  # the projections copy it to variants/<id>.patch
    refused = candidates.refused_edits(tree.changed, contract)
    state = handle.record(state, [ev.CandidateDiffRecorded(
        id=cid, attempt=attempt, patch_sha256=patch_sha, changed=tree.changed, refused=refused,
        source_sha256=workspace.tree_digest(ws, files),
    )])

    exploratory = contract.sampling.mode == "winner-confirmation"
    if not refused:
        state = _build_check_time(handle, state, cid, attempt, ws, files, scratch, exploratory, params, progress)
    return _judged(handle, state, cid, attempt, scratch, progress)


def _judged(handle: RunHandle, state, cid: str, attempt: int, scratch: Path, progress) -> EvaluateResult:
    run = state.run
    progress("gates")
    batch = judge_candidate(handle, cid)
    state = handle.record(state, batch)
    brief = None
    if state.candidates[cid].verdict.status == "verified":
        state, brief = refresh_brief(handle, state, cid, progress)
    verdict = state.candidates[cid].verdict
    gates = state.candidates[cid].gates
    repairs_left = max(0, run.budgets.repairs - max(0, state.candidates[cid].failed_attempts - 1))
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    return EvaluateResult(
        id=cid, attempt=attempt, status=verdict.status, reasons=verdict.reasons, repairable=verdict.repairable,
        speedup=verdict.speedup, interval=verdict.interval, gates=gates.gates if gates else [],
        exploratory=verdict.exploratory,
        patch=str(handle.path / "variants" / f"{cid}.patch"), repairs_left=repairs_left,
        **_campaign_fields(state.candidates[cid].evaluation), **_cumulative_fields(state, cid),
        brief=brief,
    )


def refresh_brief(handle: RunHandle, state, cid: str, progress) -> tuple[object, str | None]:
    """After a verified verdict: where the time goes in `cid` now. Its reprofile gives the hotspot
    and the remaining Amdahl ceiling; the source locator runs on its workspace for new targets and
    slices; the brief (same token budget) says what the next `ID:current:...` idea starts from.
    Recorded as SourceTargetsEmitted/BriefEmitted for `cid`; written as candidates/<id>/agent-brief.txt."""
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
    ws = handle.path / cand.prepared.workspace
    files = workspace.source_files(ws)
    target = candidate_target(handle, cid, ws, files)
    editable = {f for f in files if candidates.is_editable(f, state.run.contract)}
    try:
        hot = hs.select_hotspot(profile, editable)
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


def _cumulative_fields(state, cid: str) -> dict:
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
    return {"n_pairs": analysis.get("n_pairs"), "stop": c.get("stop"), "more_pairs": c.get("more_pairs")}


def more(
    handle: RunHandle,
    cid: str,
    pairs: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    *,
    max_time_s: float | None = None,
) -> EvaluateResult:
    """`pw evaluate RUN ID --more [N]`: continue the candidate's inconclusive campaign by up to N pairs.

    The new pairs follow the same seeded order, are recorded as a part that continues the last
    one, and the whole campaign is judged again: the anytime-valid interval stays valid however
    many times a campaign is continued.
    """
    from pw.rules import stopping

    state = handle.state()
    cand, seq, timing = _continuable(handle, state, cid)
    contract = state.run.contract
    done = len(timing.samples[timing.targets[0]])
    record = timing.campaign
    if pairs is None:
        suggested = (cand.evaluation.analysis or {}).get("campaign", {}).get("more_pairs") if cand.evaluation else None
        pairs = min(suggested or contract.sampling.max_pairs, contract.sampling.max_pairs)
    if pairs < 1:
        raise InputError(f"--more {pairs}: expected a number of pairs >= 1")
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
    target = candidate_target(handle, cid, ws, files)
    arm = timing.conditions.arms.get(cid)
    if arm is None or execute.binary_digest(target) != arm.binary_after:
        raise RejectedCommand(f"candidate {cid!r}: its build tree no longer holds the binary that was timed")
    baseline = reference_target(handle, state, cand)
    scratch = handle.path / "scratch" / cid
    result = timing_blocks.run_adaptive(
        contract, baseline, target, params, seed=timing.seed, purpose=timing.purpose,
        host=state.run.host.hostname, scratch=scratch, tool_versions=tool_versions(state), progress=progress,
        earlier=timing, continues=seq, input_seed=timing.conditions.input_seed,
        checks=run_checks(handle, state, cid),
    )
    if result.failure is not None:
        handle.record(state, [result.failure])
        raise WorkloadError(
            f"continuing the campaign of {cid!r} failed: {result.failure.failure_class}: {result.failure.message}",
            failure_class=result.failure.failure_class,
        )
    state = handle.record(state, [result.timing])
    # A campaign that now decides faster asks its reprofile to resolve the saving (it may grow).
    adapter = state.hotspot and _baseline_adapter(state)
    if adapter is not None:
        from pw.app.resolve import resolve_reprofile

        state = resolve_reprofile(handle, state, cid, profiling_targets(handle, state, adapter), progress,
                                  functools.partial(profile_once, inputs={}))
    return _judged(handle, state, cid, cand.diff.attempt, scratch, progress)


def _continuable(handle: RunHandle, state, cid: str):
    """The candidate, and the seq and merged parts of its campaign, when `--more` may continue it."""
    from pw.rules import stopping
    from pw.rules.candidates import check_id

    check_id(cid)
    cand = state.candidates.get(cid)
    if cand is None or cand.verdict is None or cand.diff is None:
        raise RejectedCommand(f"candidate {cid!r} has no evaluation to continue; run `pw evaluate {handle.path} {cid}`")
    if cand.verdict.status != "inconclusive":
        raise RejectedCommand(
            f"candidate {cid!r} is {cand.verdict.status}, not inconclusive: --more only continues a campaign "
            "whose budget ran out"
        )
    items = [(e.seq, e.data) for e in handle.ledger.events()]
    last = None
    for s, d in items:
        if isinstance(d, ev.CandidateDiffRecorded) and d.id == cid:
            last = None
        elif isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid:
            last = (s, d)
    if last is None or last[1].campaign is None or last[1].campaign.stop != "budget":
        raise RejectedCommand(
            f"candidate {cid!r}: its last attempt has no adaptive campaign that ran out of budget to continue"
        )
    return cand, last[0], stopping.merged_timing(items, *last)


def _build_check_time(handle, state, cid, attempt, ws, files, scratch, exploratory, params, progress):
    contract = state.run.contract
    target = candidate_target(handle, cid, ws, files)
    progress("build")
    built = execute.build(contract, target, handle.evidence, handle.logs)
    state = handle.record(state, [built])
    if built.outcome != "ok":
        return state
    baseline = ensure_baseline_built(handle, state)
    # Only now, with the candidate built and hashed, are its holdout inputs drawn (and recorded).
    state, fresh = draw_fresh_holdouts(handle, state, cid, built.binary_sha256)
    progress("oracle")
    oracle = correctness.check(
        contract, target, handle.path / "baseline", scratch, handle.evidence,
        stable_reference=stable_reference(handle, state), baseline=baseline, fresh=fresh,
        allowed=list(state.oracles["baseline"].left_behind) if "baseline" in state.oracles else [],
    )
    state = handle.record(state, [oracle.event] + ([oracle.fault] if oracle.fault else []))
    if not oracle.event.passed:
        return state
    # Its reference's own code and data (the baseline's, or a chained candidate's parent's): no
    # timing can show it faster, and the judge rejects it as no effect without one (gate rules 13,
    # 15), so its campaign (up to max_pairs pairs) is not run.
    parent = state.candidates[cid].prepared.resolved_parent
    why = same_image(state.builds.get(parent), built, parent)
    if why is not None:
        progress(f"timing skipped: {why}")
        return state
    # A chained candidate is timed against its parent's build; the oracle above still compares
    # with the baseline.
    reference = reference_target(handle, state, state.candidates[cid])
    seed = campaign.campaign_seed(state.run.run_id, cid, attempt, "screening")
    if exploratory:  # winner-confirmation: one exploratory pair per candidate, the campaign comes at confirm
        progress("timing 1 exploratory pair")
        result = campaign.run_pairs(
            contract, reference, target, pairs=1, seed=seed, purpose="screening", exploratory=True,
            host=state.run.host.hostname, scratch=scratch, tool_versions=tool_versions(state), progress=progress,
            input_seed=secret_seed(), checks=run_checks(handle, state, cid),
        )
    else:
        result = timing_blocks.run_adaptive(
            contract, reference, target, params, seed=seed, purpose="screening", host=state.run.host.hostname,
            scratch=scratch, tool_versions=tool_versions(state), progress=progress, input_seed=secret_seed(),
            checks=run_checks(handle, state, cid),
        )
    if result.failure is not None:
        return handle.record(state, [result.failure])
    state = handle.record(state, [result.timing])
    state = recheck_baseline(handle, state, baseline, result.timing, scratch, progress)
    if contract.profiling.cadence == "every-candidate":
        state = reprofile(handle, state, target, progress)
    elif _baseline_adapter(state) in TIMELINE_ADAPTERS:
        # Winner-confirmation mode on a GPU program: a timeline delta for every candidate (cheap,
        # ~1.04x a run), Nsight Compute deferred to the winner (`pw confirm` reprofiles in full).
        state = reprofile(handle, state, target, progress, counters=False)
    return state


def _expected(handle: RunHandle, oracle: ev.OracleChecked | None) -> output_check.Expected:
    def stored(sha: str | None) -> bytes | None:
        return handle.evidence.get(sha) if sha else None

    if oracle is None:
        return output_check.Expected(stdout=None, stderr=None, output_file_sha256=None)
    return output_check.expected(stored(oracle.output_sha256), stored(oracle.stderr_sha256),
                                 oracle.output_file_sha256)


def run_checks(handle: RunHandle, state, cid: str) -> dict[str, campaign.RunChecks]:
    """Each arm's timed runs against its own oracle-checked output; the candidate's may leave
    behind only what the baseline's oracle run left."""
    base = state.oracles.get("baseline")
    return {
        "baseline": campaign.RunChecks(expected=_expected(handle, base)),
        cid: campaign.RunChecks(expected=_expected(handle, state.oracles.get(cid)),
                                allowed=list(base.left_behind) if base is not None else []),
    }


def recheck_baseline(handle: RunHandle, state, baseline: execute.Target, timing: ev.TimingRecorded, scratch: Path,
                     progress):
    """When the campaign's baseline ran slower than the last time it was timed alone, time it alone
    again, now. The judge compares the campaign with the latest such timing: if the baseline alone is
    as slow (the machine got slower, for both arms alike), the campaign stands; if it is fast again,
    the baseline was slowed only beside the candidate (sabotage, or drift inside the campaign) and the
    verdict is inconclusive, with that reason."""
    from pw.app.start import time_baseline_alone
    from pw.rules.judge import baseline_shift_reason

    reference = next((t for t in reversed(state.timings) if t.purpose == "baseline-variance"), None)
    if reference is None or baseline_shift_reason(reference, timing) is None:
        return state
    progress("the baseline ran slower than when last timed alone: timing it alone again")
    events = time_baseline_alone(state.run.contract, baseline, scratch, runs=len(reference.samples.get("baseline", [])),
                                 host=state.run.host.hostname, binary=state.builds["baseline"].binary_sha256 or "",
                                 progress=progress, stage="baseline-recheck")
    return handle.record(state, events)


#: Adapters whose profile is a GPU timeline (device time per kernel).
TIMELINE_ADAPTERS = ("cupti", "nsys")


def reprofile(handle: RunHandle, state, target: execute.Target, progress, *, counters: bool = True,
              adapter: str | None = None, reuse: bool = True) -> object:
    """Profile the candidate with the adapter that profiled the baseline (same metric, comparable),
    growing a sampled reprofile until it resolves the campaign's saving (``pw.app.resolve``); with
    ``counters``, a GPU hotspot diagnosed with ncu at baseline gets its ncu capture too, and a CPU
    hotspot diagnosed with another adapter (callgrind) gets that adapter's capture when the cost
    model allows it (``reprofile_extra.diagnosis_adapter``). A byte-identical executable already
    profiled with the adapter reuses that evidence (``reprofile_extra.capture_or_reuse``), unless
    ``reuse`` is False (`pw confirm --fresh`: fresh evidence means a profiler runs)."""
    from pw.app import reprofile_extra
    from pw.app.resolve import resolve_reprofile

    main = adapter is None
    adapter = adapter or (state.hotspot and _baseline_adapter(state))
    if adapter is None:
        return state
    timed_target = target
    progress(f"reprofile with {adapter}")
    reusing = reuse and reprofile_extra.reuse_source(state, timed_target, adapter) is not None
    targets = profiling_targets(handle, state, adapter, twin=not reusing)  # a reuse needs no -g twin
    profiled, note = targets(target.label, target)
    inputs: dict = {}  # one fresh input per target for the whole reprofile (profile_input)
    state, result = profile_once(handle, state, profiled, adapter, note, timed=timed_target, reuse=reuse,
                                 progress=progress, inputs=inputs)
    if main:  # the diagnosis adapter (exact counts) has nothing to resolve by sampling more
        state = resolve_reprofile(handle, state, profiled.label, targets, progress,
                                  functools.partial(profile_once, inputs=inputs))
    if counters:
        state = _reprofile_counters(handle, state, profiled, result.profile, progress)
    diagnosis = reprofile_extra.diagnosis_adapter(handle, state, adapter, progress) if main else None
    return reprofile(handle, state, timed_target, progress, counters=False, adapter=diagnosis,
                     reuse=reuse) if diagnosis else state


def profiling_targets(handle: RunHandle, state, adapter: str, *, twin: bool = True):
    """``for_label(label, timed=None) -> (target, build note)``: where to profile a side (the baseline,
    a candidate). A baseline profiled from its -g twin is compared with -g twins, not bare builds;
    each twin is built once per call of this function."""
    from pw.workload import debug_build

    base_capture = state.captures.get(f"baseline:{adapter}")
    twin = twin and base_capture is not None and debug_build.used_for(base_capture.build_note)
    made: dict[str, tuple[execute.Target, str | None]] = {}

    def for_label(label: str, timed: execute.Target | None = None) -> tuple[execute.Target, str | None]:
        if label not in made:
            if timed is None:
                if label == "baseline":
                    timed = ensure_baseline_built(handle, state)
                else:
                    ws = handle.path / state.candidates[label].prepared.workspace
                    timed = candidate_target(handle, label, ws, workspace.source_files(ws))
            found: tuple[execute.Target, str | None] = (timed, None)
            if twin:
                dbg = debug_build.make(state.run.contract, timed, handle.evidence, handle.logs, handle.path / "scratch")
                found = (dbg.target or timed, dbg.note)
            made[label] = found
        return made[label]

    return for_label


def profile_once(handle: RunHandle, state, target: execute.Target, adapter: str, note: str | None, *,
                 timed: execute.Target | None = None, reuse: bool = False, progress=lambda _m: None,
                 inputs: dict | None = None):
    """One profiled run of `target`, recorded (ProfileCaptured, ProfileNormalized) and checked like a
    timed one: (state, the capture's result). A target profiled before is normalized against the
    build tree its earlier capture named, so every run of it gives the same operation ids. With
    ``timed`` (the first capture of a reprofile), the overhead and the executable's hash are recorded
    and, with ``reuse``, an identical executable's earlier capture is reused instead. ``inputs``:
    the fresh inputs already drawn for this reprofile, by target (``profile_input``)."""
    from pw.app import reprofile_extra
    from pw.workload import capture as profiling

    earlier = state.captures.get(f"{target.label}:{adapter}")
    root = earlier.source_root if earlier is not None and earlier.source_root else None
    # A reused capture runs nothing and is not checked again: no input to draw, no baseline to run.
    reusing = timed is not None and reuse and reprofile_extra.reuse_source(state, timed, adapter) is not None
    argv, expected = (None, None) if reusing else profile_input(handle, state, target, inputs)
    before = workspace.snapshot(target.build_dir)
    if timed is not None:
        result = reprofile_extra.capture_or_reuse(handle, state, timed, target, adapter, progress, reuse=reuse,
                                                  source_root=root, argv=argv)
    else:
        result = profiling.capture(state.run.contract, target, adapter, handle.evidence, handle.path / "scratch",
                                   source_root=root, argv=argv)
    if note is not None and result.captured.reused_from is None:
        result = msgspec.structs.replace(result, captured=msgspec.structs.replace(result.captured, build_note=note))
    # Like every timed run (execute.run_once), the profiled run must not leave files in the build
    # tree: a file it creates there (a result cache) would be read by the next campaign's runs.
    for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
        (target.build_dir / rel).unlink(missing_ok=True)
    state = handle.record(state, [result.captured, result.normalized])
    # The profiled run is checked like a timed one: a program that behaves differently under the
    # profiler (to make its hotspot vanish from the profile) prints something else there.
    seen = output_check.Observed(stdout=result.stdout.decode(errors="replace"), stderr=None, output_file=None)
    diffs = (output_check.differences(state.run.contract, seen, expected)
             if expected is not None and result.captured.reused_from is None else [])
    if diffs:
        stream, detail = diffs[0]
        against = (f"the baseline's output on the same fresh input `{' '.join(argv)}`" if argv is not None
                   else "its oracle-checked output")
        state = handle.record(state, [ev.FaultRecorded(
            stage="reprofile", target=target.label, failure_class="output-mismatch",
            message=f"profiled run ({adapter}), {stream}: differs from {against} ({detail})",
        )])
    return state, result


def profile_input(handle: RunHandle, state, target: execute.Target,
                  drawn: dict | None = None) -> tuple[list[str] | None, output_check.Expected]:
    """(the argv to profile `target` with, the output its profiled run must print). A candidate
    is profiled on a fresh input drawn as a timed pair's is (the timed argv with a new secret seed):
    profiled on the manifest's own argv, which no timed run uses, a program could tell its profiled
    runs by their input and show the profiler another program (red team, session 8: a non-hotspot
    saving shown as a hotspot one, verified 1.14x). Its output is then checked against the
    baseline's, run on the same input without a profiler. The baseline itself, and a workload
    without a seed generator (whose timed runs use the manifest's argv too), keep the manifest's.

    ``drawn`` (by target label) holds the inputs this reprofile drew already: every profiled run of a
    target in one reprofile shares its input, so its expected output costs one baseline run, not one
    per profiled run (rule share-band/3 takes up to 5 a side, a small saving up to max_runs)."""
    if drawn is not None and target.label in drawn:
        return drawn[target.label]
    chosen = _draw_profile_input(handle, state, target)
    if drawn is not None:
        drawn[target.label] = chosen
    return chosen


def _draw_profile_input(handle: RunHandle, state, target: execute.Target) -> tuple[list[str] | None, output_check.Expected]:
    from pw.workload.holdouts import draw_pair_inputs

    own = _expected(handle, state.oracles.get(target.label))
    contract = state.run.contract
    if target.label == "baseline":
        return None, own
    drawn = draw_pair_inputs(contract, secret_seed(), 1)
    if not drawn:
        return None, own
    argv = list(drawn[0])
    baseline = ensure_baseline_built(handle, state)
    out = execute.run_once(contract, baseline, handle.path / "scratch", argv=argv, tag="profile-input")
    if execute.classify(out) is not None:
        return None, own  # the baseline fails on it: profile the manifest's input, as before
    return argv, output_check.Expected(stdout=out.stdout, stderr=None, output_file_sha256=None)


def _reprofile_counters(handle: RunHandle, state, target: execute.Target, timeline, progress) -> object:
    """A GPU hotspot diagnosed with Nsight Compute at baseline gets the same filtered capture on the
    candidate, so the mechanism gate can see the counter the mechanism names move."""
    from pw.workload import capture as profiling

    hot = state.hotspot
    if hot is None or not any(n.target == "baseline" and n.adapter == "ncu" for n in state.profiles.values()):
        return state
    op = timeline.operation(hot.operation)
    if op is None:  # the candidate no longer runs that kernel: nothing to compare
        return state
    progress("reprofile counters with ncu")
    before = workspace.snapshot(target.build_dir)
    result = profiling.capture(state.run.contract, target, "ncu", handle.evidence, handle.path / "scratch",
                               focus=(hot.name, int(op.self_metrics.get("kernel_launches", 0))))
    for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
        (target.build_dir / rel).unlink(missing_ok=True)
    return handle.record(state, [result.captured, result.normalized])


def _baseline_adapter(state) -> str | None:
    for key, normalized in sorted(state.profiles.items()):
        if normalized.target == "baseline" and key.endswith(":" + normalized.adapter):
            routing = state.routing.get("discovery")
            if routing is None or routing.chosen == normalized.adapter:
                return normalized.adapter
    return None
