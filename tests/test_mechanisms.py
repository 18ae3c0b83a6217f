"""Mechanism catalog: portable classes ranked from measured metrics and syntax facts."""

from __future__ import annotations

import inspect
from pathlib import Path

import msgspec

from pw.agent.source import locate
from pw.agent.source.model import AccessFact
from pw.rules.mechanisms import CLASSES, DESCRIPTIONS, rank_mechanisms

DATA = Path(__file__).parent / "data"


def fact(kind, line=10, symbol="b", detail="", tags=(), touched=0, declared=0, file="k.c"):
    return AccessFact(kind=kind, file=file, line=line, detail=detail or f"{kind} on {symbol}", loop_depth=2,
                      symbol=symbol, tags=tags, fields_touched=touched, fields_declared=declared)


def ids(ranked):
    return [m.id for m in ranked]


def test_strided_access_with_cache_misses_ranks_transaction_waste_first():
    ranked = rank_mechanisms([fact("strided", line=12, symbol="b")],
                             {"hotspot_share": 0.9, "hotspot_symbol": "matmul", "d1_read_misses": 3e8,
                              "d1_write_misses": 1e8, "instructions": 1e10})
    top = ranked[0]
    assert top.id == "transaction-waste"
    names = [(e.kind, e.name) for e in top.evidence]
    assert ("metric", "hotspot_share") in names and ("metric", "d1_misses_per_instruction") in names
    assert ("fact", "strided") in names
    assert "k.c:12" in top.lines and top.symbols == ("b",)
    derived = next(e for e in top.evidence if e.name == "d1_misses_per_instruction")
    assert abs(derived.value - 0.04) < 1e-9
    assert "matmul" in top.description and "b" in top.description


def test_aos_fields_rank_data_layout_first_and_scale_with_waste():
    wide = rank_mechanisms([fact("aos-field", symbol="p", touched=2, declared=16)], {"hotspot_share": 0.8})
    assert wide[0].id == "data-layout"
    narrow = rank_mechanisms([fact("aos-field", symbol="p", touched=3, declared=4)], {"hotspot_share": 0.8})
    score = {m.id: m.score for m in narrow}
    assert score["data-layout"] < wide[0].score


def test_indirect_and_linear_membership_are_dependent_lookups():
    assert rank_mechanisms([fact("indirect", symbol="a")], {})[0].id == "dependent-lookup"
    ranked = rank_mechanisms([fact("linear-membership", symbol="seen", tags=("list",), file="k.py")],
                             {"hotspot_share": 0.7})
    assert ranked[0].id == "dependent-lookup"
    unknown = rank_mechanisms([fact("linear-membership", symbol="seen", tags=("type-unknown",), file="k.py")],
                              {"hotspot_share": 0.7})
    assert unknown[0].score < ranked[0].score


def test_quadratic_nesting_and_repeated_lookups_are_work_reuse():
    ranked = rank_mechanisms([fact("quadratic-nesting", symbol="points"),
                              fact("repeated-attribute-lookup", symbol="self.scale.factor")], {})
    assert ranked[0].id == "work-reuse"


def test_scalar_reduction_alone_supports_no_class_memory_reduction_does():
    assert rank_mechanisms([fact("reduction-dependency", symbol="sum", tags=("scalar",))], {}) == []
    ranked = rank_mechanisms([fact("reduction-dependency", symbol="out", tags=("memory",))], {})
    assert ids(ranked) == ["work-reuse"]


def test_metrics_alone_never_invent_syntax_specific_classes():
    ranked = rank_mechanisms([], {"hotspot_share": 0.5, "d1_misses_per_instruction": 0.08,
                                  "ll_misses_per_instruction": 0.03, "ipc": 0.2})
    assert set(ids(ranked)) <= {"transaction-waste", "residency"}
    assert ranked and all(e.kind == "metric" for m in ranked for e in m.evidence)
    working_set = rank_mechanisms([], {"working_set_bytes": 64 << 20, "cache_bytes": 2 << 20})
    assert ids(working_set) == ["residency"]


def test_nothing_measured_nothing_ranked():
    assert rank_mechanisms([], {}) == []
    assert rank_mechanisms([], {"hotspot_share": 0.9, "d1_misses_per_instruction": 0.0001}) == []


def test_hotspot_share_scales_scores_and_hot_lines_weigh_facts():
    facts = [fact("strided", line=12)]
    big = rank_mechanisms(facts, {"hotspot_share": 0.9})[0].score
    small = rank_mechanisms(facts, {"hotspot_share": 0.1})[0].score
    assert small < big
    cold_strided_hot_indirect = [fact("strided", line=30, symbol="b"), fact("indirect", line=12, symbol="a")]
    ranked = rank_mechanisms(cold_strided_hot_indirect, {"line_shares": {12: 0.8, 30: 0.01}})
    assert ranked[0].id == "dependent-lookup"
    ranked = rank_mechanisms(cold_strided_hot_indirect, {"line_shares": {12: 0.01, 30: 0.8}})
    assert ranked[0].id == "transaction-waste"


def test_descriptions_carry_no_vocabulary_from_fact_details():
    # the detail mentions domain words; only the symbol names may reach the description
    facts = [fact("aos-field", symbol="p", touched=2, declared=16,
                  detail="p[].{x,vx}: touches 2 of 16 declared fields of particle: position velocity")]
    for mechanism in rank_mechanisms(facts, {"hotspot_symbol": "advance"}):
        template_words = set(DESCRIPTIONS[mechanism.id].replace("{", " ").replace("}", " ").split())
        extra = set(mechanism.description.split()) - template_words
        assert all(word.strip("(),.;") in {"p", "advance", "symbols", "where"} for word in extra), extra
        for banned in ("particle", "position", "velocity"):
            assert banned not in mechanism.description


def test_agent_text_is_not_an_input_and_output_is_deterministic():
    assert list(inspect.signature(rank_mechanisms).parameters) == ["facts", "measurements"]
    facts = [fact("strided", line=5), fact("indirect", line=9, symbol="idx"), fact("aos-field", symbol="p")]
    measured = {"hotspot_share": 0.6, "sectors_per_request": 16.0, "l2_hit_rate": 0.4}
    first = msgspec.json.encode(rank_mechanisms(facts, measured))
    assert first == msgspec.json.encode(rank_mechanisms(list(reversed(facts)), dict(measured)))
    assert set(ids(rank_mechanisms(facts, measured))) <= set(CLASSES)


def test_end_to_end_from_located_facts():
    result = locate(DATA / "source-c-aos", ["*.c", "*.h"], "step.c", "step")
    ranked = rank_mechanisms(result.facts, {"hotspot_share": 0.75, "hotspot_symbol": "step"})
    assert ranked[0].id == "data-layout"
    assert any(e.kind == "fact" and e.where.startswith("step.c:") for e in ranked[0].evidence)
    py = locate(DATA / "source-py", ["kernel.py"], "kernel.py", "dedupe")
    assert rank_mechanisms(py.facts, {"hotspot_share": 0.9})[0].id == "dependent-lookup"
