"""The store's contract in small cases: refusing unreadable events, telling damage from newer
data, and the block-wise fast path agreeing with the line-by-line one."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ledger import codec, store
from ledger import events as ev
from ledger.errors import InputError, LedgerCorrupt
from ledger.events import Envelope
from ledger.store import Ledger
from tests.conftest import FIXED_AT, deterministic_ledger, make_contract, make_run_started


def _timing(xs) -> ev.TimingRecorded:
    return ev.TimingRecorded(
        purpose="screening", targets=["baseline"], metric="wall", unit="s", samples={"baseline": xs},
        order=["AB"], seed=1, exploratory=False, conditions=ev.TimingConditions(host="h", argv=["./a"]),
    )


@pytest.mark.parametrize(
    "payload",
    [
        _timing([1.0, float("nan")]),  # msgspec writes NaN as null, which no float field accepts
        _timing([float("inf")]),
        make_run_started(contract=make_contract(name="")),  # below the contract's min_length
        ev.Note(text=None),  # type: ignore[arg-type]
    ],
    ids=["nan", "inf", "constraint", "wrong-type"],
)
def test_an_event_that_would_not_read_back_is_refused_and_nothing_written(run_dir: Path, payload):
    path = run_dir / "ledger.jsonl"
    before = path.read_bytes()
    ledger = Ledger(path)
    with pytest.raises(InputError, match="not appended"):
        ledger.append([ev.Note(text="fine"), payload], expected_seq=2)
    assert path.read_bytes() == before
    assert ledger.append(ev.Note(text="still usable"), expected_seq=2)[0].seq == 3
    assert Ledger(path).verify().ok


def test_appended_envelopes_are_what_a_reader_gets(run_dir: Path):
    ledger = Ledger(run_dir / "ledger.jsonl")
    got = ledger.append([_timing([1.0, 2.5e-7]), ev.Note(text="ü\n\u2028")], expected_seq=2, cause="c", key="k")
    assert got == Ledger(ledger.path).events()[2:]
    assert [e.batch for e in got] == [1, 0]


def test_empty_ledger_does_not_verify(tmp_path: Path):
    (tmp_path / "ledger.jsonl").write_bytes(b"")
    verified = Ledger(tmp_path / "ledger.jsonl").verify()
    assert not verified.ok and "empty" in verified.message


def _append_raw(path: Path, **fields) -> None:
    head = Ledger(path).head()
    env = dict(seq=head.seq + 1, id="f" * 32, type="Note", v=1, at=FIXED_AT, actor="cli", cause=None, key=None,
               batch=0, data={"text": "raw"}, prev=head.hash)
    env.update(fields)
    with open(path, "ab") as f:
        f.write(codec.seal(Envelope(**env)))


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"v": 99}, "newer than this ProfileWeaver"),
        ({"type": "FromTheFuture"}, "unknown event type"),
        ({"prev": "0" * 64}, "does not chain"),
        ({"seq": 7}, "has seq 7"),
    ],
)
def test_a_whole_last_line_that_does_not_fit_is_corrupt_not_torn(run_dir: Path, fields, words):
    """Repair must never quarantine an intact event: only damage can be a torn tail."""
    path = run_dir / "ledger.jsonl"
    _append_raw(path, **fields)
    before = path.read_bytes()
    verified = Ledger(path).verify()
    assert not verified.ok and verified.torn_offset is None
    assert verified.first_bad_seq == 3 and words in verified.message
    with pytest.raises(LedgerCorrupt, match=words):
        Ledger(path).repair()
    assert path.read_bytes() == before
    assert sorted(p.name for p in run_dir.iterdir()) == ["ledger.jsonl"]


def test_event_ids_are_uuid4():
    ids = {store.new_event_id() for _ in range(1000)}
    assert len(ids) == 1000
    for value in list(ids)[:50]:
        assert uuid.UUID(hex=value).version == 4 and len(value) == 32


# --- fast path == careful path -------------------------------------------------------------------


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of a few hundred bytes, so every boundary case of the block-wise scan and read is hit."""
    monkeypatch.setattr(store, "_BLOCK", 700)


