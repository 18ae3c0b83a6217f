"""`pw start`: create a run from a workload (or resume one) and print where it is and what next."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ledger.codec import to_builtins
from ledger.errors import UsageError
from pw.commands.common import print_json, print_text


@contextmanager
def progress_reporter(enabled: bool):
    """A spinner with the current stage on a TTY (stderr); silent otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _msg: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status("starting") as status:
        yield lambda msg: status.update(f"pw start: {msg}")


def start(args) -> int:
    from pw.workflows.start import StartOptions
    from pw.workflows.start import start as run_start

    if bool(args.workload) == bool(args.resume):
        raise UsageError("give exactly one of --workload DIR or --resume RUN")
    opts = StartOptions(
        workload=args.workload,
        resume=args.resume,
        iterations=args.iterations,
        repairs=args.repairs,
        runs_dir=args.runs_dir,
        profile=not args.no_profile,
    )
    with progress_reporter(not args.json) as progress:
        result = run_start(opts, progress)
    if args.json:
        print_json(to_builtins(result))
        return 0
    lines = [f"run: {result.run_dir}"]
    if result.inferred:
        lines.append("contract: inferred (no profileweaver.json)")
    lines += [f"  {d}" for d in result.inference]
    if result.skipped:
        lines.append(f"resumed: skipped {', '.join(result.skipped)} (already recorded)")
    lines.append(f"baseline: {result.status}")
    brief = f"{result.run_dir}/agent-brief.txt"
    from pathlib import Path

    if Path(brief).is_file():
        lines.append(f"brief: {brief}")
    lines.append(f"next: {result.next}")
    print_text("\n".join(lines))
    return 0
