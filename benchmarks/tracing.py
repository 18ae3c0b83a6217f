"""Measure what the oracle's write tracing costs: traced over untraced wall time.

    .venv/bin/python benchmarks/tracing.py [--writes 1000000] [--rounds 7] [--ptrace-writes 100000]

A C program makes `--writes` unbuffered `fprintf(stderr, ...)` calls (one `write` each, the shape
of a benchmark suite dumping its arrays), stderr to a file. It is run untraced and under the
prefix the oracle uses (`pw.workload.write_trace.strace_prefix`), interleaved round by round so
machine noise hits both alike; the ratio is of the medians. The slow mode (strace without
`--seccomp-bpf`, which stops the process on every syscall) is measured once on a smaller program
(`--ptrace-writes`) to show what the filter saves. Ends with `key=value` lines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pw.workload import write_trace  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) fprintf(stderr, "%0.6f ", i * 0.5);
    return 0;
}
"""


def timed(argv: list[str], err: Path) -> float:
    with open(err, "wb") as f:
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=f, check=True, timeout=600)
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writes", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ptrace-writes", type=int, default=100_000)
    args = ap.parse_args()
    if shutil.which("strace") is None or shutil.which("cc") is None:
        print("needs strace and cc", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pw-bench-trace-") as tmp:
        d = Path(tmp)
        (d / "w.c").write_text(PROGRAM)
        subprocess.run(["cc", "-O2", "-o", str(d / "w"), str(d / "w.c")], check=True)
        prog = [str(d / "w"), str(args.writes)]
        traced = write_trace.strace_prefix(d / "t.log") or []
        plain_s, traced_s = [], []
        timed(prog, d / "err")  # warm-up: page cache, binary
        for _ in range(args.rounds):
            plain_s.append(timed(prog, d / "err"))
            traced_s.append(timed(traced + prog, d / "err"))
        small = [str(d / "w"), str(args.ptrace_writes)]
        slow = [a for a in traced if a != "--seccomp-bpf"]
        small_plain = statistics.median(timed(small, d / "err") for _ in range(3))
        small_slow = timed(slow + small, d / "err")
    mode = write_trace.strace_mode() or "none"
    med_plain, med_traced = statistics.median(plain_s), statistics.median(traced_s)
    print(f"{'program':<36} {'untraced s':>11} {'traced s':>9} {'ratio':>6}")
    print(f"{f'{args.writes} writes, oracle prefix':<36} {med_plain:>11.3f} {med_traced:>9.3f} "
          f"{med_traced / med_plain:>6.3f}")
    print(f"{f'{args.ptrace_writes} writes, no seccomp filter':<36} {small_plain:>11.3f} {small_slow:>9.3f} "
          f"{small_slow / small_plain:>6.1f}")
    print(f"tracing_mode={'seccomp-bpf' if mode == write_trace.SECCOMP else 'ptrace-all'}")
    print(f"writes={args.writes}")
    print(f"untraced_median_s={med_plain:.4f}")
    print(f"traced_median_s={med_traced:.4f}")
    print(f"traced_over_untraced={med_traced / med_plain:.3f}")
    print(f"no_seccomp_over_untraced_at_{args.ptrace_writes}_writes={small_slow / small_plain:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
