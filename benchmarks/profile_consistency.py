"""How far an honest candidate's profiled run is from what its timed runs predict (gate rules v5).

    python benchmarks/profile_consistency.py [--runs-dir DIR] [--patch PATH ...]

Starts workloads/matmul-c with the real `pw` (baseline timed and profiled, perf launched like a
timed run), then prepares and evaluates each candidate patch (default: the bundled honest loop
interchange and the no-op, and the red team's misattr.patch, which can no longer tell a profiled
run from a timed one). For each, the consistency evidence recorded in its GatesEvaluated inputs
is read back and the two offsets the mechanism gate checks are printed: the candidate's profiled
wall time and its profile's total, each against the candidate's timed median scaled by the
baseline's own profiled/timed ratio (log terms; the band is max(0.10, 3 sigma of the timed spread)).
An honest candidate's offsets show how much room the 0.10 floor leaves for noise; a candidate that
shaped its profile would be off by the time it hid.

Output: a table, then key=value lines.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pw.rules.gates import consistency_band, decode_inputs  # noqa: E402

DEFAULT_PATCHES = [ROOT / "workloads/matmul-c/candidates/interchange.patch",
                   ROOT / "workloads/matmul-c/candidates/noop.patch",
                   ROOT / "tests/data/redteam/misattr.patch"]


def pw(*args: str) -> dict:
    exe = Path(sys.executable).with_name("pw")  # the virtual environment's `pw`
    out = subprocess.run([str(exe) if exe.exists() else "pw", *args, "--json"], capture_output=True, text=True,
                         check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"pw {' '.join(args)} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def offsets(inputs) -> tuple[float, float, float]:
    c, d = inputs.profile_consistency, inputs.profile_diff
    tb, tc = c.baseline_timed_median_s, c.candidate_timed_median_s
    wall = math.log(c.candidate_profiled_wall_s / (tc * c.baseline_profiled_wall_s / tb))
    total = math.log(d.total_after / (tc * d.total_before / tb))
    return wall, total, consistency_band(c)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, default=None)
    ap.add_argument("--patch", type=Path, action="append", default=None)
    args = ap.parse_args()
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="pw-bench-consistency-"))
    run = Path(pw("start", "--workload", str(ROOT / "workloads/matmul-c"), "--runs-dir", str(runs))["run_dir"])
    rows = []
    for i, patch in enumerate(args.patch or DEFAULT_PATCHES):
        cid = f"c{i}"
        pw("prepare", str(run), "--candidate", f"{cid}:baseline:transaction-waste")
        subprocess.run(["patch", "-p1", "-s", "-i", str(patch.resolve())], cwd=run / "candidates" / cid / "src", check=True)
        verdict = pw("evaluate", str(run), cid)
        gates = [json.loads(line)["data"] for line in (run / "ledger.jsonl").read_text().splitlines()
                 if '"GatesEvaluated"' in line]
        inputs = decode_inputs(next(g for g in reversed(gates) if g["id"] == cid)["inputs"]) if gates else None
        if inputs is None or inputs.profile_consistency is None or inputs.profile_diff is None:
            rows.append((patch.name, verdict["status"], verdict.get("speedup"), None, None, None))
            continue
        rows.append((patch.name, verdict["status"], verdict.get("speedup"), *offsets(inputs)))
    print(f"{'patch':<28} {'verdict':<13} {'speedup':>8} {'wall off':>9} {'total off':>9} {'band':>6}")
    for name, status, speedup, wall, total, band in rows:
        f = lambda v: "n/a" if v is None else f"{v:+.3f}"  # noqa: E731
        print(f"{name:<28} {status:<13} {speedup or 0:>8.3f} {f(wall):>9} {f(total):>9} {f(band):>6}")
    measured = [r for r in rows if r[3] is not None]
    print(f"candidates={len(rows)}")
    print(f"max_abs_wall_offset={max((abs(r[3]) for r in measured), default=float('nan')):.3f}")
    print(f"max_abs_total_offset={max((abs(r[4]) for r in measured), default=float('nan')):.3f}")
    print(f"outside_band={sum(1 for r in measured if max(abs(r[3]), abs(r[4])) > r[5])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
