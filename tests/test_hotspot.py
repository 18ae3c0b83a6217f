"""Hotspot selection on synthetic profiles: editable code first, share and Amdahl ceiling, ties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.profile import LineCost, Operation, Profile
from pw.rules.hotspot import amdahl_ceiling, hot_lines, select_hotspot


def op(name: str, file: str | None, self_: float, inclusive: float | None = None, *, metric: str = "cpu_time_s",
       lines: tuple[int, int] | None = (1, 9), extra: dict[str, float] | None = None) -> Operation:
    module = "prog" if file else "libc.so.6"
    return Operation(
        id=f"{name}@{file}" if file else f"{name}@[{module}]", name=name, kind="function", module=module,
        file=file, line_start=lines[0] if lines else None, line_end=lines[1] if lines else None,
        self_metrics={metric: self_, **(extra or {})},
        inclusive_metrics={metric: self_ if inclusive is None else inclusive},
    )


def profile(ops: list[Operation], total: float, *, metrics: list[str] | None = None,
            lines: list[LineCost] | None = None) -> Profile:
    metrics = metrics or ["cpu_time_s", "samples"]
    return Profile(tool="perf", tool_version="6.1", target="baseline", granularity=["function", "line"],
                   metrics=metrics, totals={metrics[0]: total}, operations=ops, lines=lines or [])


def test_prefers_editable_operation_over_a_costlier_library_one():
    prof = profile([op("memcpy", None, 6.0), op("kernel", "k.c", 3.0), op("main", "main.c", 1.0, 10.0)], 10.0)
    hot = select_hotspot(prof, {"k.c"})
    assert hot.operation == "kernel@k.c" and hot.name == "kernel" and hot.file == "k.c"
    assert (hot.line_start, hot.line_end) == (1, 9)
    assert hot.metric == "cpu_time_s"


def test_non_editable_harness_is_not_chosen_even_with_the_largest_self_cost():
    # main.c is the (protected) harness: only the caller decides what is editable.
    prof = profile([op("main", "main.c", 7.0, 10.0), op("kernel", "k.c", 2.5)], 10.0)
    assert select_hotspot(prof, {"k.c"}).operation == "kernel@k.c"
    assert select_hotspot(prof, {"k.c", "main.c"}).operation == "main@main.c"


def test_falls_back_to_any_operation_when_nothing_editable_was_measured():
    prof = profile([op("memcpy", None, 6.0), op("strlen", None, 4.0)], 10.0)
    hot = select_hotspot(prof, {"k.c"})
    assert hot.operation == "memcpy@[libc.so.6]" and hot.file is None


def test_share_is_inclusive_over_total_and_ceiling_is_amdahl():
    # Chosen by self cost (2.0), but a rewrite of it can save its inclusive cost (8.0 of 10.0).
    prof = profile([op("outer", "k.c", 2.0, 8.0), op("inner", "lib.c", 1.5), op("setup", "k.c", 1.0)], 10.0)
    hot = select_hotspot(prof, {"k.c"})
    assert hot.operation == "outer@k.c"
    assert hot.share == pytest.approx(0.8)
    assert hot.amdahl_ceiling == pytest.approx(5.0)  # 1 / (1 - 0.8)
    assert hot.span_share is None  # not device time: no host span to take a share of


def test_chosen_by_self_cost_so_an_editable_main_does_not_win_by_inclusive_cost():
    prof = profile([op("main", "k.c", 0.5, 10.0), op("kernel", "k.c", 8.0), op("fill", "k.c", 1.5)], 10.0)
    hot = select_hotspot(prof, {"k.c"})
    assert hot.operation == "kernel@k.c" and hot.share == pytest.approx(0.8)


def test_share_uses_self_when_inclusive_is_missing():
    only_self = Operation(id="k@k.c", name="k", kind="function", module="prog", file="k.c",
                          self_metrics={"cpu_time_s": 3.0})
    hot = select_hotspot(profile([only_self], 4.0), {"k.c"})
    assert hot.share == pytest.approx(0.75) and hot.amdahl_ceiling == pytest.approx(4.0)


def test_share_is_capped_at_one_and_then_there_is_no_finite_ceiling():
    # Inclusive can exceed the total slightly (samplers count a recursive frame once, totals differ by rounding).
    prof = profile([op("main", "m.c", 5.0, 10.5)], 10.0)
    hot = select_hotspot(prof, {"m.c"})
    assert hot.share == 1.0 and hot.amdahl_ceiling is None
    assert amdahl_ceiling(1.0) is None and amdahl_ceiling(0.0) == 1.0


def test_selection_uses_the_primary_metric_only():
    a = op("a", "k.c", 100.0, metric="instructions", extra={"d1_misses": 1.0})
    b = op("b", "k.c", 60.0, metric="instructions", extra={"d1_misses": 50.0})
    prof = profile([b, a], 200.0, metrics=["instructions", "d1_misses"])
    hot = select_hotspot(prof, {"k.c"})
    assert hot.operation == "a@k.c" and hot.metric == "instructions" and hot.share == pytest.approx(0.5)


def test_ties_break_by_operation_id_whatever_the_profile_order():
    ops = [op("zeta", "k.c", 4.0), op("alpha", "k.c", 4.0), op("mid", "k.c", 4.0), op("small", "k.c", 1.0)]
    chosen = {select_hotspot(profile(list(perm), 13.0), {"k.c"}) for perm in itertools.permutations(ops)}
    assert len(chosen) == 1
    assert chosen.pop().operation == "alpha@k.c"


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=8))
def test_chosen_operation_has_maximal_self_cost_among_editable(spec):
    ops = [op(f"f{i}", "k.c" if editable else "other.c", float(cost)) for i, (cost, editable) in enumerate(spec)]
    total = sum(float(c) for c, _ in spec) + 1.0
    hot = select_hotspot(profile(ops, total), {"k.c"})
    pool = [o for o in ops if o.file == "k.c"] or ops
    best = max(o.self_metrics["cpu_time_s"] for o in pool)
    chosen = next(o for o in ops if o.id == hot.operation)
    assert chosen in pool and chosen.self_metrics["cpu_time_s"] == best
    assert hot.operation == min(o.id for o in pool if o.self_metrics["cpu_time_s"] == best)
    assert 0.0 <= hot.share < 1.0 and hot.amdahl_ceiling == pytest.approx(1.0 / (1.0 - hot.share), rel=1e-5)


@pytest.mark.parametrize("prof", [
    profile([], 10.0),
    profile([op("k", "k.c", 0.0)], 0.0),
])
def test_raises_when_there_is_nothing_to_choose(prof):
    with pytest.raises(ValueError, match="no operations with cost"):
        select_hotspot(prof, {"k.c"})


def test_hot_lines_are_the_costliest_lines_of_the_operation_sorted_by_line():
    lines = [LineCost(file="k.c", line=n, operation="k@k.c", self_metrics={"cpu_time_s": c})
             for n, c in [(10, 1.0), (12, 5.0), (14, 3.0), (16, 5.0)]]
    lines.append(LineCost(file="o.c", line=3, operation="o@o.c", self_metrics={"cpu_time_s": 9.0}))
    prof = profile([op("k", "k.c", 14.0), op("o", "o.c", 9.0)], 23.0, lines=lines)
    assert hot_lines(prof, "k@k.c", top=2) == [12, 16]
    assert hot_lines(prof, "k@k.c", top=3) == [12, 14, 16]
    assert hot_lines(prof, "missing") == []


def test_the_kernel_share_comes_from_rusage_when_the_profile_cannot_see_the_kernel():
    """An unprivileged perf (the sandbox's) samples user space only; the kernel's own accounting of
    the timed runs still says how much time the program spent in the kernel."""
    from pw.rules.hotspot import accounted_split

    split = accounted_split([0.50, 0.48, 0.52], [0.10, 0.30, 0.09])
    assert split["kernel"] == round(0.10 / 0.60, 4) and split["user"] == round(0.50 / 0.60, 4)
    assert "rusage" in split["source"]
    assert accounted_split([], []) is None and accounted_split([0.0], [0.0]) is None


def test_the_launcher_reports_the_programs_user_and_system_time(tmp_path):
    """A program that spends its time in write(2) shows system time; a pure loop shows user time."""
    import sys

    from adapters.process import run_process

    busy = "s = 0\nfor i in range(3_000_000): s += i\n"
    syscalls = "import os\nf = os.open('/dev/null', os.O_WRONLY)\nfor _ in range(800_000): os.write(f, b'x')\n"
    out = {}
    for name, code in (("busy", busy), ("sys", syscalls)):
        r = run_process([sys.executable, "-c", code], cwd=tmp_path, env=None, timeout_s=60,
                        stdout_path=tmp_path / f"{name}.out", stderr_path=tmp_path / f"{name}.err", own_peak_rss=True)
        assert r.exit_code == 0, (tmp_path / f"{name}.err").read_text()
        out[name] = r
    assert out["busy"].user_s > 0.05 and out["busy"].user_s > 3 * out["busy"].sys_s
    assert out["sys"].sys_s > 0.02
