"""Verbs that begin a run: `pw start` (create or resume a run from a workload) and `pw demo`
(the whole loop on the bundled matmul workload).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ledger.codec import to_builtins
from ledger.errors import UsageError
from pw.cli.common import print_json, print_text


@contextmanager
def progress_reporter(enabled: bool, verb: str = "start"):
    """A spinner with the current stage on a TTY (stderr); silent otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _msg: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status("starting") as status:
        yield lambda msg: status.update(f"pw {verb}: {msg}")


def start(args) -> int:
    from pw.app.start import StartOptions
    from pw.app.start import start as run_start

    if bool(args.workload) == bool(args.resume):
        raise UsageError("give exactly one of --workload DIR or --resume RUN")
    opts = StartOptions(
        workload=args.workload,
        resume=args.resume,
        iterations=args.iterations,
        repairs=args.repairs,
        runs_dir=args.runs_dir,
        profile=not args.no_profile,
        operation=args.operation,
    )
    if args.imports:
        from pw.app.imports import parse_spec

        for spec in args.imports:  # a bad TOOL=PATH is refused before the run is started
            parse_spec(spec)
    with progress_reporter(not args.json) as progress:
        result = run_start(opts, progress)
    imported = []
    if args.imports:
        from pathlib import Path

        from pw.cli.imports import import_profiles, summary

        imported = [summary(e) for e in import_profiles(Path(result.run_dir), args.imports, "baseline")]
    if args.json:
        print_json({**to_builtins(result), "imports": imported} if args.imports else to_builtins(result))
        return 0
    lines = [f"run: {result.run_dir}"]
    if result.inferred:
        lines.append("contract: inferred (no profileweaver.json)")
    lines += [f"  {d}" for d in result.inference]
    if result.skipped:
        lines.append(f"resumed: skipped {', '.join(result.skipped)} (already recorded)")
    lines.append(f"baseline: {result.status}")
    if result.oracle:
        lines.append(f"oracle compares: {result.oracle}")
    lines += [f"note: {n}" for n in result.notes]
    if result.message:
        lines.append(f"WARNING: {result.message}")
    lines += [f"WARNING: {w}" for w in result.warnings]
    brief = f"{result.run_dir}/agent-brief.txt"
    from pathlib import Path

    if Path(brief).is_file():
        lines.append(f"brief: {brief}")
    lines += [f"imported {i['adapter']}: {i['brief']} ({i['brief_tokens']} tokens; ceiling {i['ceiling']})"
              for i in imported]
    lines.append(f"next: {result.next}")
    print_text("\n".join(lines))
    return 0


def demo(args) -> int:
    from pw.app.demo import run_demo

    with progress_reporter(not args.json) as progress:
        result = run_demo(args.runs_dir, progress)
    if args.json:
        print_json(to_builtins(result))
        return 0 if result.as_expected else 1
    lines = [f"run: {result.run_dir}"]
    for c in result.candidates:
        speed = f"{c.speedup:.2f}x [{c.interval[0]:.2f}, {c.interval[1]:.2f}]" if c.interval else "-"
        gates = " ".join(f"{k}:{'pass' if v else 'FAIL'}" for k, v in c.gates.items())
        lines.append(f"{c.id:<11} {c.status:<12} (expected {c.expected}) speedup {speed}")
        if gates:
            lines.append(f"{'':<11} {gates}")
        if c.status != "verified" and c.reasons:
            lines.append(f"{'':<11} {c.reasons[0][:150]}")
    lines.append(f"report: {result.report}")
    lines.append("as expected" if result.as_expected else "NOT as expected: see the report")
    print_text("\n".join(lines))
    return 0 if result.as_expected else 1
