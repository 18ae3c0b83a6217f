"""Read-only verbs: `pw inspect` (one bounded diagnostic view at a time), `pw log`, `pw replay`,
and `pw report` (rebuild report.json and report.md from the ledger and draw their plots).
"""

from __future__ import annotations

import msgspec

from ledger.codec import canonical_json, to_builtins
from ledger.errors import InputError
from pw.cli.common import checked_events, console, open_run, print_json, print_text

NCU_GROUPS = ("memory", "compute", "occupancy", "stalls", "rules", "roofline")
# A view is bounded: an agent asks for one section and never gets more than this many items.
MAX_ITEMS = 15


def _bounded(items, group: str | None):
    items = list(items)
    if group:
        items = [i for i in items if group in msgspec.json.encode(i).decode()]
    return items[:MAX_ITEMS], len(items)


def _quantiles(values: list[float]) -> dict[str, float] | None:
    import statistics

    if not values:
        return None
    qs = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else [values[0]] * 9
    return {"p10": round(qs[0], 6), "median": round(statistics.median(values), 6), "p90": round(qs[-1], 6)}


def timing_view(t) -> dict:
    """One timing, bounded whatever its length: what ran, under what, how it stopped, and each arm's
    numbers as quantiles over its runs (value, wall, wait for a CPU, hotspot seconds, system time)."""
    import math

    arms = {}
    for label in t.targets:
        arms[label] = {key: q for key, name in (("value", label), ("wall_s", f"{label}:wall_s"),
                                                 ("run_queue_s", f"{label}:run_queue_s"),
                                                 ("hot_s", f"{label}:hot_s"), ("sys_s", f"{label}:sys_s"))
                       if (q := _quantiles([float(v) for v in t.samples.get(name, [])])) is not None}
    ref, cand = t.samples.get(t.targets[0], []), t.samples.get(t.targets[-1], [])
    ratios = [b / c for b, c in zip(ref, cand) if b > 0 and c > 0] if len(t.targets) > 1 else []
    c = t.campaign
    return {
        "purpose": t.purpose, "targets": list(t.targets), "metric": t.metric, "unit": t.unit,
        "pairs": len(ref) if len(t.targets) > 1 else 0, "runs": len(ref),
        "profiler": t.profiler.adapter if t.profiler is not None else None,
        "campaign": None if c is None else {"rule": c.rule, "stop": c.stop, "looks": len(c.looks),
                                            "max_pairs": c.max_pairs, "continues": c.continues},
        "arms": arms,
        "reference_over_candidate": _quantiles(ratios),
        "geometric_mean_ratio": round(math.exp(sum(math.log(r) for r in ratios) / len(ratios)), 6) if ratios else None,
        "sandbox": t.conditions.sandbox if t.conditions is not None else "",
    }


def _section(handle, state, section: str, candidate: str | None, group: str | None):
    view = state.brief.view if state.brief else {}
    if candidate is not None:
        cand = state.candidates.get(candidate)
        if cand is None:
            known = ", ".join(sorted(state.candidates)) or "none"
            raise InputError(f"--candidate {candidate!r}: no such candidate (known: {known})")
        if section == "gates":
            return _bounded(to_builtins(cand.gates.gates) if cand.gates else [], group)
        if section == "timing":
            # Every timing of the candidate, newest last: the profiled campaign its verdict reads, its
            # continuations, and `pw confirm`'s unprofiled pairs, each summarised (the per-run numbers
            # and evidence hashes are the ledger's; `pw report` plots them).
            timings = [timing_view(t) for t in state.timings if t.targets[-1] == candidate]
            items, total = _bounded(timings, group)
            return (timings[-MAX_ITEMS:] if not group else items), total
        if section == "diff":
            sha = cand.evaluation.profile_diff_sha256 if cand.evaluation else None
            if not sha:
                return [], 0
            diff = msgspec.json.decode(handle.evidence.get(sha))  # the evidence, not a file beside it
            return _bounded(diff.get("operations", []), group)
        if section == "ncu":
            return _candidate_ncu(handle, state, candidate, group)
        if section == "profile":
            return _bounded(_candidate_top(handle, state, candidate), group)
        if section in ("lines", "mechanisms", "facts"):
            if cand.brief is None:  # only a verified candidate gets a refreshed view of where time goes
                raise InputError(f"--section {section!r} --candidate {candidate}: no refreshed view (only a verified "
                                 "candidate gets one); try --section profile or diff")
            return _bounded(cand.brief.view.get(section, []), group)
        if section == "imports":
            return _bounded(_imports(state, candidate), group)
        raise InputError(f"--section {section!r} with --candidate: expected one of gates, timing, diff, ncu, "
                         "profile, lines, mechanisms, facts, imports")
    if section == "profile":
        return _bounded(view.get("profile", {}).get("top", []), group)
    if section in ("lines", "mechanisms", "facts"):
        return _bounded(view.get(section, []), group)
    if section == "routing":
        # discovery, then every diagnosis climb in order (one decision per rung climbed)
        decided = [r for phase, r in sorted(state.routing.items()) if phase != "diagnosis"] + list(state.climbs)
        return _bounded([to_builtins(r) for r in decided], group)
    if section == "timing":
        return _bounded([timing_view(t) for t in state.timings if t.purpose == "baseline-variance"], group)
    if section == "slices":
        st = state.source_targets
        return _bounded(sorted(st.slices) if st else [], group)
    if section == "ncu":
        return _ncu_group(view.get("ncu"), group)
    if section == "imports":
        return _bounded(_imports(state, "baseline"), group)
    raise InputError(f"--section {section!r}: needs --candidate ID")


