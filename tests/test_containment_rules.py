"""The pure rules behind containment: output checks, what a run left behind, caught -> rejected,
no sandbox -> proposed (issue 12). The end-to-end cheats are in tests/test_cheats_sandbox.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.process import ProcessResult
from ledger.contract import Contract, Metric, Oracle, Source, Step
from ledger.events import FaultRecorded, TimingConditions
from pw.rules.gates_reprofiled import evaluate_gates
from pw.rules.judge import _uncontained
from pw.rules.verdict import reach_verdict
from pw.workload import containment, output_check
from pw.workload.steps import RunOutcome, caught, left_behind
from tests.test_gates import good_inputs


def contract(*, rtol=0.0, atol=0.0, metric=Metric(), kind="stdout", path=None) -> Contract:
    return Contract(version=1, name="w", source=Source(editable=["*.c"]), run=Step(argv=["./w"]), metric=metric,
                    oracle=Oracle(kind=kind, reference="reference/out.txt", rtol=rtol, atol=atol, path=path))


EXPECTED = output_check.Expected(stdout="sum 1.000000\nn 3\n", stderr="", output_file_sha256=None)


def seen(stdout="sum 1.000000\nn 3\n", stderr: str | None = "", output_file=None) -> output_check.Observed:
    return output_check.Observed(stdout=stdout, stderr=stderr, output_file=output_file)


def test_identical_output_passes_and_any_other_output_is_named_by_stream():
    assert output_check.differences(contract(), seen(), EXPECTED) == []
    found = output_check.differences(contract(), seen(stdout="sum 0.999999\nn 3\n", stderr="warn\n"), EXPECTED)
    assert [s for s, _ in found] == ["stdout", "stderr"]
    assert "sum" in found[0][1] or "line 1" in found[0][1]
    # Whitespace is a difference too when no tolerance is declared: the bytes must be equal.
    assert [s for s, _ in output_check.differences(contract(), seen(stdout="sum 1.000000\nn 3"), EXPECTED)] == ["stdout"]


def test_a_declared_tolerance_accepts_small_numeric_differences_only():
    tolerant = contract(rtol=1e-5)
    assert output_check.differences(tolerant, seen(stdout="sum 1.000001\nn 3\n"), EXPECTED) == []
    assert output_check.differences(tolerant, seen(stdout="sum 1.1\nn 3\n"), EXPECTED)


def test_roi_metric_lines_are_not_compared():
    roi = contract(metric=Metric(kind="roi", pattern=r"time (\S+)", unit="s"))
    want = output_check.Expected(stdout="time 0.5\nsum 1\n", stderr=None, output_file_sha256=None)
    assert output_check.differences(roi, seen(stdout="time 0.25\nsum 1\n"), want) == []
    assert output_check.differences(roi, seen(stdout="time 0.25\nsum 2\n"), want)


def test_output_files_are_compared_by_hash_and_unrecorded_streams_are_skipped():
    c = contract(kind="file", path="out.bin")
    want = output_check.Expected(stdout=None, stderr=None, output_file_sha256=output_check.sha256(b"abc"))
    assert output_check.differences(c, seen(output_file=b"abc"), want) == []
    assert [s for s, _ in output_check.differences(c, seen(output_file=b"abd"), want)] == ["output file"]
    assert "did not write out.bin" in output_check.differences(c, seen(output_file=None), want)[0][1]
    # A profiled run's stderr (None) is never compared; a skipped stream neither.
    assert output_check.differences(contract(), seen(stderr=None), EXPECTED) == []
    assert output_check.differences(contract(), seen(stdout="x\n"), EXPECTED, skip=frozenset({"stdout"})) == []


def test_an_inferred_oracle_s_stream_bundle_is_compared_stream_by_stream():
    """An inferred oracle stores every stream in one bundle; a run's stdout is compared with the
    bundle's stdout, its stderr with the bundle run's stderr, never with the bundle's own text."""
    from pw.workload.compare import Streams, encode_streams

    bundle = encode_streams(Streams(stdout="", stderr="==BEGIN DUMP==\n0.5\n", files={"out.txt": "1\n"}))
    want = output_check.expected(bundle, None, None)
    assert (want.stdout, want.stderr) == ("", "==BEGIN DUMP==\n0.5\n")
    # Output on stderr only, as the suite's kernels print: the empty stdout passes, stderr is checked.
    assert output_check.differences(contract(), seen(stdout="", stderr="==BEGIN DUMP==\n0.5\n"), want) == []
    assert output_check.differences(contract(), seen(stdout="", stderr=None), want) == []
    found = output_check.differences(contract(), seen(stdout="0.5\n", stderr="==BEGIN DUMP==\n0.7\n"), want)
    assert [s for s, _ in found] == ["stdout", "stderr"]
    # The stderr stored on its own (the same run's) is the one compared; a bare stdout stays stdout.
    assert output_check.expected(bundle, b"other\n", None).stderr == "other\n"
    plain = output_check.expected(b"sum 1\n", b"", "ab" * 32)
    assert (plain.stdout, plain.stderr, plain.output_file_sha256) == ("sum 1\n", "", "ab" * 32)
    assert output_check.expected(None, None, None) == output_check.Expected(None, None, None)


