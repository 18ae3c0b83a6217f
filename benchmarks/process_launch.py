"""Measure the process runner: whose peak memory a run reports, and what the launcher costs.

    .venv/bin/python benchmarks/process_launch.py [--runs 15] [--held-mb 200]

A program that allocates and touches `--program-mb` MB is run while this process holds
`--held-mb` MB, once exec'd straight from here and once through `adapters/launch.py`
(`run_process(own_peak_rss=True)`, what timed and oracle runs use). Linux carries the parent's
high-water mark into a directly exec'd child, so only the launched reading should follow the
program. The wall time each way is the runner's own `wall_s`; the launcher's excludes its own
start-up, which is reported separately from the caller's clock. The table ends with `key=value`
lines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.process import run_process  # noqa: E402

PROGRAM = "import sys; data = b'y' * ({mb} << 20); sys.exit(len(data) % 2)"


def measure(argv: list[str], runs: int, own_peak_rss: bool, scratch: Path) -> dict[str, float]:
    rss, wall, caller = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = run_process(argv, cwd=scratch, env=None, timeout_s=60, stdout_path=scratch / "out",
                        stderr_path=scratch / "err", own_peak_rss=own_peak_rss)
        caller.append(time.perf_counter() - t0)
        if not r.ok:
            raise SystemExit(f"benchmark program failed: {r}")
        rss.append(r.max_rss_kb / 1024)
        wall.append(r.wall_s)
    return {"rss_mb": statistics.median(rss), "wall_ms": statistics.median(wall) * 1e3,
            "caller_ms": statistics.median(caller) * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--held-mb", type=int, default=200, help="memory this process holds meanwhile")
    parser.add_argument("--program-mb", type=int, default=20, help="memory the measured program touches")
    args = parser.parse_args(argv)

    held = b"x" * (args.held_mb << 20)
    results = {}
    with tempfile.TemporaryDirectory(prefix="pw-bench-launch-") as tmp:
        scratch = Path(tmp)
        for mb in (0, args.program_mb):
            program = [sys.executable, "-I", "-S", "-c", PROGRAM.format(mb=mb)]
            for how, flag in (("direct", False), ("launcher", True)):
                results[(mb, how)] = measure(program, args.runs, flag, scratch)
    assert len(held) == args.held_mb << 20  # held until every run is done

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"process runner: median of {args.runs} runs, this process holding {args.held_mb} MB")
    for col in ("program touches", "runner", "reported peak RSS MB", "wall_s ms", "caller's clock ms"):
        table.add_column(col, justify="right")
    for (mb, how), r in results.items():
        table.add_row(f"{mb} MB", how, f"{r['rss_mb']:.1f}", f"{r['wall_ms']:.2f}", f"{r['caller_ms']:.2f}")
    Console().print(table)

    big_direct, big_launch = results[(args.program_mb, "direct")], results[(args.program_mb, "launcher")]
    floor_direct, floor_launch = results[(0, "direct")], results[(0, "launcher")]
    lines = {
        "direct_rss_floor_mb": floor_direct["rss_mb"],
        "launcher_rss_floor_mb": floor_launch["rss_mb"],
        "direct_rss_of_program_mb": big_direct["rss_mb"],
        "launcher_rss_of_program_mb": big_launch["rss_mb"],
        "launcher_sees_program_growth_mb": big_launch["rss_mb"] - floor_launch["rss_mb"],
        "direct_sees_program_growth_mb": big_direct["rss_mb"] - floor_direct["rss_mb"],
        "launcher_startup_ms": floor_launch["caller_ms"] - floor_launch["wall_ms"],
        "launcher_wall_over_direct_ms": floor_launch["wall_ms"] - floor_direct["wall_ms"],
    }
    for key, value in lines.items():
        print(f"{key}={value:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