def _imports(state, target: str) -> list[dict]:
    """Profiles imported for ``target`` through partial adapters (`pw import`): what and how far
    they can be trusted; the briefs themselves are files (imports/<tool>/agent-brief.txt)."""
    return [{"adapter": i.adapter, "source": i.source, "primary_metric": i.primary_metric, "total": i.total,
             "ceiling": i.ceiling, "cannot_pass": sorted(i.gate_limits), "brief_tokens": i.tokens}
            for i in state.imports.values() if i.target == target]


def _discovery_profile(handle, state, target: str):
    from ledger.profile import decode_profile

    discovery = state.routing["discovery"].chosen if "discovery" in state.routing else None
    normalized = state.profiles.get(f"{target}:{discovery}") if discovery else None
    return decode_profile(handle.evidence.get(normalized.profile_sha256)) if normalized else None


def _candidate_top(handle, state, candidate: str) -> list[dict]:
    """The candidate's discovery profile, in the shape of the baseline's `--section profile`."""
    profile = _discovery_profile(handle, state, candidate)
    if profile is None:
        raise InputError(f"--section profile --candidate {candidate}: no reprofile recorded (run `pw evaluate` first)")
    return [{"id": o.id, "self": o.self_metrics, "inclusive": o.inclusive_metrics, "file": o.file,
             "lines": [o.line_start, o.line_end]} for o in profile.top_operations(MAX_ITEMS)]


def _hot_share(handle, state, target: str) -> float | None:
    """The hotspot's share of the target's own discovery profile (the roofline's Amdahl input)."""
    hot = state.hotspot
    if hot is None:
        return None
    profile = _discovery_profile(handle, state, target) if target != "baseline" else None
    op = profile.operation(hot.operation) if profile is not None else None
    if op is None:
        return hot.share
    total = profile.totals.get(profile.primary_metric, 0.0)
    return op.self_metrics.get(profile.primary_metric, 0.0) / total if total else hot.share


def _ncu_summary(handle, state, target: str) -> dict | None:
    from adapters import ncu
    from pw.app.profile_baseline import gpu_summary

    captured = state.captures.get(f"{target}:ncu")
    if captured is None:
        return None
    arts = {role: handle.evidence.get(sha) for role, sha in captured.artifacts.items()
            if role in (ncu.RAW_ROLE, ncu.DETAILS_ROLE)}
    if ncu.RAW_ROLE not in arts:
        return None
    return gpu_summary(arts, _hot_share(handle, state, target) or 0.0)


def _candidate_ncu(handle, state, candidate: str, group: str | None):
    """The candidate's Nsight Compute group beside its parent's and the baseline's."""
    from projections.ncu_delta import compare

    if group is not None and group not in NCU_GROUPS:
        raise InputError(f"--group {group!r} with --section ncu: expected one of {', '.join(NCU_GROUPS)}")
    mine = _ncu_summary(handle, state, candidate)
    if mine is None:
        has = sorted(c for c in state.candidates if f"{c}:ncu" in state.captures)
        raise InputError(f"--section ncu --candidate {candidate}: no Nsight Compute capture of this candidate "
                         f"(captured: {', '.join(has) or 'none'}; see --section routing)")
    baseline = _ncu_summary(handle, state, "baseline") or (state.brief.view.get("ncu") if state.brief else None)
    parent_id = state.candidates[candidate].prepared.resolved_parent
    parent = baseline if parent_id == "baseline" else _ncu_summary(handle, state, parent_id)
    return compare(mine, parent, baseline, group)[:MAX_ITEMS], len(compare(mine, parent, baseline, group))


def _ncu_group(ncu: dict | None, group: str | None):
    """One group of the Nsight Compute diagnostic (`view["ncu"]`, written by the profile stage)."""
    if not ncu:
        raise InputError("--section ncu: this run has no Nsight Compute diagnosis (routing did not reach ncu; "
                         "see --section routing)")
    if group is None:
        return _bounded([{"kernel": ncu.get("kernel"), "limiter": ncu.get("limiter")}], None)
    if group not in NCU_GROUPS:
        raise InputError(f"--group {group!r} with --section ncu: expected one of {', '.join(NCU_GROUPS)}")
    if group == "rules":
        return _bounded(ncu.get("rules", []), None)
    if group == "roofline":
        return _bounded([ncu.get("roofline", {})], None)
    values = ncu.get("groups", {}).get(group, {})
    return _bounded([{"name": k, "value": v} for k, v in sorted(values.items())], None)


