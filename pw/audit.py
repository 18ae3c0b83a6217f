"""`pw audit`: recompute everything a run claims and name the first thing that does not follow.

Checks run in order; the first failure is the answer. Later parts of the system (verdicts,
statistics, gates) add their checks to `CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ledger.evidence import EvidenceStore
from ledger.store import Ledger
from projections import documents, state
from projections.materialize import first_divergence
from pw.runpath import RunDir


class AuditContext(msgspec.Struct):
    run: RunDir
    events: list
    state: state.RunState
    files: dict[str, bytes]
    evidence: EvidenceStore


class CheckResult(msgspec.Struct, frozen=True):
    name: str
    ok: bool
    detail: str


class AuditReport(msgspec.Struct, frozen=True):
    ok: bool
    head_seq: int
    checks: list[CheckResult]
    first_divergence: str | None


def _evidence_refs(events) -> list[tuple[int, str]]:
    """Every (seq, sha256) an event cites as raw evidence."""
    refs: list[tuple[int, str]] = []
    for env in events:
        for value in _walk(env.data):
            refs.append((env.seq, value))
    return refs


def _walk(obj):
    if isinstance(obj, msgspec.Struct):
        for field in obj.__struct_fields__:
            value = getattr(obj, field)
            if field.endswith("sha256") and isinstance(value, str) and field not in _NOT_EVIDENCE:
                yield value
            elif field == "artifacts" and isinstance(value, dict):
                yield from value.values()
            else:
                yield from _walk(value)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _walk(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _walk(item)


# Hashes that identify inputs rather than stored evidence files.
_NOT_EVIDENCE = frozenset({
    "inputs_sha256", "source_sha256", "manifest_sha256", "binary_sha256", "torn_sha256", "parent_source_sha256",
})


def check_evidence(ctx: AuditContext) -> str | None:
    for seq, digest in _evidence_refs(ctx.events):
        if not digest:
            continue
        if not ctx.evidence.has(digest):
            return f"event seq {seq}: cites evidence {digest[:12]} which is missing from raw/"
        if not ctx.evidence.check(digest):
            return f"event seq {seq}: evidence {digest[:12]} in raw/ was modified (hash differs)"
    return None


def check_projections(ctx: AuditContext) -> str | None:
    return first_divergence(ctx.run.path, ctx.files)


CHECKS: list[tuple[str, Callable[[AuditContext], str | None]]] = [
    ("evidence", check_evidence),
    ("projections", check_projections),
]


def audit_run(run: RunDir) -> AuditReport:
    ledger = Ledger(run.ledger_path)
    verified = ledger.verify()
    if not verified.ok:
        detail = verified.message
        return AuditReport(False, verified.head.seq, [CheckResult("chain", False, detail)], f"chain: {detail}")
    events = ledger.events()
    run_state = state.fold(events)
    ctx = AuditContext(run, events, run_state, documents.render(run_state), EvidenceStore(run.path / "raw"))
    results = [CheckResult("chain", True, f"{verified.events} events, hash chain intact")]
    first = None
    for name, check in CHECKS:
        problem = check(ctx)
        results.append(CheckResult(name, problem is None, problem or "ok"))
        if problem is not None and first is None:
            first = f"{name}: {problem}"
    return AuditReport(first is None, verified.head.seq, results, first)
