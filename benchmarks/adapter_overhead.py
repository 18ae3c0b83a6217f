"""Measure what each CPU profiler adapter costs, against the cost model routing decides with.

    .venv/bin/python benchmarks/adapter_overhead.py [--repeats 2] [--quick]

Routing picks the cheapest adapter that can answer, by `AdapterSpec.cost_s(runtime) =
overhead_factor * runtime + setup_s` (adapters/registry.py). This script checks both numbers:
for every usable adapter and each kind of program it applies to (workloads/matmul-c built
natively, workloads/pyloop under this Python), it times the program natively and times
`capture()` at two program sizes, and fits the line through the two points: its slope is the
measured overhead factor, its intercept the measured setup. `normalize()` is timed as well (it
is part of every profile, not of the cost model). The table ends with `key=value` lines.
Unusable adapters are listed with the probe's reason.

The factors depend on the program, not only on the tool: cache simulation pays per simulated
miss, so matmul n=720 (the workload's own size, 0.5 s) measured 26x under callgrind and 98x with
the cache simulator on 2026-11-30, while the smaller sizes here give about 24x and 45x. The
sizes are kept small so the whole script takes under a minute.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.base import CaptureRequest, read_artifacts  # noqa: E402
from adapters.process import run_process  # noqa: E402
from adapters.registry import installed_adapters  # noqa: E402

# Which adapters make sense for which kind of program, and the two sizes each is measured at
# (small enough that a 100x adapter still finishes in about a minute).
SIZES = {
    "native": {"perf": ("400", "720"), "callgrind": ("250", "400"), "callgrind-cachesim": ("200", "320")},
    "python": {"perf": ("6000", "20000"), "py-spy": ("6000", "20000")},
}


def native_seconds(argv: list[str], cwd: Path, repeats: int) -> float:
    walls = []
    for i in range(repeats):
        r = run_process(argv, cwd=cwd, env=None, timeout_s=300, stdout_path=cwd / f".native-{i}.out",
                        stderr_path=cwd / f".native-{i}.err")
        if not r.ok:
            raise SystemExit(f"native run failed: {' '.join(argv)}: {Path(r.stderr_path).read_text()[-300:]}")
        walls.append(r.wall_s)
    return statistics.median(walls)


def measure_adapter(adapter, argv: list[str], cwd: Path, out: Path, repeats: int) -> dict[str, float]:
    capture_s, normalize_s = [], []
    for i in range(repeats):
        req = CaptureRequest(argv=argv, cwd=str(cwd), out_dir=str(out / f"{adapter.spec.name}-{i}"), timeout_s=900)
        t0 = time.perf_counter()
        capture = adapter.capture(req)
        t1 = time.perf_counter()
        adapter.normalize(read_artifacts(capture), str(cwd), "baseline")
        t2 = time.perf_counter()
        capture_s.append(t1 - t0)
        normalize_s.append(t2 - t1)
    return {"capture_s": statistics.median(capture_s), "normalize_s": statistics.median(normalize_s)}


def programs(kind: str, size: str, quick: bool, matmul: Path, pyloop: Path) -> tuple[list[str], Path]:
    if kind == "native":
        return ["./matmul", str(int(size) * 2 // 3) if quick else size, "1"], matmul
    return [sys.executable, "main.py", str(int(size) // 2) if quick else size, "800", "1"], pyloop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement (median)")
    parser.add_argument("--quick", action="store_true", help="one repeat each, smaller programs")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats

    rows, lines = [], {}
    with tempfile.TemporaryDirectory(prefix="pw-bench-adapters-") as tmp:
        tmp = Path(tmp)
        matmul, pyloop = tmp / "matmul-c", tmp / "pyloop"
        shutil.copytree(ROOT / "workloads" / "matmul-c", matmul)
        subprocess.run(["make", "-s"], cwd=matmul, check=True, capture_output=True)
        shutil.copytree(ROOT / "workloads" / "pyloop", pyloop)
        for adapter in installed_adapters():
            spec = adapter.spec
            usability = adapter.probe()
            for kind, by_adapter in SIZES.items():
                if spec.name not in by_adapter:
                    continue
                if not usability.usable:
                    rows.append((spec.name, kind, "-", "-", "-", f"{spec.overhead_factor:g}", "-", "-",
                                 f"unusable: {usability.reason}"))
                    continue
                points = []
                for size in by_adapter[spec.name]:
                    prog, cwd = programs(kind, size, args.quick, matmul, pyloop)
                    native = native_seconds(prog, cwd, repeats)
                    points.append((native, measure_adapter(adapter, prog, cwd, tmp / "captures", repeats)))
                (n1, m1), (n2, m2) = points
                slope = (m2["capture_s"] - m1["capture_s"]) / (n2 - n1)
                setup = m1["capture_s"] - slope * n1
                rows.append((spec.name, kind, f"{n1:.3f} / {n2:.3f}", f"{m1['capture_s']:.2f} / {m2['capture_s']:.2f}",
                             f"{m2['normalize_s']:.2f}", f"{spec.overhead_factor:g}", f"{slope:.2f}",
                             f"{spec.setup_s:g}", f"{setup:.2f}"))
                key = f"{spec.name.replace('-', '_')}_{kind}"
                lines[f"{key}_measured_factor"] = slope
                lines[f"{key}_registry_factor"] = spec.overhead_factor
                lines[f"{key}_measured_setup_s"] = setup
                lines[f"{key}_registry_setup_s"] = spec.setup_s
                lines[f"{key}_capture_over_cost_model"] = m2["capture_s"] / spec.cost_s(n2)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"adapter capture cost (median of {repeats}), fitted through two program sizes")
    for col in ("adapter", "program", "native s", "capture s", "normalize s", "registry factor",
                "measured factor", "registry setup s", "measured setup s"):
        table.add_column(col, justify="left" if col in ("adapter", "program") else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=160).print(table)
    for key, value in lines.items():
        print(f"{key}={value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
