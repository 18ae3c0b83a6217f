"""Shared fixtures: small, generic builders for ledgers and run directories.

Keep this file small; helpers specific to one area belong in that area's test module.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.contract import Contract, Source, Step
from ledger.store import Ledger

FIXED_AT = "2026-01-01T00:00:00.000000Z"

# Every `pw` command a test runs anchors the heads it appended (ledger.anchor): into a log of this
# test session, never the user's own (~/.local/state/profileweaver/anchors.jsonl).
if not os.environ.get("PW_ANCHOR_LOG"):
    import tempfile

    os.environ["PW_ANCHOR_LOG"] = os.path.join(tempfile.mkdtemp(prefix="pw-test-anchors-"), "anchors.jsonl")


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
def scratch(tmp_path: Path):
    """A scratch directory on tmpfs when there is one (fsync is nearly free there), for tests that
    write thousands of small ledgers; the behaviour under test does not depend on the disk."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="pw-test-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory holding a ledger with RunStarted and one Note."""
    run = tmp_path / "20260101-000000-demo"
    ledger = deterministic_ledger(run / "ledger.jsonl")
    ledger.append(make_run_started(run.name), expected_seq=0)
    ledger.append(ev.Note(text="hello"), expected_seq=1)
    return run


# --- running `pw` in-process ----------------------------------------------------------------------

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, out={self.out[-400:]!r}, err={self.err[-400:]!r})"


@pytest.fixture
def pw_cli(capsys):
    """`pw_cli("start", "--workload", d)` runs `pw.cli.main` in-process and returns its exit code,
    stdout and stderr (argparse's SystemExit becomes the exit code)."""
    from pw.cli import main

    def run(*args) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture
def copy_workload(tmp_path: Path):
    """Copy a bundled workload (by name) into tmp_path and return the copy's path."""
    import shutil

    def copy(name: str) -> Path:
        dest = tmp_path / "workloads" / name
        shutil.copytree(WORKLOADS / name, dest, symlinks=True)
        return dest

    return copy


_PROBES: list = []


@pytest.fixture
def fast_preflight(monkeypatch):
    """Probe the profilers for real once per session, then reuse the result: tests of `pw start`
    that are not about profilers skip the multi-second probe runs."""
    import pw.app.preflight

    if not _PROBES:
        _PROBES.append(pw.app.preflight.probe_profilers())
    monkeypatch.setattr(pw.app.preflight, "probe_profilers", lambda: list(_PROBES[0]))


# --- end-to-end helpers: the real `pw` on real workloads -----------------------------------------
#
# `pw start` on workloads/matmul-c takes 20-40 s on the 2-core dev VM, so it runs once per session
# and every test works on a copy of that run (`copy_run`). Copying is sound: every path the ledger
# uses to find files is relative to the run directory, and ProfileCaptured records the absolute
# build tree its raw paths refer to, so `pw audit` passes on a copy too.


class PwResult(CliResult):
    def json(self):
        import json

        return json.loads(self.out)


def pw_main(*args: object) -> PwResult:
    """`pw ARGS...` in this process, usable outside a test (session fixtures): stdout and stderr
    are captured by swapping sys.stdout/sys.stderr (with a .buffer, as `print_json` needs)."""
    import io
    import sys

    from pw.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdout, sys.stderr = saved
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", errors="replace"))
    return PwResult(code, *texts)


def copy_run(run: Path, dest_parent: Path) -> Path:
    """A copy of a run directory (same name) under ``dest_parent``."""
    import shutil

    dest = dest_parent / run.name
    shutil.copytree(run, dest, symlinks=True)
    return dest


def unpack(archive: Path, dest: Path) -> Path:
    """A recorded tarball (runs, evidence) extracted under ``dest``, which it returns; members that
    would land outside it are refused (tarfile's "data" filter)."""
    import tarfile

    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest


def pair_log_sd(run: Path, cid: str) -> float:
    """The SD of the log ratios reference/candidate over every timed pair of ``cid``'s campaigns
    (a continued one included): sqrt(2) times the run-to-run spread for independent arms."""
    import numpy as np

    timing = [e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets]
    ref = [x for t in timing for x in t.samples[t.targets[0]]]
    cand = [x for t in timing for x in t.samples[cid]]
    return float(np.std(np.log(np.array(ref) / np.array(cand)), ddof=1))


def ledger_events(run: Path) -> list:
    return Ledger(run / "ledger.jsonl").events()


def apply_patch(workspace: Path, patch: Path) -> None:
    import subprocess

    subprocess.run(["patch", "-s", "-p1", "-i", str(patch)], cwd=workspace, check=True)


def start_run(workload: Path, runs_dir: Path, *extra: object) -> Path:
    result = pw_main("start", "--workload", workload, "--runs-dir", runs_dir, "--json", *extra)
    assert result.code == 0, result
    return Path(result.json()["run_dir"])


@pytest.fixture(scope="session")
def matmul_template(tmp_path_factory) -> Path:
    """A started matmul-c run (baseline timed and profiled, no candidates), made once per session.
    Never modify it: ``copy_run(matmul_template, tmp_path)`` and work on the copy."""
    return start_run(WORKLOADS / "matmul-c", tmp_path_factory.mktemp("matmul-template"))


@pytest.fixture(scope="session")
def series_started(tmp_path_factory) -> Path:
    """A started workloads/series-c run (baseline timed and profiled), made once per session.
    Never modify it: copy it to add candidates."""
    return start_run(WORKLOADS / "series-c", tmp_path_factory.mktemp("series-started"))


@pytest.fixture(scope="session")
def matmul_interchange(matmul_template, tmp_path_factory) -> Path:
    """A copy of the session's started run with candidate ``a`` = candidates/interchange.patch
    prepared and evaluated. Read only: copy it to change it. A host whose load changed under the
    evaluation (an inconclusive `host-busy:`/`baseline-shift:`, or profiles too noisy for the
    profile gates) gets a second evaluation on a fresh copy before the tests that need it skip."""
    for _ in range(2):
        run = copy_run(matmul_template, tmp_path_factory.mktemp("matmul-interchange"))
        assert pw_main("prepare", run, "--candidate", "a:baseline:loop interchange i-k-j").code == 0
        apply_patch(run / "candidates" / "a" / "src", WORKLOADS / "matmul-c" / "candidates" / "interchange.patch")
        result = pw_main("evaluate", run, "a", "--json")
        assert result.code in (0, 1), result
        why = machine_changed(run, "a") or profiles_too_noisy(run, "a")
        if why is None:
            return run
    pytest.skip(f"twice: {why}")


# Above this spread of log run time in either arm of a campaign, one profiled run per side cannot
# carry the mechanism and no-collateral gates: on CI hosts whose runs spread 8-14%, the honest
# interchange's hotspot share came out 10-15 points off in either direction (notes of session 7).
PROFILE_NOISE_CV = 0.05
_PROFILE_GATES = ("gate mechanism:", "gate no_collateral:")


# --- skips for noise, counted ------------------------------------------------------------------
#
# A few end-to-end tests judge real timings and cannot pass on a host too noisy for the claim they
# check; they skip through `skip_for_noise`, and the session's closing line counts them (and .ci/test
# sums both of its passes through $PW_NOISE_SKIPS), so a green run says what it did not test.
# Cheat-defence tests never skip: they judge recorded evidence (tests/test_one_kind_cheats.py).
NOISE = "noise: "


def skip_for_noise(why: str) -> None:
    pytest.skip(NOISE + why)


def skip_if_undecided(out: dict) -> None:
    """Skip, quoting pw, when a campaign spent its budget undecided: the product's honest answer on a
    host too noisy for the effect, which a test of a verified verdict cannot get past."""
    if out.get("status") == "inconclusive" and out.get("stop") == "budget":
        skip_for_noise(f"pw said {out['reasons'][0][:220]}")


def _noise_skips(terminalreporter) -> list[str]:
    found = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        if NOISE in reason:
            found.append(report.nodeid)
    return found


def skip_if_profiles_too_noisy(run: Path, cid: str) -> None:
    """Skip, saying why (``profiles_too_noisy``)."""
    why = profiles_too_noisy(run, cid)
    if why is not None:
        skip_for_noise(why)


def profiles_too_noisy(run: Path, cid: str) -> str | None:
    """Why ``cid``'s latest judgement (a verdict, or a `pw confirm` without --fresh, which re-judges
    without a new verdict event) is `proposed` only by the gates that read its profiles because the
    host was too noisy for them, or None. Too noisy: its campaign's runs spread more than
    PROFILE_NOISE_CV, or a profiled run took PROFILED_DRIFT longer or shorter than its own timed
    runs (a neighbour came or went between the campaign and the profiler). pw's answer there is the
    honest one for such a host. Any other verdict or reason, and any quieter host, is left to the test."""
    import numpy as np

    events = ledger_events(run)
    judged = [e.data for e in events if isinstance(e.data, (ev.VerdictReached, ev.WinnerConfirmed)) and e.data.id == cid]
    if not judged or judged[-1].status != "proposed" or not all(r.startswith(_PROFILE_GATES) for r in judged[-1].reasons):
        return None
    timing = [e.data for e in events if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets][-1]
    cv = max(float(np.std(np.log(timing.samples[label]), ddof=1)) for label in timing.targets)
    said = f"pw said proposed ({judged[-1].reasons[0][:160]})"
    if cv > PROFILE_NOISE_CV:
        return (f"the campaign's runs spread {cv:.1%} per run (> {PROFILE_NOISE_CV:.0%}): the profiled runs "
                f"cannot carry the profile gates on this host; {said}")
    drift = _profiled_drift(events, cid)
    if drift is not None and drift > PROFILED_DRIFT:
        return (f"a profiled run took {drift:.0%} longer or shorter than its timed runs: the host's load changed "
                f"between the campaign and the profiler; {said}")
    return None


# A profiled run (under the launcher) that takes this much longer or shorter, in log, than the median
# of its own timed runs was run under another load than they were.
PROFILED_DRIFT = 0.10


def _profiled_drift(events, cid: str) -> float | None:
    """The larger |log(profiled wall / timed median)| of the two sides of ``cid``'s latest gates."""
    import math

    gates = [e.data for e in events if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid]
    consistency = gates[-1].inputs.get("profile_consistency") if gates else None
    if not consistency:
        return None
    drifts = []
    for side in ("baseline", "candidate"):
        profiled, timed = consistency.get(f"{side}_profiled_wall_s"), consistency.get(f"{side}_timed_median_s")
        if profiled and timed:
            drifts.append(abs(math.log(profiled / timed)))
    return max(drifts, default=None)


TINY_C = """\
#include <stdio.h>
int main(void)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < 300000; i++)
        s += i % 7;
    printf("sum %lu\\n", s);
    return 0;
}
"""


# tiny.c doing the same work in another running image (a global nobody reads lands in .data): a
# no-op to time. A comment alone builds to the baseline's image and is rejected untimed-for (rules 13).
SAME_SPEED_TINY_C = "int same_speed_marker = 1;\n" + TINY_C


def write_tiny_c_workload(root: Path) -> Path:
    """A C workload that builds and runs in milliseconds: tiny.c (editable), stdout oracle."""
    import json

    root.mkdir(parents=True, exist_ok=True)
    (root / "tiny.c").write_text(TINY_C)
    (root / "Makefile").write_text("tiny: tiny.c\n\tcc -O1 -o tiny tiny.c\n")
    (root / "reference").mkdir(exist_ok=True)
    (root / "reference" / "stdout.txt").write_text(f"sum {sum(i % 7 for i in range(300000))}\n")
    (root / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "tiny", "source": {"editable": ["tiny.c"]},
        "build": [{"argv": ["make"], "timeout_s": 60}],
        "run": {"argv": ["./tiny"], "timeout_s": 20},
        "oracle": {"kind": "stdout", "reference": "reference/stdout.txt"},
    }))
    return root


