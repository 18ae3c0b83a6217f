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
from pw import diagnostics
from pw.workload.compare import (
    STREAMS,
    compare_streams,
    decode_streams,
    encode_streams,
    is_bundle,
    unchecked_text,
    varying_lines,
)
from pw.workload.differential import compare_outputs, compared_streams, streams_of
from pw.workload.steps import (
    RunOutcome,
    Target,
    caught,
    classify,
    compare_with_reference,
    confine_for,
    failure_message,
    left_behind,
    run_once,
    step_outcome,
)


class OracleResult(msgspec.Struct, frozen=True):
    event: ev.OracleChecked
    fault: ev.FaultRecorded | None
    first_run: RunOutcome | None
    # Lines the baseline does not repeat between identical runs (stream -> line numbers), set
    # aside by the inferred oracle and kept in its stored output bundle (``compare.Streams.vary``).
    vary: dict[str, list[int]] = {}


def _method(contract: Contract) -> str:
    o = contract.oracle
    if o.kind == "stable":
        return f"inferred: exit 0 and {'+'.join(o.streams or STREAMS)} stable across two runs"
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


def _result(contract, target, passed, detail, run, evidence, *, fault_class=None, stage="oracle", vary=None):
    o = contract.oracle
    vary = dict(vary or {})
    if run is None:
        out_sha = None
    elif o.kind == "stable":  # every stream: a candidate is compared with all of them
        out_sha = evidence.put(encode_streams(msgspec.structs.replace(streams_of(run), vary=vary)))
    else:
        out_sha = evidence.put(run.stdout.encode())
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
    return OracleResult(event, fault, run, vary=vary)


def _with_evidence(result: OracleResult, first: RunOutcome, evidence: EvidenceStore) -> OracleResult:
    """What the per-run output checks and the caught rule compare later runs with: the first run's
    stderr and declared output file, and what it left behind."""
    event = msgspec.structs.replace(
        result.event,
        outside_writes=list(first.outside_writes),
        left_behind=left_behind(first),
        stderr_sha256=evidence.put(first.stderr.encode()),
        output_file_sha256=evidence.put(first.output_file) if first.output_file is not None else None,
    )
    return msgspec.structs.replace(result, event=event)


def _skip(contract: Contract) -> str | None:
    """Lines that carry the ROI metric are timing, not output: never compared."""
    return contract.metric.region_pattern


def _with_outside(result: OracleResult, outside: list[str]) -> OracleResult:
    from pw.workload.write_trace import strace_mode

    # How the first run was traced: a fallback to stopping on every syscall is slow and is said so.
    event = msgspec.structs.replace(result.event, outside_writes=list(outside), tracing=strace_mode())
    return msgspec.structs.replace(result, event=event)


def _caught(contract, target, run, what: str, allowed: list[str] | None, evidence) -> OracleResult | None:
    """A rejection naming what the run left for the next one, beyond what the baseline leaves."""
    if allowed is None:
        return None
    found = caught(run, allowed)
    if not found:
        return None
    detail = (f"caught: the {what} " + "; ".join(found)
              + " (anything kept for the next run can carry a result across runs)")
    return _result(contract, target, False, detail, run, evidence, fault_class="caught")


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
    allowed: list[str] | None = None,
) -> OracleResult:
    """Run the oracle for `target`. For an inferred (`stable`) or `baseline` oracle, the baseline is
    run twice; a candidate is compared with the baseline's first output (`stable_reference`). Then the
    `fresh` holdout inputs (drawn after the build) run on `baseline` and the target and are compared
    (`pw.workload.differential`); the event says what all of it compared.

    The runs are sandboxed (pw.workload.steps.run_once); what the first run leaves behind is
    recorded (`OracleChecked.left_behind`). With `allowed` (the baseline's own list), a run that
    leaves anything more, a file or a process, fails as `caught` before its output is compared.
    Without a sandbox the first run is traced for writes outside the workspace instead
    (`OracleChecked.outside_writes`)."""
    from contextlib import nullcontext

    from pw.workload import differential

    beside = bool(fresh) and baseline is not None and baseline.label != target.label
    with (differential.ReferenceLane(contract, baseline, scratch, list(fresh)) if beside else nullcontext()) as lane:
        first = run_once(contract, target, scratch, tag="oracle", trace_writes=True)
        n_stderr = differential.stderr_lines(first)
        result = _caught(contract, target, first, "oracle run", allowed, evidence)
        if result is None:
            result = _with_outside(_check(contract, target, reference_dir, scratch, evidence, first, stable_reference,
                                          allowed), first.outside_writes)
        lines: list[str] = []
        if result.event.passed and fresh and baseline is not None:
            ok, detail, lines, failed = differential.run_fresh(contract, target, baseline, scratch, list(fresh),
                                                               vary=result.vary, lane=lane)
            if not ok:
                failed_result = _result(contract, target, False, detail, failed, evidence)
                result = _with_outside(failed_result, first.outside_writes)
            else:
                event = msgspec.structs.replace(result.event, detail=f"{result.event.detail}; {detail}")
                result = msgspec.structs.replace(result, event=event)
    event = differential.finish(contract, result.event, first, fresh=list(fresh), fresh_lines=lines,
                                n_stderr=n_stderr, vary=result.vary)
    return _with_evidence(msgspec.structs.replace(result, event=event, fault=result.fault), first, evidence)


