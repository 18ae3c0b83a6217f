"""`pw evaluate RUN ID [ID ...]`: several candidates evaluated as one quiet batch.

The batch is decided against the run state (``pw.rules.candidates.decide_batch``: every id once,
each one evaluable now) and recorded as ``BatchPlanned`` before any candidate is touched, so a bad
id appends nothing. Then two passes, each the candidate's own ``pw.app.evaluate.evaluate``:

1. **builds first**: each candidate's diff, build, fresh holdouts and oracle check
   (``evaluate(..., until="oracle")``). One that fails them (refused edits, a failed build or
   oracle) is judged there, as a single `pw evaluate` would judge it, and the others go on.
2. **campaigns**, one after another in the plan's order: `evaluate` continues each open attempt
   (``pw.app.resume``) with its hybrid arm, campaign, diagnosis and judgement.

So no compiler or oracle run shares the machine with a campaign, and each campaign's interleaved
pairs share their load window with nothing but its own arms. Two candidates' campaigns are never
interleaved with each other: docs/decisions/0029-quiet-batches.md says why.

An error of one candidate (its lock held elsewhere, a tool that failed under it) is reported as that
candidate's outcome and the others go on; a disk that refuses writes stops the batch.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ledger import events as ev
from ledger.errors import DiskError, PWError
from pw.app.evaluate import EvaluateResult, evaluate
from pw.app.run import RunHandle
from pw.rules import candidates


class Outcome(msgspec.Struct, frozen=True):
    """One candidate's part of a batch: its result, or the one line of the error that stopped it."""

    id: str
    result: EvaluateResult | None = None
    error: str | None = None
    exit_code: int = 0  # the error's (ledger.errors EXIT_CODES); a result's is the CLI's


class BatchResult(msgspec.Struct, frozen=True):
    plan: ev.BatchPlanned
    outcomes: list[Outcome]  # in the plan's order


def evaluate_batch(
    handle: RunHandle,
    ids: list[str],
    progress: Callable[[str], None] = lambda _m: None,
    *,
    max_pairs: int | None = None,
    max_time_s: float | None = None,
) -> BatchResult:
    state = handle.refresh()
    plan = candidates.decide_batch(state, ids, max_pairs=max_pairs, max_time_s=max_time_s)
    handle.record(state, [plan])
    done: dict[str, Outcome] = {}
    for cid in plan.order:
        outcome = _one(handle, cid, progress, "build pass", max_pairs=max_pairs, max_time_s=max_time_s,
                       until="oracle")
        if outcome is not None:
            done[cid] = outcome  # judged (or stopped) before its campaign
    for cid in plan.order:
        if cid not in done:
            done[cid] = _one(handle, cid, progress, "campaign", max_pairs=max_pairs, max_time_s=max_time_s)
    return BatchResult(plan=plan, outcomes=[done[cid] for cid in plan.order])


def _one(handle: RunHandle, cid: str, progress, stage: str, **options) -> Outcome | None:
    progress(f"{cid}: {stage}")
    try:
        result = evaluate(handle, cid, lambda m: progress(f"{cid}: {m}"), **options)
    except DiskError:
        raise
    except PWError as exc:
        return Outcome(id=cid, error=exc.message, exit_code=exc.exit_code)
    return None if result is None else Outcome(id=cid, result=result)
