"""Read-only verbs over the ledger: `pw log`, `pw replay`."""

from __future__ import annotations

import msgspec

from ledger.codec import to_builtins
from pw.commands.common import checked_events, console, open_run, print_json


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
