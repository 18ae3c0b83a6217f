"""The agent brief: `fit_brief` keeps the essentials and drops the least important lines first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pw.agent.brief import RUN_HERE, TOKEN_BUDGET, BriefLine, brief_lines, fit_brief, render_brief
from pw.agent.tokens import count_tokens


def words(text: str) -> int:
    """A transparent stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def line(n_words: int, tag: str, priority: int) -> BriefLine:
    return BriefLine(" ".join([tag] * n_words), priority)


def kept_tags(text: str) -> list[str]:
    return [row.split()[0] for row in text.splitlines() if row]


def test_everything_is_kept_when_it_fits():
    lines = [line(3, "a", 0), line(3, "b", 5), line(3, "c", 1)]
    text, tokens = fit_brief(lines, words, budget=9)
    assert kept_tags(text) == ["a", "b", "c"]
    assert text.endswith("\n") and tokens == 9 == words(text)


def test_drops_the_highest_priority_number_first_and_stops_as_soon_as_it_fits():
    lines = [line(4, "head", 0), line(2, "p1", 1), line(2, "p3", 3), line(2, "p2", 2), line(4, "tail", 0)]
    text, tokens = fit_brief(lines, words, budget=12)  # 14 words: dropping p3 alone is enough
    assert kept_tags(text) == ["head", "p1", "p2", "tail"] and tokens == 12
    text, tokens = fit_brief(lines, words, budget=10)  # then p2, never p1 before p2
    assert kept_tags(text) == ["head", "p1", "tail"] and tokens == 10


def test_among_equal_priorities_the_later_line_goes_first():
    lines = [line(2, "x", 0), line(2, "first", 4), line(2, "second", 4), line(2, "third", 4)]
    text, _ = fit_brief(lines, words, budget=6)
    assert kept_tags(text) == ["x", "first", "second"]


def test_never_drops_priority_zero_even_when_only_essentials_remain():
    lines = [line(5, "e1", 0), line(9, "opt", 1), line(5, "e2", 0), line(9, "opt2", 7)]
    text, tokens = fit_brief(lines, words, budget=10)
    assert kept_tags(text) == ["e1", "e2"] and tokens == 10


def test_raises_when_the_essentials_alone_exceed_the_budget():
    lines = [line(6, "e1", 0), line(1, "opt", 1), line(6, "e2", 0)]
    with pytest.raises(ValueError, match=r"essential lines take 12 tokens, over the budget of 11"):
        fit_brief(lines, words, budget=11)


lines_strategy = st.lists(st.tuples(st.integers(1, 12), st.integers(0, 6)), min_size=1, max_size=12)


@given(lines_strategy, st.integers(1, 80))
def test_fit_is_greedy_minimal_and_keeps_order(spec, budget):
    lines = [line(n, f"L{i}", prio) for i, (n, prio) in enumerate(spec)]
    essential = sum(n for n, prio in spec if prio == 0)
    if essential > budget:
        with pytest.raises(ValueError):
            fit_brief(lines, words, budget=budget)
        return
    text, tokens = fit_brief(lines, words, budget=budget)
    kept = kept_tags(text)
    assert tokens == words(text) <= budget
    assert kept == [tag for tag in (f"L{i}" for i in range(len(spec))) if tag in kept]  # original order
    assert all(f"L{i}" in kept for i, (_, prio) in enumerate(spec) if prio == 0)
    # The dropped lines are exactly a prefix of the drop order (priority desc, position desc) ...
    order = sorted((i for i, (_, prio) in enumerate(spec) if prio > 0), key=lambda i: (-spec[i][1], -i))
    dropped = [i for i in range(len(spec)) if f"L{i}" not in kept]
    assert order[:len(dropped)] == sorted(dropped, key=lambda i: (-spec[i][1], -i))
    # ... and no longer than needed: the last one dropped would not have fitted.
    if dropped:
        assert tokens + spec[order[len(dropped) - 1]][0] > budget


