"""`pw inspect` (one bounded diagnostic view at a time) and `pw doctor` (which adapters work here)."""

from __future__ import annotations

import msgspec

from ledger.codec import canonical_json, to_builtins
from ledger.errors import InputError
from pw.commands.common import checked_events, open_run, print_json, print_text

SECTIONS = ("profile", "lines", "mechanisms", "facts", "routing", "timing", "gates", "diff", "slices")
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
            timings = [t for t in state.timings if candidate in t.targets]
            return _bounded([to_builtins(t) for t in timings[-1:]], group)
        if section == "diff":
            import json

            path = handle.path / "candidates" / candidate / "profile" / "profile-diff.json"
            if not path.is_file():
                return [], 0
            diff = json.loads(path.read_text())
            return _bounded(diff.get("operations", []), group)
        raise InputError(f"--section {section!r} with --candidate: expected one of gates, timing, diff")
    if section == "profile":
        return _bounded(view.get("profile", {}).get("top", []), group)
    if section in ("lines", "mechanisms", "facts"):
        return _bounded(view.get(section, []), group)
    if section == "routing":
        return _bounded([to_builtins(r) for _, r in sorted(state.routing.items())], group)
    if section == "timing":
        return _bounded([to_builtins(t) for t in state.timings if t.purpose == "baseline-variance"], group)
    if section == "slices":
        st = state.source_targets
        return _bounded(sorted(st.slices) if st else [], group)
    raise InputError(f"--section {section!r}: needs --candidate ID")


def inspect(args) -> int:
    from pw.app import RunHandle

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
    from pw.speedscope import to_speedscope

    target = candidate or "baseline"
    normalized = next((p for p in state.profiles.values() if p.target == target), None)
    if normalized is None:
        raise InputError(f"no profile recorded for {target!r} in this run")
    profile = decode_profile(handle.evidence.get(normalized.profile_sha256))
    print_json(to_speedscope(profile, name=f"{state.run.run_id} {target}"))
    return 0


def doctor(args) -> int:
    from adapters.registry import installed_adapters

    rows = []
    for adapter in installed_adapters():
        u = adapter.probe()
        rows.append({"adapter": adapter.spec.name, "usable": u.usable, "mode": u.mode, "version": u.version,
                     "reason": u.reason, "granularity": adapter.spec.granularity,
                     "can_reprofile": adapter.spec.can_reprofile})
    if args.json:
        print_json({"adapters": rows})
        return 0
    from rich.table import Table

    from pw.commands.common import console

    table = Table(title="pw doctor: profilers on this machine", title_justify="left")
    for col in ("adapter", "usable", "mode", "version", "reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["adapter"], "yes" if r["usable"] else "NO", r["mode"] or "-", r["version"] or "-", r["reason"])
    console().print(table)
    return 0
