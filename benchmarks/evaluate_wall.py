"""The wall time of one `pw evaluate` of matmul-c's interchange, this checkout against an earlier one.

One kind of run replaced the unprofiled campaign + the reprofile sized after it + the profile
consistency check by a single campaign of profiled pairs; this measures what that costs a person at
a terminal. Each version gets its own started run of workloads/matmul-c (their ledgers are not
readable by each other) with the interchange prepared; then ``--rounds`` rounds, each timing one
`pw evaluate` of a fresh copy of each version's run, in an order that alternates (AB, BA, ...), so
a busy stretch of the shared host falls on both. The earlier version runs from a `git archive` of
``--before`` with this venv's packages (PYTHONPATH first), the same way `pw` runs here.

    .venv/bin/python benchmarks/evaluate_wall.py [--before d0213d2] [--rounds 3] [--load 1.0]

With ``--load CPUS`` a bounded load generator (benchmarks/loadgen.py) keeps that many CPUs busy for
every round, started and stopped here: the busy login node or laptop the issue describes. Each
row's status says which verdict that wall bought.

Default ``--before``: d0213d2, the last commit before this round (gate rules 18, the reprofile).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "d0213d2"
PATCH = ROOT / "workloads" / "matmul-c" / "candidates" / "interchange.patch"


def pw(code: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(code), PW_ANCHOR_LOG=str(Path(tempfile.gettempdir()) / "pw-bench-anchors"))
    return subprocess.run([sys.executable, "-m", "pw.cli", *args], cwd=code, env=env, capture_output=True,
                          text=True, timeout=timeout)


def started(code: Path, where: Path) -> Path:
    done = pw(code, "start", "--workload", str(code / "workloads" / "matmul-c"), "--runs-dir", str(where), "--json")
    if done.returncode != 0:
        raise SystemExit(f"pw start ({code}) failed: {done.stderr.strip()[-300:]}")
    run = Path(json.loads(done.stdout)["run_dir"])
    if pw(code, "prepare", str(run), "--candidate", "a:baseline:loop interchange").returncode != 0:
        raise SystemExit(f"pw prepare ({code}) failed")
    subprocess.run(["patch", "-s", "-p1", "-d", str(run / "candidates" / "a" / "src")], input=PATCH.read_text(),
                   text=True, check=True)
    return run


def timed_evaluate(code: Path, template: Path, scratch: Path, extra: list[str]) -> tuple[float, str, str]:
    copy = scratch / template.name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(template, copy, symlinks=True)
    began = time.perf_counter()
    done = pw(code, "evaluate", str(copy), "a", "--json", *extra)
    wall = time.perf_counter() - began
    body = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    status = body.get("status") or f"exit {done.returncode}"
    shutil.rmtree(copy)
    return wall, status, str(body.get("n_pairs", "?"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", default=BEFORE, help=f"the earlier commit (default {BEFORE})")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-pairs", type=int, metavar="N",
                   help="cap both versions' campaigns at N pairs (5, the minimum, makes the pair count equal: "
                        "the adaptive stop otherwise varies with noise, and with it the wall)")
    p.add_argument("--load", type=float, metavar="CPUS",
                   help="keep CPUS of the machine busy with benchmarks/loadgen.py during the rounds")
    p.add_argument("--quick", action="store_true",
                   help="one round of this checkout only (CI: the script still runs; no ratio)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pw-evaluate-wall-"))
    load = None
    try:
        old = work / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        versions = {"now": ROOT} if args.quick else {"before": old, "now": ROOT}  # quick: the archive only
        args.rounds = 1 if args.quick else args.rounds
        templates = {name: started(code, work / f"runs-{name}") for name, code in versions.items()}
        walls: dict[str, list[float]] = {name: [] for name in versions}
        statuses: dict[str, list[str]] = {name: [] for name in versions}
        extra = ["--max-pairs", str(args.max_pairs)] if args.max_pairs else []
        load = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--cpus", str(args.load),
                                 "--seconds", "1800"], start_new_session=True) if args.load else None
        print(f"{'round':>5} {'version':>8} {'wall s':>8} {'pairs':>5}  status")
        for r in range(args.rounds):
            for name in (list(versions) if r % 2 == 0 else list(versions)[::-1]):
                wall, status, pairs = timed_evaluate(versions[name], templates[name], work / "scratch", extra)
                walls[name].append(wall)
                statuses[name].append(status)
                print(f"{r + 1:>5} {name:>8} {wall:>8.1f} {pairs:>5}  {status}")
    finally:
        if load is not None:
            os.killpg(load.pid, signal.SIGKILL)
            load.wait()
        shutil.rmtree(work, ignore_errors=True)
    if args.quick:
        print(f"evaluate_wall_now_s={walls['now'][0]:.1f}")
        return 0
    before, now = statistics.median(walls["before"]), statistics.median(walls["now"])
    ratios = sorted(n / b for n, b in zip(walls["now"], walls["before"]))
    print(f"before_commit={args.before}")
    print(f"rounds={args.rounds}")
    print(f"max_pairs={args.max_pairs or 'manifest'}")
    print(f"load_cpus={args.load or 0}")
    for name in versions:
        print(f"verified_{name}={statuses[name].count('verified')}/{len(statuses[name])}")
    print(f"evaluate_wall_before_median_s={before:.1f}")
    print(f"evaluate_wall_now_median_s={now:.1f}")
    print(f"evaluate_wall_ratio_median={now / before:.3f}")
    print(f"evaluate_wall_ratio_range={ratios[0]:.3f}-{ratios[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
