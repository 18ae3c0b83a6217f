"""What the GPU adapters cost: the CUPTI timeline against an untraced run, and one filtered ncu capture.

    .venv/bin/python benchmarks/gpu_overhead.py [--pairs 5]            # on a machine with a GPU
    .venv/bin/python benchmarks/gpu_overhead.py --from-log tests/data/gpu-capture-raw.log

Live mode builds workloads/cuda-transpose, then runs it plain and under the CUPTI injection library
in interleaved pairs (plain, traced, plain, traced, ...: drift in clocks or load hits both alike),
and times `NcuAdapter.capture` of one filtered launch of `transpose_kernel`. Without a GPU it says
so and, with --from-log, reads the timings the device capture script recorded
(tests/data/gpu-capture-raw.sh: `overhead <workload> plain|inject <i> <seconds>` and
`ncu rc=0 <name> capture_s <seconds>` lines).

The overhead is the ratio traced/plain of whole-process wall time, per pair; we report the
geometric mean with a 95% t-interval on the log ratios (scipy), and whether the interval lies under
the 1.05x target. Output ends in key=value lines.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = 1.05


def ratio_stats(plain: list[float], traced: list[float]) -> dict[str, float]:
    """Geometric-mean traced/plain ratio over pairs and its 95% t-interval (log scale)."""
    from scipy import stats

    logs = [math.log(t / p) for p, t in zip(plain, traced, strict=True)]
    mean = statistics.fmean(logs)
    if len(logs) > 1:
        sem = statistics.stdev(logs) / math.sqrt(len(logs))
        half = stats.t.ppf(0.975, len(logs) - 1) * sem
    else:
        half = math.inf
    return {"ratio": math.exp(mean), "ci_low": math.exp(mean - half), "ci_high": math.exp(mean + half),
            "pairs": float(len(logs)), "plain_median_s": statistics.median(plain),
            "traced_median_s": statistics.median(traced)}


def parse_log(text: str) -> tuple[dict[str, tuple[list[float], list[float]]], dict[str, float]]:
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for w, mode, _, s in re.findall(r"^overhead (\S+) (plain|inject) (\d+) ([0-9.]+)$", text, re.M):
        plain, traced = pairs.setdefault(w, ([], []))
        (plain if mode == "plain" else traced).append(float(s))
    ncu = {name: float(s) for name, s in re.findall(r"^ncu rc=0 (\S+) capture_s ([0-9.]+)$", text, re.M)}
    return pairs, ncu


def live(pairs: int) -> tuple[dict[str, tuple[list[float], list[float]]], dict[str, float]]:
    import subprocess

    from adapters.base import CaptureRequest
    from adapters.cupti import build_library, find_toolkit
    from adapters.ncu import NcuAdapter
    from adapters.process import run_process

    tk = find_toolkit()
    lib = build_library(tk)
    work = Path(tempfile.mkdtemp(prefix="pw-gpu-bench-"))
    shutil.copytree(ROOT / "workloads" / "cuda-transpose", work / "w")
    subprocess.run(["make", "-s"], cwd=work / "w", check=True)
    argv = ["./transpose", "8192", "8192", "300", "1"]
    plain, traced = [], []
    for i in range(pairs):
        for mode in ("plain", "traced"):
            env = {} if mode == "plain" else {"CUDA_INJECTION64_PATH": str(lib),
                                               "PW_CUPTI_OUT": str(work / f"t{i}.jsonl")}
            r = run_process(argv, cwd=str(work / "w"), env={**os.environ, **env}, timeout_s=120,
                            stdout_path=work / "out", stderr_path=work / "err")
            assert r.returncode == 0, (work / "err").read_text()
            (plain if mode == "plain" else traced).append(r.wall_s)
    ncu = NcuAdapter()
    ncu.focus("transpose_kernel", launches=100)
    t0 = time.perf_counter()
    ncu.capture(CaptureRequest(argv=["./transpose", "8192", "8192", "5", "1"], cwd=str(work / "w"),
                               out_dir=str(work / "ncu")))
    return {"cuda-transpose": (plain, traced)}, {"transpose": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--from-log", type=Path, help="read timings recorded on a GPU machine instead")
    args = ap.parse_args()
    from adapters.cupti import gpu_visible

    gpu, how = gpu_visible()
    if args.from_log:
        pairs, ncu = parse_log(args.from_log.read_text())
        source = f"recorded ({args.from_log})"
    elif gpu:
        pairs, ncu = live(args.pairs)
        source = f"live ({how})"
    else:
        print(f"no GPU here ({how}); pass --from-log tests/data/gpu-capture-raw.log for recorded numbers")
        print("gpu=absent")
        return 0
    print(f"source: {source}")
    out: list[str] = []
    for w, (plain, traced) in sorted(pairs.items()):
        s = ratio_stats(plain, traced)
        verdict = "met" if s["ci_high"] <= TARGET else ("missed" if s["ci_low"] > TARGET else "not shown")
        print(f"{w}: plain median {s['plain_median_s']:.3f} s, traced median {s['traced_median_s']:.3f} s, "
              f"ratio {s['ratio']:.3f} (95% CI {s['ci_low']:.3f}-{s['ci_high']:.3f}, {int(s['pairs'])} pairs): "
              f"target <= {TARGET} {verdict}")
        out += [f"cupti_overhead_{w}={s['ratio']:.4f}", f"cupti_overhead_{w}_ci_low={s['ci_low']:.4f}",
                f"cupti_overhead_{w}_ci_high={s['ci_high']:.4f}", f"cupti_overhead_{w}_pairs={int(s['pairs'])}",
                f"cupti_overhead_{w}_target={verdict.replace(' ', '_')}"]
    for name, secs in sorted(ncu.items()):
        out.append(f"ncu_capture_s_{name}={secs:.3f}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
