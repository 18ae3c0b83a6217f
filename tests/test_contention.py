"""A busy machine (gate rules 8): pw's launcher measures how long each timed run waited for a CPU,
and a FASTER campaign whose runs waited more than 10% of their wall time is inconclusive."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.app.judging import judge_recorded
from pw.rules.contention import CONTENDED_SHARE, OTHERS_SHARE, arm_contention, arm_of, contention_reason
from pw.rules.verdict import reach_verdict
from tests.conftest import ledger_events, skip_for_noise, unpack

RECORDED = Path(__file__).parent / "data" / "campaigns-16core" / "runs.tgz"


def _timing(waits: dict[str, list[float]], walls: dict[str, list[float]],
            steals: dict[str, list[float]] | None = None,
            others: dict[str, list[float]] | None = None) -> ev.TimingRecorded:
    samples = {}
    for label in walls:
        samples[label] = walls[label]
        samples[f"{label}:wall_s"] = walls[label]
        if label in waits:
            samples[f"{label}:run_queue_s"] = waits[label]
        if steals and label in steals:
            samples[f"{label}:steal_s"] = steals[label]
        if others and label in others:
            samples[f"{label}:others_cpu_s"] = others[label]
    return ev.TimingRecorded(purpose="candidate-evaluation", targets=list(walls), metric="wall_time_s", unit="s",
                             samples=samples, order=["AB"] * len(walls["baseline"]), seed=1, exploratory=False,
                             conditions=ev.TimingConditions(host="h", argv=["x"]))


WALLS = {"baseline": [0.5, 0.6, 0.55, 0.5, 0.52], "q": [0.45, 0.5, 0.48, 0.47, 0.46]}


def test_runs_that_waited_half_their_time_for_a_cpu_are_a_busy_machine():
    waits = {label: [w * 0.5 for w in walls] for label, walls in WALLS.items()}
    reason = contention_reason(_timing(waits, WALLS), cpus=2)
    assert reason is not None and "quiet machine" in reason
    assert "baseline waited 50% of its wall time for a CPU; q waited 50%" in reason


def test_one_busy_arm_is_enough_and_a_quiet_campaign_says_nothing():
    quiet = {label: [w * 0.002 for w in walls] for label, walls in WALLS.items()}
    assert contention_reason(_timing(quiet, WALLS), cpus=2) is None
    one = dict(quiet, q=[w * (CONTENDED_SHARE + 0.05) for w in WALLS["q"]])
    assert "q waited 15%" in contention_reason(_timing(one, WALLS), cpus=2)


def test_other_work_on_the_other_cpus_is_a_busy_machine_without_any_wait():
    """Two vCPUs that are one core's hyperthreads: a busy loop on the other one slows a run 2x
    while the run never waits in a run queue."""
    quiet = {label: [0.0] * 5 for label in WALLS}
    busy_other = {label: [0.9 * w for w in walls] for label, walls in WALLS.items()}  # 90% of the other CPU
    reason = contention_reason(_timing(quiet, WALLS, others=busy_other), cpus=2)
    assert reason is not None and "other work used 90% of the other CPUs" in reason
    # the same CPU-seconds spread over 15 other CPUs of a 16-CPU machine: 6% of them, not busy
    assert contention_reason(_timing(quiet, WALLS, others=busy_other), cpus=16) is None
    light = {label: [(OTHERS_SHARE - 0.05) * w for w in walls] for label, walls in WALLS.items()}
    assert contention_reason(_timing(quiet, WALLS, others=light), cpus=2) is None


def test_steal_counts_per_virtual_cpu():
    quiet = {label: [0.0] * 5 for label in WALLS}
    # 0.4 CPU-seconds stolen over the machine's 4 vCPUs during a 0.5 s run: 20% of each vCPU's time
    stolen = {label: [0.8 * w for w in walls] for label, walls in WALLS.items()}
    arms = arm_contention(_timing(quiet, WALLS, stolen), cpus=4)
    assert [a.waited for a in arms] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert [a.others for a in arms] == [None, None]  # not recorded: not evidence either way
    assert contention_reason(_timing(quiet, WALLS, stolen), cpus=16) is None  # 5% of each of 16


def test_campaigns_recorded_before_the_measurement_say_nothing():
    assert arm_of(_timing({}, WALLS), "baseline", 2) is None
    short = _timing({"baseline": [0.1, 0.1]}, WALLS)  # not one per run: not evidence
    assert arm_of(short, "baseline", 2) is None and contention_reason(short, 2) is None


def test_a_busy_machine_makes_any_timing_decision_inconclusive_but_leaves_a_failed_oracle():
    analysis = {"speedup": 1.06, "n_pairs": 7, "verdict": "FASTER",
                "interval": {"low": 1.05, "high": 1.25, "confidence": 0.95}}
    for decided in ("FASTER", "SLOWER", "SAME"):
        v = reach_verdict([], dict(analysis, verdict=decided), refused_edits=[], build_ok=True, oracle_passed=True,
                          exploratory=False, contended="the machine was busy")
        assert v.status == "inconclusive" and v.reasons[0].startswith("host-busy: speedup 1.06x"), v
        assert v.reasons[0].endswith("; the machine was busy"), v
    v = reach_verdict([], analysis, refused_edits=[], build_ok=True, oracle_passed=False, exploratory=False,
                      contended="the machine was busy")
    assert v.status == "rejected"
    quiet = reach_verdict([], dict(analysis, verdict="SLOWER"), refused_edits=[], build_ok=True,
                          oracle_passed=True, exploratory=False)
    assert quiet.status == "rejected"


def _busy_copy(tmp_path: Path, share: float) -> Path:
    """The device's recorded series-c run whose table-tenth candidate q was verified, its campaign
    given run-queue waits of `share` of each run's wall time (both arms)."""
    unpack(RECORDED, tmp_path)
    run = sorted((tmp_path / "pwruns").glob("2026*-series-c"))[0]

    def edit(data):
        if isinstance(data, ev.TimingRecorded) and "q" in data.targets:
            samples = dict(data.samples)
            for label in data.targets:
                samples[f"{label}:run_queue_s"] = [round(w * share, 6) for w in samples[f"{label}:wall_s"]]
                samples[f"{label}:others_cpu_s"] = [0.0 for _ in samples[f"{label}:wall_s"]]
            return msgspec.structs.replace(data, samples=samples)
        return data

    from tests.conftest import reforge_ledger

    reforge_ledger(run, edit)
    return run


