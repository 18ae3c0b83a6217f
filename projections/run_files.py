"""The run-directory files the source documents name, as projections of the ledger (issue 30).

The documents' run directory holds brief.md (the dispatch brief from the root), plan.json (the
resumable execution plan), harness-state.json (input/output hashes and stage status), bench.*.json
(one record per timing campaign), experiment-state.json (the compact candidate, batch and winner
ledger), campaign-plan.json (the final campaign's contract) and campaign-result.json (every
candidate's and finalist's samples and decisions); batch-plan.json (each quiet multi-candidate
batch of `pw evaluate RUN ID [ID ...]`, only once there is one). Here each is a pure function of the run state,
like every other projection: `pw rebuild` writes them, `pw audit` compares them, and each JSON file
has its schema in schemas/ (`pw validate FILE`).

They read a few named fields of each event, never a whole event, so a field added to an event
(with a default) does not change their bytes.
"""

from __future__ import annotations

import statistics
from typing import Any, Literal

import msgspec

from ledger import events as ev
from ledger.codec import to_builtins
from projections.state import CandidateState, Head, RunState, cumulative

# The stages of `pw start`, in order (pw.rules.stages.START_STAGES; a test keeps them equal).
START_STAGES: tuple[str, ...] = ("preflight", "build", "oracle", "baseline-timing", "profile")


class StageStatus(msgspec.Struct, frozen=True):
    name: str
    status: Literal["done", "failed", "pending"]
    inputs_sha256: str | None = None
    detail: str = ""


class CandidatePlan(msgspec.Struct, frozen=True):
    id: str
    parent: str
    mechanism: str
    state: str  # prepared | evaluated | verified | proposed | rejected | inconclusive
    confirmed: str | None  # the confirmation's status, when confirmed
    attempts: int
    repairs_left: int


class PlanDoc(msgspec.Struct, frozen=True):
    """plan.json: the resumable execution plan: start's stages, each candidate's step, what is next."""

    ledger_head: Head
    run_id: str
    workload: str
    budgets: ev.Budgets
    stages: list[StageStatus]
    candidates: list[CandidatePlan]
    candidates_left: int
    next: str


class TargetState(msgspec.Struct, frozen=True):
    build: str | None  # ok | build-failed | timeout
    build_inputs_sha256: str | None
    binary_sha256: str | None
    oracle_passed: bool | None
    source_sha256: str | None  # a candidate's edited tree (its diff); the baseline's is the run's
    patch_sha256: str | None


class HarnessStateDoc(msgspec.Struct, frozen=True):
    """harness-state.json: the input and output hashes behind each stage and target."""

    ledger_head: Head
    source_sha256: str
    manifest_sha256: str | None
    stages: list[StageStatus]
    targets: dict[str, TargetState]


class ArmSummary(msgspec.Struct, frozen=True):
    n: int
    mean: float | None
    median: float | None
    min: float | None
    max: float | None


class BenchDoc(msgspec.Struct, frozen=True):
    """bench.<n>-<purpose>-<target>.json: one timing campaign, its samples and how it stopped."""

    ledger_head: Head
    seq: int
    purpose: str
    targets: list[str]
    metric: str
    unit: str
    exploratory: bool
    seed: int
    order: list[str]
    samples: dict[str, list[float]]
    summary: dict[str, ArmSummary]
    stop: str | None
    pairs: int | None
    host: str
    argv: list[str]


class CandidateEntry(msgspec.Struct, frozen=True):
    id: str
    parent: str
    mechanism: str
    status: str
    exploratory: bool
    speedup: float | None
    interval: list[float] | None
    reference: str
    cumulative: float | None
    gates: dict[str, bool]
    confirmed: str | None


class ExperimentStateDoc(msgspec.Struct, frozen=True):
    """experiment-state.json: the compact candidate, batch and winner ledger."""

    ledger_head: Head
    run_id: str
    hotspot: str | None
    candidates: list[CandidateEntry]
    winner: str | None
    winner_confirmed: bool
    budgets: ev.Budgets
    candidates_left: int


class CampaignPlanDoc(msgspec.Struct, frozen=True):
    """campaign-plan.json: the contract every timing campaign of the run follows, and the finalist."""

    ledger_head: Head
    run_argv: list[str]
    metric: dict[str, Any]
    oracle: dict[str, Any]
    sampling: dict[str, Any]
    profiling: dict[str, Any]
    finalist: str | None
    finalist_confirmed: bool


