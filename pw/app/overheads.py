"""Measured profiler overheads for routing: the `projections.overhead` fold over every run's ledger
in a runs directory (the runs themselves are the record; nothing else is written).

"Next time" is the next routing decision: a `pw start` routes with the factors every earlier run in
its runs directory observed, and a candidate's timed profiler with those plus its own run's.
"""

from __future__ import annotations

from pathlib import Path

from projections.overhead import Observed, observed_overheads


def observed_in(runs_dir: Path, *, exclude: Path | None = None) -> dict[str, Observed]:
    """Every run's captures under ``runs_dir`` folded together (a damaged or foreign ledger is skipped)."""
    return observed_overheads(_events_of(runs_dir, exclude=exclude))


def factors_for(run_path: Path, runtime_s: float, own_events=()) -> dict[str, float]:
    """The measured factors routing uses for a run whose program takes ``runtime_s``: from its runs
    directory's other runs and its own events, measured on programs of about that length."""
    from projections.overhead import factors

    return factors(observed_overheads([*_events_of(run_path.parent, exclude=run_path), *own_events]), runtime_s)


def _events_of(runs_dir: Path, *, exclude: Path | None = None):
    from ledger.errors import PWError
    from ledger.store import Ledger

    out = []
    for path in sorted(runs_dir.glob("*/ledger.jsonl")) if runs_dir.is_dir() else []:
        if exclude is not None and path.parent.resolve() == exclude.resolve():
            continue
        try:
            out += Ledger(path).events()
        except (PWError, OSError, ValueError):
            continue
    return out
