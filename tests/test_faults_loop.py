"""Faults met by the candidate loop (`pw prepare`, `pw evaluate`, `pw confirm`): hostile ids and bad
arguments, a full or read-only disk, a candidate that does not build, torn and damaged ledgers. Each
row is one fault (tests/faultkit.py says what every row must show). The shared run has candidate `a`
prepared and unedited: evaluating it builds, checks and rejects it untimed (same image), so even
the rows that evaluate after recovering stay quick."""

from __future__ import annotations

import pytest

from pw.app.run import RunHandle
from pw.workload import workspace
from tests.conftest import ledger_events, pw_main
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
    torn,
)

BROKEN_C = "int main(void) { return 0 }  /* a missing semicolon */\nint also_broken(void) { return x; }\n"


def prepare(scene, *specs: str) -> list:
    return ["prepare", scene.run, *[a for s in specs for a in ("--candidate", s)]]


def _prepared_again(spec: str):
    """Once the disk is back, the same `pw prepare` succeeds: nothing of the refused one was kept."""

    def recover(scene):
        disk = scene.tmp / "disk"
        if (disk / ".ballast").exists():
            free(disk)
        else:
            remount(disk, "rw")
        assert not (scene.run / "candidates" / spec.split(":")[0]).exists()  # no workspace without its event
        result = pw_main("prepare", scene.run, "--candidate", spec)
        assert result.code == 0, result

    return recover


def _full_before(owner, name: str, k: int, argv):
    def act(scene):
        scene.run_on_tmpfs()
        before_call(scene, owner, name, k, lambda *_: fill(scene.tmp / "disk"))
        return argv(scene)

    return act


def _read_only(argv):
    def act(scene):
        scene.run_on_tmpfs()
        remount(scene.tmp / "disk", "ro")
        return argv(scene)

    return act


def _free_and_rebuild(scene):
    free(scene.tmp / "disk")
    result = pw_main("rebuild", scene.run)
    assert result.code == 0, result


def _evaluated_after(free_or_rw: str):
    """Once the disk is back, the same `pw evaluate` runs to its verdict (the unedited candidate:
    rejected as the baseline's own image)."""

    def recover(scene):
        disk = scene.tmp / "disk"
        free(disk) if free_or_rw == "free" else remount(disk, "rw")
        result = pw_main("evaluate", scene.run, "a")
        assert result.code == 1 and "no-effect:" in result.out, result

    return recover


def _broken_candidate(scene):
    (scene.run / "candidates" / "a" / "src" / "tiny.c").write_text(BROKEN_C)
    return ["evaluate", scene.run, "a"]


def _build_log_named(scene):
    from ledger import events as ev

    built = [e.data for e in ledger_events(scene.run) if isinstance(e.data, ev.BuildFinished) and e.data.target == "a"]
    assert [b.outcome for b in built] == ["build-failed"]
    import json
    from pathlib import Path

    # A repair attempt that still does not build says the same, in JSON too; the log is where it says.
    result = pw_main("evaluate", scene.run, "a", "--json")
    doc = json.loads(result.out)
    assert result.code == 1 and doc["attempt"] == 2, result
    assert any(line.startswith("tiny.c:1:") and "error" in line for line in doc["build_errors"]), doc
    assert 1 <= len(doc["build_errors"]) <= 8
    assert b"error" in Path(doc["build_log"]).read_bytes()


def _evaluate_a(s):
    return ["evaluate", s.run, "a"]


DAMAGED = ("fails its hash", "events 1-2 are intact", "restore ledger.jsonl", "pw start --workload")

