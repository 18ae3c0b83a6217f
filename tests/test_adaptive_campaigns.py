"""Adaptive campaigns in the product (issue 16): pw evaluate stops by the sequential rule, "no effect"
is a verdict, --more continues a campaign, and pw audit replays every stop."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from pw.rules.resolution import min_runs_for
from pw.rules.verdict import reach_verdict
from tests.conftest import (
    SAME_SPEED_TINY_C,
    copy_run,
    ledger_events,
    pair_log_sd,
    pw_main,
    skip_if_machine_changed,
    skip_if_profiles_too_noisy,
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
    # ~2x on an 85% hotspot: one profiled run per side already resolves the saving's samples; a
    # campaign whose runs spread more than 5% profiles each side its floor of runs (rule 3), one at a time.
    sized = _resolution(matmul_interchange, "a")
    assert sized.stop == "resolved" and sized.looks[0].band <= 0.5 * (sized.speedup - 1), sized
    assert sized.min_runs == min_runs_for(sized.spread, sized.max_runs), sized
    runs = [(lk.runs_before, lk.runs_after) for lk in sized.looks]
    assert runs[-1] == (sized.min_runs, sized.min_runs) and len(runs) == 2 * sized.min_runs - 1, sized
    if sized.spread <= 0.05:
        assert runs == [(1, 1)], sized


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
    assert "recorded faster, but the samples give continue" in detail, detail
    assert result.json()["first_divergence"].startswith("stops:")


@pytest.mark.slow
def test_audit_replays_how_the_reprofile_was_sized_and_names_a_forged_look(matmul_interchange, tmp_path):
    from ledger.store import Ledger

    run = copy_run(matmul_interchange, tmp_path)
    events = ledger_events(run)
    (run / "ledger.jsonl").unlink()
    forged = Ledger(run / "ledger.jsonl")
    for env in events:
        data = env.data
        if isinstance(data, ev.ReprofileResolved) and data.target == "a":
            # "the budget stopped it", where the rule says its last look resolved it
            data = msgspec.structs.replace(data, looks=[*data.looks[:-1], msgspec.structs.replace(
                data.looks[-1], decision="budget")], stop="budget")
        forged.append(data, expected_seq=env.seq - 1, actor=env.actor, cause=env.cause)

    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["chain"]["ok"] and checks["profiles"]["ok"] and not checks["resolutions"]["ok"]
    detail = checks["resolutions"]["detail"]
    assert "the reprofile of a no longer stops where it did: look " in detail, detail
    assert "recorded budget, but the rule gives resolved" in detail, detail


@pytest.mark.slow
def test_more_continues_an_inconclusive_campaign_in_the_same_seeded_order(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:an unread global").code == 0
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(SAME_SPEED_TINY_C)
    first = pw_main("evaluate", run, "a", "--max-pairs", "5", "--json")
    assert first.code == 1 and first.json()["status"] == "inconclusive", first
    assert first.json()["stop"] == "budget" and first.json()["n_pairs"] == 5

    refused = pw_main("evaluate", run, "a")
    assert refused.code == 2 and "--more" in refused.err

    more = pw_main("evaluate", run, "a", "--more", "4", "--json")
    assert more.code in (0, 1), more
    assert more.json()["n_pairs"] in (7, 9)
    parts = _timings(run, "a")
    assert len(parts) == 2
    (seq1, t1), (_, t2) = parts
    assert t2.campaign.continues == seq1 and t2.seed == t1.seed
    assert len(t2.samples["a"]) == more.json()["n_pairs"] - 5
    from pw.stats import interleaved_order

    assert t1.order + t2.order == interleaved_order(more.json()["n_pairs"], t1.seed)
    assert [lk.n_pairs for lk in t2.campaign.looks][0] == 7

    status = pw_main("status", run, "--json")
    assert status.code == 0
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
    from projections.state import fold

    assert fold(ledger_events(run)).candidates["a"].attempts == 1  # judged twice, still one attempt


WORKLOAD_PATCHES = Path(__file__).resolve().parent.parent / "workloads" / "matmul-c" / "candidates"


def _judged_with_more(run: Path, cid: str, rounds: int = 2) -> dict:
    """`pw evaluate`, then `--more` as its line suggests while it stays inconclusive (at most `rounds`)."""
    result = pw_main("evaluate", run, cid, "--json")
    assert result.code in (0, 1), result
    out = result.json()
    for _ in range(rounds):
        if out["status"] != "inconclusive" or not out["more_pairs"] or out["more_pairs"] > 80:
            break
        result = pw_main("evaluate", run, cid, "--more", out["more_pairs"], "--json")
        assert result.code in (0, 1), result
        out = result.json()
    return out


def _prepared(matmul_template, tmp_path, cid: str, patch: str) -> Path:
    from tests.conftest import apply_patch

    run = copy_run(matmul_template, tmp_path)
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{patch}").code == 0
    apply_patch(run / "candidates" / cid / "src", WORKLOAD_PATCHES / f"{patch}.patch")
    return run


def _baseline_cv(run: Path) -> float:
    """The run's own baseline-variance timing: SD of log run time (what `pw start` measured)."""
    import numpy as np

    base = next(e.data for e in ledger_events(run)
                if isinstance(e.data, ev.TimingRecorded) and e.data.purpose == "baseline-variance")
    return float(np.std(np.log(base.samples["baseline"]), ddof=1))


