"""The deliverable: report.json and report.md, pure functions of the run state.

Plots are drawn by `pw report` (matplotlib) into plots/; the markdown links them by stable names,
so the text stays a deterministic projection of the ledger.
"""

from __future__ import annotations

import statistics
from typing import Any

import msgspec

from ledger import events as ev
from projections.state import Head, RunState, cumulative


class CandidateReport(msgspec.Struct, frozen=True):
    id: str
    parent: str
    mechanism: str
    status: str
    exploratory: bool
    confirmed: bool
    speedup: float | None
    interval: list[float] | None
    reasons: list[str]
    gates: list[ev.GateResult]
    attempts: int
    patch: str
    # A chained candidate is timed against its parent: `speedup` is then the step over `reference`,
    # and `cumulative` the product along the chain (interval approximate: projections.state.cumulative).
    reference: str = "baseline"
    cumulative: float | None = None
    cumulative_interval: list[float] | None = None
    # The diagnosis adapter's hotspot before/after (GateInputs.diagnosis), and captures that reused an
    # identical executable's evidence ("perf from baseline").
    diagnosis: dict[str, Any] | None = None
    reused: list[str] = []
    # Where the changed code does not show what the agent's mechanism text claims (a finding, no gate).
    findings: list[str] = []
    # `pw confirm`'s pairs without a profiler: the speedup the user sees, beside the profiled one.
    unprofiled: dict[str, Any] | None = None


class ReportDoc(msgspec.Struct, frozen=True):
    ledger_head: Head
    question: str
    run_id: str
    workload: str
    contract_inferred: bool
    baseline: dict[str, Any]
    hotspot: dict[str, Any] | None
    candidates: list[CandidateReport]
    winner: str | None
    caveats: list[str]
    reproducibility: dict[str, Any]


QUESTION = "Why is this slow, and which rewrite makes it faster in a way we can trust?"


def _baseline(state: RunState) -> dict[str, Any]:
    var = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    xs = var.samples.get("baseline", []) if var else []
    mean = statistics.fmean(xs) if xs else None
    cv = statistics.stdev(xs) / mean if len(xs) > 1 and mean else None
    oracle = state.oracles.get("baseline")
    return {
        "metric": var.metric if var else None,
        "runs": len(xs),
        "mean_s": mean,
        "cv": cv,
        "oracle": oracle.method if oracle else None,
        "oracle_passed": oracle.passed if oracle else None,
        # What it compares (streams, lines, tolerance, holdouts), and why it is no oracle if it is none.
        "oracle_compares": oracle.compared if oracle else None,
        "oracle_compares_nothing": oracle.compares_nothing if oracle else None,
    }


def _candidates(state: RunState) -> list[CandidateReport]:
    out = []
    for cid, c in sorted(state.candidates.items(), key=lambda kv: kv[1].prepared_seq):
        v = c.confirmation or c.verdict
        cum = cumulative(state, cid)
        out.append(CandidateReport(
            id=cid, parent=c.prepared.resolved_parent, mechanism=c.prepared.mechanism,
            status=v.status if v else "prepared",
            exploratory=bool(c.verdict and c.verdict.exploratory and c.confirmation is None),
            confirmed=c.confirmation is not None,
            speedup=v.speedup if v else None, interval=v.interval if v else None,
            reasons=list(v.reasons) if v else [], gates=list(c.gates.gates) if c.gates else [],
            attempts=c.attempts, patch=f"variants/{cid}.patch",
            reference=v.reference if v else "baseline",
            cumulative=cum.speedup if cum else None, cumulative_interval=cum.interval if cum else None,
            diagnosis=(c.gates.inputs.get("diagnosis") if c.gates else None),
            reused=[f"{cap.adapter} from {cap.reused_from}" for key, cap in sorted(state.captures.items())
                    if cap.target == cid and cap.reused_from],
            findings=list(c.claim.findings) if c.claim is not None else [],
            unprofiled=_unprofiled(state, cid, v.interval if v else None),
        ))
    return out


def _unprofiled(state: RunState, cid: str, profiled: list[float] | None) -> dict[str, Any] | None:
    """`pw confirm`'s comparison of the candidate without a profiler (``UnprofiledCompared``)."""
    u = next((u for u in reversed(state.unprofiled) if u.id == cid), None)
    if u is None:
        return None
    out = {"pairs": u.pairs, "speedup": u.speedup, "interval": list(u.interval), "disagrees": u.disagrees}
    if state.run.contract.metric.kind == "operation":
        # Without a profiler there is no operation's cost to read: the pairs time the whole process.
        out["of"] = WHOLE_PROCESS
    return out


WHOLE_PROCESS = "the whole process"


def _fmt_diagnosis(d: dict[str, Any]) -> str:
    """`callgrind instructions of matmul: 1.2e+09 -> 3.1e+08 (-74.2%); total 1.3e+09 -> 4.0e+08`"""
    before, after = d["hotspot_before"], d["hotspot_after"]
    change = f" ({100 * (after - before) / before:+.1f}%)" if before else ""
    return (f"{d['adapter']} {d['metric']} of `{d['hotspot']}`: {before:.4g} -> {after:.4g}{change}; "
            f"total {d['total_before']:.4g} -> {d['total_after']:.4g}" + (" (reused evidence)" if d.get("reused") else ""))


