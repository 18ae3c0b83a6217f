"""Paired timing campaigns: interleaved runs of the reference and the candidate (and, when the
candidate's patch reaches beyond the hotspot, the hybrid arm) in a seeded, recorded order.

One kind of run: with ``profiling``, every timed run is also the profiled run. The discovery adapter
joins each run the same way for every arm (``adapters.base.RunWrap``: perf around sandbox and
launcher, py-spy between launcher and program, CUPTI through the environment); the run's profile is
reduced at once (``Profiling.reduce``) to the seconds its hotspot's part, the reference's reach and
the machine took, and kept as content-addressed evidence (raw output and normalized profile), so
`pw audit` renormalizes it. A program cannot behave one way for the timer and another for the
profiler: there is one run.

Before the first pair and after the last, every arm's built tree is hashed, so a binary swapped or
rebuilt during the campaign shows up as a mismatch with what was built. Every arm runs in the
identical sandbox (pw.workload.containment). With ``checks``, no timed run goes unchecked: each
run's outputs must equal its target's oracle-checked output (pw.workload.output_check), or with
fresh inputs the reference's output in the same pair, and a candidate run that leaves anything for
the next run beyond what the baseline leaves is caught. Either fails the campaign with a fault
naming the pair, the arm and the stream.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters.base import Adapter, CaptureError
from ledger import events as ev
from ledger.contract import Contract
from ledger.errors import ToolError
from ledger.evidence import EvidenceStore
from ledger.profile import decode_profile, encode_profile
from pw.app import warm
from pw.rules import attribution as attr
from pw.rules.contention import FAMILY_CPU, MAIN_CPU, OTHERS, RUN_QUEUE, STEAL
from pw.stats.adaptive import CAMPAIGN_RULE
from pw.workload import containment, output_check
from pw.workload import steps as execute
from pw.workload.host import scheduler_node

# An operation metric's floor: a run in which the operation's code took no sample at all.
OPERATION_FLOOR_S = 1e-6
# The per-run series that says whether a run's profile carries any cost (1.0) or none (0.0). Added after
# the first pw.campaign/4 ledgers: a campaign that recorded no such series predates it (``LATER_SERIES``).
SAMPLED = "sampled"
LATER_SERIES = frozenset({SAMPLED})


class CampaignResult(msgspec.Struct, frozen=True):
    timing: ev.TimingRecorded | None
    failure: ev.FaultRecorded | None
    side_effects: list[str]


class RunChecks(msgspec.Struct, frozen=True):
    """What every timed run of one target is checked against. ``allowed``: what its runs may leave
    behind (the baseline's own list); None for the baseline itself, which is never blamed."""

    expected: output_check.Expected
    allowed: list[str] | None = None


class Profiling:
    """The profiler every timed run of a campaign runs under, and how a run's profile is reduced.

    ``attribution`` says which code is the hotspot's part in each arm (None at `pw start`, where the
    hotspot is not chosen yet: only the profiles are kept). ``source_roots``: the build tree each
    arm's debug information names (its build directory)."""

    def __init__(self, name: str, adapter: Adapter, evidence: EvidenceStore,
                 attribution: ev.Attribution | None, source_roots: dict[str, str], *,
                 rule: str | None = CAMPAIGN_RULE) -> None:
        self.name = name
        self.adapter = adapter
        self.evidence = evidence
        self.attribution = attribution
        self.source_roots = dict(source_roots)
        # The campaign rule its runs are reduced under (pw.rules.attribution.from_v5).
        self.rule = rule

    def under(self, rule: str | None) -> Profiling:
        """The same profiling, its runs reduced under ``rule`` (a campaign continued under its own)."""
        return Profiling(self.name, self.adapter, self.evidence, self.attribution, self.source_roots, rule=rule)

    def record(self, tool_version: str) -> ev.RunProfiler:
        return ev.RunProfiler(adapter=self.name, tool_version=tool_version, options=self.adapter.timed_options(),
                              source_roots=self.source_roots)

    def reduce(self, label: str, role: str, artifacts: dict[str, bytes], wall_s: float
               ) -> tuple[ev.ProfiledRun, dict[str, float], str]:
        """Store one run's raw evidence and profile; (the run's record, its per-run series, tool version)."""
        raw = {r: self.evidence.put(data) for r, data in sorted(artifacts.items())}
        profile = self.adapter.normalize(artifacts, self.source_roots[label], label)
        sha = self.evidence.put(encode_profile(profile))
        _, series, version = self.reduce_profile(profile, role, wall_s)
        return ev.ProfiledRun(raw=raw, profile=sha), series, version

    def reduce_profile(self, profile, role: str, wall_s: float) -> tuple[None, dict[str, float], str]:
        """A run's per-run series from its profile (pure; `pw audit` recomputes them with it): the
        hotspot's part in seconds of the run (the candidate's changed code counts with it; a hybrid
        arm's hotspot is the candidate's code, so it reads as the candidate's), and in the reference's
        runs the reach of the code the candidate changed (the Amdahl ceiling)."""
        # Whether the run carries any cost at all: a run that ended before its profiler attached has an
        # empty profile, which is no evidence of where its time went (not evidence that it went nowhere).
        series: dict[str, float] = {SAMPLED: 1.0 if attr.sampled(profile) else 0.0}
        a = self.attribution
        if a is not None:
            by_name = attr.from_v5(self.rule)
            side = a.hotspot if role == "reference" else a.hybrid if role == "hybrid" and a.hybrid else a.changed
            series["hot_s"] = attr.side_seconds(profile, side, wall_s, by_name=by_name)
            if role == "reference":
                series["reach_s"] = attr.side_seconds(profile, a.reach, wall_s, by_name=by_name)
        return None, series, profile.tool_version


def campaign_seed(run_id: str, cid: str, attempt: int, purpose: str) -> int:
    """A seed derived from names, recorded in the event: the same campaign reorders the same way."""
    digest = hashlib.sha256(f"{run_id}/{cid}/{attempt}/{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _pair_mismatch(contract: Contract, cand: execute.RunOutcome, base: execute.RunOutcome, argv: list[str],
                   i: int, label: str) -> str | None:
    """Why an arm's output in pair i differs from the reference's on the same fresh input."""
    from pw.workload.differential import compare_outputs

    cmp = compare_outputs(contract, cand, base)
    if cmp.passed and cmp.lines > 0:
        return None
    why = cmp.detail if not cmp.passed else "both outputs are empty, nothing was compared"
    return f"pair {i + 1} on fresh input `{' '.join(argv)}`: {label}'s output differs from the reference's: {why}"


class _Arms:
    """The campaign's arms by letter (A reference, B candidate, C hybrid) and what each run gave."""

    def __init__(self, reference: execute.Target, candidate: execute.Target, hybrid: execute.Target | None) -> None:
        self.by_letter = {"A": reference, "B": candidate, **({"C": hybrid} if hybrid is not None else {})}
        self.role = {"A": "reference", "B": "candidate", "C": "hybrid"}
        self.series: dict[str, list[float | None]] = {}
        self.runs: dict[str, list[ev.ProfiledRun]] = {t.label: [] for t in self.by_letter.values()}
        self.tool_version = ""

    @property
    def targets(self) -> list[execute.Target]:
        return [self.by_letter[k] for k in sorted(self.by_letter, key="ACB".index)]

    def add(self, label: str, key: str, value: float | None) -> None:
        self.series.setdefault(f"{label}:{key}" if key else label, []).append(value)

    def samples(self) -> dict[str, list[float]]:
        """Every series whose every run recorded a value (loads where the launcher reported them)."""
        out = {}
        for key, values in self.series.items():
            if values and all(v is not None for v in values):
                out[key] = [round(v, 9) for v in values]  # type: ignore[arg-type]
        return out


class TimedRun(msgspec.Struct, frozen=True):
    """One timed run: its outcome and, profiled, its profile's record and per-run series."""

    outcome: execute.RunOutcome
    profiled: ev.ProfiledRun | None = None
    series: dict[str, float] = {}
    tool_version: str = ""


def timed_run(contract: Contract, target: execute.Target, scratch: Path, *, argv: list[str] | None, tag: str,
              profiling: Profiling | None, role: str) -> TimedRun:
    """One timed (and, with ``profiling``, profiled) run of ``target``; its profile reduced at once."""
    if profiling is None:
        return TimedRun(execute.run_once(contract, target, scratch, argv=argv, tag=tag))
    out_dir = scratch.parent / f"{scratch.name}-profile"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    try:
        wrap = profiling.adapter.timed_wrap(str(out_dir.absolute()))
        out = execute.run_once(contract, target, scratch, argv=argv, tag=tag, wrap=wrap)
        if execute.classify(out) is not None or out.value is None:
            return TimedRun(out)
        try:
            artifacts = profiling.adapter.timed_collect(str(out_dir.absolute()), cwd=str(target.build_dir),
                                                        timeout_s=contract.run.timeout_s)
        except CaptureError as exc:
            raise ToolError(f"{profiling.name} on timed run {tag} of {target.label}: {exc}") from None
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    # Reduced with the wall time as the record keeps it (9 decimals, `_Arms.samples`), so that `pw audit`,
    # which has only the record, recomputes the same seconds, not ones a rounding away.
    run, series, version = profiling.reduce(target.label, role, artifacts, round(out.process.wall_s, 9))
    series = {**series, "user_s": out.process.user_s, "sys_s": out.process.sys_s}
    if contract.metric.kind == "operation" and not series.get(SAMPLED, 1.0):
        why = (f"{profiling.name} took no samples of this run (it ended before the profiler attached), so the "
               "operation's cost in it is unknown: give the program an input that runs longer")
        out = msgspec.structs.replace(out, value=None, metric_error=why)
    elif contract.metric.kind == "operation" and "hot_s" in series:
        # The operation's cost is what is timed (never 0, which no ratio can take).
        cost = attr.operation_cost(series, role, profiling.rule)
        out = msgspec.structs.replace(out, value=max(cost, OPERATION_FLOOR_S))
    return TimedRun(out, run, series, version)


def _one_run(contract: Contract, arms: _Arms, letter: str, scratch: Path, argv: list[str] | None, tag: str,
             profiling: Profiling | None) -> execute.RunOutcome:
    """One timed run of the arm ``letter``, its numbers added to the arms' series."""
    target = arms.by_letter[letter]
    done = timed_run(contract, target, scratch, argv=argv, tag=tag, profiling=profiling, role=arms.role[letter])
    out = done.outcome
    if execute.classify(out) is not None or out.value is None:
        return out
    label, p = target.label, out.process
    arms.add(label, "", round(out.value, 9))
    for key, value in (("wall_s", p.wall_s), ("max_rss_kb", float(p.max_rss_kb)), (RUN_QUEUE, p.run_queue_s),
                       (STEAL, p.steal_s), (OTHERS, p.others_cpu_s), (MAIN_CPU, p.main_cpu_s),
                       (FAMILY_CPU, p.family_cpu_s), *sorted(done.series.items())):
        arms.add(label, key, value)
    if done.profiled is not None:
        arms.runs[label].append(done.profiled)
        arms.tool_version = arms.tool_version or done.tool_version
    return out


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
    profiling: Profiling | None = None,
    hybrid: execute.Target | None = None,
) -> CampaignResult:
    """Pairs first..first+pairs-1 of the campaign's one seeded order (triples with a hybrid arm).
    With ``input_seed`` and a generator matching the timed argv, pair i runs its own fresh input in
    every arm, and each arm's output must match the reference's in that pair: no timed run is
    predictable or unchecked. The seed and the inputs are recorded in the conditions."""
    from pw.stats.order import interleaved_order, interleaved_triples
    from pw.workload.holdouts import draw_pair_inputs

    warm.wait()  # no import of pw's own beside a timed program
    arms = _Arms(baseline, candidate, hybrid)
    order = (interleaved_triples if hybrid is not None else interleaved_order)(first + pairs, seed)[first:]
    pair_inputs = draw_pair_inputs(contract, input_seed, first + pairs) if input_seed is not None else None
    if pair_inputs is not None:
        pair_inputs = pair_inputs[first:]
    before = {t.label: execute.binary_digest(t) for t in arms.targets}
    inputs = {t.label: execute.inputs_digest(contract, t) for t in arms.targets}
    checker = _Checker(contract, arms, checks, purpose, first)
    for i, pair in enumerate(order):
        progress(f"pair {first + i + 1} ({pair})")
        argv = pair_inputs[i] if pair_inputs is not None else None
        outs = {}
        for letter in pair:
            out = _one_run(contract, arms, letter, scratch, argv, f"pair-{first + i}-{letter}", profiling)
            outs[letter] = out
            fault = checker.run(i, letter, out, fresh=argv is not None)
            if fault is not None:
                return CampaignResult(None, fault, checker.side_effects)
        if argv is not None and (fault := checker.pair(i, outs, argv)) is not None:
            return CampaignResult(None, fault, checker.side_effects)
    if (fault := checker.end()) is not None:
        return CampaignResult(None, fault, checker.side_effects)
    conditions = ev.TimingConditions(
        host=host,
        argv=list(contract.run.argv),
        metric=contract.metric.kind,
        tool_versions=tool_versions,
        arms={t.label: ev.TimedArm(binary_before=before[t.label], binary_after=execute.binary_digest(t),
                                   inputs_sha256=inputs[t.label]) for t in arms.targets},
        side_effects=sorted(set(checker.side_effects)),
        input_seed=input_seed if pair_inputs is not None else None,
        pair_inputs=[list(a) for a in pair_inputs] if pair_inputs is not None else [],
        sandbox=containment.describe(),
        output_checks=[s for s in output_check.STREAMS if s not in checker.baseline_differs] if checks else [],
        unchecked_streams=sorted(checker.baseline_differs),
        node=scheduler_node(),
    )
    timing = ev.TimingRecorded(
        purpose=purpose,  # type: ignore[arg-type]
        targets=[t.label for t in arms.targets],
        metric=f"{contract.metric.kind}_time_s",
        unit="s",
        samples=arms.samples(),
        order=order,
        seed=seed,
        exploratory=exploratory,
        conditions=conditions,
        profiler=profiling.record(arms.tool_version) if profiling is not None else None,
        runs=arms.runs if profiling is not None else {},
        attribution=profiling.attribution if profiling is not None else None,
    )
    return CampaignResult(timing, None, sorted(set(checker.side_effects)))


