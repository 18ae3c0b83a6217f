"""Verbs that check the run or the machine: audit, rebuild, repair, validate, doctor (which profilers
work here) and tokens (the measured o200k_base cost of what an agent loads; exit 1 when a file is over
its budget: root skill 1,500, child skill 1,200, brief 320 tokens).
"""

from __future__ import annotations

from pathlib import Path

from ledger.codec import to_builtins
from ledger.errors import InputError
from pw import diagnostics
from pw.cli.common import checked_events, open_run, print_json, print_text


def audit(args) -> int:
    from ledger import anchor
    from ledger.errors import LedgerCorrupt, NewerLedger, TornTail
    from pw.app.audit import audit_run

    try:
        printed = [anchor.parse(text) for text in getattr(args, "anchor", [])]
    except ValueError as exc:
        raise InputError(f"--anchor {exc}") from None
    run, ledger = open_run(args.run)
    try:
        checked_events(run, ledger)
    except TornTail:
        pass  # damage an audit is for: reported below (exit 1)
    except NewerLedger:
        raise  # written by a newer ProfileWeaver: nothing here can judge it (exit 2)
    except LedgerCorrupt as exc:
        # Empty or not a ledger: bad input (exit 2). A damaged chain in an otherwise valid ledger
        # is what an audit is for: it is reported below (exit 1).
        if exc.seq in (None, 1):
            raise
    report = audit_run(run, printed=printed)
    if args.json:
        print_json(to_builtins(report))
    else:
        for check in report.checks:
            mark = "ok  " if check.ok else "FAIL"
            print_text(f"{mark} {check.name}: {check.detail}")
        for note in report.notes:
            print_text(f"note {note}")
        print_text("audit passed" if report.ok else f"audit failed: {report.first_divergence}")
    return 0 if report.ok else 1


def rebuild(args) -> int:
    from projections import state
    from projections.materialize import materialize

    run, ledger = open_run(args.run)
    done = materialize(run.path, ledger, state.fold(checked_events(run, ledger)))
    diagnostics.projections_written(run.path, done.state.head.seq, done.written)
    if args.json:
        print_json({"run_dir": str(run.path), "files": done.files, "written": done.written})
    else:
        print_text(f"rebuilt {len(done.files)} projections in {run.path} ({len(done.written)} changed)")
    return 0


def repair(args) -> int:
    from ledger.errors import LedgerCorrupt, NewerLedger
    from pw.cli.common import first_line_intact

    run, ledger = open_run(args.run)
    path = run.ledger_path
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file, expected a ProfileWeaver ledger; nothing repaired")
    if not first_line_intact(path):
        # Quarantining "the torn tail" of a file that never was a ledger would empty it and turn it
        # into one; refuse and leave the file as it is.
        raise InputError(f"{path}: not a ProfileWeaver ledger (first line is not a valid event); nothing repaired")
    try:
        event = ledger.repair()
    except NewerLedger as exc:
        detail = str(exc).removeprefix("ledger: ")
        raise NewerLedger(f"{path}: {detail}; nothing to repair, nothing changed", seq=exc.seq,
                          offset=exc.offset) from None
    except LedgerCorrupt as exc:
        from pw.app.damage import advice

        detail = str(exc).removeprefix("ledger: ")
        raise LedgerCorrupt(f"{path}: {detail}; nothing changed: {advice(path, exc)}", seq=exc.seq,
                            offset=exc.offset) from None
    if event is not None:
        # The repair appended LedgerRepaired: every projection stamped with the old head is stale
        # until it is rewritten, which `pw audit` would report. Rewrite them now.
        from projections.materialize import materialize

        done = materialize(run.path, ledger)
        diagnostics.projections_written(run.path, done.state.head.seq, done.written)
    if args.json:
        print_json({"repaired": event is not None, "event": to_builtins(event) if event else None})
    elif event is None:
        print_text(f"{run.ledger_path}: intact, nothing to repair")
    else:
        print_text(
            f"quarantined {event.length} torn bytes at offset {event.offset} to {event.quarantine}; "
            "recorded LedgerRepaired and rebuilt the projections"
        )
    return 0


def validate(args) -> int:
    path = Path(args.file)
    if not path.is_file():
        what = "not a regular file" if path.exists() else "no such file"
        raise InputError(f"{args.file}: {what} (expected a run file or profileweaver.json)")
    if path.name.endswith(".jsonl"):
        count = _validate_ledger(path)
        summary = f"{path.name}: valid ledger, {count} events"
    else:
        from pw.export.schemas import FILE_TYPES, type_for_file
        from pw.export.validation import decode_as

        typ = type_for_file(path)
        if typ is None:
            known = ", ".join(p for p, _ in FILE_TYPES)
            raise InputError(f"{args.file}: no schema for this file name (known: ledger.jsonl, {known})")
        decode_as(path.read_bytes(), typ, name=path.name)
        summary = f"{path.name}: valid {typ.__name__}"
    if args.json:
        print_json({"file": str(path), "valid": True})
    else:
        print_text(summary)
    return 0


def _validate_ledger(path: Path) -> int:
    from ledger.store import Ledger
    from pw.app.runpath import RunDir

    # checked_events names the file in its errors; any *.jsonl is validated as a ledger.
    return len(checked_events(RunDir(path.parent), Ledger(path), ledger_path=path))


