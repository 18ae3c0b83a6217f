"""Run a target's correctness oracle and turn the result into events.

References always come from the baseline's pristine copy (`reference_dir`), never from the
candidate's workspace, so an edited reference file cannot make a wrong answer pass. Holdout runs
use other inputs with their own references, so output that is right only for the timed input
(hard-coded or cached) fails.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from adapters.process import run_process
from ledger import events as ev
from ledger.contract import Contract
from ledger.evidence import EvidenceStore
from pw.cli import diagnostics
from pw.workload.compare import compare_text
from pw.workload.steps import (
    RunOutcome,
    Target,
    classify,
    compare_with_reference,
    failure_message,
    run_once,
    step_outcome,
)


class OracleResult(msgspec.Struct, frozen=True):
    event: ev.OracleChecked
    fault: ev.FaultRecorded | None
    first_run: RunOutcome | None


def _method(contract: Contract) -> str:
    o = contract.oracle
    if o.kind == "stable":
        return "inferred: exit 0 and output stable across two runs"
    if o.kind == "baseline":
        gens = f" + fresh holdouts from {len(o.generators)} generator(s)" if o.generators else ""
        return f"stdout vs the baseline's on the same input (reproducible across two runs){gens}"
    if o.kind == "exit":
        return "exit status 0"
    if o.kind == "command":
        return f"command `{' '.join(o.argv or [])}` exits 0"
    where = "stdout" if o.kind == "stdout" else f"file {o.path}"
    extra = f" + {len(o.holdout)} holdout input(s)" if o.holdout else ""
    if o.generators:
        extra += f" + fresh holdouts from {len(o.generators)} generator(s)"
    return f"{where} vs {o.reference}{extra}"


def _result(contract, target, passed, detail, run, evidence, *, fault_class=None, stage="oracle"):
    o = contract.oracle
    out_sha = evidence.put(run.stdout.encode()) if run is not None else None
    event = ev.OracleChecked(
        target=target.label,
        method=_method(contract),
        inferred=o.kind == "stable",
        rtol=o.rtol,
        atol=o.atol,
        passed=passed,
        detail=detail,
        run=step_outcome(run.process, out_sha) if run is not None else None,
        output_sha256=out_sha,
    )
    fault = None
    if not passed:
        fault = ev.FaultRecorded(
            stage=stage,
            target=target.label,
            failure_class=fault_class or "oracle-failed",
            message=detail,
            log_sha256=out_sha,
        )
    return OracleResult(event, fault, run)


def _skip(contract: Contract) -> str | None:
    """Lines that carry the ROI metric are timing, not output: never compared."""
    return contract.metric.pattern if contract.metric.kind == "roi" else None


def _with_outside(result: OracleResult, outside: list[str]) -> OracleResult:
    if not outside:
        return result
    event = msgspec.structs.replace(result.event, outside_writes=list(outside))
    return msgspec.structs.replace(result, event=event)


def check(
    contract: Contract,
    target: Target,
    reference_dir: Path,
    scratch: Path,
    evidence: EvidenceStore,
    *,
    stable_reference: str | None = None,
    baseline: Target | None = None,
    fresh: list[list[str]] = (),  # type: ignore[assignment]
) -> OracleResult:
    """Run the oracle for `target`. For an inferred (`stable`) or `baseline` oracle, the baseline is
    run twice; a candidate is compared with the baseline's first output (`stable_reference`). The
    first run is traced for writes outside the workspace (`OracleChecked.outside_writes`). Then the
    `fresh` holdout inputs (drawn after the build) run on `baseline` and the target and are compared
    (`pw.workload.differential`); the event says what all of it compared."""
    from pw.workload import differential

    first = run_once(contract, target, scratch, tag="oracle", trace_writes=True)
    n_stderr = differential.stderr_lines(first)
    result = _with_outside(_check(contract, target, reference_dir, scratch, evidence, first, stable_reference),
                           first.outside_writes)
    lines: list[str] = []
    if result.event.passed and fresh and baseline is not None:
        ok, detail, lines, failed = differential.run_fresh(contract, target, baseline, scratch, list(fresh))
        if not ok:
            failed_result = _result(contract, target, False, detail, failed, evidence)
            result = _with_outside(failed_result, first.outside_writes)
        else:
            event = msgspec.structs.replace(result.event, detail=f"{result.event.detail}; {detail}")
            result = msgspec.structs.replace(result, event=event)
    event = differential.finish(contract, result.event, first, fresh=list(fresh), fresh_lines=lines,
                                  n_stderr=n_stderr)
    return msgspec.structs.replace(result, event=event, fault=result.fault)


def _check(contract, target, reference_dir, scratch, evidence, first, stable_reference) -> OracleResult:
    o = contract.oracle
    failure = classify(first)
    if failure is not None:
        return _result(contract, target, False, failure_message(contract, first), first, evidence, fault_class=failure)
    if first.metric_error:
        return _result(contract, target, False, first.metric_error, first, evidence, fault_class="launch-failed")
    if o.kind == "exit":
        return _result(contract, target, True, "exit status 0", first, evidence)
    if o.kind in ("stable", "baseline"):
        if stable_reference is None:
            second = run_once(contract, target, scratch, tag="oracle-2")
            failure = classify(second)
            if failure is not None:
                msg = "second run: " + failure_message(contract, second)
                return _result(contract, target, False, msg, second, evidence, fault_class=failure)
            cmp = compare_text(second.stdout, first.stdout, rtol=o.rtol, atol=o.atol, skip_pattern=_skip(contract))
            if not cmp.passed:
                msg = f"output differs between two identical runs: {cmp.detail}"
                return _result(contract, target, False, msg, first, evidence, fault_class="nondeterministic-output")
            detail = f"exit 0 and output stable across two runs ({cmp.detail})"
        else:
            cmp = compare_text(first.stdout, stable_reference, rtol=o.rtol, atol=o.atol, skip_pattern=_skip(contract))
            detail = f"vs baseline output: {cmp.detail}"
            if not cmp.passed:
                return _result(contract, target, False, detail, first, evidence)
        return _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first, [detail])
    if o.kind == "command":
        result = run_process(
            list(o.argv or []),
            cwd=target.build_dir,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
            timeout_s=contract.run.timeout_s,
            stdout_path=scratch / "oracle-cmd.out",
            stderr_path=scratch / "oracle-cmd.err",
        )
        diagnostics.process_ran(result, what=f"oracle command {target.label}")
        ok = result.ok
        return _result(contract, target, ok, f"oracle command {'passed' if ok else 'failed'}", first, evidence)
    cmp = compare_with_reference(contract, reference_dir, first, o.reference or "")
    if not cmp.passed:
        return _result(contract, target, False, f"vs {o.reference}: {cmp.detail}", first, evidence)
    return _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first, [f"vs {o.reference}: {cmp.detail}"])


def _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first, details) -> OracleResult:
    """The manifest's fixed holdout inputs, each against its own reference file."""
    o = contract.oracle
    for i, holdout in enumerate(o.holdout):
        run = run_once(contract, target, scratch, argv=holdout.argv, tag=f"holdout-{i}")
        failure = classify(run)
        if failure is not None:
            msg = f"holdout {i}: " + failure_message(contract, run)
            return _result(contract, target, False, msg, run, evidence, fault_class=failure)
        hcmp = compare_with_reference(contract, reference_dir, run, holdout.reference)
        if not hcmp.passed:
            return _result(contract, target, False, f"holdout {i} vs {holdout.reference}: {hcmp.detail}", run, evidence)
        details.append(f"holdout {i}: ok")
    return _result(contract, target, True, "; ".join(details), first, evidence)