@pytest.fixture(scope="session")
def tiny_budget_run(tmp_path_factory) -> Path:
    """A started (unprofiled) run of the tiny C workload with ``--iterations 1 --repairs 1``.
    Never modify it: copy it."""
    base = tmp_path_factory.mktemp("tiny")
    workload = write_tiny_c_workload(base / "workload")
    return start_run(workload, base / "runs", "--iterations", 1, "--repairs", 1, "--no-profile")


def skip_if_machine_changed(where: Path | dict | str, cid: str | None = None) -> None:
    """Skip, quoting pw (``machine_changed``)."""
    why = machine_changed(where, cid)
    if why is not None:
        skip_for_noise(why)


def machine_changed(where: Path | dict | str, cid: str | None = None) -> str | None:
    """Why a judgement is inconclusive because the machine changed under it, quoting pw, or None:
    busy while it was timed (``host-busy:``, gate rules 8), or the baseline ran slower in the
    campaign than alone before and after it (``baseline-shift:``). Both are the product's right
    answer on a loaded host, which a test of a verified verdict cannot get past. `where`: a run
    directory (the latest verdict or confirmation on `cid`, or on every candidate), a verdict as
    `pw evaluate --json` prints it, or pw's printed text."""
    from pw.rules.verdict import BASELINE_SHIFT, HOST_BUSY

    if isinstance(where, str):
        reasons = [line.strip() for line in where.splitlines()]
    elif isinstance(where, dict):
        reasons = list(where.get("reasons") or [])
    else:
        latest = {}
        for e in ledger_events(where):
            if isinstance(e.data, (ev.VerdictReached, ev.WinnerConfirmed)) and (cid is None or e.data.id == cid):
                latest[e.data.id] = e.data
        reasons = [r for v in latest.values() for r in v.reasons]
    for prefix in (HOST_BUSY, BASELINE_SHIFT):
        changed = [r for r in reasons if prefix in r]
        if changed:
            return f"the machine changed under the campaign: {changed[0][changed[0].index(prefix):]}"
    return None


