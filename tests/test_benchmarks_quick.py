"""Every benchmark under benchmarks/ runs, in a quick mode, and ends with its key=value lines, so none
can rot unnoticed (benchmarks/ledger.py once stopped running for weeks). What they measure is not
asserted here: they time a shared machine; docs/benchmarks.md records their numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

QUICK: dict[str, list[str]] = {
    "adapter_overhead.py": ["--quick"],
    "compare_streams.py": ["--lines", "2000", "--repeat", "1"],
    "evaluate_wall.py": ["--quick"],
    "gpu_overhead.py": ["--from-log", str(DATA / "gpu-capture-raw.log")],
    "hybrid_cost.py": [],
    "kernel_profile.py": ["--recorded"],
    "ledger.py": ["--events", "2000", "--fsync-events", "50", "--help-runs", "1"],
    "load_balance.py": ["--quick"],
    "loadgen.py": ["--cpus", "0.2", "--seconds", "0.5"],
    "process_launch.py": ["--runs", "3", "--held-mb", "8", "--program-mb", "4"],
    "profiler_overhead.py": ["--quick"],
    "real_aa.py": ["--campaigns", "1", "--max-pairs", "5"],
    "root_copy.py": ["--files", "50", "--repeat", "1"],
    "sandbox.py": ["--quick"],
    "slurm_fill.py": ["--quick"],
    "stats_sim.py": ["--quick", "--campaigns", "20"],
    "tracing.py": ["--writes", "200", "--rounds", "1", "--ptrace-writes", "200"],
}
KEY_VALUE = re.compile(r"^[a-z][a-z0-9_]*=\S")


def test_every_benchmark_has_a_quick_mode_here():
    assert sorted(QUICK) == sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(QUICK))
def test_the_benchmark_runs_and_ends_with_key_value_lines(script, tmp_path):
    argv = [sys.executable, str(ROOT / "benchmarks" / script), *QUICK[script]]
    if script == "real_aa.py":
        argv += ["--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if script == "loadgen.py":  # the load generator prints nothing: it only keeps CPUs busy
        assert not lines and done.returncode == 0
        return
    assert lines and KEY_VALUE.match(lines[-1]), done.stdout[-2000:]