def numbers(**over) -> dict:
    base = {
        "run_id": "20260101-000000-demo", "run_dir": "/tmp/runs/20260101-000000-demo", "workload": "demo",
        "metric": "wall time", "baseline_mean_s": 0.61234, "baseline_runs": 5, "baseline_cv": 0.031,
        "oracle": "stdout vs reference/stdout.txt", "adapter": "perf", "adapter_mode": "software-events-only",
        "hotspot": {"name": "matmul", "file": "matmul.c", "line_start": 14, "line_end": 24, "share": 0.868,
                    "metric": "cpu_time_s", "ceiling": 7.58, "operation": "matmul@matmul.c"},
        "hot_lines": [{"line": 19, "share": 0.84}, {"line": 20, "share": 0.01}],
        "mechanisms": [{"id": f"class-{i}", "score": 0.5 - i / 10, "description": "d",
                        "evidence": [f"strided @ matmul.c:{20 + i}", f"aos-field @ matmul.c:{30 + i}"]}
                       for i in range(3)],
        "slices": [{"path": f"source-slices/0{i + 1}-writer-fill_matrix_number_{i}.txt",
                    "range": f"matmul.c:{40 + i}-{60 + i}", "role": "writer", "symbol": "f"} for i in range(6)],
        "frontier": ["A double* <- malloc@main.c:24, fill_matrix@matmul.c:43 -> matmul@matmul.c:14"] * 2,
        "editable": ["matmul.c", "matmul.h"],
    }
    return {**base, **over}


def test_real_brief_fits_the_budget_with_essentials_and_drops_optional_lines():
    lines = brief_lines(numbers())
    full = count_tokens("\n".join(x.text for x in lines) + "\n")
    assert full > TOKEN_BUDGET  # the fixture is rich enough that something must go
    text, tokens = fit_brief(lines, count_tokens)
    assert tokens == count_tokens(text) <= TOKEN_BUDGET == 320
    for essential in (x.text for x in lines if x.priority == 0):
        assert essential in text.splitlines()
    assert "matmul matmul.c:14-24 = 86.8% of cpu_time_s; Amdahl ceiling 7.58x" in text
    assert "Verified needs all 6 gates" in text
    assert text.splitlines()[-1].startswith("Next (RUN=/tmp/runs/20260101-000000-demo): pw prepare RUN")
    assert "Mechanism 1: class-0" in text and "Also:" not in text  # priority 1 kept, priority 6 dropped first


def test_brief_without_ceiling_still_names_the_hotspot():
    hs = {**numbers()["hotspot"], "ceiling": None, "share": 1.0}
    text, _ = fit_brief(brief_lines(numbers(hotspot=hs, mechanisms=[], slices=[], frontier=[])), count_tokens)
    assert "Hotspot (perf): matmul = 100.0% of cpu_time_s" in text


def test_brief_states_the_recorded_span_share_of_a_device_hotspot_and_nothing_else_derives_it():
    """The share of the host's span is the hotspot rule's (recorded), never re-derived from the ceiling."""
    gpu = {**numbers()["hotspot"], "metric": "gpu_time_ns", "share": 0.558, "ceiling": 1.35, "span_share": 0.2}
    text = "\n".join(x.text for x in brief_lines(numbers(hotspot=gpu)))
    assert "= 55.8% of gpu_time_ns (20.0% of the host's CUDA span); Amdahl ceiling 1.35x" in text
    assert "25.9%" not in text  # 1 - 1/1.35: what re-deriving it would say
    # A hotspot whose rule recorded no span share (a CPU profile, or a device one without a span) says none.
    for hs in ({**gpu, "span_share": None}, {k: v for k, v in gpu.items() if k != "span_share"}):
        assert "host's CUDA span" not in "\n".join(x.text for x in brief_lines(numbers(hotspot=hs)))


def test_essentials_over_budget_raise_instead_of_emitting_a_long_brief():
    long_dir = "/very/deep/" + "/".join(f"directory-{i}" for i in range(60))
    with pytest.raises(ValueError, match="over the budget of 320"):
        fit_brief(brief_lines(numbers(run_dir=long_dir)), count_tokens)


def test_render_brief_names_the_run_by_where_the_brief_lives_when_its_path_is_too_long():
    short_text, _ = render_brief(numbers(), count_tokens)
    assert "Next (RUN=/tmp/runs/20260101-000000-demo): pw prepare RUN" in short_text
    long_dir = "/very/deep/" + "/".join(f"directory-{i}" for i in range(60))
    text, tokens = render_brief(numbers(run_dir=long_dir), count_tokens)
    assert tokens == count_tokens(text) <= TOKEN_BUDGET
    assert long_dir not in text
    assert text.splitlines()[-1] == (f"Next (RUN={RUN_HERE}): pw prepare RUN --candidate ID:baseline:MECHANISM; "
                                     "pw evaluate RUN ID")
    assert "Verified needs all 6 gates" in text and "matmul.c:14-24" in text
