"""Several writers, stale writers and re-sent commands: every event exactly once, in one chain."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.errors import EXIT_CONFLICT, ConcurrencyError
from ledger.store import Ledger
from tests.conftest import make_run_started

WRITERS = 4
APPENDS_EACH = 500


def _writer(path: str, writer: int, count: int, start, results) -> None:
    """Append `count` notes, deciding against the head each time and retrying when beaten to it."""
    try:
        ledger = Ledger(path)
        start.wait()
        conflicts = 0
        for i in range(count):
            while True:
                head = ledger.head().seq
                try:
                    ledger.append(ev.Note(text=f"writer {writer} note {i}"), expected_seq=head, actor=f"w{writer}")
                    break
                except ConcurrencyError as exc:
                    assert exc.expected == head and exc.actual > head
                    conflicts += 1
        results.put(conflicts)
    except BaseException as exc:  # report instead of leaving the parent waiting
        results.put(f"writer {writer} failed: {exc!r}")
        raise


def test_concurrent_writers_leave_every_event_once_in_one_valid_chain(tmp_path: Path):
    path = tmp_path / "ledger.jsonl"
    Ledger(path).append(make_run_started(), expected_seq=0)
    ctx = multiprocessing.get_context("fork")
    start, results = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), w, APPENDS_EACH, start, results)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    conflicts = [results.get(timeout=240) for _ in procs]
    assert all(isinstance(c, int) for c in conflicts), conflicts
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0

    verified = Ledger(path).verify()
    assert verified.ok, verified.message
    events = Ledger(path).events()
    assert [e.seq for e in events] == list(range(1, WRITERS * APPENDS_EACH + 2))
    texts = [e.data.text for e in events[1:]]
    assert sorted(texts) == sorted(f"writer {w} note {i}" for w in range(WRITERS) for i in range(APPENDS_EACH))
    for w in range(WRITERS):  # each writer's own notes stay in the order it appended them
        mine = [t for t in texts if t.startswith(f"writer {w} ")]
        assert mine == [f"writer {w} note {i}" for i in range(APPENDS_EACH)]
    assert all(e.prev == p.hash for p, e in zip(events, events[1:]))
    assert len({e.id for e in events}) == len(events)
    assert sum(conflicts) > 0, "the writers never raced; the test did not exercise the seq check"


def test_stale_writer_gets_concurrency_error_and_writes_nothing(run_dir: Path):
    path = run_dir / "ledger.jsonl"
    early = Ledger(path)
    assert early.head().seq == 2  # `early` has now cached the head
    Ledger(path).append(ev.Note(text="someone else was first"), expected_seq=2)
    before = path.read_bytes()
    for stale in (early, Ledger(path)):
        with pytest.raises(ConcurrencyError) as info:
            stale.append([ev.Note(text="decided against seq 2"), ev.Note(text="x")], expected_seq=2)
        assert (info.value.expected, info.value.actual) == (2, 3)
        assert info.value.exit_code == EXIT_CONFLICT  # neither a verdict (1) nor bad input (2)
        assert path.read_bytes() == before
    assert sorted(p.name for p in run_dir.iterdir()) == ["ledger.jsonl"]


def _resend(path: str, key: str) -> list[tuple[int, str, str]]:
    envs = Ledger(path).append([ev.Note(text="a"), ev.Note(text="b")], expected_seq=2, key=key)
    return [(e.seq, e.id, e.hash) for e in envs]


def test_resent_command_with_same_key_appends_nothing_and_returns_the_original(run_dir: Path):
    path = run_dir / "ledger.jsonl"
    ledger = Ledger(path)
    first = ledger.append([ev.Note(text="a"), ev.Note(text="b")], expected_seq=2, key="cmd-1", cause="c1")
    assert [e.seq for e in first] == [3, 4]
    after_first = path.read_bytes()

    # The same object, a fresh object (nothing cached) and another process: the original events,
    # even though the expected seq is now stale, and not a byte written.
    assert ledger.append([ev.Note(text="a"), ev.Note(text="b")], expected_seq=2, key="cmd-1") == first
    assert Ledger(path).append([ev.Note(text="a"), ev.Note(text="b")], expected_seq=2, key="cmd-1") == first
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_resend, (str(path), "cmd-1")) == [(e.seq, e.id, e.hash) for e in first]
    assert path.read_bytes() == after_first

    # Another key is another command.
    other = Ledger(path).append(ev.Note(text="a"), expected_seq=4, key="cmd-2")
    assert [e.seq for e in other] == [5]
    assert Ledger(path).append(ev.Note(text="a"), expected_seq=None, key="cmd-2") == other
    assert Ledger(path).verify().events == 5
