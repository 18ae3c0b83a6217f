"""Faults met by the verbs that look after a run (`pw audit`, `pw repair`, `pw rebuild`) and by the
verbs that only read one (status, log, replay, inspect, report): damaged, torn, emptied and
replaced ledgers, edited projections, missing evidence, a full or read-only disk. Each row is one
fault (tests/faultkit.py says what every row must show).

A damaged ledger (a flipped byte in the middle) gets the same answer from every verb: which events
still stand (up to seq N) and that the run must be restored from a copy or started again; `pw
repair` says so too, and changes nothing. A torn tail is repaired, and the repair rewrites the
projections it made stale, so `pw audit` passes right after it.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import pw_main
from tests.faultkit import (
    Fault,
    before_call,
    check,
    damaged,
    fill,
    free,
    ids,
    remount,
    repair,
    restore_ledger,
    tear,
    torn,
)

DAMAGED = ("fails its hash", "events 1-2 are intact", "nothing from seq 3 on can be trusted", "restore ledger.jsonl",
           "pw start --workload")


def _unchanged_then_restored(scene):
    assert (scene.run / "ledger.jsonl").read_bytes() == scene.damaged  # nothing was "repaired" away
    restore_ledger(scene)


def _replaced(content: bytes, verb: str = "audit"):
    def act(scene):
        (scene.run / "ledger.jsonl").write_bytes(content)
        return [verb, scene.run]

    return act


def _edited_plan(scene):
    plan = scene.run / "experiment-plan.json"
    plan.write_text(plan.read_text().replace('"tiny"', '"tinier"', 1))
    return ["audit", scene.run]


def _rebuild(scene):
    result = pw_main("rebuild", scene.run)
    assert result.code == 0 and "(1 changed)" in result.out, result


def _lost_evidence(scene):
    victim = sorted(p for p in (scene.run / "raw").rglob("*") if p.is_file())[0]
    scene.victim = victim.relative_to(scene.run)
    victim.unlink()
    return ["audit", scene.run]


def _evidence_restored(scene):
    shutil.copy2(scene.template / scene.victim, scene.run / scene.victim)


def _dropped_line(scene):
    path = scene.run / "ledger.jsonl"
    lines = path.read_bytes().split(b"\n")
    del lines[3]
    path.write_bytes(b"\n".join(lines))
    return ["audit", scene.run]


def _torn_on_read_only(scene):
    scene.run_on_tmpfs()
    tear(scene.run)
    remount(scene.tmp / "disk", "ro")
    return ["repair", scene.run]


def _writable_and_repair(scene):
    remount(scene.tmp / "disk", "rw")
    repair(scene)


def _rebuild_on_full_disk(scene):
    scene.run_on_tmpfs()
    (scene.run / "experiment-plan.json").unlink()
    fill(scene.tmp / "disk")
    return ["rebuild", scene.run]


def _free_and_rebuild(scene):
    free(scene.tmp / "disk")
    result = pw_main("rebuild", scene.run)
    assert result.code == 0, result


def _repair_full_after_truncating(scene):
    """The repair's LedgerRepaired is recorded; the projections it stales cannot be written."""
    scene.run_on_tmpfs()
    tear(scene.run)
    from projections import materialize

    before_call(scene, materialize, "write_all", 1, lambda *_: fill(scene.tmp / "disk"))
    return ["repair", scene.run]


def _run(verb: str, *extra):
    return lambda s: [verb, s.run, *extra]


FAULTS = [
    # audit
    Fault("audit-flipped-byte", "audit", 1, ("audit failed", "seq 3", "fails its hash"), damaged(_run("audit")),
          _unchanged_then_restored),
    Fault("audit-dropped-event", "audit", 1, ("audit failed", "seq 4"), _dropped_line, restore_ledger),
    Fault("audit-edited-projection", "audit", 1, ("experiment-plan.json", "differs from its rebuild"), _edited_plan,
          _rebuild),
    Fault("audit-missing-evidence", "audit", 1, ("missing from raw/",), _lost_evidence, _evidence_restored),
    Fault("audit-empty-ledger", "audit", 2, ("empty file",), _replaced(b""), restore_ledger),
    Fault("audit-not-a-ledger", "audit", 2, ("not a ProfileWeaver ledger",), _replaced(b"hello\nworld\n"),
          restore_ledger),
    Fault("audit-not-a-run", "audit", 2, ("not inside a run directory",), lambda s: ["audit", s.tmp]),
    # repair
    Fault("repair-torn-tail", "repair", 0, ("quarantined", "rebuilt the projections"), torn(_run("repair"))),
    Fault("repair-flipped-byte", "repair", 2, ("nothing changed", *DAMAGED), damaged(_run("repair")),
          _unchanged_then_restored),
    Fault("repair-intact-ledger", "repair", 0, ("intact, nothing to repair",), _run("repair")),
    Fault("repair-empty-ledger", "repair", 2, ("empty file", "nothing repaired"),
          _replaced(b"", "repair"), restore_ledger),
    Fault("repair-not-a-ledger", "repair", 2, ("not a ProfileWeaver ledger", "nothing repaired"),
          _replaced(b"x" * 100, "repair"), restore_ledger),
    Fault("repair-read-only-disk", "repair", 3, ("ledger.jsonl: read-only filesystem", "then run `pw repair"),
          _torn_on_read_only, _writable_and_repair, root=True),
    Fault("repair-disk-full-rewriting-projections", "repair", 3, ("no space left", "then run `pw rebuild"),
          _repair_full_after_truncating, _free_and_rebuild, root=True),
    # rebuild
    Fault("rebuild-disk-full", "rebuild", 3, ("experiment-plan.json: no space left", "then run `pw rebuild"),
          _rebuild_on_full_disk, _free_and_rebuild, root=True),
    Fault("rebuild-damaged-ledger", "rebuild", 2, DAMAGED, damaged(_run("rebuild")), restore_ledger),
    # the verbs that read a run: a damaged ledger is named, with what to do
    Fault("status-damaged-ledger", "status", 2, DAMAGED, damaged(_run("status")), restore_ledger),
    Fault("log-damaged-ledger", "log", 2, DAMAGED, damaged(_run("log")), restore_ledger),
    Fault("replay-damaged-ledger", "replay", 2, DAMAGED, damaged(_run("replay", "--until", 2)), restore_ledger),
    Fault("inspect-damaged-ledger", "inspect", 2, DAMAGED, damaged(_run("inspect", "--section", "facts")),
          restore_ledger),
    Fault("report-damaged-ledger", "report", 2, DAMAGED, damaged(_run("report")), restore_ledger),
    Fault("status-torn-tail", "status", 2, ("torn tail", "run `pw repair"), torn(_run("status")), repair),
    Fault("replay-past-the-end", "replay", 2, ("--until 99",), _run("replay", "--until", 99)),
]


@pytest.mark.parametrize("fault", FAULTS, ids=ids(FAULTS))
def test_fault(fault: Fault, scene) -> None:
    check(fault, scene)
