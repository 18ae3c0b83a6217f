"""winner-confirmation's iteration budget: screening ranks candidates by one exploratory pair each,
and the `pw evaluate` that spends the last of ``--iterations`` confirms the best estimate by itself
(`pw confirm` without ``--fresh``: its multi-pair campaign and the winner's full profiling)."""

from __future__ import annotations

from collections.abc import Callable

from projections.state import RunState
from pw.app.confirm import confirm
from pw.app.run import RunHandle
from pw.rules.candidates import confirmation_due


def budget_line(state: RunState) -> tuple[int | None, str | None]:
    """(iterations left, the line that says so) while screening; (None, None) otherwise."""
    due = confirmation_due(state)
    if due is None:
        return None, None
    left, _ = due
    if left:
        return left, (f"screening: {left} of {state.run.budgets.iterations} iterations left before the best "
                      "one-pair estimate is confirmed automatically")
    return 0, "screening: iteration budget spent; the best one-pair estimate is confirmed with the last evaluate"


def confirm_when_due(handle: RunHandle, progress: Callable[[str], None]) -> dict | None:
    """After an evaluate: how many iterations are left, or, once none are, the best one-pair estimate
    confirmed now. None outside the mode or once a winner is confirmed."""
    from ledger.codec import to_builtins

    state = handle.state()
    left, line = budget_line(state)
    if line is None:
        return None
    if left:
        return {"iterations_left": left, "confirmed": None, "line": line}
    _, winner = confirmation_due(state)  # not None: budget_line said screening
    if winner is None:
        return {"iterations_left": 0, "confirmed": None,
                "line": "screening: iteration budget spent, but no candidate has a one-pair estimate to confirm"}
    progress(f"iteration budget spent: confirming {winner}")
    confirmed = confirm(handle, winner, fresh=False, progress=progress)
    speed = f"{confirmed.speedup:.3f}x" if confirmed.speedup is not None else "-"
    return {"iterations_left": 0, "confirmed": to_builtins(confirmed),
            "line": f"screening: iteration budget spent; confirmed the best one-pair estimate {winner}: "
                    f"{confirmed.status} ({speed})"}
