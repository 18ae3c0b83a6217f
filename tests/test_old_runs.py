"""Runs recorded by an older ProfileWeaver still audit clean after an upgrade.

`tests/data/run-gates-v1-pyloop/` is a real run (ledger and raw evidence only), recorded once by the
ProfileWeaver of commit 5d5bb1f on workloads/pyloop with candidate `dict`: its events are the old
versions (TimingRecorded v1 with string conditions, ProfileCaptured v1 without adapter facts) and
its gates were evaluated under gate rules v1. It must never be regenerated.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.store import Ledger
from tests.conftest import pw_main

FIXTURE = Path(__file__).parent / "data" / "run-gates-v1-pyloop"


def test_fixture_is_still_written_in_the_old_versions():
    raw = [msgspec.json.decode(line) for line in (FIXTURE / "ledger.jsonl").read_bytes().splitlines()]
    versions = {(r["type"], r["v"]) for r in raw}
    assert ("TimingRecorded", 1) in versions and ("ProfileCaptured", 1) in versions
    gates = [r["data"] for r in raw if r["type"] == "GatesEvaluated"]
    assert gates and all("rules" not in g for g in gates)  # before rules were recorded: v1


def test_old_events_read_back_typed():
    events = Ledger(FIXTURE / "ledger.jsonl").events()
    timings = [e.data for e in events if isinstance(e.data, ev.TimingRecorded)]
    campaign = next(t for t in timings if t.purpose != "baseline-variance")
    assert campaign.conditions.argv == ["python3", "main.py", "20000", "1500", "1"]
    assert set(campaign.conditions.arms) == {"baseline", "dict"}
    assert campaign.conditions.arms["dict"].binary_before  # v1's candidate_binary_before
    assert campaign.conditions.arms["dict"].inputs_sha256 is None  # v1 never hashed the inputs
    assert "py-spy" in campaign.conditions.tool_versions
    assert all(e.data.can_reprofile for e in events if isinstance(e.data, ev.ProfileCaptured))
    assert [e.data.rules for e in events if isinstance(e.data, ev.GatesEvaluated)] == [1]


def test_an_old_run_rebuilds_and_audits_clean(tmp_path):
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    assert pw_main("rebuild", run).code == 0
    audit = pw_main("audit", run, "--json")
    assert audit.code == 0, audit
    assert {c["name"]: c["ok"] for c in audit.json()["checks"]}["verdicts"] is True
