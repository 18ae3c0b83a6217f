"""The application layer: a run directory with its ledger, evidence store and projections.

Load, fold, decide, append, materialize: every write of a run goes through `RunHandle.record`.
"""

from __future__ import annotations

from pathlib import Path

from ledger.events import Payload
from ledger.evidence import EvidenceStore
from ledger.store import Ledger
from projections import state
from projections.materialize import materialize
from pw import diagnostics


class RunHandle:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.ledger = Ledger(path / "ledger.jsonl")
        self.evidence = EvidenceStore(path / "raw")

    def state(self) -> state.RunState:
        return state.fold(self.ledger.read())

    def record(self, current: state.RunState, payloads: list[Payload], *, actor: str = "cli",
               key: str | None = None) -> state.RunState:
        """Append events decided against `current` (stale state -> ConcurrencyError), then rewrite
        the projections. Returns the new state."""
        if not payloads:
            return current
        envelopes = self.ledger.append(payloads, expected_seq=current.head.seq, actor=actor, key=key)
        if diagnostics.debugging():
            diagnostics.log().debug("appended", run=self.path.name, seq=f"{envelopes[0].seq}-{envelopes[-1].seq}",
                                    types=",".join(e.type for e in envelopes))
        new_state = state.fold(envelopes, current) if envelopes[0].seq == current.head.seq + 1 else self.state()
        self.materialize(new_state)
        return new_state

    def materialize(self, run_state: state.RunState) -> None:
        """Bring the projection files up to the ledger (under the run's projection lock)."""
        done = materialize(self.path, self.ledger, run_state)
        diagnostics.projections_written(self.path, done.state.head.seq, done.written)

    @property
    def logs(self) -> Path:
        return self.path / "logs"
