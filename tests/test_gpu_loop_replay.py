"""CI replay of the whole GPU loop recorded on an H200 (tests/data/gpu-loop-h200/, made by
tests/data/gpu-pw-start.sh in one device call): `pw start` on cuda-transpose (CUPTI timeline
discovery -> Nsight Compute diagnosis -> brief), the tiled candidate verified with the store counter
that moved, and on cuda-histogram the naive no-atomic candidate rejected by the oracle. CI has no GPU:
it audits the recorded ledgers (every verdict recomputed from the recorded evidence), reads the
recorded verdicts and brief, and routes from the recorded probe results."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from adapters.base import Usability
from adapters.registry import installed_specs
from ledger.store import Ledger
from pw.agent.tokens import count_tokens
from pw.rules.routing import route

DATA = Path(__file__).parent / "data" / "gpu-loop-h200"
ROOT = Path(__file__).resolve().parent.parent


def _events(run: str, kind: str) -> list:
    return [e for e in Ledger(DATA / run / "ledger.jsonl").events() if type(e.data).__name__ == kind]


def _audit(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pw.cli", "audit", str(run_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("run", ["transpose-run", "histogram-run"])
def test_the_recorded_gpu_run_audits_clean(run, tmp_path):
    copy = tmp_path / run
    shutil.copytree(DATA / run, copy)
    r = _audit(copy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "audit passed" in r.stdout and "verdicts: ok" in r.stdout


def test_audit_names_a_tampered_gpu_verdict(tmp_path):
    """The same replay fails when the recorded verdict no longer follows from the evidence."""
    copy = tmp_path / "transpose-run"
    shutil.copytree(DATA / "transpose-run", copy)
    ledger = copy / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if '"VerdictReached"' in line)
    lines[i] = lines[i].replace('"status":"verified"', '"status":"proposed"')
    assert '"status":"proposed"' in lines[i]
    ledger.write_text("\n".join(lines) + "\n")
    r = _audit(copy)
    assert r.returncode != 0 and "verdict at seq" in r.stdout and "no longer follows from the evidence" in r.stdout


def test_the_tiled_transpose_is_verified_by_the_counter_that_moved():
    verdict = _events("transpose-run", "VerdictReached")[-1].data
    assert verdict.status == "verified" and verdict.speedup > 1.1 and verdict.interval[0] > 1.01
    gates = {g.name: g for g in _events("transpose-run", "GatesEvaluated")[-1].data.gates}
    assert all(g.passed for g in gates.values()) and len(gates) == 6
    mech = gates["mechanism"].detail
    assert "transpose_kernel" in mech and "global_store_sectors_per_request 32 -> 4" in mech
    # The CLI's answer the agent read is the ledger's verdict.
    answer = json.loads((DATA / "evaluate-tiled.json").read_text())
    assert answer["status"] == verdict.status and answer["speedup"] == pytest.approx(verdict.speedup)


def test_the_brief_names_the_kernel_its_share_and_the_limiter_within_budget():
    brief = (DATA / "transpose-run" / "agent-brief.txt").read_text()
    hot = _events("transpose-run", "HotspotSelected")[-1].data
    assert count_tokens(brief) <= 320
    assert hot.name == "transpose_kernel" and f"{hot.share:.1%}" in brief
    assert "Limiter of transpose_kernel (ncu): uncoalesced global stores" in brief
    # The ceiling comes from the kernel's share of the host's span, not of device time.
    assert hot.amdahl_ceiling < 1 / (1 - hot.share)
    assert f"Amdahl ceiling {hot.amdahl_ceiling:.2f}x" in brief and "of the host's CUDA span" in brief
    # Recorded as HotspotSelected v1 (no span share); the upcast share is the one that brief stated.
    raw = [msgspec.json.decode(line) for line in (DATA / "transpose-run" / "ledger.jsonl").read_bytes().splitlines()]
    assert [r["v"] for r in raw if r["type"] == "HotspotSelected"] == [1]
    assert f"({hot.span_share:.1%} of the host's CUDA span)" in brief
    routes = {e.data.phase: e.data.chosen for e in _events("transpose-run", "RoutingDecided")}
    assert routes == {"discovery": "cupti", "diagnosis": "ncu"}


@pytest.mark.parametrize("run", ["transpose-run", "histogram-run"])
def test_the_v1_hotspot_gives_the_same_baseline_brief_as_recorded(run):
    """The baseline brief rendered again from its recorded numbers, with the span share read back from
    the v1 HotspotSelected (the brief no longer derives it from the ceiling), is the recorded brief."""
    from pw.agent.brief import render_brief

    hot = _events(run, "HotspotSelected")[-1].data
    brief = next(e.data for e in _events(run, "BriefEmitted") if e.data.target == "baseline")
    assert "span_share" not in brief.numbers["hotspot"] and hot.span_share is not None
    numbers = {**brief.numbers, "hotspot": {**brief.numbers["hotspot"], "span_share": hot.span_share}}
    # The gates' line says what the gates are today (rules 19: the hotspot's part in the same runs);
    # every other line is rendered as recorded.
    again = render_brief(numbers, count_tokens)[0].splitlines()
    recorded = brief.text.splitlines()
    assert [x for x in again if not x.startswith("Verified needs")] == \
        [x for x in recorded if not x.startswith("Verified needs")]
    assert f"({hot.span_share:.1%} of the host's CUDA span)" in brief.text


def test_the_naive_histogram_is_rejected_with_the_oracle_line():
    verdict = _events("histogram-run", "VerdictReached")[-1].data
    assert verdict.status == "rejected"
    assert any(r.startswith("oracle-failed") and "line 2" in r for r in verdict.reasons)


def _probes(name: str) -> dict[str, Usability]:
    doc = json.loads((DATA / name).read_text())
    return {a["adapter"]: Usability(usable=a["usable"], reason=a["reason"], version=a["version"], mode=a["mode"])
            for a in doc["adapters"]}


def test_nsys_failure_is_detected_and_routed_around_and_carried_libraries_make_it_work():
    broken, carried = _probes("doctor-no-nsys-libs.json"), _probes("doctor.json")
    assert not broken["nsys"].usable and "only a .qdstrm" in broken["nsys"].reason
    assert carried["nsys"].usable and carried["nsys"].mode == "carried-libs"
    specs = installed_specs()
    needs = ["gpu_time_ns", "kernel", "timeline"]
    for probes in (broken, carried):
        d = route("discovery", needs, 1.0, specs, probes, "cuda")
        assert d.chosen == "cupti"
    # With CUPTI gone too, the carried nsys answers the timeline; without its libraries nothing does.
    no_cupti = {**carried, "cupti": Usability(usable=False, reason="test: no CUPTI")}
    assert route("discovery", needs, 1.0, specs, no_cupti, "cuda").chosen == "nsys"
    nothing = {**broken, "cupti": Usability(usable=False, reason="test: no CUPTI")}
    d = route("discovery", needs, 1.0, specs, nothing, "cuda")
    assert d.chosen is None and any(r.adapter == "nsys" and "qdstrm" in r.reason for r in d.rejected)


def test_the_recorded_probes_say_where_pw_ran_and_that_the_sandbox_held():
    doc = json.loads((DATA / "doctor.json").read_text())
    assert doc["sandbox"]["usable"] and doc["sandbox"]["tool"] == "bwrap"
    timing = _events("transpose-run", "TimingRecorded")[-1].data
    assert timing.conditions.sandbox.startswith("bwrap")
    assert msgspec.json.decode(msgspec.json.encode(timing.conditions))["arms"]["tiled"]["binary_before"]
