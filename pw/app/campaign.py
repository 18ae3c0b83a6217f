"""Paired timing campaigns: interleaved baseline/candidate runs in a seeded, recorded order.

Before the first pair and after the last, both built trees are hashed, so a binary swapped or
rebuilt during the campaign (or a stale one) shows up as a mismatch with what was built.

Both arms run in the identical sandbox (pw.workload.containment), so timing stays symmetric. With
``checks``, no timed run goes unchecked: each run's outputs must equal its target's oracle-checked
output (pw.workload.output_check), and a candidate run that leaves anything for the next run
beyond what the baseline leaves (a file in or outside its tree, a process) is caught. Either
fails the campaign with a fault naming the pair, the arm and the stream.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.contract import Contract
from pw.rules.contention import OTHERS, RUN_QUEUE, STEAL
from pw.workload import containment, output_check
from pw.workload import steps as execute


class CampaignResult(msgspec.Struct, frozen=True):
    timing: ev.TimingRecorded | None
    failure: ev.FaultRecorded | None
    side_effects: list[str]


class RunChecks(msgspec.Struct, frozen=True):
    """What every timed run of one target is checked against. ``allowed``: what its runs may leave
    behind (the baseline's own list); None for the baseline itself, which is never blamed."""

    expected: output_check.Expected
    allowed: list[str] | None = None


def campaign_seed(run_id: str, cid: str, attempt: int, purpose: str) -> int:
    """A seed derived from names, recorded in the event: the same campaign reorders the same way."""
    digest = hashlib.sha256(f"{run_id}/{cid}/{attempt}/{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _pair_mismatch(contract: Contract, cand: execute.RunOutcome, base: execute.RunOutcome, argv: list[str],
                   i: int) -> str | None:
    """Why the candidate's output in pair i differs from the baseline's on the same fresh input."""
    from pw.workload.differential import compare_outputs

    cmp = compare_outputs(contract, cand, base)
    if cmp.passed and cmp.lines > 0:
        return None
    why = cmp.detail if not cmp.passed else "both outputs are empty, nothing was compared"
    return f"pair {i + 1} on fresh input `{' '.join(argv)}`: the candidate's output differs from the baseline's: {why}"


def run_pairs(
    contract: Contract,
    baseline: execute.Target,
    candidate: execute.Target,
    *,
    pairs: int,
    seed: int,
    purpose: str,
    exploratory: bool,
    host: str,
    scratch: Path,
    tool_versions: dict[str, str],
    progress: Callable[[str], None] = lambda _m: None,
    checks: dict[str, RunChecks] | None = None,
    input_seed: int | None = None,
    first: int = 0,
) -> CampaignResult:
    """With ``input_seed`` and a generator matching the timed argv, pair i runs its own fresh input
    (the timed argv with a new seed, ``pw.workload.holdouts.draw_pair_inputs``) in both arms, and
    the candidate's output must match the baseline's in that pair: no timed run is predictable or
    unchecked. The seed and the inputs are recorded in the conditions."""
    from pw.stats import interleaved_order
    from pw.workload.holdouts import draw_pair_inputs

    # Pairs first..first+pairs-1 of the campaign's one seeded order and input stream (an adaptive
    # campaign runs it block by block, and a continuation picks it up where it stopped).
    order = list(interleaved_order(first + pairs, seed))[first:]
    pair_inputs = draw_pair_inputs(contract, input_seed, first + pairs) if input_seed is not None else None
    if pair_inputs is not None:
        pair_inputs = pair_inputs[first:]
    base_bin_before = execute.binary_digest(baseline)
    cand_bin_before = execute.binary_digest(candidate)
    inputs = {t.label: execute.inputs_digest(contract, t) for t in (baseline, candidate)}
    arms = {"A": baseline, "B": candidate}
    values: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    walls: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    rss: dict[str, list[float]] = {baseline.label: [], candidate.label: []}
    # How the machine's load delayed each run (pw.rules.contention reads them): kept when every
    # run reports it, as ``{label}:run_queue_s``, ``{label}:steal_s``, ``{label}:others_cpu_s``.
    waits: dict[str, list[float | None]] = {baseline.label: [], candidate.label: []}
    steals: dict[str, list[float | None]] = {baseline.label: [], candidate.label: []}
    others: dict[str, list[float | None]] = {baseline.label: [], candidate.label: []}
    side_effects: list[str] = []
    baseline_differs: set[str] = set()  # streams the baseline itself does not reproduce
    candidate_differs: list[tuple[str, str]] = []  # (stream, message), judged once the campaign is over
    for i, pair in enumerate(order):
        progress(f"pair {first + i + 1} ({pair})")
        argv = pair_inputs[i] if pair_inputs is not None else None
        outs = {}
        for arm in pair:
            target = arms[arm]
            out = execute.run_once(contract, target, scratch, argv=argv, tag=f"pair-{first + i}-{arm}")
            outs[arm] = out
            failure = execute.classify(out)
            if failure is not None or out.value is None:
                message = execute.failure_message(contract, out) if failure else (out.metric_error or "no metric")
                fault = ev.FaultRecorded(
                    stage=purpose, target=target.label, failure_class=failure or "launch-failed",
                    message=f"pair {first + i + 1}: {message}",
                )
                return CampaignResult(None, fault, side_effects)
            values[target.label].append(round(out.value, 9))
            walls[target.label].append(round(out.process.wall_s, 9))
            rss[target.label].append(float(out.process.max_rss_kb))
            waits[target.label].append(out.process.run_queue_s)
            steals[target.label].append(out.process.steal_s)
            others[target.label].append(out.process.others_cpu_s)
            side_effects.extend(f"{target.label}: {s}" for s in out.side_effects)
            chk = (checks or {}).get(target.label)
            if chk is None:
                continue
            where = f"pair {i + 1}, {target.label} (arm {arm})"
            if chk.allowed is not None and (found := execute.caught(out, chk.allowed)):
                fault = ev.FaultRecorded(stage=purpose, target=target.label, failure_class="caught",
                                         message=f"{where}: " + "; ".join(found))
                return CampaignResult(None, fault, side_effects)
            if argv is not None:
                continue  # a fresh input: compared with the baseline's output in the same pair, below
            seen = output_check.Observed(stdout=out.stdout, stderr=out.stderr, output_file=out.output_file)
            for stream, detail in output_check.differences(contract, seen, chk.expected):
                if target is baseline:
                    baseline_differs.add(stream)
                else:
                    candidate_differs.append((stream, f"{where}, {stream}: differs from its oracle-checked "
                                                      f"output ({detail})"))
        if argv is not None:
            differs = _pair_mismatch(contract, outs["B"], outs["A"], argv, first + i)
            if differs is not None:
                fault = ev.FaultRecorded(stage=purpose, target=candidate.label, failure_class="oracle-failed",
                                         message=differs)
                return CampaignResult(None, fault, side_effects)
    blamed = [msg for stream, msg in candidate_differs if stream not in baseline_differs]
    if blamed:
        fault = ev.FaultRecorded(stage=purpose, target=candidate.label, failure_class="output-mismatch",
                                 message=blamed[0] + (f" (and {len(blamed) - 1} more)" if len(blamed) > 1 else ""))
        return CampaignResult(None, fault, side_effects)
    samples = {}
    for label in (baseline.label, candidate.label):
        samples[label] = values[label]
        samples[f"{label}:wall_s"] = walls[label]
        samples[f"{label}:max_rss_kb"] = rss[label]
        for key, seen in ((RUN_QUEUE, waits[label]), (STEAL, steals[label]), (OTHERS, others[label])):
            if seen and all(x is not None for x in seen):
                samples[f"{label}:{key}"] = [round(x, 6) for x in seen]
    conditions = ev.TimingConditions(
        host=host,
        argv=list(contract.run.argv),
        metric=contract.metric.kind,
        tool_versions=tool_versions,
        arms={
            baseline.label: ev.TimedArm(binary_before=base_bin_before, binary_after=execute.binary_digest(baseline),
                                        inputs_sha256=inputs[baseline.label]),
            candidate.label: ev.TimedArm(binary_before=cand_bin_before, binary_after=execute.binary_digest(candidate),
                                         inputs_sha256=inputs[candidate.label]),
        },
        side_effects=sorted(set(side_effects)),
        input_seed=input_seed if pair_inputs is not None else None,
        pair_inputs=[list(a) for a in pair_inputs] if pair_inputs is not None else [],
        sandbox=containment.describe(),
        output_checks=[s for s in output_check.STREAMS if s not in baseline_differs] if checks else [],
        unchecked_streams=sorted(baseline_differs),
    )
    timing = ev.TimingRecorded(
        purpose=purpose,
        targets=[baseline.label, candidate.label],
        metric=f"{contract.metric.kind}_time_s",
        unit="s",
        samples=samples,
        order=order,
        seed=seed,
        exploratory=exploratory,
        conditions=conditions,
    )
    return CampaignResult(timing, None, sorted(set(side_effects)))
