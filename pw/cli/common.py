"""Small helpers every verb uses: opening a run's ledger, printing results."""

from __future__ import annotations

import gc
import sys
from typing import Any

import msgspec

from ledger.errors import InputError, LedgerCorrupt, NewerLedger, TornTail
from ledger.store import Ledger
from pw.app.runpath import RunDir, resolve_run


def open_run(arg: str) -> tuple[RunDir, Ledger]:
    run = resolve_run(arg)
    return run, Ledger(run.ledger_path)


def checked_events(run: RunDir, ledger: Ledger, *, until: int | None = None, ledger_path=None):
    """All events, or one clear error naming the ledger and what is wrong with it."""
    path = ledger_path or run.ledger_path
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file, expected a ProfileWeaver ledger")
    try:
        events = ledger.events(until=until)
    except TornTail as exc:
        if exc.seq == 1 and not first_line_intact(path):
            raise InputError(f"{path}: not a ProfileWeaver ledger (first line is not a valid event)") from None
        raise TornTail(
            f"{path}: torn tail at byte {exc.offset} (an interrupted append); "
            f"run `pw repair {run.path}` to quarantine it",
            seq=exc.seq, offset=exc.offset,
        ) from None
    except LedgerCorrupt as exc:
        detail = str(exc).removeprefix("ledger: ")
        if exc.seq == 1 and not first_line_intact(path):
            raise InputError(f"{path}: not a ProfileWeaver ledger ({detail})") from None
        # A whole, hashed line that does not fit (newer version, broken chain): say so, naming the file,
        # and (unless it is only newer) what still stands and what the user can do.
        if not isinstance(exc, NewerLedger):
            from pw.app.damage import advice

            detail = f"{detail}; {advice(path, exc)}"
        raise type(exc)(f"{path}: {detail}", seq=exc.seq, offset=exc.offset) from None
    # A pw process keeps the events it read until it exits, and they are acyclic plain data: moving
    # them out of the cyclic collector's sight keeps every later collection (while folding, say)
    # from walking them again (fold of 100k events: benchmarks/ledger.py). That is a choice for the
    # whole process, so the command line makes it here, not the ledger library.
    gc.freeze()
    return events


def first_line_intact(path) -> bool:
    """True when the file's first line is a complete ledger line carrying its own hash: the file
    is a ledger (perhaps damaged later), not some other file in its place."""
    from ledger.codec import line_digest_ok

    with open(path, "rb") as f:
        first = f.readline(1 << 24)
    return first.endswith(b"\n") and line_digest_ok(first[:-1])


def print_json(obj: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(obj) + b"\n")
    sys.stdout.flush()


def print_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def add_remote_args(p, what: str) -> None:
    """`--remote NAME` (remote.yaml's executor: local or slurm), `--remote-set`, `--remote-config`."""
    p.add_argument("--remote", metavar="NAME", help=f"run {what} where remote.yaml's NAME says (slurm: "
                   "on an allocated node; local: here)")
    p.add_argument("--remote-set", action="append", metavar="KEY=VALUE", default=[],
                   help="change one field of the remote for this call, e.g. time=00:30:00; repeatable")
    p.add_argument("--remote-config", metavar="PATH", help="the remote.yaml to read (default: $PW_REMOTE_CONFIG, "
                   "./remote.yaml, ~/.config/profileweaver/remote.yaml)")


def chosen_remote(args):
    """The remote `--remote` names (with `--remote-set` applied), or `local` without it."""
    from pw.remote import config

    if args.remote is None:
        if args.remote_set:
            raise InputError("--remote-set: needs --remote NAME (the remote whose field it changes)")
        return config.LOCAL
    return config.load(args.remote, config=args.remote_config, overrides=args.remote_set)


def self_command() -> list[str]:
    """How another machine runs this same pw: `-m` and the module this process was started as
    (`pw.cli` for the `pw` script), so a task on a node has the verbs and tables this one has."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None and spec.name else "pw.cli"
    return ["-m", name]


_ACTOR_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:@")


def actor() -> str:
    """Who the emitted text goes to: `PW_ACTOR` (an agent's or sub-agent's name), else "cli".
    cost.json sums what each actor was handed."""
    import os

    name = os.environ.get("PW_ACTOR", "").strip() or "cli"
    if len(name) > 64 or not set(name) <= _ACTOR_CHARS:
        raise InputError(f"PW_ACTOR={name[:70]!r}: expected at most 64 letters, digits or -_.:@")
    return name
