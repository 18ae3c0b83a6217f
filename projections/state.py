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
    # After a verified verdict: where the time goes in this candidate now (the refreshed brief).
    brief: ev.BriefEmitted | None = None
    source_targets: ev.SourceTargetsEmitted | None = None
    claim: ev.ClaimChecked | None = None  # the latest attempt's claim, checked against its patch


class Emitted(msgspec.Struct, frozen=True):
    """Text pw handed to an actor (the envelope's actor): a brief, a source slice, an imported
    profile's brief or one `pw inspect` view, with its o200k token count (cost.json)."""

    seq: int
    actor: str
    kind: str  # brief | slice | import-brief | view
    name: str
    tokens: int


class RunState(msgspec.Struct, frozen=True):
    head: Head = Head()
    run: ev.RunStarted | None = None
    preflight: ev.PreflightCompleted | None = None
    builds: dict[str, ev.BuildFinished] = {}
    oracles: dict[str, ev.OracleChecked] = {}
    faults: tuple[ev.FaultRecorded, ...] = ()
    timings: tuple[ev.TimingRecorded, ...] = ()
    routing: dict[str, ev.RoutingDecided] = {}  # the latest decision of each phase
    climbs: tuple[ev.RoutingDecided, ...] = ()  # every diagnosis decision, one per rung climbed, in order
    captures: dict[str, ev.ProfileCaptured] = {}
    profiles: dict[str, ev.ProfileNormalized] = {}
    hotspot: ev.HotspotSelected | None = None
    source_targets: ev.SourceTargetsEmitted | None = None
    brief: ev.BriefEmitted | None = None
    candidates: dict[str, CandidateState] = {}
    stages: dict[str, str] = {}
    repairs: tuple[ev.LedgerRepaired, ...] = ()
    notes: tuple[str, ...] = ()
    unprofiled: tuple[ev.UnprofiledCompared, ...] = ()
    event_counts: dict[str, int] = {}
    # Profiles imported through partial adapters (`pw import`), by "target:adapter".
    imports: dict[str, ev.ProfileImported] = {}
    # Everything emitted to an actor, in ledger order (cost.json).
    emitted: tuple[Emitted, ...] = ()
    # The seq of each TimingRecorded, parallel to `timings` (bench.*.json names and cites them).
    timing_seqs: tuple[int, ...] = ()
    # Every WinnerConfirmed in ledger order (a candidate's `confirmation` is its latest): one per
    # confirmation campaign, each citing its timing (the report lists those timed on another node).
    confirmations: tuple[ev.WinnerConfirmed, ...] = ()
    # Every batch of `pw evaluate RUN ID [ID ...]`, in ledger order (batch-plan.json).
    batches: tuple[ev.BatchPlanned, ...] = ()


def initial() -> RunState:
    return RunState()


