"""Candidate bookkeeping that needs no I/O: ids, parents, budgets, editable files.

`decide_prepare`, `decide_evaluate` and `decide_batch` check a command against the folded run state and either
return what may happen or raise `RejectedCommand` with one line saying why and what to do.
"""

from __future__ import annotations

import fnmatch
import re

import msgspec

from ledger.contract import Contract
from ledger.errors import InputError, RejectedCommand
from ledger.events import BatchPlanned
from projections.state import CandidateState, RunState

ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
RESERVED_IDS = frozenset({"baseline", "current"})


class CandidateSpec(msgspec.Struct, frozen=True):
    id: str
    parent: str
    mechanism: str


def parse_candidate(text: str) -> CandidateSpec:
    """`ID:PARENT:MECHANISM`; the mechanism may itself contain colons."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise InputError(f"--candidate {text!r}: expected ID:PARENT:MECHANISM, e.g. loop-order:baseline:interchange")
    cid, parent, mechanism = (p.strip() for p in parts)
    check_id(cid)
    if not mechanism.isprintable() or len(mechanism) > MECHANISM_MAX:
        # It is printed in status tables, briefs and report.md: one line of text, no escapes a
        # terminal would act on (red team, session 9: a newline and an ANSI colour code were kept).
        shown = mechanism if len(mechanism) <= 40 else mechanism[:37] + "..."
        raise InputError(f"--candidate mechanism {shown!r}: expected one line of printable text, at most "
                         f"{MECHANISM_MAX} characters (no control characters or escapes)")
    return CandidateSpec(cid, parent, mechanism)


MECHANISM_MAX = 200


def check_id(cid: str) -> None:
    if not ID_PATTERN.fullmatch(cid) or cid in RESERVED_IDS:  # fullmatch: `$` would allow a trailing newline
        shown = cid if len(cid) <= 40 else cid[:37] + "..."
        raise InputError(
            f"candidate id {shown!r}: expected 1-32 lowercase letters, digits and dashes, starting with a letter "
            "or digit (not 'baseline' or 'current'; never a path)"
        )


def best_verified(state: RunState) -> str | None:
    """The verified candidate with the largest speedup over the baseline (cumulative along its
    chain of parents), or None."""
    from projections.state import cumulative

    best, best_speedup = None, 0.0
    for cid, cand in sorted(state.candidates.items()):
        v = cand.confirmation or cand.verdict
        cum = cumulative(state, cid) if v is not None and v.status == "verified" else None
        if cum is not None and cum.speedup > best_speedup:
            best, best_speedup = cid, cum.speedup
    return best


def screening_ranking(state: RunState) -> list[tuple[str, float]]:
    """winner-confirmation mode: the screened, correct, unconfirmed candidates by their one-pair
    estimate, best first (an exploratory ranking, never a verdict)."""
    ranked = []
    for cid, cand in state.candidates.items():
        v = cand.verdict
        if (v is not None and v.exploratory and v.status == "inconclusive" and cand.confirmation is None
                and v.speedup is not None):
            ranked.append((cid, v.speedup))
    return sorted(ranked, key=lambda kv: (-kv[1], kv[0]))


def suggested_confirmation(state: RunState) -> str | None:
    """What `pw status` suggests confirming: the best one-pair estimate while no winner is confirmed
    (after that the screening has done its work: the next ranked one is not the best estimate)."""
    if any(c.confirmation is not None for c in state.candidates.values()):
        return None
    ranking = screening_ranking(state)
    return ranking[0][0] if ranking else None


def confirmation_due(state: RunState) -> tuple[int, str | None] | None:
    """winner-confirmation mode: (iterations left before the automatic confirmation, the candidate
    it confirms once none are left). The iteration budget counts evaluated candidates (any verdict);
    when it is spent and nothing is confirmed yet, the best one-pair estimate is confirmed. Outside
    the mode, or once a winner is confirmed, nothing is due: None."""
    if state.run is None or state.run.contract.sampling.mode != "winner-confirmation":
        return None
    if any(c.confirmation is not None for c in state.candidates.values()):
        return None
    evaluated = sum(1 for c in state.candidates.values() if c.verdict is not None)
    left = max(0, state.run.budgets.iterations - evaluated)
    ranking = screening_ranking(state)
    return left, (ranking[0][0] if left == 0 and ranking else None)


def resolve_parent(state: RunState, parent: str, pending: dict[str, CandidateSpec]) -> str:
    if parent == "baseline":
        return "baseline"
    if parent == "current":
        return best_verified(state) or "baseline"
    check_id(parent)
    if parent in state.candidates:
        return parent
    if parent in pending:
        raise RejectedCommand(f"parent {parent!r} is prepared in this same command; evaluate it first")
    known = ", ".join(sorted(state.candidates)) or "none yet"
    raise RejectedCommand(f"parent {parent!r}: expected baseline, current or a candidate id (known: {known})")


def decide_prepare(state: RunState, specs: list[CandidateSpec]) -> list[tuple[CandidateSpec, str]]:
    """Check ids, parents and the iteration budget; return (spec, resolved parent) per candidate."""
    if state.run is None or "baseline-timing" not in state.stages:
        raise RejectedCommand("the baseline is not ready; finish `pw start` (or `pw start --resume RUN`) first")
    budget = state.run.budgets.iterations
    if len(state.candidates) + len(specs) > budget:
        raise RejectedCommand(
            f"iteration budget spent: {len(state.candidates)} of {budget} candidates prepared, "
            f"{len(specs)} more asked; start a new run with a larger --iterations"
        )
    seen: dict[str, CandidateSpec] = {}
    out = []
    for spec in specs:
        if spec.id in state.candidates or spec.id in seen:
            raise RejectedCommand(f"candidate {spec.id!r} already exists; choose another id")
        parent = resolve_parent(state, spec.parent, seen)
        if parent != "baseline":
            pcand = state.candidates[parent]
            if pcand.diff is None:
                raise RejectedCommand(f"parent {parent!r} has not been evaluated yet; evaluate it first")
        seen[spec.id] = spec
        out.append((spec, parent))
    return out


def decide_evaluate(state: RunState, cid: str) -> tuple[CandidateState, int]:
    """The candidate and the attempt number this evaluation will be; enforce the repair budget."""
    check_id(cid)
    cand = state.candidates.get(cid)
    if cand is None:
        known = ", ".join(sorted(state.candidates)) or "none"
        raise RejectedCommand(f"candidate {cid!r} was never prepared (prepared: {known})")
    if state.run is None:
        raise RejectedCommand("no RunStarted in this ledger")
    repairs = state.run.budgets.repairs
    if cand.verdict is not None:
        if cand.verdict.status == "inconclusive" and not cand.verdict.repairable:
            raise RejectedCommand(
                f"candidate {cid!r} already has a verdict (inconclusive); `pw evaluate RUN {cid} --more [N]` "
                "continues its timing campaign with N more pairs"
            )
        if cand.verdict.status == "proposed" and not cand.verdict.repairable and any(
                "undecided" in r for r in cand.verdict.reasons):
            raise RejectedCommand(
                f"candidate {cid!r} is proposed: its campaign's budget ran out before the mechanism was decided; "
                f"`pw evaluate RUN {cid} --more [N]` continues it"
            )
        if not cand.verdict.repairable:
            raise RejectedCommand(
                f"candidate {cid!r} already has a verdict ({cand.verdict.status}); prepare a new candidate "
                f"with parent {cid!r} to build on it, or `pw confirm` it"
            )
        if cand.failed_attempts > repairs:
            raise RejectedCommand(
                f"repair budget spent for {cid!r}: {cand.failed_attempts} failed attempts, budget {repairs} repairs"
            )
    attempt = (cand.diff.attempt + 1) if cand.diff is not None else 1
    return cand, attempt


def decide_batch(state: RunState, ids: list[str], *, max_pairs: int | None = None,
                 max_time_s: float | None = None) -> BatchPlanned:
    """The batch `pw evaluate RUN A B ...` records before it touches any candidate: every id once,
    and each one a candidate `decide_evaluate` would evaluate now (else the first one that is not,
    named, and nothing is recorded). The campaigns run in the order given."""
    seen: set[str] = set()
    for cid in ids:
        check_id(cid)
        if cid in seen:
            raise InputError(f"candidate {cid!r} is given twice; name each candidate of a batch once")
        seen.add(cid)
    for cid in ids:
        decide_evaluate(state, cid)
    return BatchPlanned(batch=f"batch-{len(state.batches) + 1}", candidates=list(ids), order=list(ids),
                        mode="builds-first", max_pairs=max_pairs, max_time_s=max_time_s)


def is_editable(rel: str, contract: Contract) -> bool:
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(rel, g.removeprefix("**/")) for g in contract.source.editable)


def protected_files(contract: Contract) -> set[str]:
    """Oracle and reference files: never editable, whatever the editable globs say."""
    o = contract.oracle
    out = {h.reference for h in o.holdout}
    if o.reference:
        out.add(o.reference)
    out.add("profileweaver.json")
    return out


def refused_edits(changed: list[str], contract: Contract) -> list[str]:
    protected = protected_files(contract)
    return sorted(rel for rel in changed if rel in protected or not is_editable(rel, contract))
