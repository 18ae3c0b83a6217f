"""Real A/A campaigns: how often `pw evaluate` decides a change that changes nothing, on this host.

    .venv/bin/python benchmarks/real_aa.py [--campaigns 12] [--workload series-c] [--patch noop]
                                           [--max-pairs 40] [--runs-dir DIR]

benchmarks/stats_sim.py measures the adaptive campaign's A/A error on simulated noise; this runs
the product itself on real timings. One `pw start` of the workload, then `--campaigns` candidates
that are all the workload's bundled no-op patch (series-c's renames a variable) plus an unread
global (below), each judged by its own `pw evaluate` campaign: its own seed (derived from its
id), its own pair order and fresh inputs, the default stopping rule and `--max-pairs`. Whatever the
host's noise is while they run (a shared machine, other jobs) is the condition measured.

A false decision is a campaign that stopped `decided` (faster or slower) for a change that makes
none; a false verification is a `verified` verdict (on series-c the hotspot is 99% of the run, so
the mechanism gate cannot tell a false FASTER from a real one: only the timing protects it).
`no effect` is the right answer; `inconclusive` (the budget ran out, or the machine was too busy:
`host-busy`, gate rules 8) an honest one. Since gate rules 13 a no-op that builds to the baseline's
running image (the bundled ones do) is rejected as no effect whatever its timing, and `pw evaluate`
does not time it at all; so each candidate also gets an unread global in the C file the patch
touches: another image at the same speed, which the campaign must judge. The campaign's own stop
(`decided` for a no-op) is what measures the timing rule (pw.stats.adaptive's). Columns: status, stop, last look, pairs, speedup, interval,
SD of the per-pair log ratios, and the larger arm's median shares (pw.rules.contention): of wall
time its runs waited for a CPU / of the other CPUs' time other work used meanwhile. The key=value lines come last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # before benchmarks/ledger.py can shadow the `ledger` package

from ledger import events as ev  # noqa: E402
from pw.rules import stopping  # noqa: E402
from pw.rules.contention import arm_contention  # noqa: E402
from pw.rules.verdict import HOST_BUSY  # noqa: E402


def pw(*args: str) -> dict:
    """One `pw` command with --json (the virtual environment's `pw`); exits on anything but 0 or 1."""
    exe = Path(sys.executable).with_name("pw")
    out = subprocess.run([str(exe) if exe.exists() else "pw", *args, "--json"], capture_output=True, text=True,
                         check=False, timeout=3600)
    if out.returncode not in (0, 1):
        raise SystemExit(f"pw {' '.join(args)} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def campaign_of(run: Path, cid: str, cpus: int) -> tuple[str, str, list[float], tuple[float, float] | None]:
    """(stop, the last look's reason, per-pair log ratios, the larger arm's median shares: of wall
    time spent waiting for a CPU, of the other CPUs used by other work) of `cid`'s campaign."""
    stop, reason, logs, delayed = "none", "none", [], None
    for line in (run / "ledger.jsonl").read_text().splitlines():
        event = json.loads(line)
        data = event.get("data", {})
        if event.get("type") != "TimingRecorded" or cid not in data.get("targets", []):
            continue
        timing = msgspec.convert(data, ev.TimingRecorded)
        base, cand = timing.targets[0], timing.targets[-1]  # a hybrid arm may sit between them
        judged = stopping.judged_timing(timing, cpus).samples  # as the campaign's rule reads them
        logs += [math.log(b / c) for b, c in zip(judged[base], judged[cand], strict=True)]
        arms = arm_contention(timing, cpus)
        if arms:
            delayed = (max(a.waited for a in arms), max((a.others or 0.0) for a in arms))
        record = (data.get("campaign") or {})
        if record:
            stop = record["stop"]
            reason = record["looks"][-1]["reason"] if record["looks"] else "none"
    return stop, reason, logs, delayed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaigns", type=int, default=12)
    ap.add_argument("--workload", default="series-c")
    ap.add_argument("--patch", default="noop", help="a patch under the workload's candidates/ (no .patch)")
    ap.add_argument("--max-pairs", type=int, default=40)
    ap.add_argument("--runs-dir", type=Path, default=None)
    args = ap.parse_args()
    workload = ROOT / "workloads" / args.workload
    patch = workload / "candidates" / f"{args.patch}.patch"
    if not patch.is_file():
        raise SystemExit(f"--patch {args.patch}: expected a patch file at {patch}")
    touched = [line.split()[1].split("/", 1)[-1] for line in patch.read_text().splitlines()
               if line.startswith("+++ ") and len(line.split()) > 1]
    source = next((f for f in touched if f.endswith((".c", ".cc", ".cpp"))), None)
    if source is None:
        raise SystemExit(f"--patch {args.patch}: expected it to touch a C or C++ file (for the unread global)")
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="pw-bench-real-aa-"))
    run = Path(pw("start", "--workload", str(workload), "--runs-dir", str(runs),
                  "--iterations", str(args.campaigns))["run_dir"])
    cpus = os.cpu_count() or 1
    print(f"run: {run}", flush=True)
    rows = []
    for k in range(args.campaigns):
        cid = f"aa{k}"
        pw("prepare", str(run), "--candidate", f"{cid}:baseline:{args.patch} (changes nothing)")
        subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=run / "candidates" / cid / "src", check=True)
        marked = run / "candidates" / cid / "src" / source
        marked.write_text(marked.read_text() + f"\nint pw_real_aa_unread_marker = {k + 1};  /* nonzero: in .data (a zero one went to .bss and left series-c's image as it was) */\n")
        out = pw("evaluate", str(run), cid, "--max-pairs", str(args.max_pairs))
        stop, reason, logs, delayed = campaign_of(run, cid, cpus)
        sd = float(np.std(logs, ddof=1)) if len(logs) > 1 else float("nan")
        rows.append({"id": cid, "status": out["status"], "stop": stop, "reason": reason, "pairs": len(logs),
                     "speedup": out.get("speedup"), "interval": out.get("interval"), "sd": sd,
                     "delayed": delayed, "busy": any(r.startswith(HOST_BUSY) for r in out.get("reasons", [])),
                     "same_image": any("same running image" in r for r in out.get("reasons", []))})
        r = rows[-1]
        interval = "-".join(f"{x:.3f}" for x in r["interval"]) if r["interval"] else "-"
        print(f"{cid:>5} {r['status']:>12} {stop:>8} {reason:>10} {r['pairs']:>5} "
              f"{(r['speedup'] or float('nan')):>8.3f} {interval:>13} {sd:>7.1%} "
              f"{'-' if delayed is None else f'{delayed[0]:.0%}/{delayed[1]:.0%}':>9}"
              f"{'  host-busy' if r['busy'] else ''}", flush=True)
    n = len(rows)
    decided = [r for r in rows if r["stop"] == "decided"]
    print(f"real_aa_workload={args.workload}")
    print(f"real_aa_campaigns={n}")
    print(f"real_aa_no_effect={sum(r['stop'] == 'margin' for r in rows)}")
    print(f"real_aa_inconclusive={sum(r['stop'] == 'budget' for r in rows)}")
    print(f"real_aa_decided_faster={sum(r['reason'] == 'faster' for r in decided)}")
    print(f"real_aa_decided_slower={sum(r['reason'] == 'slower' for r in decided)}")
    print(f"real_aa_median_pair_log_sd={statistics.median(r['sd'] for r in rows):.4f}")
    print(f"real_aa_false_decided_rate={len(decided) / n:.3f}")
    print(f"real_aa_host_busy={sum(r['busy'] for r in rows)}")
    known = [r["delayed"] for r in rows if r["delayed"] is not None]
    for i, name in enumerate(("waited", "others")):
        value = f"{statistics.median(k[i] for k in known):.3f}" if known else "nan"
        print(f"real_aa_median_{name}_share={value}")
    print(f"real_aa_same_image={sum(r['same_image'] for r in rows)}")
    print(f"real_aa_false_verified={sum(r['status'] == 'verified' for r in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
