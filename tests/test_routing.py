"""Routing: preconditions, insight, cost; separate phases; the escalation ladder."""

from __future__ import annotations

import os
import shutil

import msgspec
import pytest

from adapters.base import Usability
from adapters.callgrind import CallgrindAdapter
from adapters.perf import PerfAdapter
from adapters.registry import installed_specs
from ledger.metrics import is_known
from ledger.profile import GRANULARITIES, LineCost, Operation, Profile
from pw.rules.routing import LADDER, RUNGS, escalate, route, rung_for
from tests.test_adapter_contract import load_fixture

OK = Usability(usable=True, reason="probed", version="1")
ALL_OK = {s.name: OK for s in installed_specs()}


def reasons(decision) -> dict[str, str]:
    return {r.adapter: r.reason for r in decision.rejected}


def test_discovery_picks_cheapest_usable_and_records_every_rejection():
    d = route("discovery", {"function"}, 1.0, installed_specs(), ALL_OK, "native")
    assert d.chosen == "perf" and d.rung == "function-sampling"
    why = reasons(d)
    assert why["callgrind"] == "cost: 28.0 s > perf 1.9 s"
    assert why["callgrind-cachesim"] == "phase: does not serve discovery"
    assert why["py-spy"] == "target: native not in ['python']"
    assert set(why) | {d.chosen} == {s.name for s in installed_specs()}


def test_insight_filter_names_the_missing_granularity_or_metric():
    d = route("diagnosis", {"line", "instructions"}, 1.0, installed_specs(), ALL_OK, "native")
    assert d.chosen == "callgrind"
    assert reasons(d)["perf"] == "insight: does not measure instructions"
    no_gpu = {**ALL_OK, **{n: Usability(usable=False, reason="no NVIDIA GPU visible") for n in ("cupti", "nsys", "ncu")}}
    d = route("discovery", {"kernel"}, 1.0, installed_specs(), no_gpu, "cuda")
    assert d.chosen is None and reasons(d)["perf"] == "insight: no kernel granularity"
    assert reasons(d)["cupti"] == "unusable: no NVIDIA GPU visible"
    assert "no usable adapter" in d.reason


def test_discovery_and_diagnosis_are_separate_decisions():
    disc = route("discovery", {"line", "ll_misses"}, 1.0, installed_specs(), ALL_OK, "native")
    diag = route("diagnosis", {"line", "ll_misses"}, 1.0, installed_specs(), ALL_OK, "native")
    assert disc.chosen is None and diag.chosen == "callgrind-cachesim"
    assert diag.phase == "diagnosis" and disc.phase == "discovery"


def test_unusable_adapter_is_rejected_with_its_probe_reason():
    usab = {**ALL_OK, "perf": Usability(usable=False, reason="perf not found on PATH")}
    d = route("discovery", {"function"}, 2.0, installed_specs(), usab, "native")
    assert d.chosen == "callgrind"
    assert reasons(d)["perf"] == "unusable: perf not found on PATH"
    d = route("discovery", {"function"}, 2.0, installed_specs(), {}, "native")
    assert d.chosen is None and all(r.startswith("unusable: not probed") for r in reasons(d).values())