class CandidateResult(msgspec.Struct, frozen=True):
    id: str
    campaigns: list[int]  # seqs of its timing campaigns (bench files)
    samples: dict[str, list[float]]  # the latest campaign's, by arm
    verdict: str | None
    reasons: list[str]
    speedup: float | None
    interval: list[float] | None
    gates: dict[str, bool]
    confirmation: str | None
    confirmation_speedup: float | None


class CampaignResultDoc(msgspec.Struct, frozen=True):
    """campaign-result.json: every candidate's and the finalist's samples and decisions."""

    ledger_head: Head
    baseline: ArmSummary | None
    candidates: list[CandidateResult]
    finalist: str | None


def _fault(state: RunState, stage: str) -> ev.FaultRecorded | None:
    return next((f for f in state.faults if f.stage == stage and f.target == "baseline"), None)


def _stages(state: RunState) -> list[StageStatus]:
    out = []
    for stage in START_STAGES:
        if stage in state.stages:
            out.append(StageStatus(stage, "done", state.stages[stage]))
        elif (fault := _fault(state, stage)) is not None:
            out.append(StageStatus(stage, "failed", None, f"{fault.failure_class}: {fault.message}"))
        else:
            out.append(StageStatus(stage, "pending"))
    return out


def _verdict(cand: CandidateState):
    return cand.confirmation or cand.verdict


def _ordered(state: RunState) -> list[tuple[str, CandidateState]]:
    return sorted(state.candidates.items(), key=lambda kv: kv[1].prepared_seq)


def _winner(state: RunState) -> str | None:
    """The verified candidate with the best speedup over the baseline along its chain."""
    best, best_s = None, 0.0
    for cid, cand in _ordered(state):
        v = _verdict(cand)
        if v is None or v.status != "verified":
            continue
        c = cumulative(state, cid)
        s = c.speedup if c else (v.speedup or 0.0)
        if s > best_s:
            best, best_s = cid, s
    return best


def _left(state: RunState) -> int:
    return max(state.run.budgets.iterations - len(state.candidates), 0) if state.run else 0


def _next(state: RunState, stages: list[StageStatus]) -> str:
    if any(s.status == "failed" for s in stages):
        return "fix the workload, then pw start --resume RUN"
    if any(s.status == "pending" for s in stages):
        return "pw start --resume RUN"
    for cid, cand in _ordered(state):
        if cand.verdict is None:
            return f"pw evaluate RUN {cid}"
    winner = _winner(state)
    if winner and state.candidates[winner].confirmation is None:
        return f"pw confirm RUN {winner}"
    if _left(state) > 0:
        return "pw prepare RUN --candidate ID:current:MECHANISM"
    return "pw report RUN"


def plan(state: RunState) -> PlanDoc | None:
    run = state.run
    if run is None:
        return None
    stages = _stages(state)
    cands = []
    for cid, cand in _ordered(state):
        v = cand.verdict
        cands.append(CandidatePlan(
            id=cid, parent=cand.prepared.resolved_parent, mechanism=cand.prepared.mechanism,
            state=v.status if v else ("evaluated" if cand.evaluation else "prepared"),
            confirmed=cand.confirmation.status if cand.confirmation else None, attempts=cand.attempts,
            repairs_left=max(run.budgets.repairs - cand.failed_attempts, 0)))
    return PlanDoc(ledger_head=state.head, run_id=run.run_id, workload=run.workload, budgets=run.budgets,
                   stages=stages, candidates=cands, candidates_left=_left(state), next=_next(state, stages))


def harness_state(state: RunState) -> HarnessStateDoc | None:
    run = state.run
    if run is None:
        return None
    targets: dict[str, TargetState] = {}
    labels = ["baseline", *(cid for cid, _ in _ordered(state))]
    for label in labels:
        b = state.builds.get(label)
        o = state.oracles.get(label)
        diff = state.candidates[label].diff if label in state.candidates else None
        targets[label] = TargetState(
            build=b.outcome if b else None, build_inputs_sha256=b.inputs_sha256 if b else None,
            binary_sha256=b.binary_sha256 if b else None, oracle_passed=o.passed if o else None,
            source_sha256=diff.source_sha256 if diff else (run.source_sha256 if label == "baseline" else None),
            patch_sha256=diff.patch_sha256 if diff else None)
    return HarnessStateDoc(ledger_head=state.head, source_sha256=run.source_sha256,
                           manifest_sha256=run.manifest_sha256, stages=_stages(state), targets=targets)


