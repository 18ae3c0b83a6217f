"""projections.profile_diff: ranking, one-sided operations, explained fraction, leverage, determinism."""

from __future__ import annotations

import math

import msgspec
import pytest

from ledger.profile import LineCost, Operation, Profile
from projections.profile_diff import common_metric, diff_profiles


def op(id_: str, self_: float, incl: float | None = None, *, metric: str = "cpu_time_s",
       samples: bool = True) -> Operation:
    s = {metric: self_}
    i = {metric: incl if incl is not None else self_}
    if samples:
        s["samples"] = self_ * 1000
        i["samples"] = i[metric] * 1000
    return Operation(id=id_, name=id_.split("@")[0], kind="function", module="demo", file="demo.c",
                     self_metrics=s, inclusive_metrics=i)


def profile(ops: list[Operation], lines: list[LineCost] = (), *, metrics=("cpu_time_s", "samples"),
            tool: str = "perf") -> Profile:
    totals = {m: math.fsum(o.self_metrics.get(m, 0.0) for o in ops) for m in metrics}
    return Profile(tool=tool, tool_version="6.1", target="demo", granularity=["function", "line"],
                   metrics=list(metrics), totals=totals, operations=list(ops), lines=list(lines))


def lc(line: int, value: float, op_id: str = "matmul@demo.c") -> LineCost:
    return LineCost(file="demo.c", line=line, operation=op_id, self_metrics={"cpu_time_s": value})


BASE = profile([op("main@demo.c", 0.2, 10.0), op("matmul@demo.c", 8.0), op("init@demo.c", 1.5),
                op("io@demo.c", 0.3)],
               [lc(10, 6.0), lc(11, 2.0), lc(30, 1.5, "init@demo.c")])
GOOD = profile([op("main@demo.c", 0.2, 6.0), op("matmul@demo.c", 4.0), op("init@demo.c", 1.5),
                op("io@demo.c", 0.3)],
               [lc(10, 2.5), lc(11, 1.5), lc(30, 1.5, "init@demo.c")])


def test_totals_and_hotspot_explained_fraction():
    d = diff_profiles(BASE, GOOD, hotspot="matmul@demo.c")
    assert d.metric == "cpu_time_s" and d.unit == "s"
    assert (d.total_before, d.total_after, d.total_delta) == pytest.approx((10.0, 6.0, -4.0))
    assert d.total_relative == pytest.approx(-0.4)
    h = d.hotspot
    assert (h.self_before, h.self_after, h.self_shrink) == pytest.approx((8.0, 4.0, 4.0))
    assert h.inclusive_shrink == pytest.approx(4.0)
    assert h.explained_fraction == pytest.approx(1.0)
    assert h.present == "both"


def test_explained_fraction_partial_and_none_when_total_did_not_shrink():
    cand = profile([op("main@demo.c", 0.2, 8.0), op("matmul@demo.c", 7.0), op("init@demo.c", 0.5),
                    op("io@demo.c", 0.3)])
    d = diff_profiles(BASE, cand, hotspot="matmul@demo.c")
    assert d.hotspot.explained_fraction == pytest.approx(1.0 / 2.0)
    grew = profile([op("main@demo.c", 0.2, 11.0), op("matmul@demo.c", 7.0), op("init@demo.c", 3.5),
                    op("io@demo.c", 0.3)])
    assert diff_profiles(BASE, grew, hotspot="matmul@demo.c").hotspot.explained_fraction is None


def test_operations_ranked_by_absolute_impact_then_id():
    cand = profile([op("main@demo.c", 0.2), op("matmul@demo.c", 7.0), op("init@demo.c", 2.5),
                    op("io@demo.c", 0.3)])
    d = diff_profiles(BASE, cand, hotspot=None)
    assert [o.id for o in d.operations] == ["init@demo.c", "matmul@demo.c", "io@demo.c", "main@demo.c"]
    init = d.operations[0]
    assert init.self_delta == pytest.approx(1.0) and init.self_relative == pytest.approx(1.0 / 1.5)
    assert init.share_before == pytest.approx(0.15)
    assert init.samples_before == pytest.approx(1500) and init.samples_after == pytest.approx(2500)
    assert d.hotspot is None


