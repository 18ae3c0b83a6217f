"""`pw inspect`: one bounded view at a time, and the speedscope export of a normalized profile."""

from __future__ import annotations

import json

import pytest

from ledger.profile import CallEdge, Operation, Profile
from pw.cli.look import MAX_ITEMS
from pw.export.speedscope import to_speedscope
from tests.conftest import pw_main


def _profile() -> Profile:
    return Profile(
        tool="perf", tool_version="6.1", target="baseline", granularity=["function"], metrics=["cpu_time_s"],
        totals={"cpu_time_s": 1.0},
        operations=[
            Operation(id="main@main.c", name="main", kind="function", module="a", file="main.c", line_start=3,
                      self_metrics={"cpu_time_s": 0.1}, inclusive_metrics={"cpu_time_s": 1.0}),
            Operation(id="hot@k.c", name="hot", kind="function", module="a", file="k.c", line_start=10,
                      self_metrics={"cpu_time_s": 0.9}, inclusive_metrics={"cpu_time_s": 0.9}),
        ],
        edges=[CallEdge(caller="main@main.c", callee="hot@k.c", metrics={"cpu_time_s": 0.9})],
    )


def test_speedscope_export_puts_self_cost_on_the_callers_stack():
    doc = to_speedscope(_profile(), name="t")
    frames = [f["name"] for f in doc["shared"]["frames"]]
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and prof["unit"] == "seconds"
    stacks = {tuple(frames[i] for i in s): w for s, w in zip(prof["samples"], prof["weights"])}
    assert stacks == {("main",): 0.1, ("main", "hot"): 0.9}
    assert prof["endValue"] == pytest.approx(1.0)


@pytest.mark.slow
def test_inspect_sections_are_bounded_and_speedscope_reads_the_run(matmul_interchange):
    run = matmul_interchange
    for section in ("profile", "lines", "mechanisms", "routing", "timing", "slices"):
        r = pw_main("inspect", run, "--section", section, "--json")
        assert r.code == 0, r
        doc = json.loads(r.out)
        assert doc["shown"] <= MAX_ITEMS and doc["shown"] == len(doc["items"])
    r = pw_main("inspect", run, "--section", "gates", "--candidate", "a", "--json")
    assert {g["name"] for g in json.loads(r.out)["items"]} >= {"correctness", "mechanism"}
    r = pw_main("inspect", run, "--section", "profile", "--group", "matmul", "--json")
    assert all("matmul" in json.dumps(i) for i in json.loads(r.out)["items"])
    r = pw_main("inspect", run, "--format", "speedscope")
    doc = json.loads(r.out)
    assert any(f["name"] == "matmul" for f in doc["shared"]["frames"])
    bad = pw_main("inspect", run, "--section", "gates", "--candidate", "nope")
    assert bad.code == 2 and bad.err.count("\n") == 1