def inspect(args) -> int:
    from pw.app.run import RunHandle

    run, ledger = open_run(args.run)
    checked_events(run, ledger)
    handle = RunHandle(run.path)
    state = handle.state()
    if args.format == "speedscope":
        return _speedscope(handle, state, args.candidate)
    items, total = _section(handle, state, args.section, args.candidate, args.group)
    doc = {"section": args.section, "candidate": args.candidate, "group": args.group, "items": items,
           "shown": len(items), "total": total}
    if args.section == "ncu" and args.candidate is not None:
        doc["parent"] = state.candidates[args.candidate].prepared.resolved_parent
    text = msgspec.json.encode(doc).decode() if (args.json or args.format == "json") else canonical_json(doc).decode()
    _record_view(handle, state, args, text, len(items), total)
    print_text(text)
    return 0


def _record_view(handle, state, args, text: str, shown: int, total: int) -> None:
    """What was handed to the asking actor, for cost.json: one ViewEmitted with its token count. A
    writer that appended meanwhile is retried once against the new head."""
    from ledger import events as ev
    from ledger.errors import ConcurrencyError
    from pw.agent.tokens import TOKENIZER, count_tokens
    from pw.cli.common import actor

    event = ev.ViewEmitted(section=args.section, candidate=args.candidate, group=args.group,
                           tokens=count_tokens(text), tokenizer=TOKENIZER, shown=shown, total=total)
    who = actor()
    try:
        try:
            handle.record(state, [event], actor=who)
        except ConcurrencyError:
            handle.record(handle.state(), [event], actor=who)
    except OSError as exc:  # a run on read-only media can still be inspected; only its cost record is lost
        import sys

        sys.stderr.write(f"pw inspect: view not recorded in cost.json ({handle.path}: {exc.strerror or exc})\n")


def _speedscope(handle, state, candidate: str | None) -> int:
    from ledger.profile import decode_profile
    from pw.export.speedscope import to_speedscope

    target = candidate or "baseline"
    normalized = next((p for p in state.profiles.values() if p.target == target), None)
    if normalized is None:
        raise InputError(f"no profile recorded for {target!r} in this run")
    profile = decode_profile(handle.evidence.get(normalized.profile_sha256))
    print_json(to_speedscope(profile, name=f"{state.run.run_id} {target}"))
    return 0


def _summary(data: msgspec.Struct) -> str:
    """A short, human line for an event payload: its scalar fields, truncated."""
    parts = []
    for field in data.__struct_fields__:
        value = getattr(data, field)
        if field.endswith(("sha256", "hash", "key")) or value == "":
            continue  # hashes are for auditors; `--json` shows them
        if isinstance(value, (str, int, float, bool)):
            parts.append(f"{field}={value}")
    text = " ".join(parts)
    return text if len(text) <= 100 else text[:97] + "..."


def log(args) -> int:
    run, ledger = open_run(args.run)
    events = checked_events(run, ledger)
    if args.json:
        for env in events:
            print_json(to_builtins(env))
        return 0
    from rich.table import Table

    table = Table(title=f"{run.run_id}: {len(events)} events", title_justify="left")
    for col in ("seq", "at", "type", "actor", "summary"):
        table.add_column(col, overflow="fold")
    for env in events:
        table.add_row(str(env.seq), env.at, f"{env.type} v{env.v}", env.actor, _summary(env.data))
    console().print(table)
    return 0


def replay(args) -> int:
    from ledger.errors import InputError
    from projections.state import fold

    run, ledger = open_run(args.run)
    events = checked_events(run, ledger)
    if args.until is not None and not (1 <= args.until <= len(events)):
        raise InputError(f"--until {args.until}: expected a seq between 1 and {len(events)}")
    state = fold(events[: args.until] if args.until is not None else events)
    if args.json:
        print_json(to_builtins(state))
        return 0
    from ledger.codec import canonical_json

    console().print(canonical_json(state).decode(), markup=False)
    return 0


def report(args) -> int:
    from ledger.errors import RejectedCommand
    from projections import report as report_doc
    from projections import state
    from projections.materialize import materialize
    from pw.app.plots import draw_all
    from pw.app.run import RunHandle

    run, ledger = open_run(args.run)
    run_state = state.fold(checked_events(run, ledger))
    if report_doc.report(run_state) is None:
        raise RejectedCommand(f"{run.path}: no candidate evaluated yet; run `pw prepare` and `pw evaluate` first")
    materialize(run.path, ledger, run_state)
    plots = draw_all(RunHandle(run.path))
    if args.json:
        print_json({"run_dir": str(run.path), "report": str(run.path / "report.md"), "plots": plots})
    else:
        print_text(f"report: {run.path / 'report.md'} ({len(plots)} plots in {run.path / 'plots'})")
    return 0
