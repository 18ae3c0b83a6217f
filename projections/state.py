"""The run's state: a pure fold of its events.

`initial()` and `evolve(state, envelope)`; nothing here touches files, the clock or the
environment. Every event type is handled explicitly: types that do not change this view are
listed in `_IGNORED`, and an event of a type nobody listed raises, so a new event type cannot be
silently dropped.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import replace

from ledger import events as ev
from ledger.events import Envelope


class Head(msgspec.Struct, frozen=True):
    seq: int = 0
    hash: str = ev.GENESIS


class CandidateState(msgspec.Struct, frozen=True):
    """Everything recorded about one candidate, latest attempt last."""

    prepared: ev.CandidatePrepared
    attempts: int = 0
    failed_attempts: int = 0
    diff: ev.CandidateDiffRecorded | None = None
    evaluation: ev.CandidateEvaluated | None = None
    gates: ev.GatesEvaluated | None = None
    verdict: ev.VerdictReached | None = None
    confirmation: ev.WinnerConfirmed | None = None
    prepared_seq: int = 0


class RunState(msgspec.Struct, frozen=True):
    head: Head = Head()
    run: ev.RunStarted | None = None
    preflight: ev.PreflightCompleted | None = None
    builds: dict[str, ev.BuildFinished] = {}
    oracles: dict[str, ev.OracleChecked] = {}
    faults: tuple[ev.FaultRecorded, ...] = ()
    timings: tuple[ev.TimingRecorded, ...] = ()
    routing: dict[str, ev.RoutingDecided] = {}
    captures: dict[str, ev.ProfileCaptured] = {}
    profiles: dict[str, ev.ProfileNormalized] = {}
    hotspot: ev.HotspotSelected | None = None
    source_targets: ev.SourceTargetsEmitted | None = None
    brief: ev.BriefEmitted | None = None
    candidates: dict[str, CandidateState] = {}
    stages: dict[str, str] = {}
    repairs: tuple[ev.LedgerRepaired, ...] = ()
    notes: tuple[str, ...] = ()
    event_counts: dict[str, int] = {}


def initial() -> RunState:
    return RunState()


def _with(mapping: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = dict(mapping)
    out[key] = value
    return out


def evolve(state: RunState, env: Envelope) -> RunState:
    """Fold one event into a new state; the old state is never modified."""
    state = replace(
        state,
        head=Head(env.seq, env.hash),
        event_counts=_with(state.event_counts, env.type, state.event_counts.get(env.type, 0) + 1),
    )
    data = env.data
    match data:
        case ev.RunStarted():
            return replace(state, run=data)
        case ev.PreflightCompleted():
            return replace(state, preflight=data)
        case ev.BuildFinished():
            return replace(state, builds=_with(state.builds, data.target, data))
        case ev.OracleChecked():
            return replace(state, oracles=_with(state.oracles, data.target, data))
        case ev.FaultRecorded():
            return replace(state, faults=(*state.faults, data))
        case ev.TimingRecorded():
            return replace(state, timings=(*state.timings, data))
        case ev.RoutingDecided():
            return replace(state, routing=_with(state.routing, data.phase, data))
        case ev.ProfileCaptured():
            return replace(state, captures=_with(state.captures, f"{data.target}:{data.adapter}", data))
        case ev.ProfileNormalized():
            return replace(state, profiles=_with(state.profiles, f"{data.target}:{data.adapter}", data))
        case ev.HotspotSelected():
            return replace(state, hotspot=data)
        case ev.SourceTargetsEmitted():
            return replace(state, source_targets=data) if data.target == "baseline" else state
        case ev.BriefEmitted():
            return replace(state, brief=data) if data.target == "baseline" else state
        case ev.CandidatePrepared():
            cand = CandidateState(prepared=data, prepared_seq=env.seq)
            return replace(state, candidates=_with(state.candidates, data.id, cand))
        case ev.CandidateDiffRecorded():
            return _candidate(state, data.id, diff=data)
        case ev.CandidateEvaluated():
            cand = state.candidates[data.id]
            return _candidate(state, data.id, evaluation=data, attempts=cand.attempts + 1)
        case ev.GatesEvaluated():
            return _candidate(state, data.id, gates=data)
        case ev.VerdictReached():
            cand = state.candidates[data.id]
            failed = cand.failed_attempts + (1 if data.status == "rejected" and _repairable(data) else 0)
            return _candidate(state, data.id, verdict=data, failed_attempts=failed)
        case ev.WinnerConfirmed():
            return _candidate(state, data.id, confirmation=data)
        case ev.StageCompleted():
            return replace(state, stages=_with(state.stages, data.stage, data.inputs_sha256))
        case ev.LedgerRepaired():
            return replace(state, repairs=(*state.repairs, data))
        case ev.Note():
            return replace(state, notes=(*state.notes, data.text))
    if env.type in _IGNORED:
        return state
    raise TypeError(f"run state: no rule for event type {env.type!r}")


_IGNORED: frozenset[str] = frozenset()

# Verdict reasons that a repair (edit and evaluate again) can address and that spend a repair.
REPAIRABLE_PREFIXES = ("build-failed", "oracle-failed", "crashed", "timeout", "launch-failed", "edit-refused")


def _repairable(verdict: ev.VerdictReached) -> bool:
    return any(r.startswith(REPAIRABLE_PREFIXES) for r in verdict.reasons)


def _candidate(state: RunState, cid: str, **changes: Any) -> RunState:
    cand = state.candidates.get(cid)
    if cand is None:
        raise ValueError(f"run state: event for unknown candidate {cid!r}")
    return replace(state, candidates=_with(state.candidates, cid, replace(cand, **changes)))


def fold(envelopes, state: RunState | None = None) -> RunState:
    state = initial() if state is None else state
    for env in envelopes:
        state = evolve(state, env)
    return state