FAULTS = [
    # prepare: bad input
    Fault("prepare-unknown-parent", "prepare", 2, ("parent 'nope'",), lambda s: prepare(s, "b:nope:m")),
    Fault("prepare-id-is-a-path", "prepare", 2, ("never a path",), lambda s: prepare(s, "../../etc:baseline:m")),
    Fault("prepare-id-with-an-escape", "prepare", 2, ("candidate id",), lambda s: prepare(s, "b\x1b[31m:baseline:m")),
    Fault("prepare-id-twice", "prepare", 2, ("'b' already exists",), lambda s: prepare(s, "b:baseline:m", "b:baseline:n")),
    Fault("prepare-id-already-prepared", "prepare", 2, ("'a' already exists",), lambda s: prepare(s, "a:baseline:m")),
    Fault("prepare-mechanism-too-long", "prepare", 2, ("mechanism",), lambda s: prepare(s, "b:baseline:" + "x" * 300)),
    Fault("prepare-no-mechanism", "prepare", 2, ("expected ID:PARENT:MECHANISM",), lambda s: prepare(s, "b:baseline")),
    Fault("prepare-not-a-run", "prepare", 2, ("not inside a run directory",),
          lambda s: ["prepare", s.tmp, "--candidate", "b:baseline:m"]),
    # prepare: the machine
    Fault("prepare-disk-full-copying-the-workspace", "prepare", 3, ("candidates/b/src", "no space left", "pw prepare"),
          _full_before(workspace, "fresh_copy", 1, lambda s: prepare(s, "b:baseline:m")),
          _prepared_again("b:baseline:m"), root=True),
    Fault("prepare-disk-full-writing-projections", "prepare", 3,
          ("no space left", "the ledger holds every event", "then run `pw rebuild"),
          _full_before(RunHandle, "materialize", 1, lambda s: prepare(s, "b:baseline:m")), _free_and_rebuild,
          root=True),
    Fault("prepare-read-only-run", "prepare", 3, ("read-only filesystem", "mount it writable"),
          _read_only(lambda s: prepare(s, "b:baseline:m")), _prepared_again("b:baseline:m"), root=True),
    Fault("prepare-damaged-ledger", "prepare", 2, DAMAGED, damaged(lambda s: prepare(s, "b:baseline:m")),
          restore_ledger),
    Fault("prepare-torn-tail", "prepare", 2, ("torn tail at byte", "run `pw repair"),
          torn(lambda s: prepare(s, "b:baseline:m")), repair),
    # evaluate
    Fault("evaluate-unknown-candidate", "evaluate", 2, ("never prepared",), lambda s: ["evaluate", s.run, "zz"]),
    Fault("evaluate-id-is-a-path", "evaluate", 2, ("never a path",), lambda s: ["evaluate", s.run, "../a"]),
    Fault("evaluate-too-few-pairs", "evaluate", 2, ("--max-pairs 2",),
          lambda s: ["evaluate", s.run, "a", "--max-pairs", 2]),
    Fault("evaluate-more-and-max-pairs", "evaluate", 2, ("not both",),
          lambda s: ["evaluate", s.run, "a", "--more", 3, "--max-pairs", 9]),
    Fault("evaluate-disk-full-at-the-first-append", "evaluate", 3, ("no space left", "then run `pw evaluate"),
          _full_before(RunHandle, "record", 1, _evaluate_a), _evaluated_after("free"), root=True),
    Fault("evaluate-read-only-run", "evaluate", 3, ("read-only filesystem",), _read_only(_evaluate_a),
          _evaluated_after("rw"), root=True),
    Fault("evaluate-damaged-ledger", "evaluate", 2, DAMAGED, damaged(_evaluate_a), restore_ledger),
    Fault("evaluate-torn-tail", "evaluate", 2, ("torn tail at byte", "run `pw repair"), torn(_evaluate_a), repair),
    Fault("evaluate-candidate-does-not-build", "evaluate", 1,
          ("rejected", "build-failed:", "tiny.c:1:", "error:", "build log: "), _broken_candidate, _build_log_named),
    # confirm
    Fault("confirm-unknown-candidate", "confirm", 2, ("no evaluation to confirm",), lambda s: ["confirm", s.run, "zz"]),
    Fault("confirm-never-evaluated", "confirm", 2, ("no evaluation to confirm",), lambda s: ["confirm", s.run, "a"]),
    Fault("confirm-not-a-run", "confirm", 2, ("not inside a run directory",), lambda s: ["confirm", s.tmp, "a"]),
    Fault("confirm-damaged-ledger", "confirm", 2, DAMAGED, damaged(lambda s: ["confirm", s.run, "a"]), restore_ledger),
]


@pytest.mark.parametrize("fault", FAULTS, ids=ids(FAULTS))
def test_fault(fault: Fault, scene) -> None:
    check(fault, scene)
