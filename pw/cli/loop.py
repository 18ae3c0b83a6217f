"""Verbs of the candidate loop: prepare, evaluate, confirm, status."""

from __future__ import annotations

from ledger.codec import to_builtins
from pw.cli.begin import progress_reporter
from pw.cli.common import (
    checked_events,
    chosen_remote,
    console,
    open_run,
    print_json,
    print_text,
    self_command,
)


def _handle(arg: str):
    from pw.app.run import RunHandle

    run, ledger = open_run(arg)
    return RunHandle(run.path, ledger=ledger, events=checked_events(run, ledger))


def prepare(args) -> int:
    from pw.app.prepare import prepare as do_prepare

    handle = _handle(args.run)
    prepared = do_prepare(handle, args.candidate)
    if args.json:
        print_json({"run_dir": str(handle.path), "candidates": to_builtins(prepared)})
        return 0
    lines = []
    for p in prepared:
        lines.append(f"candidate {p.id} (parent {p.parent}): edit only these files in {p.workspace}/")
        lines += [f"  {f}" for f in p.targets]
        others = [f for f in p.editable if f not in p.targets]
        if others:
            lines.append(f"  (also editable: {', '.join(others)})")
        lines.append(f"next: pw evaluate {handle.path} {p.id}")
    print_text("\n".join(lines))
    return 0


def _gate_line(gates) -> str:
    return " ".join(f"{g.name}:{'pass' if g.passed else 'FAIL'}" for g in gates)


def _on_remote(args, handle, label: str) -> int | None:
    """With `--remote` on a Slurm remote: the same command runs on an allocated node and its exit
    status is this one's (None: run it here)."""
    remote = chosen_remote(args)
    if remote.kind == "local":
        return None
    import sys

    from pw.remote.campaign import local_argv, run_on_node

    command = [remote.python or sys.executable, *self_command(), *local_argv(args.argv)]
    return run_on_node(remote, handle.path, label, command)


def evaluate(args) -> int:
    from ledger.errors import UsageError
    from pw.app.evaluate import evaluate as do_evaluate
    from pw.app.evaluate import more as do_more
    from pw.app.screening import confirm_when_due

    if args.more is not None and args.max_pairs is not None:
        raise UsageError("give --more N or --max-pairs N, not both (--more sets the new pair budget)")
    if args.max_pairs is not None and args.max_pairs < 5:
        raise UsageError(f"--max-pairs {args.max_pairs}: expected at least 5 pairs")
    if len(args.id) > 1 and args.more is not None:
        raise UsageError(f"--more continues one candidate's campaign: give one ID, not {len(args.id)}")
    handle = _handle(args.run)
    if (code := _on_remote(args, handle, "evaluate-" + "-".join(args.id))) is not None:
        return code
    if len(args.id) > 1:
        return _evaluate_batch(args, handle)
    cid = args.id[0]
    with progress_reporter(not args.json, "evaluate") as progress:
        if args.more is not None:
            pairs = None if args.more == -1 else args.more
            result = do_more(handle, cid, pairs, progress, max_time_s=args.max_time)
        else:
            result = do_evaluate(handle, cid, progress, max_pairs=args.max_pairs, max_time_s=args.max_time)
        screening = confirm_when_due(handle, progress)
    if args.json:
        print_json(_result_json(handle, result) | ({"screening": screening} if screening is not None else {}))
    else:
        lines = _result_lines(handle, result)
        if screening is not None:
            lines.append(f"  {screening['line']}")
        print_text("\n".join(lines))
    return _exit_of(result, screening)


def _exit_of(result, screening: dict | None = None) -> int:
    """0 when the command ended verified: the candidate's own verdict, or the winner the evaluate that
    spent the iteration budget confirmed by itself (its own verdict is a screening estimate)."""
    confirmed = (screening or {}).get("confirmed") or {}
    return 0 if result.status == "verified" or confirmed.get("status") == "verified" else 1


