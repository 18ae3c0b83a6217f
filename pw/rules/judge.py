"""Judge a candidate from the ledger and the evidence alone: analysis, gate inputs, gates, verdict.

`judge_events` is a pure function of the events (and the evidence bytes they cite); evaluate and
confirm call it to decide, and `pw audit` calls it again on the same prefix of the ledger to check
that every recorded verdict still follows from the recorded samples and profiles.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ledger import events as ev
from ledger.codec import canonical_json
from ledger.evidence import EvidenceStore
from ledger.metrics import metric as metric_spec
from ledger.profile import decode_profile
from pw.rules import gates as g
from pw.rules import stopping
from pw.rules.verdict import reach_verdict


class Judgement(msgspec.Struct, frozen=True):
    evaluated: ev.CandidateEvaluated
    gates: ev.GatesEvaluated
    verdict: ev.VerdictReached
    profile_diff: bytes | None


def _latest(items, pred):
    found = None
    for seq, data in items:
        if pred(data):
            found = (seq, data)
    return found


def _tool_versions(pf: ev.PreflightCompleted | None) -> dict[str, str]:
    if pf is None:
        return {}
    out = {p.name: p.version or "" for p in pf.profilers}
    out.update({c.name: c.version or "" for c in pf.compilers})
    return dict(sorted(out.items()))


def _parse_versions(text: str) -> dict[str, str]:
    out = {}
    for part in text.split("; "):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = "" if v == "None" else v
    return dict(sorted(out.items()))


def _is_simulated(metric_id: str) -> bool:
    try:
        return metric_spec(metric_id).simulated
    except KeyError:
        return False


def analyze(timing: ev.TimingRecorded, cid: str, suffix: str = "") -> dict[str, Any] | None:
    """The paired analysis of one campaign, as recorded plain data (None below two pairs)."""
    from pw.stats import StatsInputError, analyze_pairs

    base = timing.samples.get(timing.targets[0] + suffix, [])  # the reference: baseline, or the parent
    cand = timing.samples.get(cid + suffix, [])
    try:
        result = analyze_pairs(base, cand, order=list(timing.order), seed=timing.seed)
    except StatsInputError:
        return None
    out = msgspec.to_builtins(result)
    if timing.campaign is not None and not suffix:  # an adaptive campaign: its stopping rule decides
        from pw.stats import log_ratios

        out = stopping.with_campaign(out, timing.campaign, log_ratios(base, cand))
    return out


def _one_pair_estimate(timing: ev.TimingRecorded, cid: str) -> float | None:
    base = timing.samples.get(timing.targets[0], [])
    cand = timing.samples.get(cid, [])
    if len(base) != 1 or len(cand) != 1 or cand[0] <= 0:
        return None
    return round(base[0] / cand[0], 6)


def judge_events(envelopes: list[ev.Envelope], cid: str, evidence: EvidenceStore) -> Judgement:
    items = [(e.seq, e.data) for e in envelopes]
    run_seq, run = _latest(items, lambda d: isinstance(d, ev.RunStarted))
    contract = run.contract
    pf = _latest(items, lambda d: isinstance(d, ev.PreflightCompleted))
    diff_at = _latest(items, lambda d: isinstance(d, ev.CandidateDiffRecorded) and d.id == cid)
    diff_seq, diff = diff_at
    attempt_items = [(s, d) for s, d in items if s >= diff_seq]

    def mine(kind, **extra):
        return _latest(attempt_items, lambda d: isinstance(d, kind) and all(getattr(d, k) == v for k, v in extra.items()))

    build = mine(ev.BuildFinished, target=cid)
    oracle = mine(ev.OracleChecked, target=cid)
    timing = _latest(attempt_items, lambda d: isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid)
    if timing is not None:  # every part of an adaptive campaign, as one
        timing = (timing[0], stopping.merged_timing(items, *timing))
    cand_prof = mine(ev.ProfileNormalized, target=cid)
    # A chained candidate is timed against its parent: the parent's build and profile are the reference.
    ref = timing[1].targets[0] if timing else "baseline"
    base_build = _latest(items, lambda d: isinstance(d, ev.BuildFinished) and d.target == ref and d.outcome == "ok")
    hot = _latest(items, lambda d: isinstance(d, ev.HotspotSelected))
    base_prof = None
    if cand_prof is not None:
        base_prof = _latest(
            items, lambda d: isinstance(d, ev.ProfileNormalized) and d.target == ref
            and d.adapter == cand_prof[1].adapter
        )

    analysis = analyze(timing[1], cid) if timing else None
    wall = analyze(timing[1], cid, ":wall_s") if timing and contract.metric.kind == "roi" else None

    profile_diff = None
    diff_bytes = None
    if cand_prof and base_prof and hot:
        from projections.profile_diff import diff_profiles

        bp = decode_profile(evidence.get(base_prof[1].profile_sha256))
        cp = decode_profile(evidence.get(cand_prof[1].profile_sha256))
        profile_diff = diff_profiles(bp, cp, hotspot=hot[1].operation, metric=hot[1].metric)
        diff_bytes = canonical_json(profile_diff)

    adapter = None
    if cand_prof is not None:
        from adapters.registry import adapter_by_name

        spec = adapter_by_name(cand_prof[1].adapter).spec
        probe = next((p for p in (pf[1].profilers if pf else []) if p.name == spec.name), None)
        measured = sorted(set(profile_diff.baseline_metrics) & set(profile_diff.candidate_metrics)) if profile_diff else []
        adapter = g.AdapterFacts(
            name=spec.name, can_reprofile=spec.can_reprofile, usable=bool(probe and probe.usable),
            measured=measured, simulated=[m for m in measured if _is_simulated(m)],
        )

    conditions = timing[1].conditions if timing else {}
    versions_then = _tool_versions(pf[1] if pf else None)
    side = [s for s in conditions.get("side_effects", "").split("; ") if s]
    # Files the candidate's traced oracle run wrote outside its workspace that the baseline's did
    # not: a cache in /tmp survives between runs as surely as one in the working directory.
    base_oracle = _latest(items, lambda d: isinstance(d, ev.OracleChecked) and d.target == "baseline")
    base_writes = set(base_oracle[1].outside_writes) if base_oracle else set()
    if oracle is not None:
        side += [f"wrote {p} outside its workspace" for p in oracle[1].outside_writes if p not in base_writes]
    timed_base = conditions.get("baseline_binary_before")
    if timed_base and conditions.get("baseline_binary_after") != timed_base:
        timed_base = conditions.get("baseline_binary_after")
    timed_cand = conditions.get("candidate_binary_before")
    if timed_cand and conditions.get("candidate_binary_after") != timed_cand:
        timed_cand = conditions.get("candidate_binary_after")

    inputs = g.GateInputs(
        candidate=cid,
        exploratory=bool(timing and timing[1].exploratory),
        seqs=g.Seqs(
            run=run_seq, preflight=pf[0] if pf else None, diff=diff_seq, build=build[0] if build else None,
            oracle=oracle[0] if oracle else None, timing=timing[0] if timing else None,
            wall=timing[0] if wall is not None and timing else None, hotspot=hot[0] if hot else None,
            baseline_profile=base_prof[0] if base_prof else None, candidate_profile=cand_prof[0] if cand_prof else None,
        ),
        oracle=g.OracleFacts(passed=oracle[1].passed, detail=oracle[1].detail, method=oracle[1].method,
                             rtol=oracle[1].rtol, atol=oracle[1].atol) if oracle else None,
        refused_edits=list(diff.refused),
        run_side_effects=side,
        analysis=analysis,
        min_pairs=g.DEFAULT_MIN_PAIRS,
        baseline_conditions=g.Conditions(host=run.host.hostname, argv=list(contract.run.argv),
                                         inputs_sha256=None, tool_versions=versions_then),
        candidate_conditions=g.Conditions(
            host=conditions.get("host"),
            argv=conditions.get("argv", "").split(" ") if conditions.get("argv") else [],
            inputs_sha256=None, tool_versions=_parse_versions(conditions.get("tool_versions", "")),
        ) if timing else g.Conditions(),
        binaries=g.Binaries(
            baseline_expected=base_build[1].binary_sha256 if base_build else None, baseline_timed=timed_base,
            candidate_built=build[1].binary_sha256 if build else None, candidate_timed=timed_cand,
        ),
        hotspot=g.HotspotFacts(operation=hot[1].operation, metric=hot[1].metric, share=hot[1].share,
                               amdahl_ceiling=hot[1].amdahl_ceiling) if hot else None,
        profile_diff=profile_diff,
        adapter=adapter,
        wall_analysis=wall,
        peak_rss_kb_baseline=list(timing[1].samples.get(f"{ref}:max_rss_kb", [])) if timing else [],
        peak_rss_kb_candidate=list(timing[1].samples.get(f"{cid}:max_rss_kb", [])) if timing else [],
        repro=g.Repro(
            command=list(contract.run.argv), build_sha256=build[1].binary_sha256 if build else None,
            host=run.host.hostname, tool_versions=versions_then, source_sha256=diff.source_sha256, run_id=run.run_id,
        ),
    )
    gate_results = g.evaluate_gates(inputs)
    timing_fault = None
    if timing is None and oracle is not None and oracle[1].passed:
        # The campaign itself failed (a crash or hang in a timed run): that is the verdict.
        fault = mine(ev.FaultRecorded, target=cid)
        timing_fault = fault[1] if fault is not None else None
    verdict = reach_verdict(
        gate_results, analysis, refused_edits=list(diff.refused),
        screening_estimate=_one_pair_estimate(timing[1], cid) if timing and inputs.exploratory else None,
        build_ok=None if build is None else build[1].outcome == "ok",
        oracle_passed=None if oracle is None else oracle[1].passed,
        exploratory=inputs.exploratory,
        timing_fault=timing_fault,
    )
    interval = None
    speedup = None
    if analysis is not None:
        speedup = round(analysis["speedup"], 6)
        interval = [round(analysis["interval"]["low"], 6), round(analysis["interval"]["high"], 6)]
    elif timing is not None and inputs.exploratory:
        # winner-confirmation screening: one pair, no interval; its ratio only ranks the candidates
        speedup = _one_pair_estimate(timing[1], cid)
    attempt = diff.attempt
    return Judgement(
        evaluated=ev.CandidateEvaluated(
            id=cid, attempt=attempt, exploratory=inputs.exploratory,
            build_seq=inputs.seqs.build, oracle_seq=inputs.seqs.oracle, timing_seq=inputs.seqs.timing,
            profile_sha256=cand_prof[1].profile_sha256 if cand_prof else None,
            profile_diff_sha256=hashlib.sha256(diff_bytes).hexdigest() if diff_bytes else None,
            analysis=analysis,
        ),
        gates=ev.GatesEvaluated(id=cid, attempt=attempt, gates=gate_results, inputs=msgspec.to_builtins(inputs),
                                rules=g.GATE_RULES),
        verdict=ev.VerdictReached(
            id=cid, attempt=attempt, status=verdict.status, reasons=verdict.reasons, repairable=verdict.repairable,
            speedup=speedup, interval=interval, exploratory=inputs.exploratory, reference=ref,
        ),
        profile_diff=diff_bytes,
    )


def judge_candidate(handle, cid: str) -> list[ev.Payload]:
    """The judgement batch for the candidate's latest attempt; keeps its profile diff as evidence
    and writes candidates/<id>/profile/profile-diff.json for people and agents."""
    from projections.materialize import write_atomic

    j = judge_events(handle.ledger.events(), cid, handle.evidence)
    if j.profile_diff is not None:
        handle.evidence.put(j.profile_diff)
        write_atomic(handle.path / "candidates" / cid / "profile" / "profile-diff.json", j.profile_diff)
    return [j.evaluated, j.gates, j.verdict]


def write_candidate_profile_files(handle, state, cid: str) -> None:
    """candidates/<id>/profile/profile.json: the normalized reprofile, for people and agents."""
    from projections.materialize import write_atomic

    for normalized in state.profiles.values():
        if normalized.target == cid:
            out = handle.path / "candidates" / cid / "profile"
            write_atomic(out / "profile.json", canonical_json(msgspec.json.decode(handle.evidence.get(normalized.profile_sha256))))
