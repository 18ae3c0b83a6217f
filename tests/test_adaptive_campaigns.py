"""Adaptive campaigns in the product (issue 16): pw evaluate stops by the sequential rule, "no effect"
is a verdict, --more continues a campaign, and pw audit replays every stop."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from pw.rules.verdict import reach_verdict
from pw.stats.adaptive import CAMPAIGN_RULE
from tests.conftest import (
    SAME_SPEED_TINY_C,
    copy_run,
    ledger_events,
    pw_main,
)


def _analysis(verdict: str, **campaign) -> dict:
    return {
        "verdict": verdict, "speedup": 1.004, "n_pairs": 23,
        "interval": {"low": 0.985, "high": 1.019, "confidence": 0.95},
        "campaign": {"margin": 0.02, "max_pairs": 40, "max_time_s": 600.0, "stop": "margin", **campaign},
    }


def _verdict(analysis):
    return reach_verdict([], analysis, refused_edits=[], build_ok=True, oracle_passed=True, exploratory=False)


def test_no_effect_within_the_margin_is_a_definite_rejection():
    v = _verdict(_analysis("SAME"))
    assert v.status == "rejected" and not v.repairable
    assert v.reasons[0].startswith("no-effect: speedup within ±2% (speedup 1.004x (95% CI 0.985-1.019)")


def test_inconclusive_only_for_a_spent_budget_and_it_says_how_many_more_pairs():
    v = _verdict(_analysis("INCONCLUSIVE", stop="budget", reason="max_pairs", more_pairs=17))
    assert v.status == "inconclusive"
    assert "budget of 40 pairs spent; about 17 more pairs at the current variance would decide (--more 17)" \
        in v.reasons[0]
    noisy = _verdict(_analysis("INCONCLUSIVE", stop="budget", reason="max_pairs", more_pairs=11050))
    assert "about 11050 more pairs at the current variance would decide: lower the timing noise" in noisy.reasons[0]
    timed = _verdict(_analysis("INCONCLUSIVE", stop="budget", reason="max_time", more_pairs=None))
    assert "time budget of 600 s spent; no number of pairs at the current mean would decide" in timed.reasons[0]


@pytest.mark.parametrize("args, phrase", [
    (("--more", "3", "--max-pairs", "9"), "not both"),
    (("--max-pairs", "3"), "at least 5 pairs"),
])
def test_bad_budgets_are_usage_errors(tmp_path, args, phrase):
    result = pw_main("evaluate", tmp_path / "no-run", "a", *args)
    assert result.code == 2 and phrase in result.err, result
    assert "Traceback" not in result.err


def _timings(run: Path, cid: str) -> list[tuple[int, ev.TimingRecorded]]:
    return [(e.seq, e.data) for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets]


@pytest.mark.slow
def test_a_large_effect_stops_at_the_minimum_and_says_why(matmul_interchange):
    (seq, timing), = _timings(matmul_interchange, "a")
    record = timing.campaign
    looks = [lk.n_pairs for lk in record.looks]
    assert (record.looks[-1].reason, record.stop) == ("faster", "decided")
    assert looks == list(range(5, looks[-1] + 1, 2)) and len(timing.samples["a"]) == looks[-1]
    # About 2x: the first look (the 5-pair minimum) decides when its pairs spread at most 10% (about
    # 100% of simulated 1.9x campaigns do, pw.stats.adaptive); a loaded host may need a block more.
    # (Not `pw start`'s CV: CI measured 3.5% there and then 22.5% per pair in this campaign.)
    import numpy as np

    first = np.log(np.array(timing.samples["baseline"][:5]) / np.array(timing.samples["a"][:5]))
    if float(np.std(first, ddof=1)) <= 0.10:
        assert looks == [5], (looks, first)
    # Within two blocks of the minimum while its pairs spread at most 25% (at 35%, about one 1.9x
    # campaign in eight needs more, and a 40%-spread CI host was seen); decided in any case.
    pairs = np.log(np.array(timing.samples["baseline"]) / np.array(timing.samples["a"]))
    if float(np.std(pairs, ddof=1)) <= 0.25:
        assert looks[-1] <= 9, (looks, pairs)
    evaluated = next(e.data for e in ledger_events(matmul_interchange) if isinstance(e.data, ev.CandidateEvaluated))
    assert evaluated.analysis["campaign"]["stop"] == "decided"
    # the reported interval is the anytime-valid one, never narrower than the fixed t-interval
    assert evaluated.analysis["interval"]["low"] <= evaluated.analysis["fixed_interval"]["low"]
    # the campaign stops on the mechanism too: at ~2x on an 85% hotspot, the hotspot's part was shown
    # to carry the saving at the same look the speedup decided
    assert record.rule == CAMPAIGN_RULE and record.looks[-1].mechanism == "carried", record.looks[-1]


@pytest.mark.slow
def test_audit_names_a_stop_that_no_longer_follows_from_a_tampered_sample(matmul_interchange, tmp_path):
    from ledger.store import Ledger

    run = copy_run(matmul_interchange, tmp_path)
    events = ledger_events(run)
    (run / "ledger.jsonl").unlink()
    forged = Ledger(run / "ledger.jsonl")
    for env in events:
        data = env.data
        if isinstance(data, ev.TimingRecorded) and "a" in data.targets:
            samples = dict(data.samples)
            samples["a"] = [samples["baseline"][0] * 1.5, *samples["a"][1:]]  # pair 1: the candidate slower
            data = msgspec.structs.replace(data, samples=samples)
        forged.append(data, expected_seq=env.seq - 1, actor=env.actor, cause=env.cause)

    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["chain"]["ok"] and not checks["stops"]["ok"]
    detail = checks["stops"]["detail"]
    assert "timing campaign of a no longer stops where it did: look" in detail, detail
    # what the look recorded and what the forged samples give now differ (its speedup or its mechanism)
    found = re.search(r"look (\d+) \(after \d+ pairs\) recorded (.+?), but the samples give (.+)$", detail)
    assert found and found.group(2) != found.group(3), detail
    assert result.json()["first_divergence"].startswith("stops:")


@pytest.mark.slow
def test_more_continues_an_inconclusive_campaign_in_the_same_seeded_order(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:an unread global").code == 0
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(SAME_SPEED_TINY_C)
    first = pw_main("evaluate", run, "a", "--max-pairs", "5", "--json")
    assert first.code == 1 and first.json()["status"] == "inconclusive", first
    # n_pairs counts the pairs judged; a tiny program's pairs may be set aside for unbalanced load
    assert first.json()["stop"] == "budget", first.json()
    assert first.json()["n_pairs"] + (first.json()["set_aside"] or 0) == 5, first.json()

    refused = pw_main("evaluate", run, "a")
    assert refused.code == 2 and "--more" in refused.err

    more = pw_main("evaluate", run, "a", "--more", "4", "--json")
    assert more.code in (0, 1), more
    parts = _timings(run, "a")
    assert len(parts) == 2
    (seq1, t1), (_, t2) = parts
    ran = len(t1.samples["a"]) + len(t2.samples["a"])
    assert ran in (7, 9), ran
    assert more.json()["n_pairs"] + (more.json()["set_aside"] or 0) == ran, more.json()
    assert t2.campaign.continues == seq1 and t2.seed == t1.seed
    from pw.stats import interleaved_order

    assert t1.order + t2.order == interleaved_order(ran, t1.seed)
    assert [lk.n_pairs for lk in t2.campaign.looks][0] == 7

    status = pw_main("status", run, "--json")
    assert status.code == 0
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
    from projections.state import fold

    assert fold(ledger_events(run)).candidates["a"].attempts == 1  # judged twice, still one attempt


WORKLOAD_PATCHES = Path(__file__).resolve().parent.parent / "workloads" / "matmul-c" / "candidates"


def _prepared(matmul_template, tmp_path, cid: str, patch: str) -> Path:
    from tests.conftest import apply_patch

    run = copy_run(matmul_template, tmp_path)
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{patch}").code == 0
    apply_patch(run / "candidates" / cid / "src", WORKLOAD_PATCHES / f"{patch}.patch")
    return run


def assert_same_image_is_not_timed(run: Path, cid: str, out: dict) -> None:
    """A bundled no-op (a renamed variable) loads the baseline's image: rejected as no effect on
    any host, without a campaign (gate rules 13; `pw evaluate` skips the timing)."""
    assert out["status"] == "rejected" and out["stop"] is None, out
    assert len(out["reasons"]) == 1 and out["reasons"][0].startswith("no-effect: the candidate builds to the same "
                                                                     "running image as baseline"), out
    assert out["gates"] and next(g for g in out["gates"] if g["name"] == "correctness")["passed"], out
    events = ledger_events(run)
    assert not [e for e in events if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets]
    assert not [e for e in events if isinstance(e.data, ev.ProfileCaptured) and e.data.target == cid]
    assert pw_main("audit", run).code == 0


@pytest.mark.slow
def test_the_bundled_noop_loads_the_baselines_image_and_is_rejected_untimed(matmul_template, tmp_path):
    run = _prepared(matmul_template, tmp_path, "n", "noop")
    out = pw_main("evaluate", run, "n", "--json")
    assert out.code == 1, out
    assert_same_image_is_not_timed(run, "n", out.json())




def test_the_next_line_after_a_spent_budget_never_suggests_more_than_one_more_continues_by():
    from pw.app.evaluate import MORE_CAP
    from pw.cli.loop import more_line

    assert more_line("RUN", "a", 17) == "next: pw evaluate RUN a --more 17   (the budget ran out undecided)"
    far = more_line("RUN", "a", 331)  # a PolyBench jacobi-2d step under load: the line once said --more 331
    assert far.startswith(f"next: pw evaluate RUN a --more {MORE_CAP} ") and "about 331 more pairs" in far
    assert more_line("RUN", "a", None).startswith("next: pw evaluate RUN a --more ")


@pytest.mark.slow
def test_more_with_more_pairs_than_a_call_runs_continues_by_the_cap_and_says_so(tiny_budget_run, tmp_path):
    """A verdict's reason may suggest more pairs than one `--more` runs; following it runs the cap and
    says so (a PolyBench step's `--more 331` once raised the budget by 331)."""
    from pw.app.evaluate import MORE_CAP

    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:an unread global").code == 0
    (run / "candidates" / "a" / "src" / "tiny.c").write_text(SAME_SPEED_TINY_C)
    first = pw_main("evaluate", run, "a", "--max-pairs", "5", "--json")
    assert first.code == 1 and first.json()["stop"] == "budget", first
    more = pw_main("evaluate", run, "a", "--more", "331", "--json")
    assert more.code in (0, 1), more
    assert more.json()["notes"] == [f"--more 331: continued by {MORE_CAP} pairs, the most one call runs; run it "
                                    "again for more"], more.json()
    (_, t1), (_, t2) = _timings(run, "a")
    assert t2.campaign.max_pairs == len(t1.samples["a"]) + MORE_CAP, t2.campaign
