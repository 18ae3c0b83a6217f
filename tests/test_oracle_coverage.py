"""An oracle that compares nothing is not an oracle (issue 12, item 2), and what an oracle compares
is said in words: streams, lines, tolerance, holdouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import events as ev
from pw.rules.verdict import reach_verdict
from pw.workload.compare import compare_text
from tests.conftest import ledger_events, pw_main, skip_if_machine_changed

pytestmark = pytest.mark.usefixtures("fast_preflight")

# Results go to stderr only, as a suite kernel did: stdout is empty, so an inferred oracle that
# compares stdout compared 0 lines and "passed", and a rewrite that skipped half the work was verified.
STDERR_ONLY = """#include <stdio.h>
int main(void)
{
    double s = 0.0;
    for (long i = 0; i < 60000000L; i++)
        s += (double)(i % 7) * 0.5;
    fprintf(stderr, "sum %.12e\\n", s);
    return 0;
}
"""


def stderr_only_workload(root: Path, manifest: dict | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "kernel.c").write_text(STDERR_ONLY)
    (root / "Makefile").write_text("kernel: kernel.c\n\tcc -O1 -o kernel kernel.c\n")
    if manifest is not None:
        (root / "profileweaver.json").write_text(json.dumps(manifest))
    return root


def oracle_of(run: Path) -> ev.OracleChecked:
    return next(e.data for e in ledger_events(run) if isinstance(e.data, ev.OracleChecked)
                and e.data.target == "baseline")


STDOUT_ONLY_STABLE = {"version": 1, "name": "k", "source": {"editable": ["kernel.c"]},
                      "build": [{"argv": ["make"]}], "run": {"argv": ["./kernel"]},
                      "oracle": {"kind": "stable", "rtol": 1e-6, "streams": ["stdout"]}}


def test_the_inferred_oracle_compares_stderr_so_a_stderr_only_program_is_checked(tmp_path):
    """Issue 13: the inferred oracle sees stdout, stderr and created files; the suite-kernel shape
    (results on stderr only) is compared, not 'compared nothing'."""
    wl = stderr_only_workload(tmp_path / "wl")
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile")
    assert r.code == 0, r
    assert "compares nothing" not in r.out
    oracle = oracle_of(Path(r.out.splitlines()[0].removeprefix("run: ")))
    assert oracle.passed and oracle.compares_nothing is None
    assert oracle.compared.startswith("stdout+stderr+files: 1 lines (2 fields) vs the baseline's output")


def test_comparing_zero_lines_is_said_at_start_and_recorded(tmp_path):
    # A manifest that keeps only stdout (oracle.streams) on a program that writes only stderr.
    wl = stderr_only_workload(tmp_path / "wl", STDOUT_ONLY_STABLE)
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile")
    assert r.code == 0, r
    assert "WARNING: the oracle compares nothing: it compared 0 lines: stdout was empty" in r.out
    assert "wrote 1 line(s) to stderr, which the oracle does not compare" in r.out
    assert "ceiling: proposed" in r.out
    run = Path(r.out.splitlines()[0].removeprefix("run: "))
    oracle = oracle_of(run)
    assert oracle.passed and oracle.compares_nothing and "0 lines" in oracle.compares_nothing
    assert oracle.compared.startswith("stdout: 0 lines (0 fields) vs the baseline's output")
    as_json = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs2", "--no-profile", "--json").json()
    assert as_json["message"].startswith("the oracle compares nothing")


def test_an_exit_status_oracle_compares_nothing_either(tmp_path):
    wl = stderr_only_workload(tmp_path / "wl", {
        "version": 1, "name": "k", "source": {"editable": ["kernel.c"]},
        "build": [{"argv": ["make"]}], "run": {"argv": ["./kernel"]}, "oracle": {"kind": "exit"}})
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile", "--json")
    assert r.code == 0, r
    assert "checks only the exit status" in r.json()["message"]
    assert r.json()["oracle"] == "exit status only"


def test_an_oracle_that_compares_something_says_what_and_warns_of_nothing(tiny_budget_run):
    oracle = oracle_of(tiny_budget_run)
    assert oracle.compares_nothing is None
    assert oracle.compared == ("stdout: 1 lines (2 fields) vs reference reference/stdout.txt, numbers within "
                               "rtol=1e-09 atol=0, other tokens exactly")


def test_the_no_oracle_ceiling_keeps_an_all_green_candidate_at_proposed():
    analysis = {"speedup": 2.0, "n_pairs": 5, "verdict": "FASTER",
                "interval": {"low": 1.9, "high": 2.1, "confidence": 0.95}}
    from ledger.events import GateResult
    from pw.rules.gates import GATE_NAMES

    gates = [GateResult(name=n, passed=True, detail="ok", evidence=[]) for n in GATE_NAMES]
    v = reach_verdict(gates, analysis, refused_edits=[], build_ok=True, oracle_passed=True, exploratory=False,
                      ceiling=["oracle: it compared 0 lines"])
    assert v.status == "proposed" and v.reasons == ["no-oracle: oracle: it compared 0 lines"]
    assert reach_verdict(gates, analysis, refused_edits=[], build_ok=True, oracle_passed=True,
                         exploratory=False).status == "verified"


@pytest.mark.slow
def test_a_rewrite_that_skips_most_of_the_work_is_not_verified_by_an_oracle_of_nothing(tmp_path):
    """The red team's case: results on stderr, an oracle that compares only stdout (the inferred one
    did, before it compared stderr too; here a manifest says so), a candidate skipping most of the
    loop. It is faster and 'passes' the oracle; the verdict says the oracle compared nothing."""
    wl = stderr_only_workload(tmp_path / "wl", STDOUT_ONLY_STABLE)
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile", "--json")
    run = Path(r.json()["run_dir"])
    assert pw_main("prepare", run, "--candidate", "h:baseline:a twentieth of the loop").code == 0
    # A twentieth of the loop: ~20x faster, so that even on a loaded shared machine the campaign says
    # FASTER (half of it once gave an interval of 0.95-2.1 there) and the verdict reaches the gates
    # (no profile was taken, so mechanism fails too); the oracle's ceiling is among the reasons.
    (run / "candidates" / "h" / "src" / "kernel.c").write_text(STDERR_ONLY.replace("60000000L", "3000000L"))
    out = pw_main("evaluate", run, "h", "--json").json()
    skip_if_machine_changed(out)
    assert out["status"] == "proposed", out["reasons"]
    assert any(r.startswith("no-oracle: oracle: it compared 0 lines") for r in out["reasons"]), out["reasons"]
    verdict = [e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached)][-1]
    gates = [e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated)][-1]
    assert gates.rules >= 3 and verdict.status == out["status"]


def test_hex_floats_compare_as_numbers():
    assert compare_text("0x1.8p+1 -0x1p-2\n", "3.0 -0.25\n", rtol=0, atol=0).passed
    bad = compare_text("0x1.8p+1\n", "0x1.8000000000001p+1\n", rtol=1e-18, atol=0)
    assert not bad.passed and "line 1" in bad.detail
    assert compare_text("0x1.8p+1\n", "0x1.8000000000001p+1\n", rtol=1e-9, atol=0).passed


def test_identical_outputs_are_counted_and_the_metric_line_is_skipped():
    c = compare_text("a 1\nroi_s=0.5\n\nb 2 3\n", "a 1\nroi_s=0.7\n\nb 2 3\n", rtol=0, atol=0,
                     skip_pattern=r"roi_s=([0-9.]+)")
    assert c.passed and (c.lines, c.fields) == (2, 5)
    empty = compare_text("", "  \n", rtol=0, atol=0)
    assert empty.passed and empty.lines == 0
