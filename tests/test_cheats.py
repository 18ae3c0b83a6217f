"""Planted cheating candidates (tests/data/candidates/matmul-c/README.md) are never verified.

Each end-to-end test applies one patch in a candidate workspace of a copy of the session's started
matmul-c run, evaluates it with the real `pw`, and checks the verdict and the gate that catches it.
The Amdahl-ceiling defence is shown at the gate level on a real evaluation's recorded inputs, since
no real patch of this workload can beat the hotspot's ceiling without skipping work.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.contract import Contract, Oracle, Source, Step
from pw.rules import candidates
from tests.conftest import apply_patch, copy_run, ledger_events, pw_main

CHEATS = Path(__file__).resolve().parent / "data" / "candidates" / "matmul-c"


def evaluate_patch(template: Path, tmp_path: Path, patch: Path, cid: str = "c") -> tuple[Path, dict]:
    run = copy_run(template, tmp_path)
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{patch.stem}").code == 0
    apply_patch(run / "candidates" / cid / "src", patch)
    # The gates under test do not need a long campaign: a cheat that gains nothing would otherwise
    # run the adaptive campaign to its default budget of 40 pairs.
    result = pw_main("evaluate", run, cid, "--max-pairs", "9", "--json")
    assert result.code in (0, 1), result  # 0 verified, 1 any other verdict; never a usage error
    out = result.json()
    assert result.code == (0 if out["status"] == "verified" else 1)
    return run, out


def gate(out: dict, name: str) -> dict:
    return next(g for g in out["gates"] if g["name"] == name)


def judged(run: Path, cid: str) -> tuple[ev.GatesEvaluated, ev.VerdictReached]:
    events = [e.data for e in ledger_events(run)]
    g = [d for d in events if isinstance(d, ev.GatesEvaluated) and d.id == cid][-1]
    v = [d for d in events if isinstance(d, ev.VerdictReached) and d.id == cid][-1]
    return g, v


@pytest.mark.slow
def test_skip_work_fails_the_full_output_comparison_and_is_rejected(matmul_template, tmp_path):
    """Hard-coded answer for n=720 seed 1 (the checksums and the four elements the harness used to
    print): the harness now prints all of C, and the baseline's output is the reference."""
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "skip-work.patch")
    assert out["status"] == "rejected"
    assert len(out["reasons"]) == 1 and out["reasons"][0].startswith("oracle-failed:")
    assert "vs baseline output" in out["reasons"][0]
    assert not gate(out, "correctness")["passed"]
    assert not any(isinstance(e.data, ev.TimingRecorded) and "c" in e.data.targets for e in ledger_events(run))


@pytest.mark.slow
def test_computing_only_what_was_printed_is_rejected(matmul_template, tmp_path):
    """Issue 12, class 4: an O(n^2) matmul() that computes the sum, the weighted sum and the four
    sampled elements the harness printed, for every n and seed, and fills the rest of C so the sums
    come out right. It matched every reference and holdout exactly; all of C is compared now."""
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "print-only.patch")
    assert out["status"] == "rejected", out
    assert out["reasons"][0].startswith("oracle-failed:") and "vs baseline output" in out["reasons"][0]
    oracle = [e.data for e in ledger_events(run) if isinstance(e.data, ev.OracleChecked) and e.data.target == "c"]
    assert len(oracle) == 1 and not oracle[0].passed


@pytest.mark.slow
def test_fresh_holdouts_are_drawn_after_the_build_and_compared_with_the_baseline(matmul_interchange):
    """The honest interchange: its holdout inputs are drawn only after its build (recorded, with
    the seed and the binary they were drawn for), run by the baseline and the candidate, compared in
    full; every timed pair runs its own fresh input of the timed size."""
    events = ledger_events(matmul_interchange)
    built = next(e for e in events if isinstance(e.data, ev.BuildFinished) and e.data.target == "a")
    drawn = next(e for e in events if isinstance(e.data, ev.HoldoutsDrawn) and e.data.target == "a")
    oracle = next(e for e in events if isinstance(e.data, ev.OracleChecked) and e.data.target == "a")
    assert built.seq < drawn.seq < oracle.seq and drawn.data.binary_sha256 == built.data.binary_sha256
    assert len(drawn.data.inputs) == 4 and all(a[0] == "./matmul" and 64 <= int(a[1]) <= 720 for a in drawn.data.inputs)
    assert oracle.data.passed and len(oracle.data.holdouts) == 4
    assert all("lines match the baseline" in h for h in oracle.data.holdouts)
    assert oracle.data.compares_nothing is None
    assert "fields" in oracle.data.compared and "fresh holdout" in oracle.data.compared
    timing = next(e.data for e in events if isinstance(e.data, ev.TimingRecorded) and "a" in e.data.targets)
    pairs = [" ".join(a) for a in timing.conditions.pair_inputs]
    n = len(timing.samples["a"])  # an adaptive campaign: 5 pairs or a few blocks more
    assert n >= 5 and len(pairs) == n and all(p.startswith("./matmul 720 ") for p in pairs)
    assert len(set(pairs)) == n and "./matmul 720 1" not in pairs
    # Another evaluation of the same candidate draws other inputs.
    assert drawn.data.seed != next(e.data.seed for e in events if isinstance(e.data, ev.HoldoutsDrawn)
                                   and e.data.target == "baseline")


