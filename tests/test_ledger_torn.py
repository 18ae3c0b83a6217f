"""Torn writes, flipped bytes and interrupted batches: recovered or reported, never accepted.

Each test damages a copy of a small ledger in every possible place and checks what `verify`,
`read`, `head` and `repair` make of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.errors import LedgerCorrupt, TornTail
from ledger.store import Ledger
from tests.conftest import deterministic_ledger, make_run_started

N_EVENTS = 20


def _notes(n: int) -> list[ev.Note]:
    # Varied lengths and non-ASCII text, so line boundaries fall everywhere and flips hit UTF-8.
    return [ev.Note(text=f"n{i} {'é✓' * (i % 3)}{'x' * (i * 3 % 7)}") for i in range(n)]


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line, end exclusive and including its newline; index 0 is seq 1."""
    spans, start = [], 0
    while start < len(data):
        end = data.index(b"\n", start) + 1
        spans.append((start, end))
        start = end
    return spans


@pytest.fixture
def small_ledger(scratch: Path) -> tuple[Path, bytes, list]:
    # Notes only: the smallest realistic lines keep the every-byte loops fast.
    path = scratch / "ledger.jsonl"
    ledger = deterministic_ledger(path)
    for i, note in enumerate(_notes(N_EVENTS)):
        ledger.append(note, expected_seq=i)
    data = path.read_bytes()
    return path, data, Ledger(path).events()


def _assert_no_events(path: Path) -> None:
    """`read` verifies before yielding: a damaged ledger gives no event at all."""
    it = Ledger(path).read()
    with pytest.raises(LedgerCorrupt):
        next(it)


def _assert_repaired(path: Path, damaged: bytes, cut: int, original_events: list) -> None:
    """`repair` kept everything before `cut`, quarantined exactly the rest, recorded it."""
    event = Ledger(path).repair()
    assert event is not None
    assert (event.offset, event.length) == (cut, len(damaged) - cut)
    assert (path.parent / event.quarantine).read_bytes() == damaged[cut:]
    verified = Ledger(path).verify()
    assert verified.ok, verified.message
    events = Ledger(path).events()
    assert path.read_bytes().startswith(damaged[:cut])
    survivors = events[:-1]
    assert survivors == original_events[: len(survivors)]
    assert events[-1].type == "LedgerRepaired" and events[-1].seq == len(survivors) + 1
    (path.parent / event.quarantine).unlink()


def test_truncation_anywhere_in_last_event_is_torn_or_a_shorter_valid_ledger(small_ledger):
    path, data, events = small_ledger
    start, end = _line_spans(data)[-1]
    previous_head = (events[-2].seq, events[-2].hash)
    for cut in range(start, end):
        path.write_bytes(data[:cut])
        verified = Ledger(path).verify()
        assert (verified.head.seq, verified.head.hash) == previous_head, cut
        assert verified.events == N_EVENTS - 1
        if cut == start:  # exactly at a line boundary: a valid, shorter ledger
            assert verified.ok, verified.message
            assert Ledger(path).events() == events[:-1]
            continue
        assert not verified.ok
        assert verified.torn_offset == start, (cut, verified)
        assert verified.first_bad_seq is None
        with pytest.raises(TornTail) as info:
            Ledger(path).head()
        assert info.value.offset == start
        _assert_no_events(path)
        _assert_repaired(path, data[:cut], start, events)


@pytest.mark.parametrize("flip", ["xor", "newline"], ids=["xor-0x01", "to-newline"])
def test_any_flipped_byte_is_recovered_or_reported_at_its_seq(small_ledger, flip):
    path, data, events = small_ledger
    spans = _line_spans(data)
    seq_of = [0] * len(data)
    for seq, (start, end) in enumerate(spans, start=1):
        seq_of[start:end] = [seq] * (end - start)
    torn_cases = 0
    for pos in range(len(data)):
        new = data[pos] ^ 0x01 if flip == "xor" else 0x0A
        if new == data[pos]:
            continue  # not a modification
        damaged = data[:pos] + bytes([new]) + data[pos + 1 :]
        path.write_bytes(damaged)
        seq = seq_of[pos]
        start = spans[seq - 1][0]
        verified = Ledger(path).verify()
        assert not verified.ok, f"byte {pos} flipped ({flip}) and the ledger still verifies"
        if pos % 5 == 0 or seq >= N_EVENTS - 1:  # `read` scans as `verify` does; a sample suffices
            _assert_no_events(path)
        if verified.first_bad_seq is not None:
            assert verified.first_bad_seq == seq, (pos, verified)
            assert verified.torn_offset is None
            assert verified.events == seq - 1
            continue
        # A torn tail: only when the damaged line became the file's last line (the last event, or
        # the one before it whose newline was flipped so the two merged).
        assert verified.torn_offset == start, (pos, verified)
        assert b"\n" not in damaged[start:-1], (pos, verified)
        torn_cases += 1
        _assert_repaired(path, damaged, start, events)
    assert torn_cases > 0 or flip == "newline"  # a newline inside the last line splits it: corrupt, not torn


@pytest.fixture
def batched_ledger(scratch: Path):
    path = scratch / "ledger.jsonl"
    ledger = deterministic_ledger(path)
    ledger.append(make_run_started(), expected_seq=0)
    ledger.append(_notes(3), expected_seq=1)
    before = path.read_bytes()
    ledger.append([ev.Note(text="batch one"), ev.Note(text="batch two ✓"), ev.Note(text="batch three")], expected_seq=4)
    return path, before, path.read_bytes(), Ledger(path).events()


def test_interrupted_batch_is_never_accepted_in_part(batched_ledger):
    path, before, full, events = batched_ledger
    spans = _line_spans(full)
    b1, b2, b3 = spans[-3:]
    assert b1[0] == len(before)
    head_before = (events[3].seq, events[3].hash)
    # Inside the 2nd or 3rd event, and exactly after the 1st or 2nd complete line of the batch.
    cuts = list(range(b2[0] + 1, b3[1])) + [b1[1], b2[1]]
    for cut in cuts:
        damaged = full[:cut]
        path.write_bytes(damaged)
        verified = Ledger(path).verify()
        assert not verified.ok, cut
        assert verified.torn_offset == b1[0], (cut, verified)
        assert (verified.head.seq, verified.head.hash) == head_before
        assert verified.events == 4
        with pytest.raises(TornTail) as info:
            Ledger(path).head()
        assert info.value.offset == b1[0]
        _assert_no_events(path)
        if cut % 7 and cut not in (b1[1], b2[1]):
            continue  # the writes below are slower; every line boundary and a sample of the rest
        stale = Ledger(path)
        with pytest.raises(TornTail):
            stale.append(ev.Note(text="must not land after a torn batch"), expected_seq=None)
        assert path.read_bytes() == damaged
        _assert_repaired(path, damaged, b1[0], events)
        assert [e.data for e in Ledger(path).events()[:4]] == [e.data for e in events[:4]]


def test_batch_is_all_or_none_for_a_reader_and_carries_its_countdown(batched_ledger):
    path, _, full, events = batched_ledger
    assert [e.batch for e in events] == [0, 2, 1, 0, 2, 1, 0]
    assert Ledger(path).verify().ok
    assert Ledger(path).head().seq == 7


def test_repair_of_an_intact_ledger_changes_nothing(small_ledger):
    path, data, _ = small_ledger
    assert Ledger(path).repair() is None
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.jsonl"]
