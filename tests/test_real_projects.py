"""`pw start` with no manifest on projects laid out like real ones (issue 13): a benchmark suite whose
kernels build from `../../config.mk` and `../../utilities`, with no -g, inlined kernels and output on
stderr; a CMake project with a library; a Python package in a src/ layout. Each must start, name
the right function with a line range, give source slices, and reject a wrong rewrite naming the
stream and line. The suite's legitimate gemm interchange, verified end to end, is judged from its
recording in tests/test_one_kind_cheats.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ledger import events as ev
from pw.agent.brief import render_brief
from pw.agent.tokens import count_tokens
from pw.workload import write_trace
from tests.conftest import (
    WORKLOADS,
    apply_patch,
    ledger_events,
    pw_main,
    start_run,
)

pytestmark = pytest.mark.slow


def of_type(run: Path, kind: type) -> list:
    return [e.data for e in ledger_events(run) if isinstance(e.data, kind)]


def _definition_range(path: Path, name: str) -> tuple[int, int]:
    """First and last line of a C function definition (its closing brace at column 0)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines, 1) if re.search(rf"\b{name}\(", line) and "static" in line)
    end = next(i for i, line in enumerate(lines, 1) if i > start and line.startswith("}"))
    return start, end


@pytest.fixture(scope="module")
def suite_copy(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("real") / "suite"
    shutil.copytree(WORKLOADS / "suite", dest)
    return dest


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("real-runs")


_STARTED: dict[str, Path] = {}


def started(workload: Path, runs: Path) -> Path:
    key = str(workload)
    if key not in _STARTED:
        _STARTED[key] = start_run(workload, runs)
    return _STARTED[key]


def _evaluate(run: Path, cid: str, patch: Path, where: str) -> dict:
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{patch.stem}").code == 0
    apply_patch(run / "candidates" / cid / "src" / where, patch)
    result = pw_main("evaluate", run, cid, "--json")
    return {"code": result.code, **result.json()}


# Two of the suite's kernels: each start builds and profiles a baseline (stencils/jacobi-2d took 65 s
# of CI here and starts the same way).
@pytest.mark.parametrize("kernel", ["linear-algebra/gemm", "linear-algebra/atax"])
def test_every_suite_kernel_starts_and_names_its_inlined_kernel(suite_copy, runs, kernel, tmp_path):
    run = started(suite_copy / kernel, runs)
    name = kernel.rsplit("/", 1)[1]
    (start,) = of_type(run, ev.RunStarted)
    assert start.inferred and start.inference[0].startswith("root: the build reaches outside the workload")
    assert start.contract.source.root == "../.." and start.contract.run.cwd == kernel
    hot = of_type(run, ev.HotspotSelected)[0]
    assert hot.name == f"kernel_{name.replace('-', '_')}"
    assert hot.file == f"{kernel}/{name}.c"
    lo, hi = _definition_range(suite_copy / kernel / f"{name}.c", hot.name)
    assert (hot.line_start, hot.line_end) == (lo, hi)
    (targets,) = of_type(run, ev.SourceTargetsEmitted)
    assert targets.slices and any(hot.name in text for text in targets.slices.values())
    assert all(not f.startswith("utilities") for f in targets.editable)
    brief = (run / "agent-brief.txt").read_text()
    assert f"{hot.name} {kernel}/{name}.c:{lo}-{hi}" in brief
    assert "never: config.mk" in brief and "utilities/*" in brief  # the harness is named as not editable
    # The dumps' write() time is a finding, stated when the run path leaves room (pytest's is long).
    numbers = json.loads((run / "agent-brief.json").read_text())["numbers"]
    # Measured: 8-15% here, from perf's kernel samples (root, perf outside the sandbox) or from the
    # timed runs' rusage; the finding is stated from KERNEL_FINDING up.
    from pw.agent.brief import KERNEL_FINDING

    share = numbers["time_split"]["kernel"]
    assert share >= 0.05
    short = render_brief({**numbers, "run_dir": "runs/r1"}, count_tokens)[0]
    assert ("of samples in the OS kernel" in short) == (share >= KERNEL_FINDING)
    captured = of_type(run, ev.ProfileCaptured)[0]
    assert captured.build_note and ".text identical to the timed build" in captured.build_note
    # The oracle run was traced cheaply: with a seccomp filter, and not much slower than timed runs.
    (oracle,) = of_type(run, ev.OracleChecked)
    if write_trace.seccomp_support(shutil.which("strace") or "strace") is None:
        assert oracle.tracing == write_trace.SECCOMP
    # Not slowed by tracing: the built baseline, traced as the oracle traces it and untraced,
    # interleaved (the oracle's own run is the first after the build, cold, so it is not compared).
    exe = run / "build" / "baseline" / kernel / name
    plain, traced = [], []
    for _ in range(7):
        # Logs go outside the build tree: a file left there changes the baseline's tree hash, and a
        # later evaluate would find the timed baseline "not the one built" (stale or swapped).
        plain.append(_wall([str(exe)], exe.parent, tmp_path / ".err"))
        traced.append(_wall(write_trace.strace_prefix(tmp_path / ".t.strace") + [str(exe)], exe.parent,
                            tmp_path / ".err"))
        # The fastest of each: other jobs on a shared 2-core machine only ever add time. Under that
        # load single runs of gemm still varied 1.7-2.7 s, so the test allows 1.25; the 10% target is
        # measured quietly by benchmarks/tracing.py (1.04 for a million writes). At least three pairs;
        # more (up to seven) only while the fastest of each are still further apart than that.
        if len(plain) >= 3 and min(traced) / min(plain) <= 1.25:
            break
    ratio = min(traced) / min(plain)
    assert ratio <= 1.25, (plain, traced)


def _wall(argv: list[str], cwd: Path, err_path: Path) -> float:
    with open(err_path, "wb") as err:
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, check=True, timeout=120)
        return time.perf_counter() - t0


