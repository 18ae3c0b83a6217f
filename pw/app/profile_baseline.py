"""The profile stage of `pw start`: route, capture, hotspot, source targets, mechanisms, brief.

Discovery and diagnosis are separate routing decisions, both recorded. Diagnosis climbs one rung
only when the discovery profile cannot answer (see `pw.rules.routing.escalate`).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable

import msgspec

from adapters.base import Usability
from adapters.registry import installed_specs
from ledger import events as ev
from ledger.profile import Profile
from pw.app.run import RunHandle
from pw.rules import hotspot as hs
from pw.rules import routing
from pw.workload import capture as profiling
from pw.workload.steps import Target


def language_of(argv: list[str]) -> str:
    exe = argv[0].rsplit("/", 1)[-1]
    if exe.startswith("python") or (argv and argv[0].endswith(".py")):
        return "python"
    return "native"


def usability_from(preflight: ev.PreflightCompleted) -> dict[str, Usability]:
    return {
        p.name: Usability(usable=p.usable, reason=p.reason, version=p.version or "", mode=p.mode or "")
        for p in preflight.profilers
    }


def _routing_event(decision: routing.RoutingDecision) -> ev.RoutingDecided:
    return ev.RoutingDecided(
        phase=decision.phase,
        chosen=decision.chosen,
        reason=decision.reason,
        rejected=[ev.Rejection(adapter=r.adapter, reason=r.reason) for r in decision.rejected],
        needs=list(decision.needs),
    )


def baseline_runtime(state) -> float:
    for t in state.timings:
        if t.purpose == "baseline-variance" and t.samples.get("baseline"):
            return statistics.fmean(t.samples["baseline"])
    return 1.0


def _editable_files(state, target: Target) -> set[str]:
    from pw.rules.candidates import is_editable, protected_files

    contract = state.run.contract
    protected = protected_files(contract)
    return {f for f in target.files if is_editable(f, contract) and f not in protected}


def _answered_rung(decision: routing.RoutingDecision, profile: Profile) -> routing.RoutingDecision:
    """The decision at the finest rung the captured profile answers, not just the rung it was asked.

    A discovery that fell back to callgrind already holds exact per-line instruction counts; judged as
    a sampling rung it has "0 samples per line" and would capture the same counts a second time.
    """
    have = routing.rung_for([*profile.granularity, *profile.metrics])
    order = [r.name for r in routing.LADDER]
    if decision.rung in order and order.index(have.name) > order.index(decision.rung):
        return msgspec.structs.replace(decision, rung=have.name)
    return decision


def profile_stage(handle: RunHandle, state, target: Target, progress: Callable[[str], None]) -> list[ev.Payload]:
    run = state.run
    contract = run.contract
    language = language_of(contract.run.argv)
    usable = usability_from(state.preflight)
    runtime = baseline_runtime(state)
    specs = installed_specs()
    events: list[ev.Payload] = []

    discovery = routing.route("discovery", ["function"], runtime, specs, usable, language)
    events.append(_routing_event(discovery))
    if discovery.chosen is None:
        return events + [ev.FaultRecorded(stage="profile", target="baseline", failure_class="profiler-unusable",
                                          message=discovery.reason)]
    progress(f"profile: {discovery.chosen}")
    found = profiling.capture(contract, target, discovery.chosen, handle.evidence, handle.path / "scratch")
    events += [found.captured, found.normalized]
    editable = _editable_files(state, target)
    try:
        hot = hs.select_hotspot(found.profile, editable)
    except ValueError:
        # A program that ends before the profiler can sample it has no hotspot to speak of.
        return events + [ev.FaultRecorded(
            stage="profile", target="baseline", failure_class="profiler-unusable",
            message=f"{discovery.chosen} recorded no cost in a {runtime:.3g} s run: the program is too short to "
                    "profile; give it a larger input in profileweaver.json",
        )]
    profile_for_lines: Profile = found.profile

    step = routing.escalate(_answered_rung(discovery, found.profile), found.profile, hot.operation)
    if step.to_rung is None:
        events.append(ev.RoutingDecided(phase="diagnosis", chosen=None, reason=f"no escalation: {step.reason}",
                                        rejected=[], needs=list(step.needs)))
    else:
        diagnosis = routing.route("diagnosis", step.needs, runtime, specs, usable, language, rung=step.to_rung)
        decided = _routing_event(diagnosis)
        events.append(msgspec.structs.replace(decided, reason=f"{step.reason} -> {diagnosis.reason}"))
        if diagnosis.chosen is not None:
            progress(f"diagnose: {diagnosis.chosen}")
            deep = profiling.capture(contract, target, diagnosis.chosen, handle.evidence, handle.path / "scratch")
            events += [deep.captured, deep.normalized]
            if deep.profile.operation(hot.operation) is not None:
                profile_for_lines = deep.profile
    rest = source_and_brief(handle, state, target, hot, found.profile, profile_for_lines, discovery.chosen)
    located = next((e for e in rest if isinstance(e, ev.SourceTargetsEmitted)), None)
    for t in (located.document.get("targets", []) if located else []):
        if t.get("role") == "hotspot":  # the parser's definition range, not just the sampled lines
            hot = msgspec.structs.replace(hot, line_start=t["line_start"], line_end=t["line_end"])
            break
    return events + [hot] + rest


def _line_shares(profile: Profile, op_id: str) -> list[dict]:
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0) or 1.0
    lines = sorted(profile.lines_of(op_id), key=lambda lc: (-lc.self_metrics.get(metric, 0.0), lc.line))
    return [{"line": lc.line, "share": round(lc.self_metrics.get(metric, 0.0) / total, 4)} for lc in lines[:8]]


def _evidence_text(e: dict) -> str:
    """One measured fact or metric, short: `strided B @ matmul.c:20` or `d1_miss_rate=0.31`."""
    if e["kind"] == "fact":
        return f"{e['name']} @ {e['where']}"
    value = e.get("value")
    return f"{e['name']}={value:.3g}" if isinstance(value, (int, float)) else e["name"]


def source_and_brief(handle, state, target, hot, discovery: Profile, line_profile: Profile, adapter: str):
    from pw.agent.brief import render_brief
    from pw.agent.source.locator import locate
    from pw.agent.tokens import TOKENIZER, count_tokens

    run = state.run
    contract = run.contract
    line_shares = _line_shares(line_profile, hot.operation)
    hot_lines = sorted(h["line"] for h in line_shares)
    located = None
    if hot.file and (handle.path / "baseline" / hot.file).is_file():
        located = locate(handle.path / "baseline", list(contract.source.editable), hot.file, hot.name, hot_lines)
    mech_dicts = _ranked_mechanisms(located, hot, line_profile, line_shares)
    out: list[ev.Payload] = []
    slices_info = []
    if located is not None:
        targets, slices_info = _source_targets(located, mech_dicts)
        out.append(targets)
    pf = state.preflight
    probe = next((p for p in pf.profilers if p.name == adapter), None)
    variance = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    xs = variance.samples["baseline"] if variance else []
    mean = statistics.fmean(xs) if xs else 0.0
    cv = statistics.stdev(xs) / mean if len(xs) > 1 and mean > 0 else None
    from pw.rules.candidates import is_editable, protected_files

    protected = protected_files(contract)
    editable = [f for f in target.files if is_editable(f, contract) and f not in protected]
    numbers = {
        "run_id": run.run_id, "run_dir": str(handle.path), "workload": contract.name,
        "metric": f"{contract.metric.kind} time", "baseline_mean_s": round(mean, 6), "baseline_runs": len(xs),
        "baseline_cv": round(cv, 6) if cv is not None else None,
        "oracle": state.oracles["baseline"].method if "baseline" in state.oracles else "-",
        "adapter": adapter, "adapter_mode": probe.mode if probe else None,
        "hotspot": {"name": hot.name, "file": hot.file, "line_start": hot.line_start, "line_end": hot.line_end,
                    "share": hot.share, "metric": hot.metric, "ceiling": hot.amdahl_ceiling,
                    "operation": hot.operation},
        "hot_lines": line_shares,
        "mechanisms": [{"id": m["id"], "score": round(m["score"], 3), "description": m["description"],
                        "evidence": [_evidence_text(e) for e in m["evidence"] if e["kind"] == "fact"][:2]}
                       for m in mech_dicts],
        "slices": slices_info,
        "frontier": located.frontier_lines() if located else [],
        "editable": editable,
    }
    if located is not None:
        hot_target = next((t for t in located.targets if t.role == "hotspot"), None)
        if hot_target is not None:  # the definition range from the parser, not the sampled lines
            numbers["hotspot"].update(line_start=hot_target.line_start, line_end=hot_target.line_end)
        # Point the agent at the hot ranges first.
        focus_files = [t.file for t in located.targets if t.editable]
        numbers["editable"] = sorted(set(editable), key=lambda f: (f not in focus_files, f))
    text, tokens = render_brief(numbers, count_tokens)
    view = _agent_view(adapter, discovery, line_shares, mech_dicts, located)
    costs = {"agent-brief.txt": tokens,
             "agent-view.json": count_tokens(msgspec.json.encode(view).decode())}
    for name, body in (out[0].slices.items() if out else []):
        costs[name] = count_tokens(body)
    out.append(ev.BriefEmitted(target="baseline", text=text, tokens=tokens, tokenizer=TOKENIZER,
                               numbers=numbers, view=view, costs=costs))
    return out


def _ranked_mechanisms(located, hot, line_profile: Profile, line_shares: list[dict]) -> list[dict]:
    """The mechanism catalog ranked against the hotspot's source facts and its measured metrics."""
    from pw.rules.mechanisms import rank_mechanisms

    measurements: dict = {"hotspot_share": hot.share, "hotspot_symbol": hot.name,
                          "line_shares": {h["line"]: h["share"] for h in line_shares}}
    op = line_profile.operation(hot.operation)
    if op is not None:
        measurements.update({k: v for k, v in op.self_metrics.items()})
    mechanisms = rank_mechanisms(located.facts if located else [], measurements)
    return [msgspec.to_builtins(m) for m in mechanisms]


