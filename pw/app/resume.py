"""An interrupted `pw evaluate` continues its attempt; two at once on one candidate never both work.

**One writer per candidate.** `pw evaluate` (and `--more`) holds an exclusive lock on
``locks/<id>.lock`` in the run directory for its whole run, taken before any work; the lock file says
which process holds it. A second one is refused at once (exit 4, the holder's pid named): nothing is
built, nothing is appended. The lock is the kernel's (``flock``): a killed holder releases it.

**Resume.** The latest attempt of a candidate without a verdict was interrupted (a SIGKILL, a lost
machine). When its workspace still hashes to what that attempt recorded, `pw evaluate` continues the
same attempt from its last recorded stage: a recorded build is reused once its tree still hashes to
what was built, recorded holdouts and the oracle check are not drawn or run again, a recorded campaign
is never timed again. When the workspace was edited since, the interrupted attempt is closed by an
``AttemptAbandoned`` event that says so, and a new attempt starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

import msgspec

from ledger import events as ev
from ledger.errors import HeldElsewhere
from projections.state import RunState
from pw.app.run import RunHandle
from pw.workload import workspace


class Attempt(msgspec.Struct, frozen=True):
    """An attempt of ``cid`` and the stages it has recorded ("diff", "build", "holdouts", "oracle",
    "hybrid", "timing", "diagnosis"), with the holdout inputs it drew (for the executable hashed
    ``holdouts_for``) and how its hybrid arm was prepared."""

    cid: str
    attempt: int
    recorded: frozenset[str]
    holdouts: list[list[str]] = []
    holdouts_for: str | None = None
    hybrid: str | None = None  # the recorded HybridPrepared's status


@contextlib.contextmanager
def evaluation_lock(handle: RunHandle, cid: str):
    """Hold ``locks/<cid>.lock`` for the block, or raise HeldElsewhere naming the holder."""
    locks = handle.path / "locks"
    locks.mkdir(exist_ok=True)
    path = locks / f"{cid}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise HeldElsewhere(f"candidate {cid!r} is being evaluated by {holder}; wait for it to finish "
                                   "(or stop it), then run the command again: nothing was done") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _stages(handle: RunHandle, cid: str, diff_seq: int) -> tuple[set[str], dict, bool]:
    """(stages recorded after the attempt's diff, what the Attempt keeps of them, whether a verdict
    closed it)."""
    recorded, kept, judged = {"diff"}, {}, False
    for e in handle.events():
        if e.seq <= diff_seq:
            continue
        d = e.data
        if isinstance(d, ev.BuildFinished) and d.target == cid:
            recorded.add("build")
        elif isinstance(d, ev.HoldoutsDrawn) and d.target == cid:
            recorded.add("holdouts")
            kept.update(holdouts=[list(a) for a in d.inputs], holdouts_for=d.binary_sha256)
        elif isinstance(d, ev.HybridPrepared) and d.id == cid:
            recorded.add("hybrid")
            kept["hybrid"] = d.status
        elif isinstance(d, ev.OracleChecked) and d.target == cid:
            recorded.add("oracle")
        elif isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid and d.purpose != "unprofiled":
            recorded.add("timing")
        elif isinstance(d, ev.FaultRecorded) and d.target.split(".", 1)[0] == cid and d.stage in ("screening",):
            recorded.add("timing")  # the campaign failed: that is its outcome, judged as such
        elif isinstance(d, ev.ProfileNormalized) and d.target == cid and "timing" in recorded and not d.parts:
            recorded.add("diagnosis")
        elif isinstance(d, (ev.VerdictReached, ev.AttemptAbandoned)) and d.id == cid:
            judged = True
    return recorded, kept, judged


def attempt_in_progress(handle: RunHandle, state: RunState, cid: str) -> tuple[RunState, Attempt | None]:
    """(state, the interrupted attempt `pw evaluate` continues, or None: no attempt, or the last one
    has a verdict). An interrupted attempt whose workspace was edited since is closed here."""
    cand = state.candidates.get(cid)
    if cand is None or cand.diff is None:
        return state, None
    diff = cand.diff
    seq = _seq_of_diff(handle, cid, diff.attempt)
    if seq is None:
        return state, None
    recorded, kept, judged = _stages(handle, cid, seq)
    if judged:
        return state, None
    ws = handle.path / cand.prepared.workspace
    if workspace.tree_digest(ws, workspace.source_files(ws)) != diff.source_sha256 or diff.refused:
        state = handle.record(state, [ev.AttemptAbandoned(
            id=cid, attempt=diff.attempt,
            reason="interrupted before its verdict, and the workspace was edited since: a new attempt starts")])
        return state, None
    return state, Attempt(cid=cid, attempt=diff.attempt, recorded=frozenset(recorded), **kept)


def _seq_of_diff(handle: RunHandle, cid: str, attempt: int) -> int | None:
    found = None
    for e in handle.events():
        if isinstance(e.data, ev.CandidateDiffRecorded) and e.data.id == cid and e.data.attempt == attempt:
            found = e.seq
    return found
