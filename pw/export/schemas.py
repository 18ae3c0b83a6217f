"""JSON Schemas generated from the msgspec types, and which type each run file has.

`python -m pw.export.schemas` regenerates `schemas/`; a test fails when the checked-in files drift.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"

# run file name pattern -> "module:Type". The first matching pattern wins.
FILE_TYPES: list[tuple[str, str]] = [
    ("profileweaver.json", "ledger.contract:Contract"),
    ("experiment-plan.json", "projections.documents:ExperimentPlan"),
    ("preflight.json", "projections.documents:PreflightDoc"),
    ("profiler-routing.json", "projections.documents:RoutingDoc"),
    ("source-targets.json", "projections.documents:SourceTargetsDoc"),
    ("agent-brief.json", "projections.documents:BriefDoc"),
    ("agent-view.json", "projections.documents:ViewDoc"),
    ("cost.json", "projections.documents:CostDoc"),
    ("profile.json", "ledger.profile:Profile"),
    ("profile.baseline.json", "ledger.profile:Profile"),
    ("profile.diagnosis.json", "ledger.profile:Profile"),
    ("profile-diff.json", "projections.profile_diff:ProfileDiff"),
    ("report.json", "projections.report:ReportDoc"),
    ("plan.json", "projections.run_files:PlanDoc"),
    ("harness-state.json", "projections.run_files:HarnessStateDoc"),
    ("bench.*.json", "projections.run_files:BenchDoc"),
    ("experiment-state.json", "projections.run_files:ExperimentStateDoc"),
    ("campaign-plan.json", "projections.run_files:CampaignPlanDoc"),
    ("campaign-result.json", "projections.run_files:CampaignResultDoc"),
    ("batch-plan.json", "projections.run_files:BatchPlanDoc"),
]


# Seed 000 names some schemas otherwise ("shared/schema/"); the same schema is written under its name
# too, so a reader of the documents finds it: their name -> the run file whose type it is.
SEED_NAMES: dict[str, str] = {
    "harness-plan": "plan.json",        # "resumable execution plan"
    "benchmark": "bench.*.json",        # "timing campaign with correctness + significance"
    "preflight-result": "preflight.json",  # "compact capability result and failure classification"
    "rewrite-report": "report.json",    # "a child's deliverable, including the trust gates"
}


def _load(spec: str) -> type:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def type_for_file(path: Path) -> type | None:
    for pattern, spec in FILE_TYPES:
        if fnmatch.fnmatch(path.name, pattern):
            return _load(spec)
    return None


def _schema_targets() -> dict[str, Any]:
    from ledger.events import EVENT_TYPES, Envelope

    targets: dict[str, Any] = {"envelope": Envelope}
    for name, cls in sorted(EVENT_TYPES.items()):
        targets[f"event.{name}.v{cls.VERSION}"] = cls
    for pattern, spec in FILE_TYPES:
        targets[pattern.replace(".json", "").replace("*", "_")] = _load(spec)
    by_file = dict(FILE_TYPES)
    for name, pattern in SEED_NAMES.items():
        targets[name] = _load(by_file[pattern])
    return targets


def generate() -> dict[str, bytes]:
    """File name -> schema bytes, deterministic."""
    out = {}
    for name, typ in _schema_targets().items():
        schema = msgspec.json.schema(typ)
        out[f"{name}.schema.json"] = (json.dumps(schema, indent=2, sort_keys=True) + "\n").encode()
    return out


def write(directory: Path = SCHEMA_DIR) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    files = generate()
    for stale in directory.glob("*.schema.json"):
        if stale.name not in files:
            stale.unlink()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return sorted(files)


if __name__ == "__main__":
    names = write()
    sys.stdout.write(f"wrote {len(names)} schemas to {SCHEMA_DIR}\n")