@pytest.mark.parametrize("share, rules, status", [
    (0.45, 8, "inconclusive"),  # what runs beside other jobs on this 2-core host waited
    (0.45, 7, "verified"),  # the rules it was judged by: audit replays them unchanged
    (0.01, 8, "verified"),  # a quiet machine
])
def test_the_judge_doubts_a_verified_campaign_timed_on_a_busy_machine(tmp_path, share, rules, status):
    run = _busy_copy(tmp_path, share)
    events = ledger_events(run)
    before = next(e.data for e in events if isinstance(e.data, ev.VerdictReached) and e.data.id == "q")
    assert before.status == "verified"
    cut = next(i for i, e in enumerate(events) if isinstance(e.data, ev.CandidateEvaluated) and e.data.id == "q")
    judged = judge_recorded(events[:cut], "q", EvidenceStore(run / "raw"), rules=rules)
    assert judged.verdict.status == status, judged.verdict.reasons
    if status == "inconclusive":
        assert judged.verdict.reasons[0].startswith("host-busy: speedup "), judged.verdict.reasons
        assert "; the machine was busy during the timed runs" in judged.verdict.reasons[0], judged.verdict.reasons


def _beside_a_busy_loop(tmp_path: Path, loop_cpu: int):
    """The launcher's report on 0.3 s of CPU work pinned to CPU 0 while a busy loop holds `loop_cpu`."""
    import os

    from adapters.process import run_process

    taskset = shutil.which("taskset")
    if taskset is None or (os.cpu_count() or 1) <= loop_cpu:
        pytest.skip(f"needs taskset (util-linux) and {loop_cpu + 1} CPUs")
    # The loop says when it spins, so the program never runs beside an interpreter still starting.
    hog = subprocess.Popen([taskset, "-c", str(loop_cpu), sys.executable, "-c",
                            "import sys\nsys.stdout.write('spinning\\n'); sys.stdout.flush()\nwhile True: pass"],
                           stdout=subprocess.PIPE)
    try:
        assert hog.stdout is not None and hog.stdout.readline() == b"spinning\n"
        work = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
        r = run_process([taskset, "-c", "0", sys.executable, "-c", work], cwd=tmp_path, env=None, timeout_s=60,
                        stdout_path=tmp_path / "o", stderr_path=tmp_path / "e", own_peak_rss=True)
    finally:
        hog.kill()
        hog.wait()
    assert r.exit_code == 0 and r.run_queue_s is not None and r.steal_s is not None, r
    assert r.others_cpu_s is not None, r
    return r


