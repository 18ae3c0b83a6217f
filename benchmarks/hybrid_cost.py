"""What the hybrid arm costs a campaign: the extra wall time when a patch reaches beyond the hotspot,
and none when it does not (mechanism by intervention, docs/gates.md).

Reads the recorded campaigns of tests/data/one-kind/judged.tgz (recorded on this 2-core VM by
tests/data/one-kind/record.sh), or the run directories given. For each judged candidate: the
campaign's wall time (first to last of its TimingRecorded parts, from the ledger's timestamps), the
share of its timed runs' program time that the hybrid arm's runs took. Extra = campaign wall x the
hybrid's share. Not counted: the hybrid's splice, build and oracle check, which the ledger records
in one batch with the attempt's start (a build of the workload and its oracle runs, about a second
for the bundled C workloads). A candidate whose patch stays in the hotspot records no hybrid, and
its extra is the same sum over no runs.

    .venv/bin/python benchmarks/hybrid_cost.py [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import math
import sys
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger import events as ev  # noqa: E402
from ledger.store import Ledger  # noqa: E402

RECORDED = ROOT / "tests" / "data" / "one-kind" / "judged.tgz"


def _at(envelope: ev.Envelope) -> float:
    return datetime.fromisoformat(envelope.at).timestamp()


def costs(envelopes: list[ev.Envelope]) -> list[dict]:
    """One row per candidate with a verdict: its campaign's wall time and the hybrid arm's extra."""
    rows = []
    verdicts = {e.data.id: e.data for e in envelopes if isinstance(e.data, ev.VerdictReached)}
    for cid, verdict in verdicts.items():
        parts = [e for e in envelopes if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets
                 and e.data.campaign is not None]
        if not parts:
            continue
        timing = parts[-1].data
        walls = {label: math.fsum(w for p in parts for w in p.data.samples.get(f"{label}:wall_s", [])) for label in timing.targets}
        hybrids = [label for label in timing.targets if label not in (timing.targets[0], cid)]
        share = math.fsum(walls[h] for h in hybrids) / max(1e-12, math.fsum(walls.values()))
        campaign_s = _at(parts[-1]) - _at(parts[0])
        # a campaign's first part starts after its preparation: its span runs from the event before it
        first = envelopes.index(parts[0])
        campaign_s += _at(parts[0]) - _at(envelopes[first - 1]) if first else 0.0
        status = next((e.data.status.split(":", 1)[0] for e in reversed(envelopes)
                       if isinstance(e.data, ev.HybridPrepared) and e.data.id == cid), "none")
        rows.append({"candidate": cid, "hybrid": status, "status": verdict.status, "campaign_s": campaign_s,
                     "pairs": sum(len(p.data.samples.get(timing.targets[0], [])) for p in parts),
                     "hybrid_share": share, "extra_s": campaign_s * share})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="run directories (default: the recorded fixture)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs
        if not runs:
            with tarfile.open(RECORDED) as tar:
                tar.extractall(tmp, filter="data")
            runs = sorted(q.parent for q in Path(tmp).glob("*/ledger.jsonl"))
        rows = []
        for run in runs:
            ledger = run / "ledger.jsonl"
            if not ledger.is_file():
                print(f"hybrid_cost: {run}: no ledger.jsonl; expected a pw run directory", file=sys.stderr)
                return 2
            rows += [dict(r, run=run.name) for r in costs(Ledger(ledger).events())]
    print(f"{'run':<16} {'candidate':<13} {'hybrid':<10} {'status':<12} {'pairs':>5} {'campaign s':>10} "
          f"{'hybrid share':>12} {'extra s':>8}")
    for r in rows:
        print(f"{r['run']:<16} {r['candidate']:<13} {r['hybrid'][:10]:<10} {r['status']:<12} {r['pairs']:>5} "
              f"{r['campaign_s']:>10.1f} {r['hybrid_share']:>12.1%} {r['extra_s']:>8.1f}")
    needed = [r for r in rows if r["hybrid"] == "built"]
    not_needed = [r for r in rows if r["hybrid"] == "none"]
    print(f"hybrid_candidates_built={len(needed)}")
    print(f"hybrid_candidates_none={len(not_needed)}")
    print(f"hybrid_extra_s_when_needed_max={max((r['extra_s'] for r in needed), default=0.0):.1f}")
    print(f"hybrid_extra_share_when_needed_max={max((r['extra_s'] / r['campaign_s'] for r in needed if r['campaign_s'] > 0), default=0.0):.3f}")
    print(f"hybrid_extra_s_when_not_needed_max={max((r['extra_s'] for r in not_needed), default=0.0):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