def _summary(xs: list[float]) -> ArmSummary:
    if not xs:
        return ArmSummary(0, None, None, None, None)
    return ArmSummary(len(xs), round(statistics.fmean(xs), 9), round(statistics.median(xs), 9), min(xs), max(xs))


def bench_files(state: RunState) -> dict[str, BenchDoc]:
    """One file per timing campaign, named by its order in the ledger, purpose and measured target."""
    out: dict[str, BenchDoc] = {}
    for n, (seq, t) in enumerate(zip(state.timing_seqs, state.timings), 1):
        arms = {k: v for k, v in t.samples.items() if ":" not in k}  # "baseline:max_rss_kb" etc. are side data
        campaign = t.campaign
        out[f"bench.{n:02d}-{t.purpose}-{t.targets[-1]}.json"] = BenchDoc(
            ledger_head=state.head, seq=seq, purpose=t.purpose, targets=list(t.targets), metric=t.metric,
            unit=t.unit, exploratory=t.exploratory, seed=t.seed, order=list(t.order), samples=dict(t.samples),
            summary={k: _summary(v) for k, v in sorted(arms.items())},
            stop=campaign.stop if campaign else None,
            pairs=campaign.looks[-1].n_pairs if campaign and campaign.looks else None,
            host=t.conditions.host, argv=list(t.conditions.argv))
    return out


def _gates(cand: CandidateState) -> dict[str, bool]:
    return {g.name: g.passed for g in cand.gates.gates} if cand.gates else {}


def experiment_state(state: RunState) -> ExperimentStateDoc | None:
    run = state.run
    if run is None:
        return None
    entries = []
    for cid, cand in _ordered(state):
        v = _verdict(cand)
        c = cumulative(state, cid) if v else None
        entries.append(CandidateEntry(
            id=cid, parent=cand.prepared.resolved_parent, mechanism=cand.prepared.mechanism,
            status=v.status if v else ("evaluated" if cand.evaluation else "prepared"),
            exploratory=bool(cand.verdict and cand.verdict.exploratory and cand.confirmation is None),
            speedup=v.speedup if v else None, interval=v.interval if v else None,
            reference=v.reference if v else "baseline", cumulative=c.speedup if c else None, gates=_gates(cand),
            confirmed=cand.confirmation.status if cand.confirmation else None))
    winner = _winner(state)
    return ExperimentStateDoc(ledger_head=state.head, run_id=run.run_id,
                              hotspot=state.hotspot.operation if state.hotspot else None, candidates=entries,
                              winner=winner, winner_confirmed=bool(winner and state.candidates[winner].confirmation),
                              budgets=run.budgets, candidates_left=_left(state))


def campaign_plan(state: RunState) -> CampaignPlanDoc | None:
    run = state.run
    if run is None:
        return None
    c = run.contract
    winner = _winner(state)
    return CampaignPlanDoc(ledger_head=state.head, run_argv=list(c.run.argv), metric=_fields(c.metric, METRIC_FIELDS),
                           oracle={"kind": c.oracle.kind, "rtol": c.oracle.rtol, "atol": c.oracle.atol,
                                   "reference": c.oracle.reference, "holdouts": len(c.oracle.holdout),
                                   "generators": len(c.oracle.generators)},
                           sampling=_fields(c.sampling, SAMPLING_FIELDS), profiling=_fields(c.profiling, PROFILING_FIELDS),
                           finalist=winner, finalist_confirmed=bool(winner and state.candidates[winner].confirmation))


# The contract fields campaign-plan.json names. Explicit, so a field added to the contract (with a
# default) changes no bytes of an older run's plan; a field read here that a contract lacks is null.
METRIC_FIELDS = ("kind", "unit", "pattern", "json_key")
SAMPLING_FIELDS = ("mode", "pairs", "margin", "max_pairs", "max_time_s")
PROFILING_FIELDS = ("cadence", "max_runs", "max_time_s")


def _fields(part: msgspec.Struct, names: tuple[str, ...]) -> dict[str, Any]:
    return {n: to_builtins(getattr(part, n, None)) for n in names}