def outcome(**kw) -> RunOutcome:
    proc = ProcessResult(["./w"], 0, None, False, None, 0.1, 1000, "o", "e", sandboxed=True)
    base = dict(process=proc, stdout="", value=0.1, metric_error=None, side_effects=[], output_file=None)
    return RunOutcome(**{**base, **kw})


def test_left_behind_says_what_a_run_left_and_caught_subtracts_the_baseline():
    run = outcome(side_effects=["created .cache.bin"], outside_writes=["/dev/shm/pw-mm-720"],
                  leftover_processes=["matmul"])
    assert left_behind(run) == ["created .cache.bin in its tree", "wrote /dev/shm/pw-mm-720 outside its tree",
                                "left a process running (matmul)"]
    assert caught(run, ["wrote /dev/shm/pw-mm-720 outside its tree"]) == [
        "created .cache.bin in its tree", "left a process running (matmul)"]
    assert caught(outcome(), []) == []


@pytest.mark.parametrize("klass", ["caught", "output-mismatch"])
def test_caught_in_a_timed_or_profiled_run_is_rejected_without_a_speedup(klass):
    inputs = good_inputs()
    fault = FaultRecorded(stage="screening", target="c", failure_class=klass,
                          message="pair 2, c (arm B), stdout: differs from its oracle-checked output")
    v = reach_verdict(evaluate_gates(inputs), inputs.analysis, refused_edits=[], build_ok=True, oracle_passed=True,
                      exploratory=False, timing_fault=fault)
    assert v.status == "rejected" and not v.repairable
    assert v.reasons == [f"{klass}: pair 2, c (arm B), stdout: differs from its oracle-checked output"]
    assert "speedup" not in " ".join(v.reasons)


def test_no_sandbox_caps_an_otherwise_verified_candidate_at_proposed():
    inputs = good_inputs()
    common = dict(refused_edits=[], build_ok=True, oracle_passed=True, exploratory=False)
    assert reach_verdict(evaluate_gates(inputs), inputs.analysis, **common).status == "verified"
    v = reach_verdict(evaluate_gates(inputs), inputs.analysis, **common, uncontained="bwrap: not installed")
    assert v.status == "proposed"
    assert v.reasons == ["no sandbox: bwrap: not installed; a run outside a sandbox could have cached its result "
                         "or read the references, so the ceiling is proposed"]


def test_the_campaign_condition_says_whether_runs_were_contained():
    def cond(sandbox: str) -> TimingConditions:
        return TimingConditions(host="h", argv=["./w"], sandbox=sandbox)

    assert _uncontained(cond("bwrap (bubblewrap 0.8.0)")) is None
    assert _uncontained(cond("")) is None and _uncontained(None) is None  # recorded before the sandbox
    assert _uncontained(cond("none: bwrap: not installed; unshare: exited 1")) == \
        "bwrap: not installed; unshare: exited 1"


def test_hidden_dirs_hide_the_runs_directory_and_the_workload_but_never_pw_itself(tmp_path):
    run = tmp_path / "runs" / "20260101-000000-w"
    run.mkdir(parents=True)
    workload = tmp_path / "wl"
    workload.mkdir()
    assert containment.hidden_dirs(run, str(workload)) == [str((tmp_path / "runs").resolve()), str(workload.resolve())]
    # A runs directory that holds the interpreter (runs at the root of a checkout): only the run.
    repo_root = Path(containment._needed_by_pw()[0]).parent
    assert containment.hidden_dirs(repo_root / "some-run", None) == [str((repo_root / "some-run").resolve())]