@pytest.mark.slow
def test_output_wrong_only_on_unpublished_seeds_fails_its_timed_pair(matmul_template, tmp_path):
    """Full work only for the seeds of the published checks (1, 2), half the rows for any other
    input of the timed size: the oracle and the small holdouts pass; the first timed pair, on a
    fresh seed, compares the candidate's output with the baseline's and rejects it."""
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "seed-keyed.patch")
    assert out["status"] == "rejected", out
    assert out["reasons"][0].startswith("oracle-failed: pair 1 on fresh input `./matmul 720 "), out["reasons"]
    assert "differs from the reference's" in out["reasons"][0]
    oracle = [e.data for e in ledger_events(run) if isinstance(e.data, ev.OracleChecked) and e.data.target == "c"]
    assert oracle[-1].passed  # only the timed pair caught it


@pytest.mark.slow
def test_cache_file_across_runs_is_rejected_naming_the_file(matmul_template, tmp_path):
    """Caches C in ./.matmul-cache-720-1.bin: the oracle run already leaves it in its tree, which
    the baseline's does not, so it is caught and rejected with the file named (issue 12, class 8:
    before, this was `inconclusive` with a reason that never mentioned the cache)."""
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "cache-file.patch")
    assert out["status"] == "rejected"
    assert "created .matmul-cache-720-1.bin in its tree" in out["reasons"][0]
    assert not gate(out, "correctness")["passed"]
    # The cache never survived into the next run: nothing of it is left in the build tree.
    assert not list((run / "build" / "c").glob(".matmul-cache-*"))


@pytest.mark.slow
def test_edit_oracle_is_refused_and_reference_is_protected(matmul_template, tmp_path):
    """Rewrites reference/holdout-24-7.txt to match a wrong matmul: refused before anything is built."""
    ref = "reference/holdout-24-7.txt"
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "edit-oracle.patch")
    assert out["status"] == "rejected"
    assert out["reasons"] == [f"edit-refused: {ref}"]
    corr = gate(out, "correctness")
    assert not corr["passed"] and "refused edits" in corr["detail"] and ref in corr["detail"]
    diff = [e.data for e in ledger_events(run) if isinstance(e.data, ev.CandidateDiffRecorded)][-1]
    assert diff.refused == [ref] and sorted(diff.changed) == ["matmul.c", ref]
    assert not any(isinstance(e.data, ev.BuildFinished) and e.data.target == "c" for e in ledger_events(run))
    # The baseline's reference, the one every oracle reads, is untouched.
    original = (Path(__file__).resolve().parents[1] / "workloads" / "matmul-c" / ref).read_bytes()
    assert (run / "baseline" / ref).read_bytes() == original


def test_protected_files_are_refused_even_when_editable_globs_cover_them():
    contract = Contract(
        version=1, name="w", source=Source(editable=["*", "**/*"]), run=Step(argv=["./w"]),
        oracle=Oracle(kind="stdout", reference="reference/stdout.txt"),
    )
    changed = ["kernel.c", "reference/stdout.txt", "profileweaver.json"]
    assert candidates.refused_edits(changed, contract) == ["profileweaver.json", "reference/stdout.txt"]


@pytest.mark.slow
def test_edit_harness_is_refused(matmul_template, tmp_path):
    """Does the multiply inline in main.c (the harness, outside source.editable)."""
    run, out = evaluate_patch(matmul_template, tmp_path, CHEATS / "edit-harness.patch")
    assert out["status"] == "rejected"
    assert out["reasons"] == ["edit-refused: main.c"]
    corr = gate(out, "correctness")
    assert not corr["passed"] and "main.c" in corr["detail"]
    assert not any(isinstance(e.data, ev.BuildFinished) and e.data.target == "c" for e in ledger_events(run))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to see writes outside the workspace")
def test_cache_in_a_shared_absolute_path_is_not_verified(matmul_template, tmp_path):
    """cache-file.patch with its cache moved from ./ to /tmp: nothing is left in the build tree, the
    oracle passes, and every timed run after the first reads the cached product."""
    import uuid

    token = uuid.uuid4().hex[:8]
    patch = tmp_path / "abs-cache.patch"
    text = (CHEATS / "cache-file.patch").read_text()
    patch.write_text(text.replace('".matmul-cache-%d-%u.bin"', f'"/tmp/pwc-{token}-%d-%u.bin"'))
    try:
        _, out = evaluate_patch(matmul_template, tmp_path, patch)
    finally:
        for leftover in Path("/tmp").glob(f"pwc-{token}-*"):
            leftover.unlink()
    # The traced oracle run shows the write outside the run's own directories.
    correctness = gate(out, "correctness")
    assert not correctness["passed"], out["reasons"]
    assert f"/tmp/pwc-{token}" in correctness["detail"], correctness
    assert out["status"] != "verified"