class _Checker:
    """The checks every timed run of a campaign gets (module docstring)."""

    def __init__(self, contract: Contract, arms: _Arms, checks: dict[str, RunChecks] | None, purpose: str,
                 first: int) -> None:
        self.contract, self.arms, self.checks, self.purpose, self.first = contract, arms, checks, purpose, first
        self.side_effects: list[str] = []
        self.baseline_differs: set[str] = set()  # streams the reference itself does not reproduce
        self.candidate_differs: list[tuple[str, str, str]] = []  # (label, stream, message), judged at the end

    def run(self, i: int, letter: str, out: execute.RunOutcome, *, fresh: bool) -> ev.FaultRecorded | None:
        target = self.arms.by_letter[letter]
        failure = execute.classify(out)
        if failure is not None or out.value is None:
            message = execute.failure_message(self.contract, out) if failure else (out.metric_error or "no metric")
            return ev.FaultRecorded(stage=self.purpose, target=target.label, failure_class=failure or "launch-failed",
                                    message=f"pair {self.first + i + 1}: {message}")
        self.side_effects.extend(f"{target.label}: {s}" for s in out.side_effects)
        chk = (self.checks or {}).get(target.label)
        if chk is None:
            return None
        where = f"pair {i + 1}, {target.label} (arm {letter})"
        if chk.allowed is not None and (found := execute.caught(out, chk.allowed)):
            return ev.FaultRecorded(stage=self.purpose, target=target.label, failure_class="caught",
                                    message=f"{where}: " + "; ".join(found))
        if fresh:
            return None  # a fresh input: compared with the reference's output in the same pair
        seen = output_check.Observed(stdout=out.stdout, stderr=out.stderr, output_file=out.output_file)
        for stream, detail in output_check.differences(self.contract, seen, chk.expected):
            if letter == "A":
                self.baseline_differs.add(stream)
            else:
                self.candidate_differs.append((target.label, stream, f"{where}, {stream}: differs from its "
                                                                      f"oracle-checked output ({detail})"))
        return None

    def pair(self, i: int, outs: dict[str, execute.RunOutcome], argv: list[str]) -> ev.FaultRecorded | None:
        for letter in ("B", "C"):
            if letter not in outs:
                continue
            label = self.arms.by_letter[letter].label
            differs = _pair_mismatch(self.contract, outs[letter], outs["A"], argv, self.first + i,
                                     "the candidate" if letter == "B" else f"the hybrid arm {label}")
            if differs is not None:
                return ev.FaultRecorded(stage=self.purpose, target=label, failure_class="oracle-failed",
                                        message=differs)
        return None

    def end(self) -> ev.FaultRecorded | None:
        blamed = [(label, msg) for label, stream, msg in self.candidate_differs if stream not in self.baseline_differs]
        if not blamed:
            return None
        label, first = blamed[0]
        return ev.FaultRecorded(stage=self.purpose, target=label, failure_class="output-mismatch",
                                message=first + (f" (and {len(blamed) - 1} more)" if len(blamed) > 1 else ""))


def profile_of(evidence: EvidenceStore, run: ev.ProfiledRun):
    """One timed run's normalized profile, from the evidence store."""
    return decode_profile(evidence.get(run.profile))
