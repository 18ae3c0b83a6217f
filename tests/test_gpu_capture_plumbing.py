"""The capture shells of the GPU adapters, run for real (subprocesses, files, timeouts) against
stand-in tools: small scripts that answer like ncu / nsys did on the H200, replaying the recorded
outputs in tests/data. What is tested is our side (arguments, the files we expect, the failure we
must detect), not the tools; the tools themselves ran on the device (tests/data/gpu-capture-raw.log).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from adapters import cupti, ncu, nsys
from adapters.base import CaptureError, CaptureRequest, read_artifacts

DATA = Path(__file__).parent / "data"


def script(path: Path, body: str) -> str:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


FAKE_NCU = r'''
import os, shutil, subprocess, sys
a = sys.argv[1:]
data = os.environ["FAKE_DATA"]
if a == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 36398880) (public-release)")
elif "--import" in a:
    page = a[a.index("--page") + 1]
    sys.stdout.write(open(os.path.join(data, f"baseline-{page}.csv")).read())
else:
    with open(os.environ["FAKE_ARGS"], "w") as f:
        f.write("\n".join(a))
    open(a[a.index("-o") + 1] + ".ncu-rep", "w").write("report")
    sys.exit(subprocess.call(a[a.index("--") + 1:]))
'''


def test_ncu_capture_runs_the_program_filtered_and_imports_both_pages(tmp_path, monkeypatch):
    exe = script(tmp_path / "ncu", FAKE_NCU)
    monkeypatch.setenv("FAKE_DATA", str(DATA / "ncu-cuda-transpose-csv"))
    monkeypatch.setenv("FAKE_ARGS", str(tmp_path / "args"))
    a = ncu.NcuAdapter(tool_path=exe, question="memory")
    a.focus("transpose_kernel", launches=21)
    cap = a.capture(CaptureRequest(argv=[sys.executable, "-c", "print('ran')"], cwd=str(tmp_path),
                                   out_dir=str(tmp_path / "out")))
    assert cap.tool_version == "2025.3.1.0 (build 36398880) (public-release)"
    args = (tmp_path / "args").read_text().split("\n")
    assert args[:2] == ["--clock-control", "none"] and "regex:^transpose_kernel$" in args
    assert [args[i + 1] for i, x in enumerate(args) if x == "--section"] == ncu.sections_for("memory")
    assert (tmp_path / "out" / "stdout.txt").read_text() == "ran\n"
    p = a.normalize(read_artifacts(cap), str(tmp_path), "baseline")
    assert p.operation("transpose_kernel@[gpu]").self_metrics["global_store_sectors_per_request"] == 32.0


def test_ncu_capture_reports_counter_permission(tmp_path):
    exe = script(tmp_path / "ncu", 'import sys\nif sys.argv[1:] == ["--version"]: print("Version 1")\n'
                                   'else: print("==ERROR== ERR_NVGPUCTRPERM - no permission"); sys.exit(1)\n')
    a = ncu.NcuAdapter(tool_path=exe, kernel="k")
    with pytest.raises(CaptureError, match="ERR_NVGPUCTRPERM"):
        a.capture(CaptureRequest(argv=["true"], cwd=str(tmp_path), out_dir=str(tmp_path / "o")))


FAKE_NSYS = r'''
import os, shutil, subprocess, sys
a = sys.argv[1:]
mode = os.environ["FAKE_MODE"]
if a == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.0")
elif a[0] == "profile":
    base = a[a.index("-o") + 1]
    argv = a[a.index("--") + 1:] if "--" in a else a[len(a) - 1:]
    subprocess.call(argv)
    print("Collecting data...")
    if mode == "broken" and not os.environ.get("LD_LIBRARY_PATH", "").startswith("/carried"):
        print("Importer error status: An unknown error occurred.")
        print("Unable to retrieve the importer version: skipping importation of the QDSTRM file.")
        open(base + ".qdstrm", "w").write("raw")
    else:
        open(base + ".nsys-rep", "w").write("report")
elif a[0] == "export":
    shutil.copy(os.environ["FAKE_SQLITE"], a[a.index("-o") + 1])
'''


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch):
    exe = script(tmp_path / "nsys", FAKE_NSYS)
    monkeypatch.setenv("FAKE_SQLITE", str(DATA / "nsys-cuda-transpose-sqlite/with-libs.sqlite"))
    monkeypatch.setattr(nsys, "gpu_visible", lambda: (True, "GPU 0: stand-in"))
    monkeypatch.delenv(nsys.LIBS_ENV, raising=False)
    return exe


def test_nsys_probe_detects_the_qdstrm_failure_and_carried_libs_fix_it(fake_nsys, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "broken")
    u = nsys.NsysAdapter(tool_path=fake_nsys).probe()
    assert not u.usable and "only a .qdstrm" in u.reason and "Importer error status" in u.reason
    monkeypatch.setenv(nsys.LIBS_ENV, "/carried/usr/lib/x86_64-linux-gnu")
    u = nsys.NsysAdapter(tool_path=fake_nsys).probe()
    assert u.usable and u.mode == "carried-libs"


def test_nsys_capture_exports_sqlite_and_normalizes(fake_nsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_MODE", "ok")
    a = nsys.NsysAdapter(tool_path=fake_nsys)
    cap = a.capture(CaptureRequest(argv=["true"], cwd=str(tmp_path), out_dir=str(tmp_path / "out")))
    assert cap.commands[1][:3] == [fake_nsys, "export", "--type"]
    p = a.normalize(read_artifacts(cap), str(tmp_path), "baseline")
    # That recorded run (4096², 10 transposes) spent more device time copying the result back than
    # transposing: the DtoH copy leads, the kernel follows.
    assert p.tool == "nsys" and [o.name for o in p.top_operations(2)] == ["memcpy DtoH", "transpose_kernel"]
    monkeypatch.setenv("FAKE_MODE", "broken")
    with pytest.raises(CaptureError, match="only a .qdstrm"):
        a.capture(CaptureRequest(argv=["true"], cwd=str(tmp_path), out_dir=str(tmp_path / "out2")))


TOOLKIT = cupti.find_toolkit()


@pytest.mark.skipif(TOOLKIT is None, reason="needs a CUDA toolkit with CUPTI headers and libcupti (to build the library)")
def test_cupti_capture_sets_the_injection_env_and_reads_what_was_written(tmp_path):
    # Stand-in for a CUDA program: writes what the driver-loaded library wrote on the H200.
    fixture = DATA / "cupti-cuda-histogram-jsonl/baseline.jsonl"
    prog = script(tmp_path / "prog", "import os, shutil\n"
                  "assert os.path.isfile(os.environ['CUDA_INJECTION64_PATH'])\n"
                  f"shutil.copy({str(fixture)!r}, os.environ['PW_CUPTI_OUT'])\nprint('ok')\n")
    a = cupti.CuptiAdapter(cache=tmp_path / "cache")
    cap = a.capture(CaptureRequest(argv=[prog], cwd=str(tmp_path), out_dir=str(tmp_path / "out")))
    p = a.normalize(read_artifacts(cap), str(tmp_path), "baseline")
    assert p.top_operations(1)[0].id == "histogram_kernel@[gpu]"
    silent = script(tmp_path / "silent", "print('no CUDA here')\n")
    with pytest.raises(CaptureError, match="no activity records"):
        a.capture(CaptureRequest(argv=[silent], cwd=str(tmp_path), out_dir=str(tmp_path / "out2")))
    assert os.environ.get("CUDA_INJECTION64_PATH") is None  # never leaked into pw's own environment
