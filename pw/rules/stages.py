"""Pure decisions: given the folded state and a command, which events follow (or why none may).

No I/O here. The workflows gather facts (run a build, time a program), then ask these functions
whether and what to record; only then is anything appended, with the expected sequence number.
"""

from __future__ import annotations

from ledger import events as ev
from ledger.errors import RejectedCommand
from projections.state import RunState

# The stages of `pw start`, in order. Each needs every earlier one completed.
START_STAGES: tuple[str, ...] = (
    "preflight",
    "build",
    "oracle",
    "baseline-timing",
    "profile",
)


def stage_done(state: RunState, stage: str, inputs_sha256: str) -> bool:
    """True when `stage` was already recorded for exactly these inputs (a resume skips it)."""
    return state.stages.get(stage) == inputs_sha256


def decide_stage(state: RunState, stage: str, inputs_sha256: str, results: list[ev.Payload], *,
                 redo: str | None = None) -> list[ev.Payload]:
    """Events to append for a finished stage: its results, plus `StageCompleted` unless it failed.

    Refuses a stage whose predecessors are not complete, and a stage already recorded for the same
    inputs, so no stage is ever recorded twice — unless `redo` says why that record no longer holds
    (the workflow found the stage's outputs missing). Then the stage runs again under the same
    inputs hash, and a `Note` leading the batch records why.
    """
    if state.run is None:
        raise RejectedCommand("no RunStarted in this ledger; start a run with `pw start --workload DIR`")
    if stage not in START_STAGES:
        raise RejectedCommand(f"unknown stage {stage!r}; expected one of {', '.join(START_STAGES)}")
    for earlier in START_STAGES[: START_STAGES.index(stage)]:
        if earlier not in state.stages:
            raise RejectedCommand(f"stage {stage!r} needs {earlier!r} completed first")
    done = stage_done(state, stage, inputs_sha256)
    if done and redo is None:
        raise RejectedCommand(f"stage {stage!r} is already recorded for these inputs")
    if redo is not None and not done:
        raise RejectedCommand(f"stage {stage!r} is not recorded for these inputs, so there is nothing to redo")
    events = [ev.Note(text=redo_note(stage, redo))] if redo is not None else []
    events += results
    if not any(isinstance(e, ev.FaultRecorded) for e in results):
        events.append(ev.StageCompleted(stage=stage, inputs_sha256=inputs_sha256))
    return events


def redo_note(stage: str, reason: str) -> str:
    """The text of the Note that says why a recorded stage was run again."""
    return f"stage {stage!r} redone for the same inputs: {reason}"