def _winner(cands: list[CandidateReport]) -> str | None:
    verified = [c for c in cands if c.status == "verified" and c.cumulative]
    return max(verified, key=lambda c: (c.cumulative, c.id)).id if verified else None


def _caveats(state: RunState, base: dict[str, Any]) -> list[str]:
    out = []
    if state.run and state.run.inferred:
        out.append("The workload contract was inferred (no profileweaver.json): the oracle only checks exit status "
                   "and output stability, not correctness against a reference.")
    if base.get("oracle_compares_nothing"):
        out.append(f"The oracle compares nothing ({base['oracle_compares_nothing']}): no candidate can be "
                   "verified until the contract declares an oracle that compares the program's results.")
    if base.get("cv") is not None and base["cv"] > 0.05:
        out.append(f"The baseline varies {100 * base['cv']:.1f}% run to run: small effects need many pairs.")
    pf = state.preflight
    if pf is not None and pf.sandbox is None and pf.sandbox_reasons:
        out.append("No sandbox could be made (" + "; ".join(pf.sandbox_reasons) + "): candidates' runs were not "
                   "contained, so no verdict can be better than proposed.")
    for p in pf.profilers if pf else []:
        if p.usable and p.mode:
            out.append(f"{p.name}: {p.mode} ({p.reason}).")
    for cid, c in sorted(state.candidates.items()):
        if c.verdict and c.verdict.exploratory and c.confirmation is None:
            out.append(f"{cid}: screening result is exploratory (one pair); confirm it before relying on it.")
    return out


def report(state: RunState) -> ReportDoc | None:
    run = state.run
    if run is None or not state.candidates:
        return None
    base = _baseline(state)
    hs = state.hotspot
    cands = _candidates(state)
    pf = state.preflight
    return ReportDoc(
        ledger_head=state.head,
        question=QUESTION,
        run_id=run.run_id,
        workload=run.contract.name,
        contract_inferred=run.inferred,
        baseline=base,
        hotspot=None if hs is None else {
            "operation": hs.operation, "name": hs.name, "file": hs.file, "lines": [hs.line_start, hs.line_end],
            "share": hs.share, "metric": hs.metric, "amdahl_ceiling": hs.amdahl_ceiling,
        },
        candidates=cands,
        winner=_winner(cands),
        caveats=_caveats(state, base),
        reproducibility={
            "run_id": run.run_id,
            "host": msgspec.to_builtins(run.host),
            "build": [" ".join(s.argv) for s in run.contract.build],
            "run": " ".join(run.contract.run.argv),
            "source_sha256": run.source_sha256,
            "tool_versions": {t.name: t.version for t in (pf.compilers if pf else [])}
            | {p.name: p.version for p in (pf.profilers if pf else [])},
            "commands": [f"pw start --workload {run.workload}"]
            + [f"pw evaluate runs/{run.run_id} {c.id}" for c in cands],
        } | _elsewhere(state),
    )


def _elsewhere(state: RunState) -> dict[str, Any]:
    """The campaigns a scheduler placed on another machine (`--remote`), each with where and what
    it measured, side by side (does the speedup hold on another node?); {} when every campaign ran
    on the run's host, so such a run's report is what it always was."""
    rows = []
    for seq, t in zip(state.timing_seqs, state.timings, strict=True):
        node = t.conditions.node if t.conditions is not None else None
        if node is None or t.purpose not in ("screening", "confirmation"):
            continue
        cid = t.targets[-1]
        c = state.candidates.get(cid)
        confirmed = next((w for w in state.confirmations if w.timing_seq == seq), None)
        last_screening = max((s for s, x in zip(state.timing_seqs, state.timings, strict=True)
                              if x.purpose == "screening" and x.targets[-1] == cid), default=None)
        v = confirmed or (c.verdict if c is not None and t.purpose == "screening" and seq == last_screening else None)
        rows.append({"candidate": cid, "purpose": t.purpose, "timing_seq": seq, "pairs": len(t.order),
                     "node": node.node, "where": node.describe(), "status": v.status if v else None,
                     "speedup": v.speedup if v else None, "interval": v.interval if v else None})
    return {"timed_elsewhere": rows} if rows else {}


def _fmt(speedup: float | None, interval: list[float] | None) -> str:
    if speedup is None or interval is None:
        return "-"
    return f"{speedup:.3f}x [{interval[0]:.3f}, {interval[1]:.3f}]"


def _fmt_speedup(c: CandidateReport) -> str:
    if c.reference == "baseline":
        return _fmt(c.speedup, c.interval)
    return (f"step {_fmt(c.speedup, c.interval)} vs {c.reference}; cumulative "
            f"{_fmt(c.cumulative, c.cumulative_interval)} vs baseline (approx.)")