def test_no_sandbox_is_reported_with_its_reason(monkeypatch):
    monkeypatch.setenv("PW_NO_SANDBOX", "1")
    containment.probe.cache_clear()
    try:
        assert containment.describe() == "none: PW_NO_SANDBOX=1 in the environment"
        assert containment.confinement(Path("/x"), [], Path("/x")) is None
    finally:
        containment.probe.cache_clear()


def test_a_search_path_in_tmp_stays_visible_but_never_one_inside_a_hidden_dir(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    inside = tmp_path / "runs" / "bin"
    inside.mkdir(parents=True)
    path = os.pathsep.join([str(tools), "/usr/bin", str(inside), "relative/bin"])
    shown = containment.search_path_in_scratch(path, hidden=[str(tmp_path / "runs")])
    assert shown == ([str(tools.resolve())] if str(tools.resolve()).startswith("/tmp/") else [])


def test_pw_start_records_the_sandbox_in_preflight_and_in_each_timing(tiny_budget_run):
    from ledger import events as ev
    from tests.conftest import ledger_events

    found = containment.probe()
    events = [e.data for e in ledger_events(tiny_budget_run)]
    pf = next(d for d in events if isinstance(d, ev.PreflightCompleted))
    assert pf.sandbox == (containment.describe(found) if found.sandbox else None)
    assert pf.sandbox_reasons == list(found.reasons)
    timing = next(d for d in events if isinstance(d, ev.TimingRecorded))
    assert timing.conditions.sandbox == containment.describe(found)
    oracle = next(d for d in events if isinstance(d, ev.OracleChecked))
    assert oracle.left_behind == [] and oracle.stderr_sha256 is not None


@pytest.mark.skipif(not os.path.exists("/usr/bin/gcc") and not os.path.exists("/bin/gcc"), reason="needs gcc")
def test_the_g_profiling_twin_builds_in_the_timed_build_s_sandbox_with_its_wrappers_shown(tmp_path):
    """The -g twin hides what the timed build hides (a file in the run directory stays unreachable),
    and its compiler wrappers, written in that hidden run directory, are shown read-only, so `gcc`
    inside the sandbox is the wrapper and the twin has line tables."""
    import shutil

    from ledger.evidence import EvidenceStore
    from pw.workload import debug_build, steps

    if containment.probe().sandbox is None:
        pytest.skip("no sandbox on this host: " + containment.describe())
    run = tmp_path / "runs" / "r1"
    src = run / "baseline"
    src.mkdir(parents=True)
    (src / "prog.c").write_text("int main(void) { return 0; }\n")
    (run / "secret").write_text("reference\n")
    # The build fails if the run directory's file can be reached from the build tree.
    build = Step(argv=["/bin/sh", "-c", "gcc -O2 -o prog prog.c && ! test -e ../../secret"])
    c = Contract(version=1, name="w", source=Source(editable=["*.c"]), run=Step(argv=["./prog"]), build=[build],
                 oracle=Oracle(kind="exit"))
    hidden = containment.hidden_dirs(run, None)
    timed = steps.Target(label="baseline", src_dir=src, build_dir=run / "build" / "baseline", files=["prog.c"],
                         hidden=hidden)
    evidence = EvidenceStore(run / "evidence")
    logs = run / "logs"
    logs.mkdir()
    assert steps.build(c, timed, evidence, logs).outcome == "ok"
    dbg = debug_build.make(c, timed, evidence, logs, run / "scratch")
    assert dbg.target is not None, dbg.note
    assert dbg.target.hidden == hidden and dbg.target.tools == [str((run / "scratch" / "pw-debug-cc").resolve())]
    assert debug_build.has_debug_info(dbg.target.build_dir / "prog") and dbg.same_code, dbg.note
    # Without the wrappers shown, `gcc` inside is the bare compiler: no line tables.
    bare = steps.Target(label="baseline", src_dir=src, build_dir=run / "build" / "bare",
                        files=["prog.c"], hidden=hidden)
    shutil.rmtree(run / "scratch" / "pw-debug-cc")
    wrappers = run / "scratch" / "pw-debug-cc"
    debug_build.write_wrappers(wrappers)
    path = f"{wrappers}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    with_path = Contract(version=1, name="w", source=c.source, run=c.run, oracle=c.oracle,
                         build=[Step(argv=build.argv, env={"PATH": path})])
    assert steps.build(with_path, bare, evidence, logs).outcome == "ok"
    assert not debug_build.has_debug_info(bare.build_dir / "prog")
