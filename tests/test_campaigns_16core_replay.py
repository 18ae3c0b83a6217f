"""CI replay of issue 16's campaigns recorded on the device machine's 16 CPU cores
(tests/data/campaigns-16core/, made by tests/data/cpu-campaign-device.sh in one device call; two
`pw start` runs of workloads/series-c, each judging three candidates with the workload's own
manifest, `sampling.pairs` 5):

- table-tenth.patch, a real 7% effect, verified: the sequential test kept adding pairs until it
  decided (11 and 35 pairs), and the reprofile resolved the saving;
- table.patch, about 1.8x, stops at the first look (the 5-pair minimum);
- noop.patch, on a host whose baseline CV was 4-12%, is inconclusive after the 40-pair budget with
  how many more pairs would decide: the honest answer there (±2% needs a quieter host).

CI re-derives every stop, reprofile sizing and verdict (`pw audit`, on another machine: another
numpy and libm) and checks a tampered sample is named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from pw.app.audit import same_numbers
from tests.conftest import ledger_events, pw_main, reforge_ledger, unpack

DATA = Path(__file__).parent / "data" / "campaigns-16core"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[Path]:
    """The two recorded run directories, unpacked (read-only evidence: tests copy before editing)."""
    root = unpack(DATA / "runs.tgz", tmp_path_factory.mktemp("campaigns-16core"))
    runs = sorted((root / "pwruns").glob("2026*-series-c"))
    assert len(runs) == 2, runs
    return runs


def _of(run: Path, kind: type, cid: str) -> list:
    return [e.data for e in ledger_events(run) if isinstance(e.data, kind)
            and cid in (getattr(e.data, "targets", None) or [getattr(e.data, "id", None) or getattr(e.data, "target", None)])]


@pytest.mark.parametrize("which", [0, 1])
def test_the_recorded_campaigns_audit_clean_on_another_machine(recorded, which):
    result = pw_main("audit", recorded[which], "--json")
    assert result.code == 0, result
    checks = {c["name"]: c["ok"] for c in result.json()["checks"]}
    assert checks["stops"] and checks["resolutions"] and checks["verdicts"], checks


@pytest.mark.parametrize("which", [0, 1])
def test_a_small_real_effect_was_verified_by_adding_pairs_not_by_touching_sampling_pairs(recorded, which):
    run = recorded[which]
    started = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.RunStarted))
    assert started.contract.sampling.pairs == 5 and started.contract.name == "series-c"
    (timing,) = _of(run, ev.TimingRecorded, "q")
    looks = [lk.n_pairs for lk in timing.campaign.looks]
    assert timing.campaign.stop == "decided" and timing.campaign.looks[-1].reason == "faster", timing.campaign
    assert looks[0] == 5 and looks[-1] > 5 and len(timing.samples["q"]) == looks[-1], looks
    verdict = _of(run, ev.VerdictReached, "q")[-1]
    assert verdict.status == "verified" and 1.02 < verdict.speedup < 1.15 and verdict.interval[0] > 1.01, verdict
    gates = _of(run, ev.GatesEvaluated, "q")[-1]
    assert gates.rules == 7 and all(g.passed for g in gates.gates), gates.gates
    sized = _of(run, ev.ReprofileResolved, "q")[-1]
    assert sized.stop == "resolved" and sized.looks[-1].band <= 0.5 * (sized.speedup - 1), sized


@pytest.mark.parametrize("which", [0, 1])
def test_a_large_effect_stops_at_the_minimum(recorded, which):
    (timing,) = _of(recorded[which], ev.TimingRecorded, "a")
    assert [(lk.n_pairs, lk.reason) for lk in timing.campaign.looks] == [(5, "faster")], timing.campaign
    assert _of(recorded[which], ev.VerdictReached, "a")[-1].status == "verified"


def test_the_noop_on_a_noisy_host_spends_its_budget_and_says_how_many_more_pairs_would_decide(recorded):
    answer = json.loads((DATA / "evaluate-n.json").read_text())
    verdict = _of(recorded[1], ev.VerdictReached, "n")[-1]
    assert answer["status"] == verdict.status == "inconclusive" and answer["stop"] == "budget"
    assert answer["n_pairs"] == 40 and answer["more_pairs"] > 40, answer
    assert verdict.interval[0] < 0.98 and verdict.interval[1] > 1.02  # ±2% not shown: not "no effect"
    assert f"about {answer['more_pairs']} more pairs at the current variance would decide" in verdict.reasons[0]


def test_audit_names_a_tampered_sample_of_the_small_effects_campaign(recorded, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(recorded[0], run)

    def faster_first_look(data):
        if isinstance(data, ev.TimingRecorded) and "q" in data.targets:
            samples = dict(data.samples)
            samples["q"] = [x * 0.8 for x in samples["q"][:5]] + list(samples["q"][5:])
            return msgspec.structs.replace(data, samples=samples)
        return data

    reforge_ledger(run, faster_first_look)
    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["chain"]["ok"] and not checks["stops"]["ok"], checks
    assert "timing campaign of q no longer stops where it did: look 1" in checks["stops"]["detail"], checks["stops"]


def test_an_analysis_recomputed_elsewhere_may_differ_in_the_last_bit_but_not_more():
    recorded = {"interval": {"low": 0.9585920655113694}, "order": ["AB", "BA"], "n": 40, "ok": True}
    assert same_numbers(recorded, {"interval": {"low": 0.9585920655113696}, "order": ("AB", "BA"), "n": 40, "ok": True})
    assert not same_numbers(recorded, {"interval": {"low": 0.95859207}, "order": ("AB", "BA"), "n": 40, "ok": True})
    assert not same_numbers(recorded, {"interval": {"low": 0.9585920655113694}, "order": ("BA", "AB"), "n": 40,
                                       "ok": True})
    assert not same_numbers(recorded, {**recorded, "extra": 1})
    assert not same_numbers({"x": None}, {"x": 0.0}) and not same_numbers({"x": True}, {"x": 1.0})


def test_the_recorded_campaigns_keep_their_rule_and_an_unknown_rule_is_named(recorded, tmp_path):
    """The device campaigns were recorded under pw.campaign/1 (the running intersection) and are
    replayed under it; a campaign that names a rule this ProfileWeaver does not know fails the
    audit's stop check with the rule and the known ones, not with a traceback."""
    import msgspec

    from pw.stats.adaptive import CAMPAIGN_RULE, CAMPAIGN_RULES
    from tests.conftest import copy_run
    from tests.test_candidates_loop import _rerecord

    run = copy_run(recorded[0], tmp_path)
    rules = {e.data.campaign.rule for e in ledger_events(run)
             if isinstance(e.data, ev.TimingRecorded) and e.data.campaign is not None}
    assert rules == {"pw.campaign/1"} and CAMPAIGN_RULE == "pw.campaign/5" and set(CAMPAIGN_RULES) == {
        "pw.campaign/1", "pw.campaign/2", "pw.campaign/3", "pw.campaign/4", "pw.campaign/5"}

    def unknown(data):
        if isinstance(data, ev.TimingRecorded) and data.campaign is not None:
            return msgspec.structs.replace(data, campaign=msgspec.structs.replace(data.campaign, rule="pw.campaign/9"))
        return data

    _rerecord(run, unknown)
    result = pw_main("audit", run)
    assert result.code == 1, result
    assert "campaign rule 'pw.campaign/9' is not one this ProfileWeaver knows (pw.campaign/1, pw.campaign/2, pw.campaign/3, pw.campaign/4, pw.campaign/5)" in \
        result.out, result.out
    assert "Traceback" not in result.out + result.err
