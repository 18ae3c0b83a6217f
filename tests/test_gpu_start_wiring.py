"""`pw start` -> `pw prepare` -> `pw evaluate` -> `pw audit` on a CUDA workload, with the GPU
captures replayed from the H200 recordings.

There is no GPU here, so three things are stand-ins, and only these: the program (a script that
prints the recorded stdout), the profiler probes (cupti and ncu usable, nsys failing as it did on
the device), and the two GPU adapters' ``capture`` (they copy the raw outputs recorded on the H200
for the baseline and for the tiled candidate). Everything else is the real ProfileWeaver: routing,
normalize, hotspot, escalation to ncu focused on the timeline's kernel, the locator on the real
``transpose.cu``, the brief, the judge reading the counter the stated mechanism names, and audit.
The real run on the device is tests/data/gpu-pw-start.sh (not yet run).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from adapters import cupti, ncu
from adapters.base import Capture
from ledger import events as ev
from tests.conftest import apply_patch, ledger_events, pw_main

DATA = Path(__file__).parent / "data"
WORKLOADS = Path(__file__).parents[1] / "workloads"
NSYS_REASON = "nsys wrote only a .qdstrm, no .nsys-rep: the QDSTRM import failed (Importer error status: ...)"


def _workload(root: Path) -> Path:
    root.mkdir(parents=True)
    for f in ("transpose.cu", "transpose.h"):
        shutil.copy(WORKLOADS / "cuda-transpose" / f, root / f)
    shutil.copytree(WORKLOADS / "cuda-transpose" / "candidates", root / "candidates")
    (root / "reference").mkdir()
    shutil.copy(WORKLOADS / "cuda-transpose/reference/stdout.txt", root / "reference/stdout.txt")
    (root / "prog.py").write_text("import sys\nsys.stdout.write(open('reference/stdout.txt').read())\n")
    (root / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "cuda-transpose-replay", "source": {"editable": ["transpose.cu"]},
        "run": {"argv": ["python3", "prog.py"], "timeout_s": 30},
        "oracle": {"kind": "stdout", "reference": "reference/stdout.txt", "rtol": 0.0, "atol": 0.0},
        # The stand-in program takes the same time in both arms: its campaign says nothing, so it
        # stops at the minimum (5 pairs) instead of running the default budget of 40.
        "sampling": {"mode": "standard", "pairs": 5, "max_pairs": 5},
    }))
    return root


def _replay(files: dict[str, Path], role_names: dict[str, str], adapter: str):
    def capture(self, req):
        os.makedirs(req.out_dir, exist_ok=True)
        which = "baseline" if req.label == "baseline" else "candidate"
        arts = {}
        for role, name in role_names.items():
            dest = os.path.join(req.out_dir, role)
            shutil.copy(files[f"{which}:{name}"], dest)
            arts[role] = dest
        arts["capture.json"] = self.write_meta(req.out_dir, tool_version="replayed H200 capture", cwd=req.cwd,
                                               argv=list(req.argv), options={})
        seen.append((adapter, req.label, getattr(self, "kernel", None), getattr(self, "skip", None)))
        return Capture(adapter=adapter, label=req.label, artifacts=arts, wall_s=0.1,
                       tool_version="replayed H200 capture", commands=[list(req.argv)])
    return capture


seen: list = []


@pytest.fixture
def replayed_gpu(monkeypatch):
    import pw.app.preflight
    from adapters.registry import installed_adapters

    def probes():
        out = []
        for a in installed_adapters():
            usable = a.spec.name in ("cupti", "ncu")
            reason = "stand-in probe (replay)" if usable else (NSYS_REASON if a.spec.name == "nsys" else "off in this test")
            out.append(ev.ProfilerProbe(name=a.spec.name, usable=usable, version="replay" if usable else None,
                                        mode=None, reason=reason))
        return out

    monkeypatch.setattr(pw.app.preflight, "probe_profilers", probes)
    t, n = DATA / "cupti-cuda-transpose-jsonl", DATA / "ncu-cuda-transpose-csv"
    monkeypatch.setattr(cupti.CuptiAdapter, "capture", _replay(
        {"baseline:jsonl": t / "baseline.jsonl", "candidate:jsonl": t / "tiled.jsonl"},
        {cupti.JSONL_ROLE: "jsonl"}, "cupti"))
    monkeypatch.setattr(ncu.NcuAdapter, "capture", _replay(
        {"baseline:raw": n / "baseline-raw.csv", "baseline:details": n / "baseline-details.csv",
         "candidate:raw": n / "tiled-raw.csv", "candidate:details": n / "tiled-details.csv"},
        {ncu.RAW_ROLE: "raw", ncu.DETAILS_ROLE: "details"}, "ncu"))
    seen.clear()
    return seen


@pytest.mark.slow
def test_gpu_loop_wiring_with_replayed_captures(tmp_path, replayed_gpu):
    workload = _workload(tmp_path / "w")
    r = pw_main("start", "--workload", workload, "--runs-dir", tmp_path / "runs", "--json")
    assert r.code == 0, r
    run = Path(r.json()["run_dir"])
    events = ledger_events(run)
    routed = [e.data for e in events if isinstance(e.data, ev.RoutingDecided)]
    assert routed[0].phase == "discovery" and routed[0].chosen == "cupti"
    assert any(x.adapter == "nsys" and "only a .qdstrm" in x.reason for x in routed[0].rejected)
    assert routed[1].phase == "diagnosis" and routed[1].chosen == "ncu" and "transpose_kernel" in routed[1].reason
    assert ("ncu", "baseline", "transpose_kernel", 2) in replayed_gpu  # focused on the timeline's kernel
    hot = next(e.data for e in events if isinstance(e.data, ev.HotspotSelected))
    assert (hot.operation, hot.file, hot.line_start, hot.line_end) == ("transpose_kernel@[gpu]", "transpose.cu", 6, 12)
    brief = (run / "agent-brief.txt").read_text()
    assert "transpose_kernel" in brief and "55.8% of device time" in brief
    assert f"{hot.ceiling_share:.1%} of the wall time; Amdahl ceiling {hot.amdahl_ceiling:.2f}x of the wall time" in brief
    assert "uncoalesced global stores: 32.0 sectors/request" in brief
    emitted = next(e.data for e in events if isinstance(e.data, ev.BriefEmitted))
    assert emitted.tokens <= 320
    r = pw_main("inspect", run, "--section", "ncu", "--group", "memory", "--json")
    assert r.code == 0, r
    items = {i["name"]: i["value"] for i in r.json()["items"]}
    assert items["global_store_sectors_per_request"] == 32.0

    assert pw_main("prepare", run, "--candidate", "tiled:baseline:coalescing: shared-memory tiled transpose").code == 0
    apply_patch(run / "candidates" / "tiled" / "src", workload / "candidates" / "tiled.patch")
    r = pw_main("evaluate", run, "tiled", "--json")
    assert r.code in (0, 1), r
    assert ("ncu", "tiled", "transpose_kernel", 2) in replayed_gpu  # the candidate's kernel, same filter
    gates = [e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated)][-1]
    mech = next(g for g in gates.gates if g.name == "mechanism")
    assert "global_store_sectors_per_request 32 -> 4" in mech.detail, mech.detail
    assert pw_main("audit", run).code == 0