def reforge_ledger(run: Path, edit) -> None:
    """Rewrite `run`'s ledger with `edit(data)` in place of each event's data, re-hashing the chain
    as a forger would: the chain check passes, so only the recomputing checks can name the edit."""
    from ledger.store import Ledger

    events = ledger_events(run)
    (run / "ledger.jsonl").unlink()
    forged = Ledger(run / "ledger.jsonl")
    for env in events:
        forged.append(edit(env.data), expected_seq=env.seq - 1, actor=env.actor, cause=env.cause)


# --- the fault-injection suite (tests/faultkit.py, tests/test_faults_*.py) -----------------------


@pytest.fixture(scope="session")
def faults_template(tmp_path_factory) -> Path:
    """A started, unprofiled run of the tiny C workload with candidate ``a`` prepared (unedited), made
    once per session for the fault-injection suite; its workload is ``run.parents[1] / "workload"``.
    Never modify it: copy it."""
    import pw.app.preflight

    if not _PROBES:
        _PROBES.append(pw.app.preflight.probe_profilers())
    base = tmp_path_factory.mktemp("faults")
    workload = write_tiny_c_workload(base / "workload")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pw.app.preflight, "probe_profilers", lambda: list(_PROBES[0]))
        run = start_run(workload, base / "runs", "--no-profile")
    assert pw_main("prepare", run, "--candidate", "a:baseline:the fault suite's candidate").code == 0
    return run