def test_the_launcher_measures_a_run_that_shares_its_cpu(tmp_path):
    """Beside a busy loop on its own CPU, a CPU-bound program waits, and the launcher's wait is the
    time it was not on a CPU (wall less CPU time: it never blocks). How much it waits is the
    scheduler's: about half alone, a quarter on a host busy elsewhere (measured under load)."""
    r = _beside_a_busy_loop(tmp_path, 0)
    off_cpu = r.wall_s - r.user_s - r.sys_s
    assert r.run_queue_s / r.wall_s > 0.1, r
    assert abs(r.run_queue_s - off_cpu) < 0.05 + 0.2 * off_cpu, (off_cpu, r)
    assert r.others_cpu_s / r.wall_s > 0.3, r  # the busy loop's half


def test_the_launcher_sees_other_work_on_another_cpu(tmp_path):
    """Pinned to different CPUs, the program need not wait, but the other work is measured."""
    r = _beside_a_busy_loop(tmp_path, 1)
    assert r.others_cpu_s / r.wall_s > 0.7, r  # the busy loop held the other CPU the whole run


@pytest.mark.slow  # serial: a second test worker would be other work
def test_draining_a_loud_programs_output_is_not_other_work(tmp_path):
    """pw's own threads copy the program's output while it runs; on a quiet machine a program that
    prints 200 MB to stderr must not read as timed beside other work (CI's suite gemm did, at 50-60%
    of the other CPU, before pw subtracted its own CPU time)."""
    from adapters.process import run_process

    loud = "import sys\nline = 'x' * 99 + '\\n'\nfor _ in range(2_000_000): sys.stderr.write(line)\n"
    r = run_process([sys.executable, "-c", loud], cwd=tmp_path, env=None, timeout_s=120,
                    stdout_path=tmp_path / "o", stderr_path=tmp_path / "e", own_peak_rss=True)
    assert r.exit_code == 0 and (tmp_path / "e").stat().st_size == 200_000_000, r
    if r.run_queue_s / r.wall_s > CONTENDED_SHARE:
        skip_for_noise(f"the machine is busy: the program waited {r.run_queue_s / r.wall_s:.0%} of its run for a CPU")
    # The host's own background over as long, beside a program that prints nothing: a neighbour on
    # the other CPU is other work, whoever drains the output.
    quiet = run_process([sys.executable, "-c", f"import time; time.sleep({r.wall_s:.3f})"], cwd=tmp_path, env=None,
                        timeout_s=120, stdout_path=tmp_path / "qo", stderr_path=tmp_path / "qe", own_peak_rss=True)
    if quiet.others_cpu_s / quiet.wall_s > OTHERS_SHARE / 2:
        skip_for_noise(f"the machine is busy: other work held {quiet.others_cpu_s / quiet.wall_s:.0%} of a CPU "
                    f"beside a program that printed nothing")
    assert r.others_cpu_s / r.wall_s < OTHERS_SHARE, (r, quiet)