def test_a_wrong_gemm_rewrite_fails_correctness_naming_stderr_and_the_line(suite_copy, runs, tmp_path):
    run = started(suite_copy / "linear-algebra/gemm", runs)
    out = _evaluate(run, "w", WORKLOADS / "suite" / "candidates" / "gemm-wrong-beta.patch", "linear-algebra/gemm")
    assert out["code"] == 1 and out["status"] == "rejected"
    assert out["reasons"][0].startswith("oracle-failed") and \
        "vs baseline output: stderr line 3: got " in out["reasons"][0], out["reasons"]


def test_the_cmake_project_names_the_library_function(runs, tmp_path):
    project = tmp_path / "cmake-lib"
    shutil.copytree(WORKLOADS / "cmake-lib", project)
    run = started(project, runs)
    hot = of_type(run, ev.HotspotSelected)[0]
    assert hot.file == "lib/histo.c" and hot.name in ("histo_find_bin", "histo_add_all")
    assert hot.line_start is not None and hot.line_end >= hot.line_start
    (targets,) = of_type(run, ev.SourceTargetsEmitted)
    assert targets.slices
    out = _evaluate(run, "w", WORKLOADS / "cmake-lib" / "candidates" / "wrong-early-stop.patch", ".")
    assert out["status"] == "rejected"
    assert out["reasons"][0].startswith("oracle-failed") and \
        "vs baseline output: stdout line 2: got " in out["reasons"][0], out["reasons"]


def test_the_python_src_layout_package_runs_as_a_module_and_names_its_function(runs, tmp_path):
    project = tmp_path / "py-srclayout"
    shutil.copytree(WORKLOADS / "py-srclayout", project)
    # Half the generated text (~0.5 s a run instead of ~1.5 s: count_words is quadratic in the
    # vocabulary): what is tested is the layout, the entry point and the function named, not the size.
    main = project / "src" / "wordfreq" / "__main__.py"
    assert "generate_words(40_000)" in main.read_text()
    main.write_text(main.read_text().replace("generate_words(40_000)", "generate_words(20_000)"))
    run = started(project, runs)
    (start,) = of_type(run, ev.RunStarted)
    assert start.contract.run.argv == ["python3", "-m", "wordfreq"] and start.contract.run.cwd == "src"
    hot = of_type(run, ev.HotspotSelected)[0]
    assert (hot.name.rsplit(".", 1)[-1], hot.file) == ("count_words", "src/wordfreq/vocab.py")
    assert hot.line_start is not None
    (targets,) = of_type(run, ev.SourceTargetsEmitted)
    assert targets.slices
    out = _evaluate(run, "w", WORKLOADS / "py-srclayout" / "candidates" / "wrong-counts.patch", ".")
    assert out["status"] == "rejected"
    assert out["reasons"][0].startswith("oracle-failed") and \
        "vs baseline output: stdout line 2: got " in out["reasons"][0], out["reasons"]
