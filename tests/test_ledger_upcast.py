"""Old ledgers keep decoding: the checked-in v0 fixture replays through its upcaster.

`tests/data/ledger-v0/ledger.jsonl` was written once, by hand, with `ledger.codec.seal` on
envelopes whose Note payloads are version 0 (`{"message": ...}`); it must never be regenerated.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.codec import decode_payload
from ledger.store import Ledger
from ledger.upcast import upcast

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
