"""A/A campaigns under a bounded load generator: how often a no-op is called faster (and verified),
and where the load-balance threshold of pw.campaign/3 (``pw.rules.contention.MAX_LOAD_IMBALANCE``) sets
pairs aside.

Two steps. ``--record N`` runs N profiled, interleaved pairs of matmul-c's baseline against a
byte-identical copy of itself (an A/A pair: any difference is the machine's), with
benchmarks/loadgen.py keeping ``--load`` CPUs busy, through pw's own campaign code (sandbox,
launcher, perf in every run), and writes every pair's samples (times, hotspot seconds, each run's
load) to a JSON file. ``--replay FILE`` (the default reads the recorded fixture) cuts that stream into
campaigns (windows of consecutive pairs at every ``--step`` pairs) and runs pw.campaign/3's looks on
each, at several thresholds: a campaign is *false-faster* when it stops faster, *false-verified*
when its mechanism is decided carried too (the gates' remaining checks pass for a no-op). Windows
overlap, so the campaigns are not independent: the Clopper-Pearson interval is of the rate over the
windows, a guide rather than a test.

    python benchmarks/load_balance.py --record 300 --load 1.5 --out tests/data/load-aa/pairs.json
    python benchmarks/load_balance.py --replay tests/data/load-aa/pairs.json
    python benchmarks/load_balance.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.contract import Sampling  # noqa: E402

RECORDED = ROOT / "tests" / "data" / "load-aa" / "pairs.json"
THRESHOLDS = (None, 0.30, 0.20, 0.15, 0.10, 0.05)  # pw.campaign/3's admission, for comparison


def record(pairs: int, load: float, out: Path) -> None:
    from pw.agent.source import regions
    from pw.app import campaign
    from pw.app.profiled import profiling_for, tree_files
    from pw.app.run import RunHandle
    from pw.app.targets import baseline_target
    from pw.workload import steps as execute

    runs = Path(tempfile.mkdtemp(prefix="pw-aa-"))
    try:
        subprocess.run([sys.executable, "-m", "pw.cli", "start", "--workload", str(ROOT / "workloads" / "matmul-c"),
                        "--runs-dir", str(runs), "--json"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        handle = RunHandle(next(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")))
        state = handle.state()
        base = baseline_target(handle, state)
        copy = execute.Target(label="same", src_dir=base.src_dir, build_dir=handle.path / "build" / "same",
                              files=base.files, hidden=base.hidden)
        shutil.copytree(base.build_dir, copy.build_dir, symlinks=True)
        hot = state.hotspot
        files = tree_files(base.src_dir, base.files)  # the hotspot's code in both arms, as a campaign reads it
        attribution = regions.attribution(hot.operation, hot.name, hot.file, files, files, b"")
        profiling = profiling_for(handle, state, base, [copy], attribution)
        gen = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--cpus", str(load),
                                "--seconds", "7200"], start_new_session=True)
        try:
            time.sleep(1.0)
            result = campaign.run_pairs(state.run.contract, base, copy, pairs=pairs, seed=20261202, purpose="screening",
                                        exploratory=False, host=state.run.host.hostname,
                                        scratch=handle.path / "scratch" / "aa", tool_versions={}, profiling=profiling,
                                        input_seed=7, progress=lambda m: print(m, file=sys.stderr, flush=True))
        finally:
            os.killpg(gen.pid, signal.SIGKILL)  # its spinning children too, not only the parent
            gen.wait()
        if result.failure is not None:
            raise SystemExit(f"load_balance: a timed run failed: {result.failure.message}")
        doc = {"workload": "matmul-c", "load_cpus": load, "cpus": state.run.host.cpus, "pairs": pairs,
               "labels": ["baseline", "same"], "order": result.timing.order, "samples": result.timing.samples}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(runs, ignore_errors=True)


HONEST_SAVING = 0.15  # the A/B column: this share of every candidate run taken out of its hotspot


def _with_saving(samples: dict[str, list[float]], cid: str, saving: float) -> dict[str, list[float]]:
    """The A/A stream with an honest saving planted in the candidate arm: ``saving`` of each of its
    runs taken out of its hotspot's part (wall, metric and hotspot seconds alike)."""
    out = dict(samples)
    cut = [saving * w for w in samples[cid]]
    out[cid] = [w - c for w, c in zip(samples[cid], cut)]
    out[f"{cid}:wall_s"] = [w - c for w, c in zip(samples[f"{cid}:wall_s"], cut)]
    out[f"{cid}:hot_s"] = [max(0.0, h - c) for h, c in zip(samples[f"{cid}:hot_s"], cut)]
    return out


def _campaign(cut: dict, labels, params, cpus: int, rule: str, threshold: float | None):
    from pw.rules.stopping import judged_samples, look_of_samples
    from pw.stats.adaptive import is_look

    look = None
    for n in range(1, params.max_pairs + 1):
        if not is_look(n, params):
            continue
        prefix = judged_samples({k: v[:n] for k, v in cut.items()}, rule, labels, cpus, "wall_time_s")
        look = look_of_samples(prefix, labels, params, 0.0, cpus=cpus, max_imbalance=threshold, fraction=0.5)
        if look.stop:
            break
    return look


