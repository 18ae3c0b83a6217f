"""Shared fixtures: small, generic builders for ledgers and run directories.

Keep this file small; helpers specific to one area belong in that area's test module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.contract import Contract, Source, Step
from ledger.store import Ledger

FIXED_AT = "2026-01-01T00:00:00.000000Z"


def make_contract(name: str = "demo") -> Contract:
    return Contract(version=1, name=name, source=Source(editable=["src/*.c"]), run=Step(argv=["./demo"]))


def make_run_started(run_id: str = "20260101-000000-demo", contract: Contract | None = None) -> ev.RunStarted:
    return ev.RunStarted(
        run_id=run_id,
        workload="workloads/demo",
        contract=contract or make_contract(),
        manifest_sha256=None,
        inferred=False,
        inference=[],
        source_sha256="0" * 64,
        budgets=ev.Budgets(iterations=10, repairs=7),
        host=ev.Host(hostname="host", platform="linux", machine="x86_64", cpus=2, python="3.11.7"),
    )


def deterministic_ledger(path: Path) -> Ledger:
    """A ledger whose clock and ids are fixed, so identical appends give identical bytes."""
    counter = iter(range(1, 1 << 62))
    return Ledger(path, clock=lambda: FIXED_AT, new_id=lambda: f"{next(counter):032x}")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory holding a ledger with RunStarted and one Note."""
    run = tmp_path / "20260101-000000-demo"
    ledger = deterministic_ledger(run / "ledger.jsonl")
    ledger.append(make_run_started(run.name), expected_seq=0)
    ledger.append(ev.Note(text="hello"), expected_seq=1)
    return run
