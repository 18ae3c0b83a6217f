"""Projection files rendered from the run state. Each document is a pure function of the state.

Every JSON document carries `ledger_head` (seq and hash of the last event it reflects), so a stale
or hand-edited projection is detectable: `pw audit` rebuilds each file and compares bytes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import msgspec

from ledger import events as ev
from ledger.codec import canonical_json
from ledger.contract import Contract
from projections.state import Head, RunState


class ExperimentPlan(msgspec.Struct, frozen=True):
    """The inherited contract every candidate is judged by."""

    ledger_head: Head
    run_id: str
    workload: str
    contract: Contract
    inferred: bool
    inference: list[str]
    manifest_sha256: str | None
    source_sha256: str
    budgets: ev.Budgets
    host: ev.Host


class Variation(msgspec.Struct, frozen=True):
    metric: str
    unit: str
    runs: int
    mean: float
    cv: float | None


class PreflightDoc(msgspec.Struct, frozen=True):
    """Tool versions and usability, build, launch, oracle and the baseline's run-to-run variation."""

    ledger_head: Head
    status: str
    failure_class: str | None
    failure: str | None
    cache_key: str | None
    cached: bool | None
    compilers: list[ev.ToolInfo]
    python: str | None
    gpu: str | None
    profilers: list[ev.ProfilerProbe]
    build: ev.BuildFinished | None
    oracle: ev.OracleChecked | None
    baseline_variation: Variation | None
    # The sandbox every target's code runs in, or None with why none could be made.
    sandbox: str | None = None
    sandbox_reasons: list[str] = []


def experiment_plan(state: RunState) -> ExperimentPlan | None:
    run = state.run
    if run is None:
        return None
    return ExperimentPlan(
        ledger_head=state.head,
        run_id=run.run_id,
        workload=run.workload,
        contract=run.contract,
        inferred=run.inferred,
        inference=run.inference,
        manifest_sha256=run.manifest_sha256,
        source_sha256=run.source_sha256,
        budgets=run.budgets,
        host=run.host,
    )


def _variation(state: RunState) -> Variation | None:
    for timing in state.timings:
        if timing.purpose == "baseline-variance":
            xs = timing.samples.get("baseline", [])
            if not xs:
                return None
            mean = statistics.fmean(xs)
            cv = statistics.stdev(xs) / mean if len(xs) > 1 and mean > 0 else None
            return Variation(metric=timing.metric, unit=timing.unit, runs=len(xs), mean=mean, cv=cv)
    return None


def preflight(state: RunState) -> PreflightDoc | None:
    if state.run is None:
        return None
    pf = state.preflight
    fault = next((f for f in state.faults if f.target == "baseline"), None)
    oracle = state.oracles.get("baseline")
    variation = _variation(state)
    if fault is not None:
        status = "failed"
    elif pf is not None and oracle is not None and oracle.passed and variation is not None:
        status = "ok"
    else:
        status = "incomplete"
    return PreflightDoc(
        ledger_head=state.head,
        status=status,
        failure_class=fault.failure_class if fault else None,
        failure=fault.message if fault else None,
        cache_key=pf.cache_key if pf else None,
        cached=pf.cached if pf else None,
        compilers=pf.compilers if pf else [],
        python=pf.python if pf else None,
        gpu=pf.gpu if pf else None,
        profilers=pf.profilers if pf else [],
        build=state.builds.get("baseline"),
        oracle=oracle,
        baseline_variation=variation,
        sandbox=pf.sandbox if pf else None,
        sandbox_reasons=list(pf.sandbox_reasons) if pf else [],
    )


class RoutingDoc(msgspec.Struct, frozen=True):
    """profiler-routing.json: each phase's choice and why the others were not chosen; `climbs`: every
    diagnosis decision in order (one per rung climbed; `phases["diagnosis"]` is the last)."""

    ledger_head: Head
    phases: dict[str, ev.RoutingDecided]
    climbs: list[ev.RoutingDecided] = []


class SourceTargetsDoc(msgspec.Struct, frozen=True):
    ledger_head: Head
    targets: dict[str, Any]
    frontier: list[str]
    editable: list[str]


class BriefDoc(msgspec.Struct, frozen=True):
    """agent-brief.json: the numbers behind every line of agent-brief.txt."""

    ledger_head: Head
    tokens: int
    tokenizer: str
    budget: int
    numbers: dict[str, Any]


class ViewDoc(msgspec.Struct, frozen=True):
    """agent-view.json: expanded diagnostics, read one bounded section at a time via `pw inspect`."""

    ledger_head: Head
    sections: dict[str, Any]


class Emission(msgspec.Struct, frozen=True):
    """One text handed to an actor: what (kind, run-relative name or inspect command), when (seq)."""

    seq: int
    kind: str
    name: str
    tokens: int


class ActorCost(msgspec.Struct, frozen=True):
    """What one actor (PW_ACTOR, else "cli") was handed over the investigation, in o200k tokens."""

    tokens: int
    emitted: list[Emission]


class CostDoc(msgspec.Struct, frozen=True):
    """cost.json: `tokens`, the emitted files of the current brief by name (format 3 and before);
    `actors`, everything each actor was handed in order (briefs, slices, imported briefs, inspect
    views), and `total` over all actors."""

    ledger_head: Head
    tokenizer: str
    tokens: dict[str, int]
    actors: dict[str, ActorCost] = {}
    total: int = 0


BRIEF_BUDGET = 320


def profiler_routing(state: RunState) -> RoutingDoc | None:
    if not state.routing:
        return None
    return RoutingDoc(ledger_head=state.head, phases=dict(sorted(state.routing.items())), climbs=list(state.climbs))


