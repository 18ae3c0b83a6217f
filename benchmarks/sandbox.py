"""What the sandbox costs per launch, and whether timing in it still holds the A/A error rate.

    python benchmarks/sandbox.py [--launches N] [--campaigns N] [--pairs N] [--throwaway-pairs N]
    python benchmarks/sandbox.py --quick    # the throwaway tree's cost only, in under 20 s

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

3. The throwaway tree's cost (issue 26). `true` is launched through the launcher, in a tree of
   100 small files in 5 directories, in pairs, in a
   seeded random order within each pair: as runs were launched before issue 26 (no user namespace,
   no seccomp filter, bwrap's --dev, the tree bound writable) and as a timed run is launched now
   (its own user namespace, the keyring filter, /dev node by node, the tree through a throwaway
   overlay the launcher mounts), with the now-arm's whole per-run tree work around it
   (`pw.workload.steps.RunTree`: the changes directory made, listed and discarded) against the
   before-arm's (its tree snapshotted before and after, as run_once did). The per-pair
   difference of the outer wall time is the cost; its median and a 95% bootstrap interval are
   printed, and `throwaway_cost_within_2ms` says whether the median is at most 2 ms. Beside it, the
   work the overlay adds, timed where it happens: the launcher's mount, hide and capability drop
   (it reports `throwaway_s`) and pw's side (the changes directory made, listed, discarded);
   `throwaway_added_work_within_2ms` says whether their sum is at most 2 ms. On a shared, loaded
   host the paired wall time moves by tens of ms between launches; the parts do not.

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


def _bwrap_before_issue_26(exe: str, layout: sb.Layout, argv, *, devices=(), seccomp_fd=None) -> list[str]:
    """adapters.sandbox.bwrap_argv as it was before issue 26 (commit d0213d2), for the paired arm."""
    del seccomp_fd
    out = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for dev in devices:
        out += ["--dev-bind", dev, dev]
    for path in sb._masks(layout):
        out += ["--tmpfs", path]
    out += ["--dir", sb.SANDBOX_HOME]
    for path in layout.readonly:
        out += ["--ro-bind", path, path]
    for path in layout.writable:
        out += ["--bind", path, path]
    return [*out, "--chdir", layout.cwd, "--", *argv]


def throwaway_cost(found: sb.Sandbox, root: Path, pairs: int, seed: int = 26) -> dict[str, float]:
    """Paired launches of `true` under the launcher: before issue 26, and now with a throwaway tree."""
    import random

    from adapters import process
    from pw.workload import containment, workspace
    from pw.workload.steps import RunTree, Target, confine_for

    root.mkdir(parents=True, exist_ok=True)
    # Probed now, with today's bwrap arguments (the before-arm swaps them while it runs).
    if process.probe_throwaway(found, str(root)) or not containment.throwaway_works():
        return {"throwaway_available": 0}
    true = shutil.which("true") or "/bin/true"
    env = {"PATH": "/usr/bin:/bin"}
    runs = root / "runs"
    tree = runs / "r" / "build" / "c"
    tree.mkdir(parents=True)
    # A small built tree (sources, objects, inputs): what each run's tree check walks or not.
    for d in range(5):
        (tree / f"d{d}").mkdir()
        for i in range(20):
            (tree / f"d{d}" / f"f{i}.c").write_bytes(b"x" * 4096)
    logs = root / "logs"
    real_builder = sb.bwrap_argv
    target = Target(label="c", src_dir=tree, build_dir=tree, files=[], hidden=[str(runs)])
    scratch = runs / "r" / "scratch" / "c"

    def today() -> tuple[float, float]:
        """A run as pw.workload.steps.run_once made it before issue 26: its sandbox, the tree
        bound writable, snapshots (size, mtime) of the tree before and after."""
        sb.bwrap_argv = _bwrap_before_issue_26
        try:
            start = time.perf_counter()
            before = workspace.snapshot(tree)
            conf = confine_for(target, tree)
            r = run_process([true], cwd=tree, env=env, timeout_s=30, stdout_path=logs / "o", stderr_path=logs / "e",
                            own_peak_rss=True, confine=conf)
            assert r.ok and workspace.snapshot(tree) == before, r
            return time.perf_counter() - start, r.wall_s
        finally:
            sb.bwrap_argv = real_builder

    setup: list[float] = []  # the launcher's mount, hide and capability drop (it reports it)
    pw_side: list[float] = []  # pw's own (pw.workload.steps.RunTree): before the run, and after it

    def throwaway() -> tuple[float, float]:
        start = time.perf_counter()
        run_tree = RunTree.before(target, scratch, "run")
        conf = confine_for(target, tree, changes=run_tree.changes)
        made = time.perf_counter() - start
        r = run_process([true], cwd=tree, env=env, timeout_s=30, stdout_path=logs / "o", stderr_path=logs / "e",
                        own_peak_rss=True, confine=conf)
        t1 = time.perf_counter()
        words, _, _ = run_tree.after(None)
        run_tree.discard()
        pw_side.append(made + time.perf_counter() - t1)
        setup.append(r.throwaway_s)
        assert r.ok and words == [] and run_tree.changes is not None, (r, words)
        return time.perf_counter() - start, r.wall_s

    rng = random.Random(seed)
    arms = {"today": today, "throwaway": throwaway}
    outer: dict[str, list[float]] = {k: [] for k in arms}
    inner: dict[str, list[float]] = {k: [] for k in arms}
    for name in arms:  # one unmeasured launch each: caches warm for both
        arms[name]()
    for _ in range(pairs):
        order = list(arms)
        rng.shuffle(order)
        for name in order:
            o, i = arms[name]()
            outer[name].append(o)
            inner[name].append(i)
    diffs = [b - a for a, b in zip(outer["today"], outer["throwaway"], strict=True)]
    boot = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    out = {"throwaway_available": 1, "throwaway_pairs": pairs,
           "launch_ms_today": _ms(outer["today"]), "launch_ms_throwaway": _ms(outer["throwaway"]),
           "inner_wall_ms_today": _ms(inner["today"]), "inner_wall_ms_throwaway": _ms(inner["throwaway"]),
           "throwaway_cost_ms_median_paired": _ms(diffs),
           "throwaway_cost_ms_ci95_low": boot[int(0.025 * len(boot))] * 1000.0,
           "throwaway_cost_ms_ci95_high": boot[int(0.975 * len(boot)) - 1] * 1000.0,
           # The work the throwaway tree adds, each part timed where it happens (load blurs these
           # far less than the whole launch's wall time, which other work on a shared host moves
           # by tens of ms from one launch to the next).
           "throwaway_launcher_setup_ms": _ms(setup), "throwaway_pw_side_ms": _ms(pw_side),
           "throwaway_added_work_ms": _ms(setup) + _ms(pw_side),
           "load_average_1min_after": os.getloadavg()[0]}
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
    parser.add_argument("--throwaway-pairs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="the throwaway tree's cost only, 40 pairs (< 20 s)")
    args = parser.parse_args()
    found = sb.probe()
    if found.sandbox is None:
        print("no sandbox on this host: " + "; ".join(found.reasons))
        print("sandbox=none")
        return 1
    root = Path(tempfile.mkdtemp(prefix="pw-sandbox-bench-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    costs: dict = {}
    aa: dict = {}
    try:
        tree = root / "tree"
        tree.mkdir()
        conf = Confinement(sandbox=found.sandbox,
                           layout=sb.Layout(writable=[str(tree)], hidden=[str(root)], cwd=str(tree)))
        if not args.quick:
            costs = launch_costs(conf, tree, args.launches)
            aa = aa_campaigns(conf, tree, args.campaigns, args.pairs)
        thrown = throwaway_cost(found.sandbox, root / "throwaway", 40 if args.quick else args.throwaway_pairs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'measure':<40} {'value':>10}")
    for k, v in {**costs, **aa, **thrown}.items():
        print(f"{k:<40} {v:>10.4g}" if isinstance(v, float) else f"{k:<40} {v:>10}")
    print()
    print(f"sandbox={found.sandbox.tool} ({found.sandbox.version})".replace(" ", "_"))
    for k, v in {**costs, **aa, **thrown}.items():
        print(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    if costs:
        print(f"sandbox_cost_within_5ms={costs['sandbox_cost_ms_per_launch'] <= 5.0}")
        print(f"sandbox_cost_p10_within_5ms={costs['sandbox_cost_ms_p10'] <= 5.0}")
        print(f"aa_false_verified_within_5pct={aa['aa_false_verified_rate'] <= 0.05}")
    if thrown.get("throwaway_available"):
        print(f"throwaway_cost_within_2ms={thrown['throwaway_cost_ms_median_paired'] <= 2.0}")
        print(f"throwaway_added_work_within_2ms={thrown['throwaway_added_work_ms'] <= 2.0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
