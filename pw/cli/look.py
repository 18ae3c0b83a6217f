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
            timings = [t for t in state.timings if t.targets[-1] == candidate]
            return _bounded([to_builtins(t) for t in timings[-1:]], group)
        if section == "diff":
            sha = cand.evaluation.profile_diff_sha256 if cand.evaluation else None
            if not sha:
                return [], 0
            diff = msgspec.json.decode(handle.evidence.get(sha))  # the evidence, not a file beside it
            return _bounded(diff.get("operations", []), group)
        raise InputError(f"--section {section!r} with --candidate: expected one of gates, timing, diff")
    if section == "profile":
        return _bounded(view.get("profile", {}).get("top", []), group)
    if section in ("lines", "mechanisms", "facts"):
        return _bounded(view.get(section, []), group)
    if section == "routing":
        # discovery, then every diagnosis climb in order (one decision per rung climbed)
        decided = [r for phase, r in sorted(state.routing.items()) if phase != "diagnosis"] + list(state.climbs)
        return _bounded([to_builtins(r) for r in decided], group)
    if section == "timing":
        return _bounded([to_builtins(t) for t in state.timings if t.purpose == "baseline-variance"], group)
    if section == "slices":
        st = state.source_targets
        return _bounded(sorted(st.slices) if st else [], group)
    if section == "ncu":
        return _ncu_group(view.get("ncu"), group)
    raise InputError(f"--section {section!r}: needs --candidate ID")


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
    if args.json or args.format == "json":
        print_json(doc)
    else:
        print_text(canonical_json(doc).decode())
    return 0


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