def _source_targets(located, mech_dicts: list[dict]) -> tuple[ev.SourceTargetsEmitted, list[dict]]:
    """The located targets as an event with their slices under stable file names, and the brief's
    list of those slices."""
    doc = msgspec.to_builtins(located)
    # Stable, shell-friendly file names in the locator's priority order: 01-hotspot-matmul.txt
    names: dict[str, str] = {}
    slices_info = []
    for t in located.targets:
        if t.slice and t.slice not in names:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{t.role}-{t.symbol}").strip("-")[:48]
            names[t.slice] = f"source-slices/{len(names) + 1:02d}-{stem}.txt"
            slices_info.append({"path": names[t.slice], "range": f"{t.file}:{t.line_start}-{t.line_end}",
                                "role": t.role, "symbol": t.symbol})
    slices = {names[k]: text for k, text in located.slices.items() if k in names}
    event = ev.SourceTargetsEmitted(
        target="baseline", document=doc, slices=dict(sorted(slices.items())),
        frontier=located.frontier_lines(), mechanisms=mech_dicts,
        editable=sorted({t.file for t in located.targets if t.editable}),
    )
    return event, slices_info


def _agent_view(adapter: str, discovery: Profile, line_shares: list[dict], mech_dicts: list[dict], located) -> dict:
    """What `pw inspect` shows beyond the brief: the discovery profile's top, lines, mechanisms, facts."""
    return {
        "profile": {"adapter": adapter, "tool": discovery.tool, "tool_version": discovery.tool_version,
                    "totals": discovery.totals,
                    "top": [{"id": o.id, "self": o.self_metrics, "inclusive": o.inclusive_metrics,
                             "file": o.file, "lines": [o.line_start, o.line_end]}
                            for o in discovery.top_operations(15)]},
        "lines": line_shares,
        "mechanisms": mech_dicts,
        "facts": [msgspec.to_builtins(f) for f in (located.facts if located else [])],
        "omitted": list(located.omitted) if located else [],
    }
