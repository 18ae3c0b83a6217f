"""What the sandbox costs per launch, and whether timing in it still holds the A/A error rate.

    python benchmarks/sandbox.py [--launches N] [--campaigns N] [--pairs N]

1. Per-launch cost. `true` is launched N times each way, interleaved: plain, in the sandbox
   (`adapters.sandbox`, the tool the probe finds), and both again through pw's launcher
   (`adapters.process.run_process(own_peak_rss=True)`, what timed runs use). Medians (and 10th
   percentiles: load from other work only adds) of the outer wall time, and the CPU time of the
   launch; the sandbox's cost is the difference. The launcher times the program itself from
   inside the sandbox, so the cost never enters a timed sample: `inner_wall_ms_*` shows that.
2. A/A false-verified rate. A small C program (~15 ms of arithmetic) is both arms of real
   interleaved campaigns of `--pairs` pairs, every run in the sandbox exactly as `pw evaluate`
   runs them (`pw.app.campaign` order, `pw.stats.analyze_pairs` verdict). A campaign whose
   verdict is FASTER would be a false "verified" speedup (significance is the gate it needs).
   The bound is 5%; the 95% Clopper-Pearson interval of the observed rate is printed beside it.

Output: a table, then key=value lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The repository root first: benchmarks/ledger.py would otherwise shadow the `ledger` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters import sandbox as sb  # noqa: E402
from adapters.process import Confinement, run_process  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
int main(void)
{
    volatile double s = 0.0;
    for (long i = 0; i < 12000000; i++)
        s += (double)(i % 7) * 0.5;
    printf("%.1f\n", s);
    return 0;
}
"""


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000.0


def _p10_ms(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[0] * 1000.0


def _children_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def launch_costs(conf: Confinement, tree: Path, launches: int) -> dict[str, float]:
    true = shutil.which("true") or "/bin/true"
    env = {"PATH": "/usr/bin:/bin"}
    outer: dict[str, list[float]] = {k: [] for k in ("plain", "sandbox", "launcher", "launcher_sandbox")}
    cpu: dict[str, list[float]] = {"plain": [], "sandbox": []}
    inner: dict[str, list[float]] = {"launcher": [], "launcher_sandbox": []}
    wrapped = sb.wrap(conf.sandbox, conf.layout, [true])
    for _ in range(launches):
        for kind, argv in (("plain", [true]), ("sandbox", wrapped)):
            cpu0, start = _children_cpu_s(), time.perf_counter()
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            outer[kind].append(time.perf_counter() - start)
            cpu[kind].append(_children_cpu_s() - cpu0)
        for kind, confine in (("launcher", None), ("launcher_sandbox", conf)):
            start = time.perf_counter()
            r = run_process([true], cwd=tree, env=env, timeout_s=30, stdout_path=tree.parent / "o",
                            stderr_path=tree.parent / "e", own_peak_rss=True, confine=confine)
            outer[kind].append(time.perf_counter() - start)
            assert r.ok, r
            inner[kind].append(r.wall_s)
    out = {f"outer_ms_{k}": _ms(v) for k, v in outer.items()}
    out.update({f"inner_wall_ms_{k}": _ms(v) for k, v in inner.items()})
    out["load_average_1min"] = os.getloadavg()[0]
    out["sandbox_cost_ms_per_launch"] = out["outer_ms_sandbox"] - out["outer_ms_plain"]
    # The quiet end of the distribution (a shared machine's load only ever adds to wall time) and
    # the CPU the sandbox's set-up and tear-down take (user + system, bwrap and the kernel's work).
    out["sandbox_cost_ms_p10"] = _p10_ms(outer["sandbox"]) - _p10_ms(outer["plain"])
    out["sandbox_cpu_ms_per_launch"] = _ms(cpu["sandbox"]) - _ms(cpu["plain"])
    out["sandbox_cost_ms_through_launcher"] = out["outer_ms_launcher_sandbox"] - out["outer_ms_launcher"]
    return out


def aa_campaigns(conf: Confinement, tree: Path, campaigns: int, pairs: int) -> dict[str, float]:
    from pw.stats import analyze_pairs, interleaved_order

    (tree / "aa.c").write_text(PROGRAM)
    subprocess.run(["cc", "-O1", "-o", str(tree / "aa"), str(tree / "aa.c")], check=True)
    env = {"PATH": "/usr/bin:/bin"}
    verdicts: dict[str, int] = {}
    for c in range(campaigns):
        order = list(interleaved_order(pairs, 1000 + c))
        times: dict[str, list[float]] = {"A": [], "B": []}
        for pair in order:
            for arm in pair:
                r = run_process(["./aa"], cwd=tree, env=env, timeout_s=60, stdout_path=tree.parent / "o",
                                stderr_path=tree.parent / "e", own_peak_rss=True, confine=conf)
                assert r.ok, r
                times[arm].append(r.wall_s)
        result = analyze_pairs(times["A"], times["B"], order=order, seed=1000 + c)
        verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
    faster = verdicts.get("FASTER", 0)
    from scipy.stats import binomtest

    ci = binomtest(faster, campaigns).proportion_ci(0.95, method="exact")
    return {"aa_campaigns": campaigns, "aa_pairs": pairs, "aa_false_verified": faster,
            "aa_false_verified_rate": faster / campaigns, "aa_false_verified_rate_ci_high": ci.high,
            **{f"aa_verdict_{k.lower()}": v for k, v in sorted(verdicts.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=60)
    parser.add_argument("--campaigns", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    found = sb.probe()
    if found.sandbox is None:
        print("no sandbox on this host: " + "; ".join(found.reasons))
        print("sandbox=none")
        return 1
    root = Path(tempfile.mkdtemp(prefix="pw-sandbox-bench-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    try:
        tree = root / "tree"
        tree.mkdir()
        conf = Confinement(sandbox=found.sandbox,
                           layout=sb.Layout(writable=[str(tree)], hidden=[str(root)], cwd=str(tree)))
        costs = launch_costs(conf, tree, args.launches)
        aa = aa_campaigns(conf, tree, args.campaigns, args.pairs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'measure':<40} {'value':>10}")
    for k, v in {**costs, **aa}.items():
        print(f"{k:<40} {v:>10.4g}" if isinstance(v, float) else f"{k:<40} {v:>10}")
    print()
    print(f"sandbox={found.sandbox.tool} ({found.sandbox.version})".replace(" ", "_"))
    for k, v in {**costs, **aa}.items():
        print(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    print(f"sandbox_cost_within_5ms={costs['sandbox_cost_ms_per_launch'] <= 5.0}")
    print(f"sandbox_cost_p10_within_5ms={costs['sandbox_cost_ms_p10'] <= 5.0}")
    print(f"aa_false_verified_within_5pct={aa['aa_false_verified_rate'] <= 0.05}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
