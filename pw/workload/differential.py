"""Differential checks: fresh holdout inputs run by the baseline and a target, outputs compared;
and what an oracle check covered, in words, including when it covered nothing.

The baseline (the user's pristine program) is the reference on any input, so a generator needs no
reference files and its inputs can be drawn after the candidate is built: nothing about them can be
precomputed into the candidate. `pw.workload.correctness.check` calls `finish` once its own checks
are done.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.contract import Contract
from pw.workload.compare import Comparison, compare_text
from pw.workload.steps import RunOutcome, Target, classify, failure_message, run_once


def output_of(contract: Contract, run: RunOutcome) -> str:
    """The text the oracle compares for one run: the declared output file, else stdout."""
    if contract.oracle.kind == "file":
        return (run.output_file or b"").decode(errors="replace")
    return run.stdout


def compare_outputs(contract: Contract, got: RunOutcome, want: RunOutcome) -> Comparison:
    """A target's output against the baseline's on the same input, within the oracle's tolerance."""
    o = contract.oracle
    skip = contract.metric.pattern if contract.metric.kind == "roi" else None
    return compare_text(output_of(contract, got), output_of(contract, want), rtol=o.rtol, atol=o.atol,
                        skip_pattern=skip)


def coverage(contract: Contract, run: RunOutcome | None) -> Comparison | None:
    """What a passing comparison of this run's output covers (its non-empty, non-metric lines)."""
    if run is None or contract.oracle.kind in ("exit", "command"):
        return None
    return compare_outputs(contract, run, run)


def stderr_lines(run: RunOutcome) -> int:
    """Non-blank lines a run wrote to stderr (read before the next run reuses its scratch)."""
    path = Path(run.process.stderr_path) if run.process.stderr_path else None
    if path is None or not path.is_file():
        return 0
    return sum(1 for ln in path.read_text(errors="replace").splitlines() if ln.strip())


def compares_nothing(contract: Contract, covered: Comparison | None, n_stderr: int) -> str | None:
    """Why this oracle is no oracle, or None."""
    o = contract.oracle
    if o.kind == "exit":
        return "it checks only the exit status; no output is compared (declare an output oracle in profileweaver.json)"
    if o.kind == "command" or covered is None or covered.lines > 0:
        return None
    stream = f"the output file {o.path}" if o.kind == "file" else "stdout"
    extra = f"; the program wrote {n_stderr} line(s) to stderr, which the oracle does not compare" if n_stderr else ""
    return (f"it compared 0 lines: {stream} was empty{extra}; give an oracle that compares the program's "
            "results (oracle.kind stdout/file/baseline in profileweaver.json)")


def run_fresh(contract: Contract, target: Target, baseline: Target, scratch: Path,
              inputs: list[list[str]]) -> tuple[bool, str, list[str], RunOutcome | None]:
    """Each drawn input, run by the baseline (the reference) and then by the target, compared.
    Returns (passed, detail of the first failure or a summary, one line per input, the failing run)."""
    lines: list[str] = []
    for i, argv in enumerate(inputs):
        shown = " ".join(argv)
        ref = run_once(contract, baseline, scratch, argv=argv, tag=f"fresh-{i}-baseline")
        if classify(ref) is not None:
            return False, f"fresh holdout `{shown}`: the baseline itself failed: {failure_message(contract, ref)}", \
                lines, ref
        if target.label == baseline.label:
            covered = coverage(contract, ref)
            n = covered.lines if covered else 0
            lines.append(f"{shown}: baseline ran ({n} lines)")
            if n == 0:
                return False, f"fresh holdout `{shown}`: the baseline's output is empty, nothing to compare", lines, ref
            continue
        got = run_once(contract, target, scratch, argv=argv, tag=f"fresh-{i}")
        if classify(got) is not None:
            return False, f"fresh holdout `{shown}`: {failure_message(contract, got)}", lines, got
        cmp = compare_outputs(contract, got, ref)
        if not cmp.passed:
            return False, f"fresh holdout `{shown}` vs the baseline: {cmp.detail}", lines, got
        lines.append(f"{shown}: {cmp.lines} lines match the baseline")
    return True, f"{len(inputs)} fresh holdout input(s) match the baseline", lines, None


def describe_coverage(contract: Contract, covered: Comparison | None, fresh: list[list[str]],
                      pair_template: str | None) -> str:
    """One sentence of what the oracle compares: streams, lines, tolerance, holdouts."""
    from pw.workload.holdouts import describe

    o = contract.oracle
    if o.kind == "exit":
        return "exit status only"
    if o.kind == "command":
        return f"whatever `{' '.join(o.argv or [])}` checks (exit 0)"
    stream = f"file {o.path}" if o.kind == "file" else "stdout"
    n = covered.lines if covered else 0
    fields = covered.fields if covered else 0
    against = {"stdout": f"reference {o.reference}", "file": f"reference {o.reference}",
               "stable": "the baseline's output", "baseline": "the baseline's output"}[o.kind]
    parts = [f"{stream}: {n} lines ({fields} fields) vs {against}, numbers within rtol={o.rtol:g} "
             f"atol={o.atol:g}, other tokens exactly"]
    if o.holdout:
        parts.append(f"{len(o.holdout)} fixed holdout input(s) vs their references")
    if o.generators:
        gens = "; ".join(describe(g) for g in o.generators)
        parts.append(f"{len(fresh)} fresh holdout input(s) drawn after the build from {gens}, vs the baseline")
    if pair_template:
        parts.append(f"every timed pair on a fresh input {pair_template}, candidate vs baseline")
    return "; ".join(parts)


def finish(contract: Contract, event: ev.OracleChecked, first: RunOutcome | None, *,
           fresh: list[list[str]], fresh_lines: list[str], n_stderr: int = 0) -> ev.OracleChecked:
    """The event with what it compared, whether that is nothing, and the holdouts it ran."""
    from pw.workload.holdouts import pair_generator

    covered = coverage(contract, first) if event.passed else None
    pair = pair_generator(contract)
    template = None
    if pair is not None:
        gen, _ = pair
        template = f"(`{' '.join(contract.run.argv)}` with {gen.seed} drawn from {gen.ranges[gen.seed]})"  # type: ignore[index]
    return msgspec.structs.replace(
        event,
        compared=describe_coverage(contract, covered, fresh, template),
        compares_nothing=compares_nothing(contract, covered, n_stderr) if event.passed else None,
        holdouts=list(fresh_lines),
    )
