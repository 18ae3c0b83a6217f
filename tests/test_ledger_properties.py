"""Property tests: replay is deterministic, replay in parts equals replay at once, and what is
appended is what is read back, for random sequences of many event types with random values."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.contract import Contract, Oracle, Source, Step
from ledger.store import Ledger
from projections import documents, state
from tests.conftest import deterministic_ledger, make_run_started

text = st.text(max_size=40)  # any unicode (no lone surrogates: those cannot be UTF-8)
name = st.text(min_size=1, max_size=12)
sha = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
maybe_sha = st.none() | sha
# Finite, as measured values are; NaN cannot round-trip through JSON and append refuses it.
real = st.floats(allow_nan=False, allow_infinity=False, width=64)
seconds = st.floats(min_value=1e-9, max_value=1e6, allow_nan=False)
small_int = st.integers(min_value=-(2**31), max_value=2**31)

step_outcome = st.builds(
    ev.StepOutcome,
    argv=st.lists(text, min_size=1, max_size=3),
    exit_code=st.none() | st.integers(-255, 255),
    signal=st.none() | st.integers(1, 64),
    duration_s=seconds,
    timed_out=st.booleans(),
    log_sha256=maybe_sha,
)

payloads = st.one_of(
    st.builds(ev.Note, text=text),
    st.builds(
        ev.TimingRecorded,
        purpose=st.sampled_from(["baseline-variance", "screening", "confirmation"]),
        targets=st.lists(name, min_size=1, max_size=3),
        metric=name,
        unit=st.sampled_from(["s", "ms"]),
        samples=st.dictionaries(
            st.sampled_from(["baseline", "c1", "c2"]), st.lists(seconds, min_size=1, max_size=20), min_size=1
        ),
        order=st.lists(st.sampled_from(["AB", "BA"]), max_size=20),
        seed=st.integers(0, 2**63 - 1),
        exploratory=st.booleans(),
        conditions=st.builds(
            ev.TimingConditions, host=name, argv=st.lists(text, max_size=3),
            tool_versions=st.dictionaries(name, text, max_size=3),
            arms=st.dictionaries(name, st.builds(ev.TimedArm, binary_before=maybe_sha, binary_after=maybe_sha,
                                                 inputs_sha256=maybe_sha), max_size=2),
            side_effects=st.lists(text, max_size=2),
        ),
    ),
    st.builds(
        ev.BuildFinished,
        target=st.sampled_from(["baseline", "c1", "c2"]),
        inputs_sha256=sha,
        outcome=st.sampled_from(["ok", "build-failed", "timeout"]),
        steps=st.lists(step_outcome, max_size=3),
        duration_s=seconds,
        binary_sha256=maybe_sha,
    ),
    st.builds(
        ev.FaultRecorded,
        stage=name,
        target=st.sampled_from(["baseline", "c1"]),
        failure_class=st.sampled_from(
            ["build-failed", "launch-failed", "oracle-failed", "timeout", "crashed", "nondeterministic-output"]
        ),
        message=text,
        log_sha256=maybe_sha,
    ),
    st.builds(
        ev.RoutingDecided,
        phase=st.sampled_from(["discovery", "diagnosis"]),
        chosen=st.none() | name,
        reason=text,
        rejected=st.lists(st.builds(ev.Rejection, adapter=name, reason=text), max_size=3),
        needs=st.lists(name, max_size=3),
    ),
    st.builds(ev.StageCompleted, stage=name, inputs_sha256=sha),
    st.builds(
        ev.HotspotSelected,
        operation=text,
        name=text,
        file=st.none() | text,
        line_start=st.none() | st.integers(1, 10**6),
        line_end=st.none() | st.integers(1, 10**6),
        metric=name,
        share=st.floats(0, 1),
        amdahl_ceiling=st.none() | st.floats(1, 1e6),
    ),
    st.builds(
        ev.OracleChecked,
        target=st.sampled_from(["baseline", "c1"]),
        method=name,
        inferred=st.booleans(),
        rtol=st.floats(0, 1),
        atol=st.floats(0, 1),
        passed=st.booleans(),
        detail=text,
        run=st.none() | step_outcome,
        output_sha256=maybe_sha,
    ),
    st.builds(
        ev.ProfileCaptured,
        adapter=name,
        target=name,
        artifacts=st.dictionaries(name, sha, max_size=3),
        wall_s=seconds,
        tool_version=st.none() | name,
        command=st.lists(text, max_size=4),
        can_reprofile=st.booleans(),
    ),
    st.builds(
        ev.ProfileNormalized,
        adapter=name,
        target=name,
        profile_sha256=sha,
        primary_metric=name,
        total=real,
    ),
)

contracts = st.builds(
    Contract,
    version=st.just(1),
    name=st.text(min_size=1, max_size=64),
    source=st.builds(Source, editable=st.lists(text, min_size=1, max_size=2)),
    run=st.builds(Step, argv=st.lists(text, min_size=1, max_size=3), timeout_s=seconds),
    oracle=st.builds(Oracle, rtol=st.floats(0, 1), atol=st.floats(0, 1)),
)

# A run: RunStarted first (so documents render), then payloads in batches of 1-4.
runs = st.tuples(
    contracts,
    st.lists(st.lists(payloads, min_size=1, max_size=4), min_size=1, max_size=12),
    st.data(),
)


def _write(path: Path, contract: Contract, batches: list[list[ev.Payload]]) -> list:
    ledger = deterministic_ledger(path)
    ledger.append(make_run_started(contract=contract), expected_seq=0)
    seq = 1
    for batch in batches:
        seq = ledger.append(batch, expected_seq=seq)[-1].seq
    return Ledger(path).events()


def _project(envelopes) -> dict[str, bytes]:
    return documents.render(state.fold(envelopes))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_replay_is_deterministic_and_replay_in_parts_equals_at_once(run):
    contract, batches, data = run
    with tempfile.TemporaryDirectory(prefix="pw-prop-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        first = Path(d) / "a" / "ledger.jsonl"
        second = Path(d) / "b" / "ledger.jsonl"
        events = _write(first, contract, batches)
        again = _write(second, contract, batches)
        # Same commands, same clock and ids: the same bytes, and the same projections, twice.
        assert first.read_bytes() == second.read_bytes()
        assert Ledger(first).verify().ok

        # What was appended is what is read back.
        appended = [p for batch in batches for p in batch]
        assert [e.data for e in events[1:]] == appended
        assert [e.seq for e in events] == list(range(1, len(appended) + 2))

        at_once = _project(events)
        assert at_once == _project(Ledger(first).events()) == _project(again)
        assert "experiment-plan.json" in at_once and "preflight.json" in at_once

        split = data.draw(st.integers(0, len(events)), label="split")
        prefix = state.fold(events[:split])
        assert documents.render(state.fold(events[split:], prefix)) == at_once
        # Folding a prefix read with `until` and then the rest gives the same state.
        assert state.fold(Ledger(first).read(until=split)) == prefix
        # `fold` is exactly `evolve` applied in order (a faster fold must keep this).
        assert functools.reduce(state.evolve, events, state.initial()) == state.fold(events)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs, st.integers(64, 4096))
def test_a_reader_following_appends_reads_exactly_the_file(run, block):
    """`events` verifies and decodes new lines in one block pass and decodes the part it verified
    before separately; with any block size, and a reader that last looked at any point, the
    result is the file decoded line by line."""
    from unittest import mock

    from ledger import codec, store

    contract, batches, data = run
    with tempfile.TemporaryDirectory(prefix="pw-prop-") as d, mock.patch.object(store, "_BLOCK", block):
        path = Path(d) / "ledger.jsonl"
        writer = deterministic_ledger(path)
        writer.append(make_run_started(contract=contract), expected_seq=0)
        reader = Ledger(path)
        looked_after = data.draw(st.integers(0, len(batches)), label="reader looks after batch")
        seq = 1
        for i, batch in enumerate(batches):
            if i == looked_after:
                assert reader.events() == [codec.decode_envelope(ln) for ln in path.read_bytes().splitlines()]
            seq = writer.append(batch, expected_seq=seq)[-1].seq
        expected = [codec.decode_envelope(ln) for ln in path.read_bytes().splitlines()]
        assert reader.events() == expected
        until = data.draw(st.integers(0, len(expected) + 2), label="until")
        assert reader.events(until=until) == expected[:until] == Ledger(path).events(until=until)
