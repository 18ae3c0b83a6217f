"""One fold per command: a whole `pw evaluate` (build, oracle, holdouts, a timed campaign, the judge,
the brief) reads and folds its run's ledger once and writes the projections once per stage; before the renovation it read the ledger 8-9 times and re-rendered every projection after
each append."""

from __future__ import annotations

from pathlib import Path

import pytest

import pw.app.run
from ledger.store import Ledger
from tests.conftest import copy_run, pw_main


@pytest.fixture
def counted(monkeypatch):
    """Whole reads of any ledger named ledger.jsonl, and projection writes, by run directory."""
    reads: dict[Path, int] = {}
    writes: dict[Path, int] = {}
    read, materialize = Ledger.events, pw.app.run.materialize

    def counting_read(self, *args, **kwargs):
        reads[self.path.parent] = reads.get(self.path.parent, 0) + 1
        return read(self, *args, **kwargs)

    def counting_materialize(run_dir, *args, **kwargs):
        writes[run_dir] = writes.get(run_dir, 0) + 1
        return materialize(run_dir, *args, **kwargs)

    monkeypatch.setattr(Ledger, "events", counting_read)
    monkeypatch.setattr(pw.app.run, "materialize", counting_materialize)
    return reads, writes


def test_one_evaluate_folds_its_ledger_once_and_writes_the_projections_once_per_stage(faults_template, tmp_path,
                                                                            fast_preflight, counted):
    run = copy_run(faults_template, tmp_path)
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(source.read_text() + "\nint pw_test_unread_marker = 1;\n")  # its own image: timed
    reads, writes = counted
    result = pw_main("evaluate", run, "a", "--json")
    assert result.code in (0, 1), result.err
    out = result.json()  # a campaign ran (its pairs judged or set aside for load): the whole loop
    assert (out["n_pairs"] or 0) + (out["set_aside"] or 0) >= 5, out
    assert reads.get(run) == 1, reads
    # two stages, each written once: build, oracle and holdouts (written before the long campaign, so
    # a person watching sees them), then the campaign, the judge and the brief
    assert writes.get(run) == 2, writes