def pytest_terminal_summary(terminalreporter) -> None:
    """The fault-injection suite's closing line: how many fault rows ran, and how they ended."""
    outcomes: dict[str, str] = {}
    for key in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(key, []):
            nodeid = getattr(report, "nodeid", "")
            if "/test_faults_" in nodeid and "::test_fault[" in nodeid and outcomes.get(nodeid) != "failed":
                outcomes[nodeid] = "failed" if key == "error" else key
    if outcomes:
        counts = Counter(outcomes.values())
        said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        terminalreporter.write_line(f"fault-injection: {len(outcomes)} faults ({said})")
    noisy = _noise_skips(terminalreporter)
    terminalreporter.write_line(f"{len(noisy)} skipped for noise" + (f": {', '.join(noisy)}" if noisy else ""))
    if os.environ.get("PW_NOISE_SKIPS"):
        with open(os.environ["PW_NOISE_SKIPS"], "a") as log:
            log.writelines(f"{nodeid}\n" for nodeid in noisy)


@pytest.fixture
def scene(tmp_path, faults_template, monkeypatch, fast_preflight):
    """One fault row's world (tests/faultkit.py `Scene`): copies of the shared run, tmpfs mounts
    unmounted at the end."""
    from tests.faultkit import Scene

    world = Scene(tmp_path, faults_template, faults_template.parents[1] / "workload", monkeypatch)
    try:
        yield world
    finally:
        world.close()
def python_as(user: str, home: str | None = None) -> list[str] | None:
    """An argv prefix that runs this checkout's Python as another local ``user`` (root only, with
    setpriv), or None: this interpreter where that user may run it, else the system's python3 with
    this checkout and its site-packages on PYTHONPATH (an interpreter under /root is not theirs)."""
    import pwd
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    root = Path(__file__).resolve().parents[1]
    site = ":".join(p for p in sys.path if p.endswith("site-packages"))
    for exe in (sys.executable, "/usr/bin/python3"):
        argv = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "env",
                f"HOME={home or entry.pw_dir}", f"PYTHONPATH={root}:{site}", exe]
        if subprocess.run([*argv, "-c", "import msgspec, pw.cli"], capture_output=True, timeout=60).returncode == 0:
            return argv
    return None


# The slow pass hands whole files to its two workers as they free up (`--dist loadfile`), in
# collection order; a long file collected last leaves one worker running it alone at the end.
# These are the longest (about 60-150 s each here), so they go first.
_LONG_FILES = ("test_benchmarks_quick.py", "test_remote_slurm.py", "test_real_projects.py",
               "test_candidates_loop.py")


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {name: i for i, name in enumerate(_LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