def _evaluate_batch(args, handle) -> int:
    """`pw evaluate RUN A B ...`: one quiet batch (pw.app.batch); each candidate's part as a single
    `pw evaluate` prints it; the exit status is the worst (highest) of the candidates'."""
    from pw.app.batch import evaluate_batch
    from pw.app.screening import confirm_when_due

    with progress_reporter(not args.json, "evaluate") as progress:
        batch = evaluate_batch(handle, args.id, progress, max_pairs=args.max_pairs, max_time_s=args.max_time)
        screening = confirm_when_due(handle, progress)
    codes = [o.exit_code if o.result is None else _exit_of(o.result) for o in batch.outcomes]
    if args.json:
        results = [_result_json(handle, o.result) if o.result is not None
                   else {"id": o.id, "error": o.error, "exit_code": o.exit_code} for o in batch.outcomes]
        print_json({"batch": to_builtins(batch.plan), "results": results}
                   | ({"screening": screening} if screening is not None else {}))
    else:
        plan = batch.plan
        lines = [f"{plan.batch}: {', '.join(plan.order)} (builds and oracle checks first, then the campaigns "
                 "one at a time, in this order)"]
        for outcome in batch.outcomes:
            if outcome.result is not None:
                lines += _result_lines(handle, outcome.result)
            else:
                lines.append(f"{outcome.id}: error (exit {outcome.exit_code}): {outcome.error}")
        if screening is not None:
            lines.append(f"  {screening['line']}")
        print_text("\n".join(lines))
    return max(codes)


def _result_json(handle, result) -> dict:
    errors, log = _build_errors(handle, result)
    extra = {"build_errors": errors, "build_log": str(log)} if log else {}
    return to_builtins(result) | {"run_dir": str(handle.path)} | extra


def _result_lines(handle, result) -> list[str]:
    errors, log = _build_errors(handle, result)
    speed = f"{result.speedup:.3f}x [{result.interval[0]:.3f}, {result.interval[1]:.3f}]" if result.interval else "-"
    if result.reference != "baseline":
        cum = (f"{result.cumulative:.3f}x [{result.cumulative_interval[0]:.3f}, {result.cumulative_interval[1]:.3f}]"
               if result.cumulative and result.cumulative_interval else "-")
        speed = f"step {speed} vs {result.reference}; cumulative {cum} vs baseline, approx."
    else:
        speed = f"speedup {speed}"
    lines = [f"{result.id} attempt {result.attempt}: {result.status} ({speed})"]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  {r}" for r in result.reasons]
    if log:
        lines += [f"    {e}" for e in errors]
        lines.append(f"    build log: {log}")
    if result.gates:
        lines.append(f"  gates: {_gate_line(result.gates)}")
    if result.stop:
        aside = f" (and {result.set_aside} set aside for unbalanced load)" if result.set_aside else ""
        lines.append(f"  campaign: {result.n_pairs} pairs{aside}, stopped: {_STOPS.get(result.stop, result.stop)}")
    lines.append(f"  patch: {result.patch}")
    if result.repairable and result.repairs_left:
        lines.append(f"  repairs left: {result.repairs_left} (edit the workspace and evaluate again)")
    if result.brief:
        lines.append(f"  brief for the next idea: {result.brief}")
        lines.append(f"next: pw prepare {handle.path} --candidate ID:current:MECHANISM")
    if result.status in ("inconclusive", "proposed") and result.stop == "budget":
        lines.append(more_line(handle.path, result.id, result.more_pairs))
    return lines


def more_line(run, cid: str, suggested: int | None) -> str:
    """The `next:` line after a budget ran out undecided: `--more N` with N what the current variance
    needs, never more than one `--more` continues by (MORE_CAP); when it needs more than that, the
    line says so and names the cap, so that what it suggests is what the command does."""
    from pw.app.evaluate import MORE_CAP

    if not suggested:
        return (f"next: pw evaluate {run} {cid} --more   (the budget ran out undecided; no number of pairs at the "
                f"current mean would decide: continues by at most {MORE_CAP})")
    if suggested <= MORE_CAP:
        return f"next: pw evaluate {run} {cid} --more {suggested}   (the budget ran out undecided)"
    return (f"next: pw evaluate {run} {cid} --more {MORE_CAP}   (the budget ran out undecided; the current variance "
            f"needs about {suggested} more pairs, {MORE_CAP} at a time: a quieter machine or a longer input "
            "decides sooner)")


def _build_errors(handle, result):
    """The compiler's first error lines and the log's path, when this attempt's build failed."""
    from pw.rules.verdict import BUILD_FAILED
    from pw.workload import build_log

    if not any(r.startswith(BUILD_FAILED) for r in result.reasons):
        return [], None
    built = handle.state().builds.get(result.id)
    return build_log.summary(built, handle.evidence) if built is not None else ([], None)


