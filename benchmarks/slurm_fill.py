"""Wall time of a kernel-profile fill on Slurm: two nodes against one (issue #31, target >= 1.8x).

The same 40 specs of the test-only FAKE runner (tests/kernel_profile_fake.py: it sleeps a fixed
time per spec, so the nodes' work is the scheduler's and pw's, not this host's CPUs) are filled by
`pw kernel-profile run --remote`: on a one-node partition as one array task (what a fill on one
node is), and on a two-node partition as two tasks. Each round fills an empty cache both ways, in
alternating order. The wall is the whole command's: planning, submission, the tasks' start-up,
the wait and the merge.

Uses the Slurm at $SLURM_CONF, else starts its own with .ci/slurm (root only) and stops it after.
Prints a table, then key=value lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cluster(tmp: Path) -> tuple[str | None, str]:
    """(the SLURM_CONF to use, why none) and starts one when there is none and we may."""
    conf = os.environ.get("SLURM_CONF")
    if conf and Path(conf).is_file():
        return conf, ""
    if os.geteuid() != 0 or shutil.which("slurmctld") is None:
        return None, "no SLURM_CONF, and .ci/slurm needs root and slurm-wlm"
    env = {**os.environ, "PW_SLURM_PORT_BASE": str(30000 + (os.getpid() % 2000) * 10)}
    up = subprocess.run(["bash", str(ROOT / ".ci" / "slurm"), "up", str(tmp / "slurm")], capture_output=True,
                        text=True, env=env, timeout=60)
    if up.returncode != 0:
        return None, f".ci/slurm up failed: {up.stderr.strip()[-300:]}"
    return up.stdout.strip().split("=", 1)[1], ""


def fill(tmp: Path, conf: str, partition: str, tasks: int, n: int, sleep_s: float, tag: str) -> float:
    cfg = tmp / f"remote-{tag}.yaml"
    cfg.write_text(f"remotes:\n  r:\n    kind: slurm\n    partition: {partition}\n    tasks: {tasks}\n"
                   f"    gpus_per_task: 0\n    poll_s: 0.1\n    env: {{PW_PROFILE_GPUS: '0'}}\n")
    specs = tmp / "specs.jsonl"
    specs.write_text("".join(json.dumps({"rows": r, "cols": 8, "dtype": "bf16"}) + "\n" for r in range(1, n + 1)))
    env = {**os.environ, "SLURM_CONF": conf, "PW_PROFILE_DB": str(tmp / tag / "profile.db"),
           "PW_FAKE_SLEEP_S": str(sleep_s)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tests.kernel_profile_fake", "kernel-profile", "run", "fake_matrix",
                           "--backend", "fake", "--specs", str(specs), "--gpu-name", "FAKE", "--remote", "r",
                           "--remote-config", str(cfg), "--output-dir", str(tmp / tag / "out"), "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"slurm_fill: the {tag} fill failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    body = json.loads(done.stdout)
    assert body["missing_count"] == 0 and body["measured_count"] == n, body["missing_count"]
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=40)
    ap.add_argument("--sleep-s", type=float, default=0.5, help="seconds the fake runner takes per spec")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="8 specs of 0.05 s, one round (the test suite's check)")
    a = ap.parse_args()
    if a.quick:
        a.specs, a.sleep_s, a.rounds = 8, 0.05, 1
    with tempfile.TemporaryDirectory(prefix="pw-slurm-bench-") as d:
        tmp = Path(d)
        conf, why = _cluster(tmp)
        if conf is None:
            print(f"slurm_fill: skipped: {why}")
            print("slurm=unavailable")
            return 0
        started_here = not os.environ.get("SLURM_CONF")
        try:
            one, two = [], []
            for r in range(a.rounds):
                order = [("one", 1), ("pw", 2)] if r % 2 == 0 else [("pw", 2), ("one", 1)]
                for partition, tasks in order:
                    wall = fill(tmp, conf, partition, tasks, a.specs, a.sleep_s, f"{partition}-{r}")
                    (one if partition == "one" else two).append(wall)
        finally:
            if started_here:
                subprocess.run(["bash", str(ROOT / ".ci" / "slurm"), "down", str(tmp / "slurm")], timeout=60)
    work = a.specs * a.sleep_s
    print(f"{'nodes':>5}  {'tasks':>5}  {'fill wall s (each round)':<30}  median")
    print(f"{1:>5}  {1:>5}  {', '.join(f'{w:.2f}' for w in one):<30}  {statistics.median(one):.2f}")
    print(f"{2:>5}  {2:>5}  {', '.join(f'{w:.2f}' for w in two):<30}  {statistics.median(two):.2f}")
    print(f"(the fake runner's own time: {work:.1f} s of specs; ideal two-node wall {work / 2:.1f} s)")
    print(f"specs={a.specs}")
    print(f"spec_sleep_s={a.sleep_s}")
    print(f"one_node_wall_s={statistics.median(one):.3f}")
    print(f"two_node_wall_s={statistics.median(two):.3f}")
    print(f"two_over_one_speedup={statistics.median(one) / statistics.median(two):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
