"""The short /proc/kallsyms perf record starts with in a timed run (adapters/kernel_map.py): perf
reads the reference symbols alone and writes the same kernel map, and a sandbox inside still mounts
a /proc of its own, where the program reads the real /proc/kallsyms as in every other kind of run."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from adapters import kernel_map
from adapters.perf import PerfAdapter


def _prefix() -> tuple[str, ...]:
    prefix = kernel_map.perf_prefix()
    if not prefix:
        pytest.skip("the shortcut needs root, unshare, mount, sh and bwrap (perf then reads the real file)")
    return prefix


def _lines(argv: list[str]) -> int:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[0])


def test_perf_reads_the_short_file_and_a_sandbox_inside_reads_the_real_one():
    prefix = _prefix()
    real = _lines(["wc", "-l", "/proc/kallsyms"])
    short = _lines([*prefix, "wc", "-l", "/proc/kallsyms"])
    assert short == len(kernel_map.reference_file().read_text().splitlines()) and short < 20 < real
    bwrap = shutil.which("bwrap")
    inside = _lines([*prefix, bwrap, "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc",
                     "wc", "-l", "/proc/kallsyms"])
    assert inside == real  # the program has nothing to tell a timed run by
    # and nothing of perf's namespace reaches the host
    assert _lines(["wc", "-l", "/proc/kallsyms"]) == real


def _kernel_mmap(tmp_path: Path, prefix: tuple[str, ...], name: str) -> str:
    perf = shutil.which("perf")
    data = tmp_path / f"{name}.data"
    rec = subprocess.run([*prefix, perf, "record", "-q", "--no-bpf-event", "--no-buildid-cache", "-e", "cpu-clock",
                          "-o", str(data), "--", "true"], capture_output=True, text=True, timeout=60)
    assert rec.returncode == 0, rec.stderr
    dump = subprocess.run([perf, "script", "-i", str(data), "--show-mmap-events", "--kallsyms=/dev/null"],
                          capture_output=True, text=True, timeout=60).stdout
    found = [line for line in dump.splitlines() if "[kernel.kallsyms]" in line and "MMAP" in line]
    assert found, dump[:2000]
    return re.sub(r"^.*?PERF_RECORD_MMAP", "PERF_RECORD_MMAP", found[0])  # the map, not the time stamp


def test_perf_writes_the_same_kernel_map_from_the_short_file(tmp_path):
    prefix = _prefix()
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    assert _kernel_mmap(tmp_path, prefix, "short") == _kernel_mmap(tmp_path, (), "real")


def test_a_timed_run_puts_the_shortcut_only_where_the_run_is_sandboxed(tmp_path):
    wrap = PerfAdapter().timed_wrap(str(tmp_path))
    if wrap is None:
        pytest.skip("perf is not installed")
    assert wrap.outer_when_confined == list(kernel_map.perf_prefix())
    assert not set(wrap.outer) & {"unshare", shutil.which("unshare")}  # never in the part every run gets