_STOPS = {
    "decided": "decided (the interval cleared the minimum effect)",
    "margin": "no effect (the interval lies within the margin)",
    "budget": "budget spent before the speedup and the mechanism were both decided",
    "misfit": "the running interval became empty (drifting timings)",
}


def confirm(args) -> int:
    from pw.app.confirm import confirm as do_confirm

    handle = _handle(args.run)
    if (code := _on_remote(args, handle, f"confirm-{args.id}")) is not None:
        return code
    with progress_reporter(not args.json) as progress:
        result = do_confirm(handle, args.id, fresh=args.fresh, progress=progress)
    if args.json:
        print_json(to_builtins(result) | {"run_dir": str(handle.path)})
    else:
        speed = f"{result.speedup:.3f}x [{result.interval[0]:.3f}, {result.interval[1]:.3f}]" if result.interval else "-"
        how = ("fresh profiled campaign" if result.launched
               else "reused the profiled pairs; captured what cadence winner-only deferred"
               if result.reprofiled else "reused the profiled pairs already collected")
        if result.unprofiled is not None:
            whole = " (the whole process)" if handle.state().run.contract.metric.kind == "operation" else ""
            how += f"; without a profiler {result.unprofiled:.3f}x{whole} over 5 unprofiled pairs"
        lines = [f"{result.id}: {result.status} (speedup {speed}; {how})", f"  gates: {_gate_line(result.gates)}"]
        lines += [f"  {r}" for r in result.reasons]
        lines.append(f"next: pw report {handle.path}")
        print_text("\n".join(lines))
    return 0 if result.status == "verified" else 1


def status(args) -> int:
    from pw.app.screening import budget_line
    from pw.rules.candidates import best_verified, screening_ranking, suggested_confirmation

    handle = _handle(args.run)
    state = handle.state()
    best = best_verified(state)
    ranking = screening_ranking(state)
    to_confirm = suggested_confirmation(state)
    left, due = budget_line(state)
    rows = []
    for cid, cand in sorted(state.candidates.items(), key=lambda kv: kv[1].prepared_seq):
        v = cand.confirmation or cand.verdict
        rows.append({
            "id": cid,
            "parent": cand.prepared.resolved_parent,
            "mechanism": cand.prepared.mechanism,
            "status": v.status if v else "prepared",
            "speedup": v.speedup if v else None,
            "interval": v.interval if v else None,
            "gates": {g.name: g.passed for g in cand.gates.gates} if cand.gates else {},
            "kept": cid == best,
            "attempts": cand.attempts,
            "exploratory": bool(cand.verdict and cand.verdict.exploratory and cand.confirmation is None),
        })
    if args.json:
        print_json({"run_dir": str(handle.path), "best": best, "to_confirm": to_confirm,
                    "iterations_left": left if due else None, "screening": due,
                    "screening_ranking": [{"id": c, "one_pair_estimate": s} for c, s in ranking],
                    "candidates": rows})
        return 0
    from rich.table import Table

    hs = state.hotspot
    title = f"{state.run.run_id}" + (f" · hotspot {hs.name} {hs.share:.0%} (ceiling {hs.amdahl_ceiling or 0:.2f}x)" if hs else "")
    table = Table(title=title, title_justify="left")
    for col in ("id", "parent", "mechanism", "speedup [95% CI]", "gates", "status", "kept"):
        table.add_column(col, overflow="fold")
    for r in rows:
        ci = f"{r['speedup']:.3f}x [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]" if r["interval"] else "-"
        if r["exploratory"] and r["speedup"] is not None:
            ci = f"{r['speedup']:.3f}x (one pair, exploratory)"
        gates = "".join("✓" if ok else "✗" for ok in r["gates"].values()) or "-"
        table.add_row(r["id"], r["parent"], r["mechanism"], ci, gates, r["status"], "kept" if r["kept"] else "reverted")
    console().print(table)
    if due:
        console().print(due)
    if to_confirm:
        console().print(f"next: pw confirm {handle.path} {to_confirm}   (best one-pair screening estimate, "
                        f"{dict(ranking)[to_confirm]:.3f}x; screening ranks, confirmation decides)")
    return 0