def tokens(args) -> int:
    from pw.agent import skilltree
    from pw.agent.tokens import provenance

    root = skilltree.SKILLS_DIR
    rows = skilltree.skill_costs(root)
    run_rows = []
    run_path = None
    run_arg = getattr(args, "run", None)
    if run_arg:
        from pw.app.runpath import resolve_run

        run_path = resolve_run(run_arg).path
        run_rows = skilltree.run_costs(Path(run_path))
    over = [r for r in rows + run_rows if not r.within]
    if getattr(args, "json", False):
        def row(r):
            return {"kind": r.kind, "path": r.path, "tokens": r.tokens, "limit": r.limit, "within": r.within}

        doc = {
            **provenance(),
            "skills_dir": str(root),
            "files": [row(r) for r in rows],
            "total": sum(r.tokens for r in rows),
            "over_budget": [r.path for r in over],
        }
        if run_path is not None:
            doc["run"] = {"run_dir": str(run_path), "files": [row(r) for r in run_rows],
                          "total": sum(r.tokens for r in run_rows)}
        print_json(doc)
        return 1 if over else 0

    prov = provenance()
    lines = []
    for title, group in (("skill tree", rows), (f"run {run_path}", run_rows)):
        if title.startswith("run") and run_path is None:
            continue
        lines.append(f"{title}: {prov['tokenizer']} tokens ({prov['package']} {prov['version']})")
        lines += _table(group)
        lines.append("")
    if run_path is not None and not run_rows:
        lines.append(f"{run_path}: no agent-brief.txt, agent-view.json or source-slices yet")
    if over:
        lines.append("over budget: " + ", ".join(f"{r.path} ({r.tokens} > {r.limit})" for r in over))
    print_text("\n".join(lines).rstrip("\n"))
    return 1 if over else 0


def _table(group) -> list[str]:
    """Plain aligned columns: readable in a terminal and when piped, never wrapped."""
    body = [(r.kind, r.path, str(r.tokens), "-" if r.limit is None else str(r.limit),
             "" if r.within else "OVER") for r in group]
    body.append(("", "total", str(sum(r.tokens for r in group)), "", ""))
    head = ("kind", "file", "tokens", "budget", "")
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(4)]

    def fmt(row) -> str:
        return (f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  "
                f"{row[3]:>{widths[3]}}  {row[4]}").rstrip()

    rule = "-" * (sum(widths) + 8)
    return [fmt(head), rule, *[fmt(r) for r in body[:-1]], rule, fmt(body[-1])]


def _where_pw_runs() -> dict[str, str]:
    """Which `pw` this is: the command that ran, the package it imported, the interpreter."""
    import shutil
    import sys
    from pathlib import Path

    import pw

    argv0 = Path(sys.argv[0])
    exe = str(argv0.resolve()) if argv0.name == "pw" and argv0.exists() else (shutil.which("pw") or "not on PATH")
    return {"executable": exe, "package": str(Path(pw.__file__).resolve().parent), "python": sys.executable}


def doctor(args) -> int:
    from pathlib import Path

    from adapters.registry import installed_adapters
    from pw.app.overheads import observed_in

    # The registry's declared overhead, and the one the runs' captures measured (a projection of
    # their ProfileCaptured events): routing uses the measured one once it exists.
    observed = observed_in(Path(getattr(args, "runs_dir", None) or "runs"))
    rows = []
    for adapter in installed_adapters():
        u = adapter.probe()
        seen = observed.get(adapter.spec.name)
        rows.append({"adapter": adapter.spec.name, "usable": u.usable, "mode": u.mode, "version": u.version,
                     "reason": u.reason, "granularity": adapter.spec.granularity,
                     "can_reprofile": adapter.spec.can_reprofile,
                     "overhead": {"declared": adapter.spec.overhead_factor,
                                  "measured": seen.factor if seen else None,
                                  "captures": seen.captures if seen else 0,
                                  "timed_wall_s": [seen.points[0][0], seen.points[-1][0]] if seen else None}})
    from pw.workload import containment

    found = containment.probe()
    sandbox = {"usable": found.sandbox is not None, "tool": found.sandbox.tool if found.sandbox else None,
               "description": containment.describe(found), "reasons": list(found.reasons),
               # How a run's tree is kept from the next run (docs/trust-model.md): a throwaway
               # overlay, or snapshots before and after (the reason why not the overlay).
               "throwaway": bool(found.sandbox and found.sandbox.throwaway),
               "throwaway_reason": found.sandbox.throwaway_reason if found.sandbox else "no sandbox"}
    where = _where_pw_runs()
    if args.json:
        print_json({"adapters": rows, "sandbox": sandbox, "pw": where})
        return 0
    from rich.table import Table

    from pw.cli.common import console

    console().print(f"pw: {where['executable']} (package {where['package']}, python {where['python']})")
    table = Table(title="pw doctor: profilers on this machine", title_justify="left")
    for col in ("adapter", "usable", "mode", "version", "reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["adapter"], "yes" if r["usable"] else "NO", r["mode"] or "-", r["version"] or "-", r["reason"])
    console().print(table)
    console().print(f"overhead (profiled wall / timed wall) declared by the registry, measured by the runs in "
                    f"{getattr(args, 'runs_dir', None) or 'runs'}/; routing uses the measured one for programs "
                    "within 2x of the lengths it was measured on, the declared one otherwise:")
    for r in rows:
        o = r["overhead"]
        measured = "not measured yet"
        if o["measured"] is not None:
            lo, hi = o["timed_wall_s"]
            measured = (f"measured x{o['measured']:g} (median of {o['captures']} capture(s) of "
                        f"{lo:.3g}-{hi:.3g} s programs)")
        console().print(f"  {r['adapter']}: declared x{o['declared']:g}, {measured}", soft_wrap=True)
    if sandbox["usable"]:
        console().print(f"sandbox: {sandbox['description']}")
        console().print("runs' trees: " + ("a throwaway overlay per run" if sandbox["throwaway"] else
                                           f"snapshots before and after each run ({sandbox['throwaway_reason']})"))
    else:
        console().print(f"sandbox: NONE ({'; '.join(sandbox['reasons'])}); verdicts are capped at proposed")
    return 0