def test_real_probe_without_perf_on_path_falls_back_to_callgrind(monkeypatch, tmp_path):
    """PATH holds valgrind and true but not perf: the real perf probe fails, routing falls back."""
    valgrind, true = shutil.which("valgrind"), shutil.which("true")
    if valgrind is None or true is None:
        pytest.skip("valgrind (or true) not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "valgrind"  # Debian's valgrind is a script that execs "$0.bin": wrap, not link
    wrapper.write_text(f'#!/bin/sh\nexec {valgrind} "$@"\n')
    wrapper.chmod(0o755)
    os.symlink(true, bin_dir / "true")
    monkeypatch.setenv("PATH", str(bin_dir))
    perf, cg = PerfAdapter(), CallgrindAdapter()
    usab = {"perf": perf.probe(), "callgrind": cg.probe()}
    assert not usab["perf"].usable and usab["perf"].reason == "perf not found on PATH"
    if not usab["callgrind"].usable:
        pytest.skip(f"callgrind unusable here: {usab['callgrind'].reason}")
    d = route("discovery", {"function"}, 1.0, [perf.spec, cg.spec], usab, "native")
    assert d.chosen == "callgrind"
    assert reasons(d) == {"perf": "unusable: perf not found on PATH"}


def test_cost_model_includes_rebuild_only_when_needed():
    spec = installed_specs()[0]
    rebuilding = msgspec.structs.replace(spec, name="instrumenting", needs_rebuild=True, overhead_factor=1.0,
                                         setup_s=0.0, measures=["cpu_time_s"], targets=["native"])
    d = route("discovery", {"function"}, 1.0, [rebuilding], {"instrumenting": OK}, "native", build_s=30.0)
    assert d.estimated_cost_s == 31.0
    assert rebuilding.cost_s(1.0, build_s=30.0) == 31.0 and spec.cost_s(1.0, build_s=30.0) == spec.cost_s(1.0)


def test_bad_phase_or_need_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown phase"):
        route("tuning", {"function"}, 1.0, installed_specs(), ALL_OK, "native")
    with pytest.raises(ValueError, match="unknown needs"):
        route("discovery", {"time (inc)"}, 1.0, installed_specs(), ALL_OK, "native")


def test_ladder_is_data_ordered_coarse_to_fine():
    assert [r.name for r in LADDER] == ["process-time", "function-sampling", "line-exact", "counters",
                                        "gpu-kernel", "gpu-timeline", "kernel-counters"]
    for r in LADDER:
        assert r.needs and all(n in GRANULARITIES or is_known(n) for n in r.needs)
    assert rung_for({"function"}).name == "function-sampling"
    assert rung_for({"line", "instructions"}).name == "line-exact"
    assert msgspec.json.encode(LADDER)  # serializable as-is


# --- escalation ---------------------------------------------------------------------------------

def _perf_fixture_profile():
    arts, expected = load_fixture("perf-hotc-script")
    return PerfAdapter().normalize(arts, expected["source_root"], "baseline")


def _sampling_decision():
    return route("discovery", {"function", "cpu_time_s"}, 1.0, installed_specs(), ALL_OK, "native")


def test_sampling_with_enough_samples_per_line_does_not_escalate():
    prof = _perf_fixture_profile()  # hot_kernel: 267 samples over lines 14..16
    esc = escalate(_sampling_decision(), prof, "hot_kernel@hot.c")
    assert esc.to_rung is None and esc.needs == []
    assert "/line (>= 25)" in esc.reason


def test_too_few_samples_per_line_escalates_to_exact_line_counts():
    prof = _perf_fixture_profile()
    dec = _sampling_decision()
    esc = escalate(dec, prof, "hot_kernel@hot.c", min_samples_per_line=500)
    assert (esc.from_rung, esc.to_rung) == ("function-sampling", "line-exact")
    assert esc.needs == ["line", "instructions"] and "sampling noise" in esc.reason
    nxt = route("discovery", esc.needs, 1.0, installed_specs(), ALL_OK, "native")
    assert nxt.chosen == "callgrind" and nxt.rung == "line-exact"


def _one_op_profile(op: Operation, lines=(), metrics=("cpu_time_s", "samples")) -> Profile:
    return Profile(tool="t", tool_version="1", target="baseline", granularity=["function", "line"],
                   metrics=list(metrics), totals={m: 1000.0 for m in metrics}, operations=[op], lines=list(lines))


def test_wide_hot_function_escalates_even_with_many_samples():
    op = Operation(id="big@a.c", name="big", kind="function", module="prog", file="a.c", line_start=10,
                   line_end=100, self_metrics={"samples": 1000.0, "cpu_time_s": 1.0})
    lines = [LineCost(file="a.c", line=50, operation="big@a.c", self_metrics={"samples": 1000.0})]
    esc = escalate(_sampling_decision(), _one_op_profile(op, lines), "big@a.c", min_samples_per_line=1)
    assert esc.to_rung == "line-exact" and "spans 91 lines (> 40)" in esc.reason


def test_no_line_attribution_escalates():
    op = Operation(id="f@[prog]", name="f", kind="function", module="prog", self_metrics={"samples": 900.0})
    esc = escalate(_sampling_decision(), _one_op_profile(op), "f@[prog]")
    assert esc.to_rung == "line-exact" and "no source-line attribution" in esc.reason


def test_line_rung_escalates_to_counters_only_in_diagnosis():
    arts, expected = load_fixture("callgrind-hotc-out")
    prof = CallgrindAdapter().normalize(arts, expected["source_root"], "baseline")
    for phase, to in (("discovery", None), ("diagnosis", "counters")):
        dec = route(phase, {"line", "instructions"}, 1.0, installed_specs(), ALL_OK, "native")
        esc = escalate(dec, prof, "hot_kernel@hot.c")
        assert esc.to_rung == to, esc.reason
    assert "line hot.c:16" in esc.reason and esc.needs == ["line", "ll_misses"]
    assert route("diagnosis", esc.needs, 1.0, installed_specs(), ALL_OK, "native").chosen == "callgrind-cachesim"


def test_gpu_rung_needs_evidence_not_just_a_cuda_program():
    user = Operation(id="k@a.cu", name="k", kind="function", module="app", file="a.cu", line_start=1,
                     line_end=3, self_metrics={"samples": 900.0})
    lines = [LineCost(file="a.cu", line=2, operation="k@a.cu", self_metrics={"samples": 900.0})]
    dec = route("discovery", {"function", "cpu_time_s"}, 1.0, installed_specs(), ALL_OK, "cuda")
    assert dec.chosen == "perf"
    assert escalate(dec, _one_op_profile(user, lines), "k@a.cu").to_rung is None
    sync = Operation(id="cudaDeviceSynchronize@[libcudart.so.12]", name="cudaDeviceSynchronize",
                     kind="function", module="libcudart.so.12", self_metrics={"samples": 900.0})
    esc = escalate(dec, _one_op_profile(sync), sync.id)
    assert esc.to_rung == "gpu-kernel" and esc.needs == RUNGS["gpu-kernel"].needs
    assert "waits on the GPU" in esc.reason


def test_escalate_unknown_hotspot_is_a_clear_error():
    with pytest.raises(ValueError, match="not an operation"):
        escalate(_sampling_decision(), _perf_fixture_profile(), "nope@x.c")