def source_targets(state: RunState) -> SourceTargetsDoc | None:
    st = state.source_targets
    if st is None:
        return None
    return SourceTargetsDoc(ledger_head=state.head, targets=st.document, frontier=st.frontier, editable=st.editable)


def agent_brief_json(state: RunState) -> BriefDoc | None:
    b = state.brief
    if b is None:
        return None
    return BriefDoc(ledger_head=state.head, tokens=b.tokens, tokenizer=b.tokenizer, budget=BRIEF_BUDGET,
                    numbers=b.numbers)


def agent_view(state: RunState) -> ViewDoc | None:
    b = state.brief
    return None if b is None else ViewDoc(ledger_head=state.head, sections=b.view)


def cost(state: RunState) -> CostDoc | None:
    b = state.brief
    if b is None and not state.emitted:
        return None
    by: dict[str, list[Emission]] = {}
    for e in state.emitted:
        by.setdefault(e.actor, []).append(Emission(seq=e.seq, kind=e.kind, name=e.name, tokens=e.tokens))
    actors = {a: ActorCost(tokens=sum(x.tokens for x in xs), emitted=xs) for a, xs in sorted(by.items())}
    return CostDoc(ledger_head=state.head, tokenizer=b.tokenizer if b else "o200k_base",
                   tokens=b.costs if b else {}, actors=actors, total=sum(a.tokens for a in actors.values()))


Renderer = Callable[[RunState], msgspec.Struct | None]

# File name -> renderer. Order is the order `pw rebuild` writes and `pw audit` compares.
DOCUMENTS: dict[str, Renderer] = {
    "experiment-plan.json": experiment_plan,
    "preflight.json": preflight,
    "profiler-routing.json": profiler_routing,
    "source-targets.json": source_targets,
    "agent-brief.json": agent_brief_json,
    "agent-view.json": agent_view,
    "cost.json": cost,
}


def render(state: RunState) -> dict[str, bytes]:
    """Every projection file that the state supports, as canonical bytes."""
    out: dict[str, bytes] = {}
    for name, renderer in DOCUMENTS.items():
        doc = renderer(state)
        if doc is not None:
            out[name] = canonical_json(doc)
    from projections import run_files

    for name, renderer in run_files.JSON_FILES.items():  # the documents' run-directory files
        doc = renderer(state)
        if doc is not None:
            out[name] = canonical_json(doc)
    for name, bench in run_files.bench_files(state).items():
        out[name] = canonical_json(bench)
    dispatch = run_files.brief_md(state)
    if dispatch is not None:
        out["brief.md"] = dispatch.encode()
    from projections.report import render_markdown, report

    doc = report(state)
    if doc is not None:
        out["report.json"] = canonical_json(doc)
        out["report.md"] = render_markdown(doc).encode()
    if state.brief is not None:
        out["agent-brief.txt"] = state.brief.text.encode()
    if state.source_targets is not None:
        for name, text in sorted(state.source_targets.slices.items()):
            out[name] = text.encode() if text.endswith("\n") else (text + "\n").encode()
    for imported in state.imports.values():  # profiles of tools that ran elsewhere (`pw import`)
        prefix = "" if imported.target == "baseline" else f"candidates/{imported.target}/"
        out[f"{prefix}imports/{imported.adapter}/agent-brief.txt"] = imported.brief.encode()
    for cid, cand in sorted(state.candidates.items()):  # refreshed briefs of verified candidates
        if cand.brief is not None:
            out[f"candidates/{cid}/agent-brief.txt"] = cand.brief.text.encode()
        if cand.source_targets is not None:
            st = cand.source_targets
            out[f"candidates/{cid}/profile/source-targets.json"] = canonical_json(SourceTargetsDoc(
                ledger_head=state.head, targets=st.document, frontier=st.frontier, editable=st.editable))
            for name, text in sorted(cand.source_targets.slices.items()):
                out[name] = text.encode() if text.endswith("\n") else (text + "\n").encode()
    return out


def evidence_copies(state: RunState) -> dict[str, str]:
    """Run files that are copies of content-addressed evidence: file name -> sha256 in raw/.

    The normalized profiles, each candidate's patch against its parent and its profile diff are
    evidence already; these copies put them where people and agents look (docs/run-directory.md), and like
    every other run file they are rebuilt by `pw rebuild` and compared by `pw audit`.
    """
    out: dict[str, str] = {}
    discovery = state.routing["discovery"].chosen if "discovery" in state.routing else None
    for normalized in state.profiles.values():
        if normalized.target == "baseline":
            out["profile.baseline.json"] = normalized.profile_sha256
        elif normalized.target in state.candidates:
            # A candidate's reprofile with the diagnosis adapter (callgrind) sits beside the discovery
            # one, whose diff profile-diff.json is.
            second = normalized.adapter not in (discovery, "ncu") and discovery is not None and \
                f"{normalized.target}:{discovery}" in state.profiles
            name = "profile.diagnosis.json" if second else "profile.json"
            out[f"candidates/{normalized.target}/profile/{name}"] = normalized.profile_sha256
    for imported in state.imports.values():
        prefix = "" if imported.target == "baseline" else f"candidates/{imported.target}/"
        out[f"{prefix}imports/{imported.adapter}/profile.json"] = imported.profile_sha256
    for cid, cand in sorted(state.candidates.items()):
        if cand.diff is not None:
            out[f"variants/{cid}.patch"] = cand.diff.patch_sha256
        if cand.evaluation is not None and cand.evaluation.profile_diff_sha256:
            out[f"candidates/{cid}/profile/profile-diff.json"] = cand.evaluation.profile_diff_sha256
    return dict(sorted(out.items()))