def test_operation_present_in_one_profile_counts_zero_on_the_other_side():
    cand = profile([op("main@demo.c", 0.2), op("matmul_blocked@demo.c", 3.0), op("init@demo.c", 1.5),
                    op("io@demo.c", 0.3)])
    d = diff_profiles(BASE, cand, hotspot="matmul@demo.c")
    by = {o.id: o for o in d.operations}
    gone, new = by["matmul@demo.c"], by["matmul_blocked@demo.c"]
    assert gone.present == "baseline" and gone.self_after == 0.0 and gone.self_relative == -1.0
    assert new.present == "candidate" and new.self_before == 0.0 and new.self_relative is None
    assert d.hotspot.present == "baseline" and d.hotspot.inclusive_shrink == pytest.approx(8.0)
    # total shrank 5, hotspot alone 8: more than explained (work moved to the new function)
    assert d.hotspot.explained_fraction == pytest.approx(8.0 / 5.0)


def test_missing_inclusive_falls_back_to_self_and_exact_metric_has_no_samples():
    a = Operation(id="f@x.c", name="f", kind="function", module="m", self_metrics={"instructions": 100.0})
    b = Operation(id="f@x.c", name="f", kind="function", module="m", self_metrics={"instructions": 60.0})
    pa = profile([a], metrics=("instructions",), tool="callgrind")
    pb = profile([b], metrics=("instructions",), tool="callgrind")
    d = diff_profiles(pa, pb, hotspot="f@x.c")
    assert d.hotspot.inclusive_before == 100.0 and d.hotspot.inclusive_after == 60.0
    assert d.operations[0].samples_before is None


def test_lines_aggregated_ranked_and_cut_to_top_n():
    d = diff_profiles(BASE, GOOD, hotspot="matmul@demo.c", top_lines=2)
    assert [(ln.line, ln.delta) for ln in d.lines] == [(10, pytest.approx(-3.5)), (11, pytest.approx(-0.5))]
    assert d.lines[0].operations == ["matmul@demo.c"] and d.lines[0].file == "demo.c"
    full = diff_profiles(BASE, GOOD, hotspot="matmul@demo.c")
    assert [ln.line for ln in full.lines] == [10, 11, 30]  # 30 unchanged, last


def test_remaining_leverage_shares_and_amdahl_ceilings():
    d = diff_profiles(BASE, GOOD, hotspot="matmul@demo.c", top_leverage=2)
    lev = d.remaining_leverage
    assert [x.operation for x in lev] == ["matmul@demo.c", "init@demo.c"]
    assert lev[0].share == pytest.approx(4.0 / 6.0)
    assert lev[0].amdahl_ceiling == pytest.approx(1.0 / (1.0 - 4.0 / 6.0))
    assert lev[1].share == pytest.approx(0.25) and lev[1].amdahl_ceiling == pytest.approx(4.0 / 3.0)
    only = profile([op("f@a.c", 2.0)])
    assert diff_profiles(only, only, hotspot=None).remaining_leverage[0].amdahl_ceiling is None


def test_deterministic_under_input_order():
    shuffled_base = msgspec.structs.replace(BASE, operations=list(reversed(BASE.operations)),
                                            lines=list(reversed(BASE.lines)))
    shuffled_good = msgspec.structs.replace(GOOD, operations=GOOD.operations[2:] + GOOD.operations[:2])
    enc = msgspec.json.Encoder(order="deterministic").encode
    one = enc(diff_profiles(BASE, GOOD, hotspot="matmul@demo.c"))
    two = enc(diff_profiles(shuffled_base, shuffled_good, hotspot="matmul@demo.c"))
    assert one == two


def test_metric_choice():
    a = profile([op("f@a.c", 1.0)], metrics=("cpu_time_s", "samples"))
    b = profile([op("f@a.c", 1.0)], metrics=("samples", "cpu_time_s"))
    assert common_metric(a, b) == "cpu_time_s"
    assert diff_profiles(a, b, hotspot=None, metric="samples").total_before == pytest.approx(1000.0)
    c = profile([op("f@a.c", 1.0, metric="instructions", samples=False)], metrics=("instructions",))
    with pytest.raises(ValueError, match="share no metric"):
        diff_profiles(a, c, hotspot=None)
    with pytest.raises(ValueError, match="both profiles"):
        diff_profiles(a, c, hotspot=None, metric="instructions")
