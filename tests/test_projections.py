"""Projections are pure folds of the ledger, stamped with its head, written atomically."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from ledger.store import Ledger
from projections import documents, state
from projections.materialize import (
    first_divergence,
    materialize,
    projection_lock,
    rebuild_in_memory,
    write_all,
)
from tests.conftest import deterministic_ledger, make_run_started


def _timing(xs: list[float]) -> ev.TimingRecorded:
    return ev.TimingRecorded(
        purpose="baseline-variance", targets=["baseline"], metric="wall", unit="s", samples={"baseline": xs},
        order=[], seed=7, exploratory=False, conditions=ev.TimingConditions(host="h", argv=["./prog"]),
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = deterministic_ledger(tmp_path / "run" / "ledger.jsonl")
    ledger.append(make_run_started(), expected_seq=0)
    ledger.append([_timing([1.0, 1.1, 0.9]), ev.Note(text="n")], expected_seq=1)
    return ledger


def test_documents_are_stamped_with_the_head_they_were_built_from(ledger: Ledger):
    events = ledger.events()
    run_state, files = rebuild_in_memory(ledger)
    assert run_state.head == state.Head(events[-1].seq, events[-1].hash)
    for name, data in files.items():
        if not name.endswith(".json"):  # brief.md: the dispatch brief, markdown
            continue
        doc = msgspec.json.decode(data)
        assert doc["ledger_head"] == {"seq": 3, "hash": events[-1].hash}, name
    plan = msgspec.json.decode(files["experiment-plan.json"])
    assert plan["contract"]["name"] == "demo"
    variation = msgspec.json.decode(files["preflight.json"])["baseline_variation"]
    assert variation["runs"] == 3 and variation["mean"] == pytest.approx(1.0)
    # As of seq 1 the state differs, and so do the bytes.
    _, early = rebuild_in_memory(ledger, until=1)
    assert early["experiment-plan.json"] != files["experiment-plan.json"]


def test_no_documents_before_the_run_started():
    assert documents.render(state.initial()) == {}


def test_evolve_returns_new_state_and_leaves_the_old_one_alone(ledger: Ledger):
    events = ledger.events()
    s0 = state.initial()
    s1 = state.evolve(s0, events[0])
    assert s0 == state.initial() and s1 != s0
    s2 = state.evolve(s1, events[1])
    assert s1.timings == () and len(s2.timings) == 1
    assert s2.event_counts == {"RunStarted": 1, "TimingRecorded": 1}
    assert s1.event_counts == {"RunStarted": 1}


def test_an_event_type_without_a_rule_is_refused_not_dropped(ledger: Ledger):
    env = ledger.events()[-1]
    odd = msgspec.structs.replace(env, type="NoSuchEvent", data=object())
    with pytest.raises(TypeError, match="NoSuchEvent"):
        state.evolve(state.initial(), odd)


def test_write_all_writes_only_what_changed_atomically_and_audit_sees_edits(ledger: Ledger):
    run_dir = ledger.path.parent
    _, files = rebuild_in_memory(ledger)
    assert sorted(write_all(run_dir, files)) == sorted(files)
    assert write_all(run_dir, files) == []
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]  # no temporary files left
    assert first_divergence(run_dir, files) is None

    plan = run_dir / "experiment-plan.json"
    plan.write_bytes(plan.read_bytes().replace(b'"demo"', b'"DEMO"'))
    assert "experiment-plan.json" in first_divergence(run_dir, files)
    (run_dir / "preflight.json").unlink()
    assert first_divergence(run_dir, files, ["preflight.json"]).startswith("preflight.json: missing")
    assert write_all(run_dir, files) == ["experiment-plan.json", "preflight.json"]
    assert first_divergence(run_dir, files) is None


def test_projections_follow_new_events(ledger: Ledger):
    run_dir = ledger.path.parent
    write_all(run_dir, rebuild_in_memory(ledger)[1])
    before = (run_dir / "preflight.json").read_bytes()
    ledger.append(ev.Note(text="later"), expected_seq=3)
    _, files = rebuild_in_memory(Ledger(ledger.path))
    assert first_divergence(run_dir, files) is not None  # stale: the head moved
    assert write_all(run_dir, files) == sorted(files, key=list(files).index)
    assert (run_dir / "preflight.json").read_bytes() != before


def test_a_writer_holding_an_older_state_writes_the_ledger_head_instead(ledger: Ledger):
    """Process A folds seq 3; process B appends seq 4 and writes; A writes last. Without the head
    check under the lock, A would leave seq 3's projections on disk."""
    run_dir = ledger.path.parent
    older = state.fold(ledger.read())
    Ledger(ledger.path).append(ev.Note(text="from another process"), expected_seq=3)
    done = materialize(run_dir, ledger, older)
    assert done.state.head.seq == 4 and older.head.seq == 3
    _, current = rebuild_in_memory(Ledger(ledger.path))
    assert first_divergence(run_dir, current) is None
    assert done.files == sorted(current)


def test_materialize_removes_what_a_killed_writer_left_and_nothing_else(ledger: Ledger):
    run_dir = ledger.path.parent
    materialize(run_dir, ledger)
    strays = [run_dir / ".experiment-plan.json.k1ll3d", run_dir / ".preflight.json.x"]
    for stray in strays:
        stray.write_bytes(b"half a file")
    keep = run_dir / ".keep"
    keep.write_bytes(b"")
    assert materialize(run_dir, ledger).written == []
    assert not any(stray.exists() for stray in strays) and keep.exists()


def test_materialize_waits_for_the_projection_lock(ledger: Ledger):
    run_dir = ledger.path.parent
    finished = threading.Event()
    with projection_lock(run_dir):
        worker = threading.Thread(target=lambda: (materialize(run_dir, ledger), finished.set()))
        worker.start()
        assert not finished.wait(0.3), "wrote projections while another writer held the lock"
        assert not (run_dir / "experiment-plan.json").exists()
    worker.join(10)
    assert finished.is_set() and (run_dir / "experiment-plan.json").exists()