def _quiet_enough(run: Path, cv_max: float = 0.03, claim: str = "±2%") -> None:
    """Skip, saying why, when the run's own baseline-variance timing shows a host too noisy for a
    ±2% claim within the default budget (at 3% CV, ±2% equivalence takes about 40 pairs)."""
    cv = _baseline_cv(run)
    if cv > cv_max:
        pytest.skip(f"this host's baseline wall-time CV is {cv:.1%} (> {cv_max:.0%}): too noisy to show {claim}")


def _small_on_this_cpu(out: dict, upper: float) -> None:
    """Skip, saying why, when this CPU makes a "small" candidate's real effect large. The product's
    claims (verified, decided, resolved, audited) are asserted before this is called; what a partial
    rewrite saves depends on the core (a CI host measured series-c's table-tenth at 1.31x, 95% CI
    1.23-1.41, where the device's Xeon and this VM measure 1.07x), so "about 5%" is the host's to
    give, not pw's to get right."""
    if out["speedup"] >= upper:
        pytest.skip(f"this CPU ({_cpu_model()}) gives the small candidate a {out['speedup']:.3f}x effect "
                    f"(>= {upper}x): verified as it should be, but not the small effect this test is about")


def _cpu_model() -> str:
    """The CPU's model name and numbers, for skip lines that say which host gave which effect (a
    VM's model name can be as bare as "Intel(R) Xeon(R) Processor")."""
    fields: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if not line.strip():
            break  # the first processor is enough
        fields.setdefault(key.strip(), value.strip())
    return (f"{fields.get('model name', 'unknown CPU')}, family {fields.get('cpu family', '?')} "
            f"model {fields.get('model', '?')}")


def another_image(run: Path, cid: str, source: str) -> None:
    """Make the candidate's no-op load another image at the same speed: an unread global in
    `source` (the bundled no-ops rename a variable, which loads the baseline's own image and is not
    timed at all; the ±2% claim needs a campaign)."""
    path = run / "candidates" / cid / "src" / source
    path.write_text(path.read_text() + "\nint pw_test_unread_marker = 1;\n")


def assert_noop_is_no_effect(run: Path, cid: str, out: dict) -> None:
    """A no-op whose image differs from the baseline's (``another_image``) at the same speed: on a
    quiet host its campaign shows no effect within ±2% in the 40 pairs it gets (a rejected campaign
    is not continued with --more). The interval at n = 40 is about ±0.55 per-pair SDs: ±2% needs
    the SD well below 3.6%."""
    assert not any("same running image" in r for r in out["reasons"]), out  # the campaign decides here
    if out["stop"] != "margin":
        _campaign_quiet_enough(run, cid, out, sd_max=0.03, any_outcome=True)
    assert out["status"] == "rejected", out
    assert out["stop"] == "margin", out
    assert out["reasons"][0].startswith("no-effect: speedup within ±2%"), out["reasons"]


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