def replay(path: Path, step: int, window: int) -> dict:
    """Each row: a rule (pw.campaign/3 at a threshold, /4, or /5 where the pairs recorded whose CPU
    time each run used) over campaigns cut from the stream; A/A
    as recorded, and A/B with an honest saving planted (``_with_saving``)."""
    import numpy as np
    from scipy.stats import beta

    from pw.rules.contention import admitted_pairs
    from pw.rules.stopping import judged_samples
    from pw.stats.adaptive import CampaignParams

    doc = json.loads(path.read_text())
    samples, (ref, cid) = doc["samples"], doc["labels"]
    labels = (ref, None, cid)
    n_all = len(samples[ref])
    params = CampaignParams(max_pairs=window)
    planted = _with_saving(samples, cid, HONEST_SAVING)
    rows = {}
    rules = [("pw.campaign/3", t) for t in THRESHOLDS] + [("pw.campaign/4", None)]
    if f"{ref}:family_cpu_s" in samples:  # recorded since the launcher reports whose CPU time it was
        rules.append(("pw.campaign/5", None))
    for rule, threshold in rules:
        faster = verified = honest = total = pairs_used = aside = 0
        for start in range(0, n_all - window + 1, step):
            cut = {k: v[start:start + window] for k, v in samples.items()}
            look = _campaign(cut, labels, params, doc["cpus"], rule, threshold)
            total += 1
            pairs_used += look.n_pairs
            aside += look.n_pairs - (look.admitted or 0)
            if look.reason == "faster":
                faster += 1
                verified += look.mechanism == "carried"
            ab = _campaign({k: v[start:start + window] for k, v in planted.items()}, labels, params, doc["cpus"],
                           rule, threshold)
            honest += ab.reason == "faster" and ab.mechanism == "carried"
        whole = judged_samples(samples, rule, labels, doc["cpus"], "wall_time_s")
        kept = admitted_pairs(whole, [ref, cid], doc["cpus"], threshold)
        d = np.log(np.asarray(whole[ref])[kept] / np.asarray(whole[cid])[kept])
        lo, hi = (beta.ppf(0.025, verified, total - verified + 1) if verified else 0.0,
                  beta.ppf(0.975, verified + 1, total - verified) if verified < total else 1.0)
        name = {"pw.campaign/4": "/4 wait out", "pw.campaign/5": "/5 own wait"}.get(
            rule, "/3 none" if threshold is None else f"/3 {threshold:.2f}")
        rows[name] = {"campaigns": total, "false_faster": faster / total, "false_verified": verified / total,
                      "false_verified_low": lo, "false_verified_high": hi, "mean_pairs": pairs_used / total,
                      "set_aside": aside / max(1, pairs_used), "pair_sd": float(np.std(d, ddof=1)),
                      "honest_verified": honest / total}
    return {"doc": doc, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", type=int, metavar="N", help="record N A/A pairs under load")
    p.add_argument("--load", type=float, default=1.5, help="CPUs the load generator keeps busy (default 1.5)")
    p.add_argument("--out", type=Path, default=RECORDED)
    p.add_argument("--replay", type=Path, nargs="?", const=RECORDED, default=None)
    p.add_argument("--step", type=int, default=3, help="pairs between the starts of replayed campaigns")
    p.add_argument("--window", type=int, default=Sampling().max_pairs,
                   help="pairs per replayed campaign (its budget; default: a campaign's default budget)")
    p.add_argument("--quick", action="store_true", help="replay the recorded fixture with a coarse step")
    args = p.parse_args(argv)
    if args.record:
        record(args.record, args.load, args.out)
        return 0
    path = args.replay or RECORDED
    if not path.is_file():
        print(f"load_balance: {path}: no recorded pairs; record some with --record N", file=sys.stderr)
        return 2
    out = replay(path, 12 if args.quick else args.step, args.window)
    doc, rows = out["doc"], out["rows"]
    print(f"A/A pairs of {doc['workload']} under a load of {doc['load_cpus']} CPUs ({doc['pairs']} pairs recorded, "
          f"{doc['cpus']} CPUs); campaigns of at most {args.window} pairs")
    print(f"{'rule':>12} {'campaigns':>9} {'false faster':>12} {'false verified [95% CI]':>26} {'pair SD':>8} "
          f"{'honest 15%':>10} {'mean pairs':>10} {'set aside':>9}")
    for name, r in rows.items():
        print(f"{name:>12} {r['campaigns']:>9} {r['false_faster']:>12.3f} {r['false_verified']:>10.3f} "
              f"[{r['false_verified_low']:.3f}, {r['false_verified_high']:.3f}] {r['pair_sd']:>8.3f} "
              f"{r['honest_verified']:>10.3f} {r['mean_pairs']:>10.1f} {r['set_aside']:>9.2f}")
    from pw.rules.contention import MAX_LOAD_IMBALANCE

    now, before = rows.get("/5 own wait", rows["/4 wait out"]), rows[f"/3 {MAX_LOAD_IMBALANCE:.2f}"]
    print(f"aa_rule={'pw.campaign/5' if '/5 own wait' in rows else 'pw.campaign/4'}")
    print(f"aa_false_verified={now['false_verified']:.4f}")
    print(f"aa_false_verified_high={now['false_verified_high']:.4f}")
    print(f"aa_false_faster={now['false_faster']:.4f}")
    print(f"aa_pair_sd={now['pair_sd']:.4f}")
    print(f"aa_pair_sd_unadjusted={rows['/3 none']['pair_sd']:.4f}")
    print(f"honest15_verified={now['honest_verified']:.4f}")
    print(f"honest15_verified_campaign3_threshold_{MAX_LOAD_IMBALANCE:.2f}={before['honest_verified']:.4f}")
    print(f"aa_set_aside_campaign3_threshold_{MAX_LOAD_IMBALANCE:.2f}={before['set_aside']:.4f}")
    print(f"aa_campaigns={now['campaigns']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