def _check(contract, target, reference_dir, scratch, evidence, first, stable_reference, allowed) -> OracleResult:
    o = contract.oracle
    failure = classify(first)
    if failure is not None:
        return _result(contract, target, False, failure_message(contract, first), first, evidence, fault_class=failure)
    if first.metric_error:
        return _result(contract, target, False, first.metric_error, first, evidence, fault_class="launch-failed")
    if o.kind == "exit":
        return _result(contract, target, True, "exit status 0", first, evidence)
    if o.kind in ("stable", "baseline"):
        vary: dict[str, list[int]] = {}
        if stable_reference is None:
            second = run_once(contract, target, scratch, tag="oracle-2")
            failure = classify(second)
            if failure is not None:
                msg = "second run: " + failure_message(contract, second)
                return _result(contract, target, False, msg, second, evidence, fault_class=failure)
            cmp = compare_outputs(contract, second, first)
            if not cmp.passed and o.kind == "stable":
                vary, cmp = _set_aside_varying(contract, target, scratch, evidence, first, second, cmp)
                if isinstance(vary, OracleResult):
                    return vary
            if not cmp.passed:
                msg = f"output differs between two identical runs: {cmp.detail}"
                return _result(contract, target, False, msg, first, evidence, fault_class="nondeterministic-output")
            runs = "three" if vary else "two"
            detail = f"exit 0 and output stable across {runs} runs ({cmp.detail})"
            if vary:
                detail += f"; {unchecked_text(vary)}"
        else:
            # A stable baseline recorded before stream bundles kept stdout only: compare what it kept.
            bundled = o.kind == "stable" and is_bundle(stable_reference)
            streams = (o.streams or STREAMS) if bundled else ("stdout",)
            want = decode_streams(stable_reference)
            vary = dict(want.vary) if bundled else {}
            cmp = compare_streams(streams_of(first), want, streams, rtol=o.rtol,
                                  atol=o.atol, skip_pattern=_skip(contract))
            detail = f"vs baseline output: {cmp.detail}" + (f"; {unchecked_text(vary)}" if vary else "")
            if not cmp.passed:
                return _result(contract, target, False, detail, first, evidence, vary=vary)
        return _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first, [detail], allowed,
                               vary=vary)
    if o.kind == "command":
        result = run_process(
            list(o.argv or []),
            cwd=target.build_dir,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
            timeout_s=contract.run.timeout_s,
            stdout_path=scratch / "oracle-cmd.out",
            stderr_path=scratch / "oracle-cmd.err",
            # The user's checker, but in the candidate's tree, among files the candidate built.
            confine=confine_for(target, target.build_dir),
        )
        diagnostics.process_ran(result, what=f"oracle command {target.label}")
        ok = result.ok
        return _result(contract, target, ok, f"oracle command {'passed' if ok else 'failed'}", first, evidence)
    cmp = compare_with_reference(contract, reference_dir, first, o.reference or "")
    if not cmp.passed:
        return _result(contract, target, False, f"vs {o.reference}: {cmp.detail}", first, evidence)
    return _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first,
                           [f"vs {o.reference}: {cmp.detail}"], allowed)


def _set_aside_varying(contract, target, scratch, evidence, first: RunOutcome, second: RunOutcome, cmp):
    """Two identical runs of the baseline differ: a third run, and the lines that differ among
    the three set aside (timers vary by nature; ``compare.varying_lines``). Returns (vary, the
    comparison of the other two runs with the first without those lines), or (an OracleResult,
    None) when the third run failed. Where lines cannot be set aside (the runs print another number
    of lines, or write other files), the first comparison stands and says why."""
    third = run_once(contract, target, scratch, tag="oracle-3")
    failure = classify(third)
    if failure is not None:
        msg = "third run: " + failure_message(contract, third)
        return _result(contract, target, False, msg, third, evidence, fault_class=failure), None
    o = contract.oracle
    streams = compared_streams(contract)
    vary, why = varying_lines(streams_of(first), [streams_of(second), streams_of(third)], streams, rtol=o.rtol,
                              atol=o.atol, skip_pattern=_skip(contract))
    if why is not None:
        return {}, msgspec.structs.replace(cmp, detail=f"{cmp.detail} ({why}: no lines can be set aside; "
                                                        "declare an oracle in profileweaver.json)")
    want = msgspec.structs.replace(streams_of(first), vary=vary)
    if compare_streams(streams_of(first), want, streams, rtol=o.rtol, atol=o.atol, skip_pattern=_skip(contract)).lines == 0:
        # Nothing would be left to compare: the program's whole output is nondeterministic.
        return {}, msgspec.structs.replace(cmp, detail=f"{cmp.detail} (every line varies: nothing stable is left "
                                                        "to compare)")
    for other in (second, third):
        again = compare_streams(streams_of(other), want, streams, rtol=o.rtol, atol=o.atol, skip_pattern=_skip(contract))
        if not again.passed:
            return {}, again
    return vary, again


def _fixed_holdouts(contract, target, reference_dir, scratch, evidence, first, details, allowed=None, vary=None
                    ) -> OracleResult:
    """The manifest's fixed holdout inputs, each against its own reference file."""
    o = contract.oracle
    for i, holdout in enumerate(o.holdout):
        run = run_once(contract, target, scratch, argv=holdout.argv, tag=f"holdout-{i}")
        failure = classify(run)
        if failure is not None:
            msg = f"holdout {i}: " + failure_message(contract, run)
            return _result(contract, target, False, msg, run, evidence, fault_class=failure)
        if (held := _caught(contract, target, run, f"holdout {i} run", allowed, evidence)) is not None:
            return held
        hcmp = compare_with_reference(contract, reference_dir, run, holdout.reference)
        if not hcmp.passed:
            return _result(contract, target, False, f"holdout {i} vs {holdout.reference}: {hcmp.detail}", run, evidence,
                           vary=vary)
        details.append(f"holdout {i}: ok")
    return _result(contract, target, True, "; ".join(details), first, evidence, vary=vary)
