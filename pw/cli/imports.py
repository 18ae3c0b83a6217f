"""`pw import RUN TOOL=PATH ...`: import pre-captured profiles of tools that do not run here
(HPCToolkit, GVProf, DrGPUM, GPA) through their partial adapters, and print each one's brief."""

from __future__ import annotations

from pathlib import Path

from pw.cli.common import actor, print_json, print_text


def import_profiles(run_dir: Path, specs: list[str], target: str) -> list:
    from pw.app.imports import import_profiles as record

    return record(run_dir, specs, target=target, actor=actor())


def summary(event) -> dict:
    return {"adapter": event.adapter, "target": event.target, "source": event.source,
            "primary_metric": event.primary_metric, "total": event.total, "ceiling": event.ceiling,
            "cannot_pass": sorted(event.gate_limits), "brief_tokens": event.tokens,
            "brief": (f"imports/{event.adapter}/agent-brief.txt" if event.target == "baseline"
                      else f"candidates/{event.target}/imports/{event.adapter}/agent-brief.txt")}


def import_verb(args) -> int:
    from pw.cli.common import open_run

    run, _ = open_run(args.run)
    events = import_profiles(run.path, args.artifacts, args.target)
    if args.json:
        print_json({"run_dir": str(run.path), "imports": [summary(e) for e in events]})
        return 0
    for e in events:
        print_text(f"imported {e.adapter} into {e.target}: {summary(e)['brief']} "
                   f"({e.tokens} tokens; ceiling {e.ceiling})")
        print_text(e.brief)
    return 0