def render_markdown(doc: ReportDoc) -> str:
    b = doc.baseline
    lines = [f"# ProfileWeaver report: {doc.workload}", "", f"**Asked:** {doc.question}", "",
             f"Run `{doc.run_id}`" + (" (contract inferred)" if doc.contract_inferred else ""), "", "## Baseline", ""]
    if b.get("mean_s") is not None:
        cv = f"{100 * b['cv']:.1f}%" if b.get("cv") is not None else "-"
        lines.append(f"- {b['metric']}: mean {b['mean_s']:.4g} s over {b['runs']} runs, CV {cv}")
    lines.append(f"- correctness oracle: {b.get('oracle')} ({'passed' if b.get('oracle_passed') else 'not passed'})")
    if b.get("oracle_compares"):
        lines.append(f"- the oracle compares: {b['oracle_compares']}")
    if b.get("oracle_compares_nothing"):
        lines.append(f"- **the oracle compares nothing**: {b['oracle_compares_nothing']}")
    if doc.hotspot:
        h = doc.hotspot
        ceiling = f"{h['amdahl_ceiling']:.2f}x" if h["amdahl_ceiling"] else "unbounded"
        lines += ["", "## Hotspot", "",
                  f"`{h['name']}` in `{h['file']}` lines {h['lines'][0]}-{h['lines'][1]}: "
                  f"{100 * h['share']:.1f}% of {h['metric']}. Amdahl ceiling (if it cost nothing): {ceiling}."]
    lines += ["", "## Candidates", "", "| id | parent | mechanism (agent's words) | speedup [95% CI] | status |",
              "| --- | --- | --- | --- | --- |"]
    for c in doc.candidates:
        status = c.status + (" (exploratory)" if c.exploratory else "") + (" (confirmed)" if c.confirmed else "")
        lines.append(f"| {c.id} | {c.parent} | {c.mechanism} | {_fmt_speedup(c)} | {status} |")
    for c in doc.candidates:
        lines += ["", f"### {c.id}: {c.status}", "", f"Patch: [{c.patch}]({c.patch})", ""]
        lines += [f"- {r}" for r in c.reasons]
        if c.gates:
            lines += ["", "| gate | passed | evidence |", "| --- | --- | --- |"]
            lines += [f"| {g.name} | {'yes' if g.passed else 'NO'} | {g.detail} |" for g in c.gates]
        if c.diagnosis:
            lines += ["", f"Diagnosis reprofile: {_fmt_diagnosis(c.diagnosis)}"]
        if c.reused:
            lines += ["", f"Profile evidence reused (byte-identical executable): {', '.join(c.reused)}"]
        if c.findings:
            lines += ["", "Finding (the agent's claim against its patch; no gate reads it): " + "; ".join(c.findings)]
        if c.unprofiled:
            u = c.unprofiled
            said = (" **This disagrees with the profiled campaign beyond both intervals: a finding.**"
                    if u["disagrees"] else "")
            of = f"; {u['of']}, not the operation's cost" if u.get("of") else ""
            lines += ["", f"Without a profiler (`pw confirm`, {u['pairs']} pairs{of}): {u['speedup']:.3g}x "
                          f"[{u['interval'][0]:.3g}, {u['interval'][1]:.3g}].{said}"]
        if c.speedup is not None:
            lines += ["", f"![paired samples of {c.id}](plots/paired-{c.id}.png)"]
    lines += ["", "## Winner", ""]
    if doc.winner:
        w = next(c for c in doc.candidates if c.id == doc.winner)
        mech = next((g.detail for g in w.gates if g.name == "mechanism"), "")
        lines += [f"**{w.id}**: {_fmt_speedup(w)} (geometric mean of paired ratios, 95% t-interval).", "",
                  f"Mechanism evidence: {mech}", "", f"![hotspot before and after](plots/profile-{w.id}.png)"]
    else:
        lines.append("No candidate is verified. The measurements above are the result: a well-characterised "
                     "negative result is a deliverable.")
    if doc.caveats:
        lines += ["", "## Caveats", ""] + [f"- {c}" for c in doc.caveats]
    r = doc.reproducibility
    lines += ["", "## Reproducibility", "", f"- run id: `{r['run_id']}`",
              f"- host: {r['host']['hostname']} ({r['host']['platform']}, {r['host']['cpus']} CPUs, "
              f"Python {r['host']['python']})",
              f"- build: {'; '.join(f'`{b}`' for b in r['build']) or '(none)'}", f"- run: `{r['run']}`",
              f"- source sha256: `{r['source_sha256']}`", "- tool versions:"]
    lines += [f"  - {k}: {v}" for k, v in sorted(r["tool_versions"].items())]
    lines += ["- commands:"] + [f"  - `{c}`" for c in r["commands"]]
    if r.get("timed_elsewhere"):
        lines += ["", "### Where the campaigns ran", "", "| candidate | campaign | pairs | timed on | status | speedup [95% CI] |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {e['candidate']} | {e['purpose']} (seq {e['timing_seq']}) | {e['pairs']} | {e['where']} | "
                  f"{e['status'] or '-'} | {_fmt(e['speedup'], e['interval'])} |" for e in r["timed_elsewhere"]]
    return "\n".join(lines) + "\n"
