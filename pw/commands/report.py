"""`pw report RUN`: rebuild report.json and report.md from the ledger and draw their plots."""

from __future__ import annotations

from pw.commands.common import checked_events, open_run, print_json, print_text


def report(args) -> int:
    from ledger.errors import RejectedCommand
    from projections import report as report_doc
    from projections import state
    from projections.materialize import materialize
    from pw.app import RunHandle
    from pw.plots import draw_all

    run, ledger = open_run(args.run)
    run_state = state.fold(checked_events(run, ledger))
    if report_doc.report(run_state) is None:
        raise RejectedCommand(f"{run.path}: no candidate evaluated yet; run `pw prepare` and `pw evaluate` first")
    materialize(run.path, ledger, run_state)
    plots = draw_all(RunHandle(run.path))
    if args.json:
        print_json({"run_dir": str(run.path), "report": str(run.path / "report.md"), "plots": plots})
    else:
        print_text(f"report: {run.path / 'report.md'} ({len(plots)} plots in {run.path / 'plots'})")
    return 0
