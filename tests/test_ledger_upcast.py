"""Old ledgers keep decoding: the checked-in v0 and v1 fixtures replay through their upcasters.

`tests/data/ledger-v0/ledger.jsonl` was written once, by hand, with `ledger.codec.seal` on
envelopes whose Note payloads are version 0 (`{"message": ...}`); it must never be regenerated.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from ledger.codec import decode_payload
from ledger.errors import LedgerCorrupt
from ledger.store import Ledger
from ledger.upcast import upcast
from projections.state import fold

FIXTURE = Path(__file__).parent / "data" / "ledger-v0"
PW = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "pw"


def test_fixture_is_still_written_in_the_old_version():
    lines = (FIXTURE / "ledger.jsonl").read_bytes().splitlines()
    raw = [msgspec.json.decode(line) for line in lines]
    assert [(r["type"], r["v"]) for r in raw] == [("Note", 0), ("Note", 0), ("Note", 1)]
    assert "message" in raw[0]["data"] and "text" not in raw[0]["data"]


def test_v0_notes_read_back_as_current_notes():
    ledger = Ledger(FIXTURE / "ledger.jsonl")
    assert ledger.verify().ok
    events = ledger.events()
    assert [e.data for e in events] == [
        ev.Note(text="first note, written before the field was renamed"),
        ev.Note(text="ünïcödé survives the upcast — ✓"),
        ev.Note(text="a current-version note after the old ones"),
    ]
    assert [e.v for e in events] == [0, 0, 1]  # the envelope keeps the version it was written in


def test_upcaster_is_pure():
    data = {"message": "m", "extra": 1}
    assert upcast("Note", 0, 1, data) == {"text": "m", "extra": 1}
    assert data == {"message": "m", "extra": 1}
    assert decode_payload("Note", 0, {"message": "m"}) == ev.Note(text="m")


def test_pw_log_reads_the_v0_fixture(tmp_path: Path):
    run = tmp_path / "ledger-v0"
    shutil.copytree(FIXTURE, run)  # never let a verb touch the checked-in fixture
    proc = subprocess.run([str(PW), "log", str(run), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [msgspec.json.decode(line) for line in proc.stdout.splitlines()]
    assert [r["data"] for r in rows] == [
        {"text": "first note, written before the field was renamed"},
        {"text": "ünïcödé survives the upcast — ✓"},
        {"text": "a current-version note after the old ones"},
    ]
    table = subprocess.run([str(PW), "log", str(run)], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "Note v0" in table.stdout and "text=first note" in table.stdout
    assert sorted(p.name for p in run.iterdir()) == ["ledger.jsonl"]


# --- VerdictReached v1 -> v2: `repairable` from the reasons' prefixes ------------------------------
#
# `tests/data/ledger-verdict-v1/ledger.jsonl` was written once, with `ledger.codec.seal`, from
# payload dicts in the v1 shape (no `repairable`), with one v2 verdict at the end; never regenerate it.

VERDICT_FIXTURE = Path(__file__).parent / "data" / "ledger-verdict-v1"


def _v1_verdict(status: str, *reasons: str) -> dict:
    return {"id": "a", "attempt": 1, "status": status, "reasons": list(reasons), "speedup": None, "interval": None}


def test_verdict_fixture_is_still_written_in_the_old_version():
    raw = [msgspec.json.decode(line) for line in (VERDICT_FIXTURE / "ledger.jsonl").read_bytes().splitlines()]
    verdicts = [r for r in raw if r["type"] == "VerdictReached"]
    assert [r["v"] for r in verdicts] == [1] * 7 + [2]
    assert not any("repairable" in r["data"] for r in verdicts[:-1])


def test_v1_verdicts_read_back_with_repairable_from_their_reasons():
    ledger = Ledger(VERDICT_FIXTURE / "ledger.jsonl")
    assert ledger.verify().ok
    verdicts = [e.data for e in ledger.events() if isinstance(e.data, ev.VerdictReached)]
    assert [(v.id, v.attempt, v.status, v.repairable) for v in verdicts] == [
        ("a", 1, "rejected", True),  # build-failed
        ("a", 2, "rejected", True),  # oracle-failed
        ("a", 3, "rejected", False),  # slower
        ("b", 1, "rejected", True),  # crashed in a timed run
        ("b", 2, "proposed", False),
        ("c", 1, "rejected", True),  # edit-refused and build-failed
        ("c", 2, "rejected", False),  # no-effect
        ("d", 1, "verified", False),  # written as v2
    ]
    assert verdicts[2].speedup == 0.7 and verdicts[2].interval == [0.65, 0.75]


def test_v1_verdicts_spend_repairs_as_they_did():
    candidates = fold(Ledger(VERDICT_FIXTURE / "ledger.jsonl").events()).candidates
    assert {cid: c.failed_attempts for cid, c in candidates.items()} == {"a": 2, "b": 1, "c": 1, "d": 0}
    assert not candidates["a"].verdict.repairable and not candidates["b"].verdict.repairable


def test_verdict_upcaster_is_pure_and_flags_repairable_rejections():
    for prefix in ("build-failed", "oracle-failed", "crashed", "timeout", "launch-failed", "edit-refused"):
        data = _v1_verdict("rejected", f"{prefix}: detail")
        assert upcast("VerdictReached", 1, 2, data) == {**data, "repairable": True}
        assert "repairable" not in data
    for reason in ("slower: speedup 0.9x", "no-effect: speedup 1x", "nondeterministic-output: differs"):
        assert upcast("VerdictReached", 1, 2, _v1_verdict("rejected", reason))["repairable"] is False
    # Only a rejection is repairable, whatever its reasons say.
    assert upcast("VerdictReached", 1, 2, _v1_verdict("proposed", "crashed: but proposed"))["repairable"] is False
    assert decode_payload("VerdictReached", 1, _v1_verdict("rejected", "timeout: pair 1")).repairable is True
    assert decode_payload("VerdictReached", 1, _v1_verdict("rejected", "slower: 0.8x")).repairable is False


def test_malformed_v1_verdict_is_reported_not_crashed_on():
    for bad in ({"id": "a", "attempt": 1, "status": "rejected", "reasons": 5, "speedup": None, "interval": None},
                {"id": "a", "attempt": 1, "status": "rejected", "reasons": [5], "speedup": None, "interval": None},
                {"status": "rejected"}):
        with pytest.raises(LedgerCorrupt, match="VerdictReached payload invalid"):
            decode_payload("VerdictReached", 1, bad, seq=3)
    # A v2 payload must say it: the field has no default.
    with pytest.raises(LedgerCorrupt, match="repairable"):
        decode_payload("VerdictReached", 2, _v1_verdict("rejected", "slower: 0.8x"))


# --- HotspotSelected v1 -> v2: the share of the host's span a device-time ceiling was taken from ---

def _v1_hotspot(metric: str, share: float, ceiling: float | None) -> dict:
    return {"operation": "k@[gpu]", "name": "k", "file": None, "line_start": None, "line_end": None,
            "metric": metric, "share": share, "amdahl_ceiling": ceiling}


def test_v1_device_hotspot_reads_back_with_the_span_share_its_ceiling_was_taken_from():
    # A kernel at 56% of device time but 20% of the host's span: ceiling 1 / (1 - 0.2) = 1.25.
    data = _v1_hotspot("gpu_time_ns", 0.56, 1.25)
    assert upcast("HotspotSelected", 1, 2, data) == {**data, "span_share": 0.2}
    assert "span_share" not in data  # pure
    assert decode_payload("HotspotSelected", 1, data).span_share == pytest.approx(0.2)


def test_v1_hotspot_claims_no_span_share_where_none_was_recorded():
    # CPU time: the ceiling is the share's own.
    assert upcast("HotspotSelected", 1, 2, _v1_hotspot("cpu_time_s", 0.8, 5.0))["span_share"] is None
    # Device time, but the ceiling is the device share's (the profile had no host span): no span claimed.
    assert upcast("HotspotSelected", 1, 2, _v1_hotspot("gpu_time_ns", 0.8, 5.0))["span_share"] is None
    # No finite ceiling: nothing to take it from.
    assert upcast("HotspotSelected", 1, 2, _v1_hotspot("gpu_time_ns", 1.0, None))["span_share"] is None
    with pytest.raises(LedgerCorrupt, match="HotspotSelected payload invalid"):
        decode_payload("HotspotSelected", 1, {**_v1_hotspot("gpu_time_ns", 0.5, 1.25), "share": "x"}, seq=2)
