"""Measure the oracle's comparison on a million-line output (pw.workload.compare.compare_streams).

    .venv/bin/python benchmarks/compare_streams.py [--lines 1000000] [--repeat 3]

Three cases, each the best of `--repeat`: stderr identical to the reference (what a correct
deterministic program gives), every number on every line off by a relative 1e-9 (the worst case
within tolerance: every token parsed), and one wrong value on the last line (found and named).
Ends with `key=value` lines.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pw.workload.compare import Streams, compare_streams  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.lines
    values = [(i % 977) * 0.731 + 1.0 for i in range(n)]
    want = Streams(stdout="", stderr="".join(f"{v:0.9f} {v * 2:0.9f}\n" for v in values))
    same = Streams(stdout="", stderr=str(want.stderr))
    near = Streams(stdout="", stderr="".join(f"{v * (1 + 1e-9):0.9f} {v * 2:0.9f}\n" for v in values))
    wrong = Streams(stdout="", stderr=want.stderr[: want.stderr.rindex("\n", 0, -1) + 1] + "0.5 0.5\n")
    streams = ("stdout", "stderr", "files")
    t_same, r_same = best(lambda: compare_streams(same, want, streams, rtol=1e-6, atol=0), args.repeat)
    t_near, r_near = best(lambda: compare_streams(near, want, streams, rtol=1e-6, atol=0), args.repeat)
    t_wrong, r_wrong = best(lambda: compare_streams(wrong, want, streams, rtol=1e-6, atol=0), args.repeat)
    assert r_same.passed and r_near.passed and not r_wrong.passed, (r_same, r_near, r_wrong)
    print(f"{'case':<34} {'seconds':>8}  result")
    print(f"{'identical':<34} {t_same:>8.3f}  {r_same.detail[:60]}")
    print(f"{'every value off by rel 1e-9':<34} {t_near:>8.3f}  {r_near.detail[:60]}")
    print(f"{'one wrong value, last line':<34} {t_wrong:>8.3f}  {r_wrong.detail[:60]}")
    print(f"lines={n}")
    print(f"identical_s={t_same:.3f}")
    print(f"all_within_tolerance_s={t_near:.3f}")
    print(f"wrong_last_line_s={t_wrong:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