def _with(mapping: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = dict(mapping)
    out[key] = value
    return out


def evolve(state: RunState, env: Envelope) -> RunState:
    """Fold one event into a new state; the old state is never modified."""
    return fold((env,), state)


# Events whose only effect is to append to a tuple field, and the value they append. `fold`
# collects these in lists and builds each tuple once, so a long ledger folds in linear time.
_APPENDS: dict[type, tuple[str, Any]] = {
    ev.FaultRecorded: ("faults", lambda d: d),
    ev.TimingRecorded: ("timings", lambda d: d),
    ev.LedgerRepaired: ("repairs", lambda d: d),
    ev.Note: ("notes", lambda d: d.text),
    ev.UnprofiledCompared: ("unprofiled", lambda d: d),
    ev.BatchPlanned: ("batches", lambda d: d),
}


def _apply(state: RunState, env: Envelope) -> RunState:
    """The effect of one event other than head, counts and the append-only tuples."""
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
        case ev.RoutingDecided():
            climbs = state.climbs + (data,) if data.phase == "diagnosis" else state.climbs
            return replace(state, routing=_with(state.routing, data.phase, data), climbs=climbs)
        case ev.ProfileCaptured():
            return replace(state, captures=_with(state.captures, f"{data.target}:{data.adapter}", data))
        case ev.ProfileNormalized():
            return replace(state, profiles=_with(state.profiles, f"{data.target}:{data.adapter}", data))
        case ev.HotspotSelected():
            return replace(state, hotspot=data)
        case ev.SourceTargetsEmitted():
            if data.target in state.candidates:
                return _candidate(state, data.target, source_targets=data)
            return replace(state, source_targets=data) if data.target == "baseline" else state
        case ev.BriefEmitted():
            if data.target in state.candidates:
                return _candidate(state, data.target, brief=data)
            return replace(state, brief=data) if data.target == "baseline" else state
        case ev.CandidatePrepared():
            cand = CandidateState(prepared=data, prepared_seq=env.seq)
            return replace(state, candidates=_with(state.candidates, data.id, cand))
        case ev.CandidateDiffRecorded():
            return _candidate(state, data.id, diff=data)
        case ev.CandidateEvaluated():
            cand = state.candidates[data.id]
            # `pw evaluate --more` judges the same attempt again: still one attempt.
            again = cand.evaluation is not None and cand.evaluation.attempt == data.attempt
            return _candidate(state, data.id, evaluation=data, attempts=cand.attempts + (0 if again else 1))
        case ev.GatesEvaluated():
            return _candidate(state, data.id, gates=data)
        case ev.VerdictReached():
            cand = state.candidates[data.id]
            failed = cand.failed_attempts + (1 if data.repairable else 0)  # each repairable rejection counts
            return _candidate(state, data.id, verdict=data, failed_attempts=failed)
        case ev.WinnerConfirmed():
            return _candidate(state, data.id, confirmation=data)
        case ev.ClaimChecked():
            return _candidate(state, data.id, claim=data)
        case ev.StageCompleted():
            return replace(state, stages=_with(state.stages, data.stage, data.inputs_sha256))
        case ev.ProfileImported():
            return replace(state, imports=_with(state.imports, f"{data.target}:{data.adapter}", data))
        case ev.ViewEmitted():
            return state  # its only effect is on `emitted` (see `emissions`)
    if env.type in _IGNORED:
        return state
    raise TypeError(f"run state: no rule for event type {env.type!r}")


# Read where needed from the events themselves (the judge reads the drawn holdouts and how a
# reprofile was sized), not folded here.
_IGNORED: frozenset[str] = frozenset({"HoldoutsDrawn", "ReprofileResolved", "HybridPrepared", "AttemptAbandoned"})


def _candidate(state: RunState, cid: str, **changes: Any) -> RunState:
    cand = state.candidates.get(cid)
    if cand is None:
        raise ValueError(f"run state: event for unknown candidate {cid!r}")
    return replace(state, candidates=_with(state.candidates, cid, replace(cand, **changes)))


def emissions(env: Envelope) -> list[Emitted]:
    """What one event handed to its actor: a brief and the slices it names, an imported profile's
    brief, or an inspect view (cost.json counts them per actor)."""
    data = env.data
    match data:
        case ev.BriefEmitted():
            prefix = "" if data.target == "baseline" else f"candidates/{data.target}/"
            out = [Emitted(env.seq, env.actor, "brief", prefix + "agent-brief.txt", data.tokens)]
            out += [Emitted(env.seq, env.actor, "slice", name, tokens) for name, tokens in sorted(data.costs.items())
                    if name not in ("agent-brief.txt", "agent-view.json")]  # the view is read only via inspect
            return out
        case ev.ProfileImported():
            prefix = "" if data.target == "baseline" else f"candidates/{data.target}/"
            return [Emitted(env.seq, env.actor, "import-brief", f"{prefix}imports/{data.adapter}/agent-brief.txt",
                            data.tokens)]
        case ev.ViewEmitted():
            what = f"inspect --section {data.section}" + (f" --candidate {data.candidate}" if data.candidate else "") + \
                (f" --group {data.group}" if data.group else "")
            return [Emitted(env.seq, env.actor, "view", what, data.tokens)]
    return []


def fold(envelopes, state: RunState | None = None) -> RunState:
    """The state after `envelopes`, starting from `state` (default: the initial state)."""
    state = initial() if state is None else state
    appended: dict[str, list] = {field: list(getattr(state, field)) for field, _ in _APPENDS.values()}
    emitted = list(state.emitted)
    timing_seqs = list(state.timing_seqs)
    confirmations = list(state.confirmations)
    counts = dict(state.event_counts)
    head = state.head
    for env in envelopes:
        counts[env.type] = counts.get(env.type, 0) + 1
        head = env
        emitted += emissions(env)
        if type(env.data) is ev.TimingRecorded:
            timing_seqs.append(env.seq)
        elif type(env.data) is ev.WinnerConfirmed:
            confirmations.append(env.data)
        rule = _APPENDS.get(type(env.data))
        if rule is not None:
            appended[rule[0]].append(rule[1](env.data))
        else:
            state = _apply(state, env)
    if head is state.head:
        return state
    return replace(
        state,
        head=Head(head.seq, head.hash),
        event_counts=counts,
        emitted=tuple(emitted),
        timing_seqs=tuple(timing_seqs),
        confirmations=tuple(confirmations),
        **{field: tuple(values) for field, values in appended.items()},
    )


class Cumulative(msgspec.Struct, frozen=True):
    """A candidate's speedup over the baseline along its chain of parents."""

    speedup: float
    interval: list[float] | None  # approximate: see `cumulative`
    steps: list[str]  # the candidates multiplied, baseline side first


def cumulative(state: RunState, cid: str) -> Cumulative | None:
    """The speedup over the baseline: the product of the step speedups along the chain of parents
    (each chained candidate is timed against its parent). The interval adds the steps' log-scale
    half-widths in quadrature (independent campaigns), an approximation stated wherever it is shown.
    None when a step has no speedup."""
    import math

    steps: list[str] = []
    log_s = 0.0
    var_lo = var_hi = 0.0
    have_interval = True
    seen: set[str] = set()
    node: str | None = cid
    while node is not None and node != "baseline" and node not in seen:
        seen.add(node)
        cand = state.candidates.get(node)
        v = (cand.confirmation or cand.verdict) if cand is not None else None
        if v is None or not v.speedup:
            return None
        steps.append(node)
        log_s += math.log(v.speedup)
        if v.interval and v.interval[0] > 0:
            var_lo += (math.log(v.speedup) - math.log(v.interval[0])) ** 2
            var_hi += (math.log(v.interval[1]) - math.log(v.speedup)) ** 2
        else:
            have_interval = False
        node = v.reference if v.reference != "baseline" else None
    interval = None
    if have_interval:
        interval = [round(math.exp(log_s - math.sqrt(var_lo)), 6), round(math.exp(log_s + math.sqrt(var_hi)), 6)]
    return Cumulative(speedup=round(math.exp(log_s), 6), interval=interval, steps=steps[::-1])
