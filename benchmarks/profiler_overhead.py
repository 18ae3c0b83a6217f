"""What a timed profiler costs a timed run (one kind of run): profiled over unprofiled program wall.

Builds a workload's baseline with pw (`pw start --no-profile`), then runs it in interleaved pairs
through pw's own timed-run path (`pw.app.campaign.timed_run`: sandbox, launcher, the same fresh
input in both arms of a pair): once plain, once under the timed profiler (perf's `record -F 499`
around sandbox and launcher, py-spy on the program's process id from outside, CUPTI through the environment),
in a seeded order. The ratio is of the program's own wall time as the launcher measures it, so a
profiler's start-up and teardown outside the program are not in it; they are reported apart, as the
whole timed run's extra seconds (what a campaign pays per run on top, with the reduction of the
run's profile).

    python benchmarks/profiler_overhead.py --adapter perf --workload workloads/matmul-c --pairs 12
    python benchmarks/profiler_overhead.py --adapter py-spy --workload workloads/pyloop --pairs 12
    python benchmarks/profiler_overhead.py --adapter cupti --workload workloads/cuda-transpose   # a GPU
    python benchmarks/profiler_overhead.py --quick     # perf, matmul-c, 4 pairs

Output ends in key=value lines: the geometric mean ratio with its 95% t-interval.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(adapter_name: str, workload: Path, pairs: int) -> dict:
    import numpy as np
    from scipy import stats

    from adapters.registry import adapter_by_name
    from pw.app import campaign
    from pw.app.run import RunHandle
    from pw.app.targets import baseline_target
    from pw.stats.order import interleaved_order

    runs = Path(tempfile.mkdtemp(prefix="pw-overhead-"))
    try:
        subprocess.run([sys.executable, "-m", "pw.cli", "start", "--workload", str(workload), "--runs-dir", str(runs),
                        "--no-profile", "--json"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        handle = RunHandle(next(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")))
        state = handle.state()
        target = baseline_target(handle, state)
        adapter = adapter_by_name(adapter_name)
        if adapter.timed_wrap(str(runs)) is None:
            raise SystemExit(f"profiler_overhead: {adapter_name} cannot profile a timed run here "
                             f"({adapter.probe().reason})")
        profiling = campaign.Profiling(adapter_name, adapter, handle.evidence, None,
                                       {"baseline": str(target.build_dir.resolve())})
        contract = state.run.contract
        scratch = handle.path / "scratch" / "overhead"
        plain, traced, extra = [], [], []
        campaign.timed_run(contract, target, scratch, argv=None, tag="warm", profiling=None, role="reference")
        for i, order in enumerate(interleaved_order(pairs, 20261202)):
            got = {}
            for arm in order:
                started = time.perf_counter()
                done = campaign.timed_run(contract, target, scratch, argv=None, tag=f"p{i}{arm}",
                                          profiling=profiling if arm == "B" else None, role="reference")
                whole = time.perf_counter() - started
                if done.outcome.value is None:
                    raise SystemExit(f"profiler_overhead: a run failed: {done.outcome.process}")
                got[arm] = (done.outcome.process.wall_s, whole)
            plain.append(got["A"][0])
            traced.append(got["B"][0])
            extra.append((got["B"][1] - got["B"][0]) - (got["A"][1] - got["A"][0]))
        d = np.log(np.asarray(traced)) - np.log(np.asarray(plain))
        m, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("nan")
        t = float(stats.t.ppf(0.975, d.size - 1)) if d.size > 1 else float("nan")
        return {"adapter": adapter_name, "workload": workload.name, "pairs": pairs,
                "plain_median_s": float(np.median(plain)), "traced_median_s": float(np.median(traced)),
                "ratio": math.exp(m), "low": math.exp(m - t * se), "high": math.exp(m + t * se),
                "extra_s": float(np.median(extra))}
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", default="perf", choices=("perf", "py-spy", "cupti"))
    p.add_argument("--workload", type=Path, default=ROOT / "workloads" / "matmul-c")
    p.add_argument("--pairs", type=int, default=12)
    p.add_argument("--quick", action="store_true", help="perf on matmul-c, 4 pairs")
    args = p.parse_args(argv)
    if args.quick:
        args.adapter, args.workload, args.pairs = "perf", ROOT / "workloads" / "matmul-c", 4
    if not args.workload.is_dir() or args.pairs < 2:
        print(f"profiler_overhead: expected a workload directory and at least 2 pairs ({args.workload})",
              file=sys.stderr)
        return 2
    r = measure(args.adapter, args.workload.resolve(), args.pairs)
    print(f"{'adapter':8} {'workload':16} {'pairs':>5} {'plain s':>8} {'profiled s':>10} {'ratio [95% CI]':>24} "
          f"{'extra s/run':>11}")
    print(f"{r['adapter']:8} {r['workload']:16} {r['pairs']:>5} {r['plain_median_s']:>8.4f} {r['traced_median_s']:>10.4f} "
          f"{r['ratio']:>8.4f} [{r['low']:.4f}, {r['high']:.4f}] {r['extra_s']:>11.3f}")
    key = r["adapter"].replace("-", "")
    print(f"{key}_overhead_ratio={r['ratio']:.4f}")
    print(f"{key}_overhead_low={r['low']:.4f}")
    print(f"{key}_overhead_high={r['high']:.4f}")
    print(f"{key}_extra_s_per_run={r['extra_s']:.4f}")
    print(f"{key}_overhead_pairs={r['pairs']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
