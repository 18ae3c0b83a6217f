"""The application layer: a run directory with its ledger, evidence store and projections.

Load, fold, decide, append, materialize: every write of a run goes through `RunHandle.record`.

One fold per command: the handle reads and folds the ledger once, the first time a command asks
(``events``, ``state``), and keeps both current with its own appends (a fold of the new events only),
so the workflows, the judge and the resume logic share one copy instead of reading the file again.
Another writer's append is still noticed: the ledger's expected-seq check refuses a stale append
(``ConcurrencyError``). Projections are rewritten once per stage (``stage``), not after every append.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ledger.events import Envelope, Payload
from ledger.evidence import EvidenceStore
from ledger.store import Ledger
from projections import state
from projections.materialize import materialize
from pw import diagnostics


class RunHandle:
    def __init__(self, path: Path, *, ledger: Ledger | None = None, events: list[Envelope] | None = None) -> None:
        """``ledger`` and ``events``: what the caller already read and checked (the CLI reads a run's
        ledger once to say what is wrong with it); the handle folds those instead of reading again."""
        self.path = path
        self.ledger = ledger or Ledger(path / "ledger.jsonl")
        self.evidence = EvidenceStore(path / "raw")
        self._events: list[Envelope] | None = None
        self._state: state.RunState | None = None
        self.reads = 0  # how many times this handle read and folded the whole ledger (tests/test_one_fold.py)
        if events is not None:
            self._events, self._state = events, state.fold(events)
            self.reads = 1
        self._deferred = 0
        self._stale = False

    def events(self) -> list[Envelope]:
        """Every event of the run, read once per handle and kept current with its own appends."""
        if self._events is None:
            self._events = self.ledger.events()
            self._state = state.fold(self._events)
            self.reads += 1
        return self._events

    def state(self) -> state.RunState:
        self.events()
        return self._state  # type: ignore[return-value]

    def refresh(self) -> state.RunState:
        """The state as the ledger on disk has it now (another process may have appended since it was
        read): read and fold again only when the ledger's head moved; the head check reads only the
        bytes after what this handle's ledger already verified."""
        if self._state is not None:
            head = self.ledger.head()
            if (head.seq, head.hash) == (self._state.head.seq, self._state.head.hash):
                return self._state
        self._events = None
        return self.state()

    def record(self, current: state.RunState, payloads: list[Payload], *, actor: str = "cli",
               key: str | None = None) -> state.RunState:
        """Append events decided against `current` (stale state -> ConcurrencyError), then rewrite
        the projections (at the end of the stage, inside ``stage``). Returns the new state."""
        if not payloads:
            return current
        envelopes = self.ledger.append(payloads, expected_seq=current.head.seq, actor=actor, key=key)
        if diagnostics.debugging():
            diagnostics.log().debug("appended", run=self.path.name, seq=f"{envelopes[0].seq}-{envelopes[-1].seq}",
                                    types=",".join(e.type for e in envelopes))
        if envelopes[0].seq == current.head.seq + 1:
            new_state = state.fold(envelopes, current)
            if self._events is not None and self._state is not None and self._state.head.seq == current.head.seq:
                self._events = self._events + list(envelopes)
                self._state = new_state
            else:
                self._events = None  # an idempotent re-send returned older events: read again when asked
        else:
            new_state = self.refresh()
        if self._deferred:
            self._stale = True
        else:
            self.materialize(new_state)
        return new_state

    @contextlib.contextmanager
    def stage(self):
        """Appends inside write the projections once, when the (outermost) stage ends, even when it
        fails: what was appended is on disk either way."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1
            if not self._deferred and self._stale:
                self._stale = False
                self.materialize(self.state())

    def materialize(self, run_state: state.RunState) -> None:
        """Bring the projection files up to the ledger (under the run's projection lock)."""
        done = materialize(self.path, self.ledger, run_state)
        diagnostics.projections_written(self.path, done.state.head.seq, done.written)

    @property
    def logs(self) -> Path:
        return self.path / "logs"