def _mixed_ledger(path: Path) -> list:
    ledger = deterministic_ledger(path)
    ledger.append(make_run_started(), expected_seq=0)
    seq = 1
    for i in range(30):
        batch = [ev.Note(text=f"n{i}-{j} " + "é" * (i % 5)) for j in range(i % 4 + 1)]
        if i % 3 == 0:
            batch.append(_timing([float(k) for k in range(i % 7 + 1)]))
        seq = ledger.append(batch, expected_seq=seq, key=f"k{i}" if i % 2 else None)[-1].seq
    return [codec.decode_envelope(line) for line in path.read_bytes().splitlines()]


def test_block_scan_and_read_agree_with_line_by_line(tmp_path: Path, tiny_blocks):
    path = tmp_path / "ledger.jsonl"
    expected = _mixed_ledger(path)
    fresh = Ledger(path)
    assert fresh.verify().ok
    assert fresh.events() == expected == Ledger(path).events()
    assert Ledger(path).events(until=17) == expected[:17]
    # Idempotency keys found by the block scan, across block boundaries.
    first_keyed = next(e for e in expected if e.key == "k5")
    again = Ledger(path).append(ev.Note(text="ignored"), expected_seq=None, key="k5")
    assert again[0] == first_keyed and again == [e for e in expected if e.key == "k5"]
    assert Ledger(path).head().seq == expected[-1].seq


def test_a_reader_joins_events_it_verified_before_with_ones_appended_since(tmp_path: Path, tiny_blocks):
    """`events` decodes the already-verified prefix apart from the new tail, which it verifies and
    decodes in one parse; the joined list must be exactly the file, in order."""
    path = tmp_path / "ledger.jsonl"
    before = _mixed_ledger(path)
    reader = Ledger(path)
    assert reader.events() == before
    Ledger(path).append([ev.Note(text=f"later {i}") for i in range(5)], expected_seq=before[-1].seq)
    after = [codec.decode_envelope(line) for line in path.read_bytes().splitlines()]
    assert len(after) == len(before) + 5
    assert reader.events() == after
    assert reader.events(until=len(before) + 2) == after[: len(before) + 2]
    assert reader.events(until=0) == []


def test_block_scan_finds_damage_where_line_by_line_does(tmp_path: Path, tiny_blocks):
    path = tmp_path / "ledger.jsonl"
    expected = _mixed_ledger(path)
    data = path.read_bytes()
    starts = [0]
    for line in data.splitlines(keepends=True)[:-1]:
        starts.append(starts[-1] + len(line))
    for seq in (2, 9, 40, len(expected) - 1):
        pos = starts[seq - 1] + 20
        path.write_bytes(data[:pos] + bytes([data[pos] ^ 1]) + data[pos + 1 :])
        verified = Ledger(path).verify()
        assert verified.first_bad_seq == seq, verified
        with pytest.raises(LedgerCorrupt):
            Ledger(path).events()


def test_decode_block_upcasts_old_lines_like_decode_envelope():
    lines = (Path(__file__).parent / "data" / "ledger-v0" / "ledger.jsonl").read_bytes()
    assert codec.decode_block(lines) == [codec.decode_envelope(line) for line in lines.splitlines()]
    assert codec.decode_block(b"") == []


def test_debris_after_the_last_event_is_a_torn_tail(run_dir: Path):
    """A crash can leave a complete-looking line of garbage (e.g. zeros the file system exposed)."""
    path = run_dir / "ledger.jsonl"
    intact = path.read_bytes()
    path.write_bytes(intact + b"\x00" * 300 + b"\n")
    verified = Ledger(path).verify()
    assert verified.torn_offset == len(intact) and verified.events == 2
    event = Ledger(path).repair()
    assert event is not None and (run_dir / event.quarantine).read_bytes() == b"\x00" * 300 + b"\n"
    assert path.read_bytes().startswith(intact) and Ledger(path).verify().events == 3
