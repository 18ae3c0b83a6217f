"""Differential checks: fresh holdout inputs run by the baseline and a target, outputs compared;
and what an oracle check covered, in words, including when it covered nothing.

The baseline (the user's pristine program) is the reference on any input, so a generator needs no
reference files and its inputs can be drawn after the candidate is built: nothing about them can be
precomputed into the candidate. `pw.workload.correctness.check` calls `finish` once its own checks
are done.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.contract import Contract
from pw.workload.compare import STREAMS, Comparison, Streams, compare_streams, compare_text, unchecked_text
from pw.workload.steps import RunOutcome, Target, classify, failure_message, run_once


def output_of(contract: Contract, run: RunOutcome) -> str:
    """The text the oracle compares for one run: the declared output file, else stdout."""
    if contract.oracle.kind == "file":
        return (run.output_file or b"").decode(errors="replace")
    return run.stdout


def streams_of(run: RunOutcome) -> Streams:
    return Streams(stdout=run.stdout, stderr=run.stderr, files=dict(run.created))


def compared_streams(contract: Contract) -> tuple[str, ...]:
    """The outputs an oracle compares: the inferred one sees stdout, stderr and created files."""
    o = contract.oracle
    if o.kind == "stable":
        return tuple(o.streams or STREAMS)
    return (f"file {o.path}",) if o.kind == "file" else ("stdout",)


def compare_outputs(contract: Contract, got: RunOutcome, want: RunOutcome,
                    vary: dict[str, list[int]] | None = None) -> Comparison:
    """A target's output against the baseline's on the same input, within the oracle's tolerance;
    ``vary`` (the inferred oracle's): lines of each stream that vary run to run, not compared."""
    o = contract.oracle
    skip = contract.metric.region_pattern
    if o.kind == "stable":
        reference = msgspec.structs.replace(streams_of(want), vary=dict(vary or {}))
        return compare_streams(streams_of(got), reference, compared_streams(contract), rtol=o.rtol,
                               atol=o.atol, skip_pattern=skip)
    return compare_text(output_of(contract, got), output_of(contract, want), rtol=o.rtol, atol=o.atol,
                        skip_pattern=skip)


def coverage(contract: Contract, run: RunOutcome | None,
             vary: dict[str, list[int]] | None = None) -> Comparison | None:
    """What a passing comparison of this run's output covers (its non-empty lines, less the
    metric's and those that vary run to run)."""
    if run is None or contract.oracle.kind in ("exit", "command"):
        return None
    return compare_outputs(contract, run, run, vary)


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
    stream = f"the output file {o.path}" if o.kind == "file" else "+".join(compared_streams(contract))
    unseen = n_stderr and "stderr" not in compared_streams(contract)
    extra = f"; the program wrote {n_stderr} line(s) to stderr, which the oracle does not compare" if unseen else ""
    return (f"it compared 0 lines: {stream} was empty{extra}; give an oracle that compares the program's "
            "results (oracle.kind stdout/file/baseline in profileweaver.json)")


class ReferenceLane:
    """The baseline's runs of the fresh holdout inputs, one after another on a thread of their own,
    started before the target's first oracle run so that they run beside all of the target's
    (these runs are not timed; two cores do both lanes in about the time of the longer one). Each
    target has one lane, so no two runs of one built tree ever overlap (the tree's snapshot
    fallback, where no sandbox overlay can be made, could not tell their changes apart). Leaving the
    ``with`` block cancels the runs not started, so a target that fails early waits for one run at
    most."""

    def __init__(self, contract: Contract, baseline: Target, scratch: Path, inputs: list[list[str]]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pw-fresh-baseline")
        # Beside the target's scratch, not in it: each target run starts by emptying its own.
        where = scratch.parent / f"{scratch.name}.fresh-baseline"
        self._runs = [self._pool.submit(run_once, contract, baseline, where, argv=argv, tag=f"fresh-{i}-baseline")
                      for i, argv in enumerate(inputs)]

    def run(self, i: int) -> RunOutcome:
        return self._runs[i].result()

    def __enter__(self) -> ReferenceLane:
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def run_fresh(contract: Contract, target: Target, baseline: Target, scratch: Path,
              inputs: list[list[str]], vary: dict[str, list[int]] | None = None,
              lane: ReferenceLane | None = None) -> tuple[bool, str, list[str], RunOutcome | None]:
    """Each drawn input, run by the baseline (the reference: from ``lane``, where its runs are
    already under way) and by the target (each in its own sandbox and scratch directory),
    compared. Without a lane, or when the target is the baseline, the baseline's runs are made here,
    in turn. Returns (passed, detail of the first failure or a summary, one line per input, the
    failing run)."""
    lines: list[str] = []
    same = target.label == baseline.label
    for i, argv in enumerate(inputs):
        if lane is not None and not same:
            ref = lane.run(i)
        else:
            ref = run_once(contract, baseline, scratch / "fresh-baseline", argv=argv, tag=f"fresh-{i}-baseline")
        got = None if same else run_once(contract, target, scratch / "fresh-target", argv=argv, tag=f"fresh-{i}")
        ok, detail, failed = _judge_fresh(contract, (ref, got), argv, vary, lines)
        if not ok:
            return False, detail, lines, failed
    return True, f"{len(inputs)} fresh holdout input(s) match the baseline", lines, None


def _judge_fresh(contract: Contract, runs: tuple[RunOutcome, RunOutcome | None], argv: list[str],
                 vary: dict[str, list[int]] | None, lines: list[str]) -> tuple[bool, str, RunOutcome | None]:
    """One input's verdict, the reference's failure first."""
    ref, got = runs
    shown = " ".join(argv)
    if classify(ref) is not None:
        return False, f"fresh holdout `{shown}`: the baseline itself failed: {failure_message(contract, ref)}", ref
    if got is None:  # the baseline against itself: its output must say something
        covered = coverage(contract, ref, vary)
        n = covered.lines if covered else 0
        lines.append(f"{shown}: baseline ran ({n} lines)")
        if n == 0:
            return False, f"fresh holdout `{shown}`: the baseline's output is empty, nothing to compare", ref
        return True, "", None
    if classify(got) is not None:
        return False, f"fresh holdout `{shown}`: {failure_message(contract, got)}", got
    cmp = compare_outputs(contract, got, ref, vary)
    if not cmp.passed:
        return False, f"fresh holdout `{shown}` vs the baseline: {cmp.detail}", got
    lines.append(f"{shown}: {cmp.lines} lines match the baseline")
    return True, "", None


def describe_coverage(contract: Contract, covered: Comparison | None, fresh: list[list[str]],
                      pair_template: str | None, vary: dict[str, list[int]] | None = None) -> str:
    """One sentence of what the oracle compares: streams, lines, tolerance, holdouts."""
    from pw.workload.holdouts import describe, drawn_from

    o = contract.oracle
    if o.kind == "exit":
        return "exit status only"
    if o.kind == "command":
        return f"whatever `{' '.join(o.argv or [])}` checks (exit 0)"
    stream = "+".join(compared_streams(contract))
    n = covered.lines if covered else 0
    fields = covered.fields if covered else 0
    against = {"stdout": f"reference {o.reference}", "file": f"reference {o.reference}",
               "stable": "the baseline's output", "baseline": "the baseline's output"}[o.kind]
    counted = f"{n} lines ({fields} fields) " if covered is not None else ""  # unknown when the check failed
    parts = [f"{stream}: {counted}vs {against}, numbers within rtol={o.rtol:g} "
             f"atol={o.atol:g}, other tokens exactly"]
    if o.holdout:
        parts.append(f"{len(o.holdout)} fixed holdout input(s) vs their references")
    if o.generators:
        gens = "; ".join(describe(g) for g in drawn_from(contract))
        parts.append(f"{len(fresh)} fresh holdout input(s) drawn after the build from {gens}, vs the baseline")
    if pair_template:
        parts.append(f"every timed pair on a fresh input {pair_template}, candidate vs baseline")
    if vary:
        parts.append(unchecked_text(vary))
    return "; ".join(parts)


def finish(contract: Contract, event: ev.OracleChecked, first: RunOutcome | None, *,
           fresh: list[list[str]], fresh_lines: list[str], n_stderr: int = 0,
           vary: dict[str, list[int]] | None = None) -> ev.OracleChecked:
    """The event with what it compared (less the lines that vary run to run), whether that is
    nothing, and the holdouts it ran."""
    from pw.workload.holdouts import pair_generator

    covered = coverage(contract, first, vary) if event.passed else None
    pair = pair_generator(contract)
    template = None
    if pair is not None:
        gen, _ = pair
        template = f"(`{' '.join(contract.run.argv)}` with {gen.seed} drawn from {gen.ranges[gen.seed]})"  # type: ignore[index]
    return msgspec.structs.replace(
        event,
        compared=describe_coverage(contract, covered, fresh, template, vary),
        compares_nothing=compares_nothing(contract, covered, n_stderr) if event.passed else None,
        lines_compared=covered.lines if covered is not None else None,
        holdouts=list(fresh_lines),
    )


def short_statement(contract: Contract, event: ev.OracleChecked | None,
                    vary: dict[str, list[int]] | None = None) -> str:
    """What the oracle compares, in a few words for the agent's brief; holdouts only where they
    exist, and the lines it sets aside because they vary run to run (``vary``)."""
    o = contract.oracle
    if event is None:
        return "-"
    if event.compares_nothing:
        return "compares NOTHING (" + ("exit status only" if o.kind == "exit" else "0 lines") + "): ceiling proposed"
    if o.kind == "command":
        return f"command `{' '.join(o.argv or [])}`"
    stream = f"file {o.path}" if o.kind == "file" else "+".join(compared_streams(contract))
    against = "baseline" if o.kind in ("stable", "baseline") else o.reference
    text = f"{stream} {event.lines_compared if event.lines_compared is not None else '?'} lines vs {against}, " \
           f"rtol {o.rtol:g} atol {o.atol:g}"
    held = []
    if o.holdout:
        held.append(f"{len(o.holdout)} fixed")
    if o.generators:
        held.append(f"{sum(g.count for g in o.generators)} fresh (drawn after build)")
    if held:
        text += "; holdouts: " + " + ".join(held)
    from pw.workload.holdouts import pair_generator

    if pair_generator(contract) is not None:
        text += "; fresh input per timed pair"
    if vary:
        text += "; " + ", ".join(f"{name} line{'s' if len(lines) > 1 else ''} {', '.join(str(n) for n in lines[:4])}"
                                 + ("..." if len(lines) > 4 else "") for name, lines in vary.items()) + " unchecked (vary)"
    return text
