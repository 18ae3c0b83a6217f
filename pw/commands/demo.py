"""`pw demo`: the whole loop on the bundled matmul workload."""

from __future__ import annotations

from ledger.codec import to_builtins
from pw.commands.common import print_json, print_text
from pw.commands.start import progress_reporter


def demo(args) -> int:
    from pw.workflows.demo import run_demo

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
