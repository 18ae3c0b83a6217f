"""Verbs that check or rewrite derived files: audit, rebuild, repair, validate."""

from __future__ import annotations

from pathlib import Path

from ledger.codec import to_builtins
from ledger.errors import InputError
from pw import diagnostics
from pw.commands.common import checked_events, open_run, print_json, print_text


def audit(args) -> int:
    from ledger.errors import LedgerCorrupt
    from pw.audit import audit_run

    run, ledger = open_run(args.run)
    try:
        checked_events(run, ledger)
    except LedgerCorrupt as exc:
        # Empty, not a ledger, or newer than this code: bad input (exit 2). A damaged chain in an
        # otherwise valid ledger is what an audit is for: it is reported below (exit 1).
        if exc.seq in (None, 1) or "newer than" in str(exc):
            raise
    except InputError as exc:
        if "torn tail" not in str(exc):
            raise
    report = audit_run(run)
    if args.json:
        print_json(to_builtins(report))
    else:
        for check in report.checks:
            mark = "ok  " if check.ok else "FAIL"
            print_text(f"{mark} {check.name}: {check.detail}")
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
    from ledger.errors import LedgerCorrupt
    from pw.commands.common import first_line_intact

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
    except LedgerCorrupt as exc:
        detail = str(exc).removeprefix("ledger: ")
        raise LedgerCorrupt(
            f"{path}: {detail}; only a torn tail can be repaired, nothing changed", seq=exc.seq, offset=exc.offset
        ) from None
    if args.json:
        print_json({"repaired": event is not None, "event": to_builtins(event) if event else None})
    elif event is None:
        print_text(f"{run.ledger_path}: intact, nothing to repair")
    else:
        print_text(
            f"quarantined {event.length} torn bytes at offset {event.offset} to {event.quarantine}; "
            "recorded LedgerRepaired"
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
        from pw.schemas import FILE_TYPES, type_for_file
        from pw.validation import decode_as

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
    from pw.runpath import RunDir

    # checked_events names the file in its errors; any *.jsonl is validated as a ledger.
    return len(checked_events(RunDir(path.parent), Ledger(path), ledger_path=path))