def _campaign_quiet_enough(run: Path, cid: str, out: dict, sd_max: float = 0.03 * 2 ** 0.5, *,
                           any_outcome: bool = False) -> None:
    """Skip, saying why, when the campaign itself ran noisier than a ±2% claim allows (the host's
    load changed after `pw start` measured it): the SD of the campaign's per-pair log ratios, which
    is sqrt(2) times the run-to-run CV for independent arms. Only an inconclusive or budget-spent
    campaign is skipped, unless `any_outcome` (a no-op that a noise streak timed faster or slower)."""
    if not any_outcome and out["status"] != "inconclusive" and out.get("stop") != "budget":
        return
    sd = pair_log_sd(run, cid)
    if sd > sd_max:
        pytest.skip(f"the campaign's per-pair log-ratio SD was {sd:.1%} (> {sd_max:.1%}): the host got too "
                    f"noisy for ±2% after pw start ({out['status']} after {out.get('n_pairs')} pairs)")


@pytest.mark.slow
def test_the_bundled_noop_loads_the_baselines_image_and_is_rejected_untimed(matmul_template, tmp_path):
    run = _prepared(matmul_template, tmp_path, "n", "noop")
    out = pw_main("evaluate", run, "n", "--json")
    assert out.code == 1, out
    assert_same_image_is_not_timed(run, "n", out.json())


@pytest.mark.slow
def test_a_noop_with_its_own_image_is_no_effect_not_inconclusive(matmul_template, tmp_path):
    """Needs a host whose wall-time noise lets ±2% be shown within the budget (about 2% CV)."""
    run = _prepared(matmul_template, tmp_path, "n", "noop")
    another_image(run, "n", "matmul.c")
    _quiet_enough(run)
    out = _judged_with_more(run, "n")
    assert_noop_is_no_effect(run, "n", out)
    sized = _resolution(run, "n")  # no saving, no extra profiled runs
    assert sized.stop == "not-needed" and not sized.looks and len(sized.after_parts) == 1, sized


@pytest.mark.slow
def test_a_small_real_effect_is_verified_without_touching_sampling_pairs(matmul_template, tmp_path):
    """two-sums-quarter.patch (about 5% faster in the hotspot), with the workload's own manifest."""
    run = _prepared(matmul_template, tmp_path, "q", "two-sums-quarter")
    _quiet_enough(run)
    started = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.RunStarted))
    assert started.contract.sampling.pairs == 5
    out = _judged_with_more(run, "q")
    _campaign_quiet_enough(run, "q", out)
    skip_if_machine_changed(out)
    assert out["stop"] == "decided", out  # the statistics decided, within the default budget
    skip_if_profiles_too_noisy(run, "q")
    assert out["status"] == "verified", out
    assert out["speedup"] > 1.02, out
    # The reprofile grew until the share band resolved the saving (one run of each side was not
    # enough at ~350-650 samples), and the gate's band is over the summed samples.
    sized = _resolution(run, "q")
    last = sized.looks[-1]
    assert sized.stop == "resolved" and last.band <= 0.5 * (sized.speedup - 1), sized
    assert len(sized.after_parts) == last.runs_after, sized
    small = out["speedup"] < 1.12
    if small:  # a ~5% effect takes more than the minimum, in pairs and in profiled runs
        assert out["n_pairs"] > 5 and last.runs_before + last.runs_after > 2, (out, sized)
    gated = [e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == "q"][-1]
    ops = gated.inputs["profile_diff"]["operations"]
    assert (sum(o["samples_before"] for o in ops), sum(o["samples_after"] for o in ops)) == \
        (last.samples_before, last.samples_after)
    merged = [e.data for e in ledger_events(run) if isinstance(e.data, ev.ProfileNormalized) and e.data.parts]
    assert {m.target for m in merged} <= {"baseline", "q"}, merged
    if last.runs_before + last.runs_after > 2:  # one run a side merges nothing
        assert merged, sized
    audit = pw_main("audit", run, "--json")
    assert audit.code == 0, audit
    assert {c["name"]: c["ok"] for c in audit.json()["checks"]}["resolutions"] is True
    _small_on_this_cpu(out, 1.12)


def _resolution(run: Path, cid: str) -> ev.ReprofileResolved:
    """The last sizing of `cid`'s reprofile."""
    return [e.data for e in ledger_events(run) if isinstance(e.data, ev.ReprofileResolved) and e.data.target == cid][-1]