def campaign_result(state: RunState) -> CampaignResultDoc | None:
    if state.run is None or not state.candidates:
        return None
    seqs = dict(zip(state.timing_seqs, state.timings))
    results = []
    for cid, cand in _ordered(state):
        own = [seq for seq, t in seqs.items() if t.targets and t.targets[-1] == cid]
        latest = seqs[own[-1]] if own else None
        v, conf = cand.verdict, cand.confirmation
        results.append(CandidateResult(
            id=cid, campaigns=own, samples={k: list(x) for k, x in latest.samples.items() if ":" not in k} if latest else {},
            verdict=v.status if v else None, reasons=list(v.reasons) if v else [],
            speedup=v.speedup if v else None, interval=v.interval if v else None, gates=_gates(cand),
            confirmation=conf.status if conf else None, confirmation_speedup=conf.speedup if conf else None))
    base = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    return CampaignResultDoc(ledger_head=state.head, baseline=_summary(list(base.samples.get("baseline", [])))
                             if base else None, candidates=results, finalist=_winner(state))


class BatchEntry(msgspec.Struct, frozen=True):
    batch: str
    candidates: list[str]  # as given
    order: list[str]  # the order the campaigns run in
    mode: str  # builds-first: every build and oracle check, then the campaigns one at a time
    max_pairs: int | None
    max_time_s: float | None


class BatchPlanDoc(msgspec.Struct, frozen=True):
    """batch-plan.json: every quiet multi-candidate batch of the run (`BatchPlanned`), in ledger order."""

    ledger_head: Head
    batches: list[BatchEntry]


def batch_plan(state: RunState) -> BatchPlanDoc | None:
    """None (no file) until the run has a batch, so a run without one has the same files as before."""
    if state.run is None or not state.batches:
        return None
    return BatchPlanDoc(ledger_head=state.head, batches=[
        BatchEntry(batch=b.batch, candidates=list(b.candidates), order=list(b.order), mode=b.mode,
                   max_pairs=b.max_pairs, max_time_s=b.max_time_s) for b in state.batches])


def brief_md(state: RunState) -> str | None:
    """brief.md: the dispatch brief from the root: the question, the contract, the routing and where
    the run stands, in words a person reads first."""
    run = state.run
    if run is None:
        return None
    c = run.contract
    lines = [f"# Dispatch brief: {run.run_id}", "",
             "Question: why is this slow, and which rewrite makes it faster in a way we can trust?", "",
             f"- workload: `{run.workload}` (contract {'inferred' if run.inferred else 'explicit profileweaver.json'})",
             f"- run: `{' '.join(c.run.argv)}`; metric: {c.metric.kind} time ({c.metric.unit})",
             f"- correct means: oracle `{c.oracle.kind}` (rtol {c.oracle.rtol:g}, atol {c.oracle.atol:g}), "
             f"{len(c.oracle.holdout) + len(c.oracle.generators)} holdout source(s)",
             f"- sampling: {c.sampling.mode}; profiling cadence: {c.profiling.cadence}",
             f"- budgets: {run.budgets.iterations} candidates, {run.budgets.repairs} repairs each"]
    for phase in ("discovery", "diagnosis"):
        r = state.routing.get(phase)
        if r is not None:
            lines.append(f"- {phase}: {r.chosen or 'none'} ({r.reason})")
    if state.hotspot:
        h = state.hotspot
        where = f" {h.file}:{h.line_start}-{h.line_end}" if h.file else ""
        lines.append(f"- hotspot: {h.name}{where} = {h.share:.1%} of {h.metric}"
                     + (f"; Amdahl ceiling {h.amdahl_ceiling:.2f}x" if h.amdahl_ceiling else ""))
    for imported in state.imports.values():
        lines.append(f"- imported: {imported.adapter} ({imported.primary_metric}; ceiling {imported.ceiling})")
    stages = _stages(state)
    lines += ["", "Trust: a speedup is reported only when all six gates pass (correctness, significance, "
              "mechanism, no_collateral, attribution, reproducible); anything less is proposed.",
              "", f"Next: `{_next(state, stages)}` (RUN = this directory). The agent reads agent-brief.txt "
              "and the source slices it names; nothing else.",
              "", f"<!-- ledger head: seq {state.head.seq}, {state.head.hash} -->"]
    return "\n".join(lines) + "\n"


JSON_FILES = {
    "plan.json": plan,
    "harness-state.json": harness_state,
    "experiment-state.json": experiment_state,
    "campaign-plan.json": campaign_plan,
    "campaign-result.json": campaign_result,
    "batch-plan.json": batch_plan,
}
