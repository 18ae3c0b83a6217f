"""The fault-injection suite's rows and its one check (tests/test_faults_*.py).

A fault is one row of a table: the verb that meets it, the exit code it must give, words its one
line must contain, `act` (inject the fault into a `Scene` and return pw's arguments, or a result it
ran itself) and `recover` (put the world right and run what continues). `check` runs a row:

- pw answers with the row's exit code and, unless it succeeded, exactly one line on stderr that
  starts `pw VERB: ` and holds no traceback (a killed process, code -9, says nothing);
- after `recover`, nothing the ledger held before the fault is lost (its events then are a prefix
  of its events now), no stage and no candidate is recorded twice, no half-made run or temporary
  file is left, and `pw audit` passes.

Faults are injected for real: a tmpfs filled to its last byte, remounted read-only, a flipped byte,
a SIGKILL, a file this user may not read. Where the moment matters (the k-th append of `pw start`),
a seam of the code is wrapped so the disk fills just before it; the error pw meets is the kernel's.

Add a fault: one `Fault(...)` in the FAULTS list of a tests/test_faults_<area>.py module, whose one
parametrized test runs it. tests/test_faults_registry.py counts every module's rows, and the
closing line of a run says how many ran (`fault-injection: N faults`, tests/conftest.py).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.store import Ledger
from tests.conftest import CliResult, copy_run, pw_main

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Fault:
    name: str
    verb: str  # the pw verb that meets the fault
    code: int  # its exit code (-9: the process was killed)
    says: tuple[str, ...]  # words its line (stderr, or stdout for a failed check) must contain
    act: Callable[[Scene], list | CliResult]
    recover: Callable[[Scene], None] | None = None
    root: bool = False  # needs root (mounts a tmpfs)
    tags: tuple[str, ...] = field(default=())


class Scene:
    """One row's world: a copy of the shared started run (candidate `a` prepared), the workload it
    came from, tmpfs mounts, and the run whose events must survive the fault."""

    def __init__(self, tmp: Path, template: Path, workload: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.template = template
        self.workload = workload
        self.monkeypatch = monkeypatch
        self.mounts: list[Path] = []
        self.trash: list[Path] = []  # folders made outside tmp (removed when the row ends)
        self._run: Path | None = None
        self.before: list[str] = []

    # --- the run under test --------------------------------------------------------------------

    @property
    def run(self) -> Path:
        """A fresh copy of the shared run (made on first use); its events now must not be lost."""
        if self._run is None:
            self.use(copy_run(self.template, self.tmp / "runs"))
        return self._run

    def use(self, run: Path) -> Path:
        """Make `run` the one the checks look at; what its ledger holds now must survive."""
        self._run = run
        self.before = event_hashes(run)
        return run

    @property
    def current(self) -> Path | None:
        return self._run

    def pw(self, *args) -> CliResult:
        return pw_main(*args)

    # --- filesystems -----------------------------------------------------------------------------

    def mount(self, where: Path, size: str = "16m", mode: str = "0755") -> Path:
        """A fresh tmpfs of `size` at `where` (unmounted when the row ends); skips when not root."""
        if os.geteuid() != 0:
            pytest.skip(f"mounting a tmpfs needs root; this test runs as uid {os.geteuid()}")
        where.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        self.mounts.append(where)
        return where

    def run_on_tmpfs(self, size: str = "16m") -> Path:
        """The shared run copied onto a tmpfs of its own (its runs directory is the mount)."""
        mnt = self.mount(self.tmp / "disk", size)
        return self.use(copy_run(self.template, mnt))

    def close(self) -> None:
        for where in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
        self.mounts.clear()
        for folder in self.trash:
            shutil.rmtree(folder, ignore_errors=True)


def fill(mnt: Path) -> Path:
    """Fill the filesystem of `mnt` to its last byte with a ballast file (removed by `free`)."""
    ballast = mnt / ".ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    chunk = b"\0" * (1 << 20)
    try:
        while True:
            os.write(fd, chunk)  # short writes fill the last pages; the next one is refused
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return ballast


def free(mnt: Path) -> None:
    (mnt / ".ballast").unlink(missing_ok=True)


def remount(mnt: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mnt)], check=True, capture_output=True)


def mount_of(path: Path) -> Path:
    """The mount point `path` lies on."""
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return path


# --- seams: fill the disk (or kill) just before the k-th call of a function ------------------------


def before_call(scene: Scene, owner, name: str, k: int, action: Callable[..., object]) -> None:
    """Run `action` (with the call's arguments) just before the k-th call (1-based) of `owner.name`
    in this process."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == k:
            action(*args, **kwargs)
        return original(*args, **kwargs)

    scene.monkeypatch.setattr(owner, name, wrapped)


_KILLER = """
import os, signal, sys
import {module} as owner
k, original, calls = int(sys.argv[1]), owner.{attr}, [0]
def wrapped(*args, **kwargs):
    calls[0] += 1
    if calls[0] == k:
        os.kill(os.getpid(), signal.{signal})
    return original(*args, **kwargs)
owner.{attr} = wrapped
from pw.cli import main
sys.exit(main(sys.argv[2:]))
"""


def killed_at(target: str, k: int, *args) -> CliResult:
    """`pw ARGS` in a child process, SIGKILLed just before the k-th call of `target`
    ("pw.app.run:RunHandle.record")."""
    proc = subprocess.run(_signalled_at(target, k, "SIGKILL", args), capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def stopped_at(target: str, k: int, *args, timeout_s: float = 120) -> subprocess.Popen:
    """`pw ARGS` in a child process that stops itself (SIGSTOP) just before the k-th call of
    `target`; returned once it has stopped. SIGCONT lets it go on; the caller reaps it."""
    proc = subprocess.Popen(_signalled_at(target, k, "SIGSTOP", args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + timeout_s
    while _state_of(proc.pid) != "T":
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the child never reached {target} call {k}: exit {proc.returncode}, {err[-400:]}")
        time.sleep(0.05)
    return proc


def _signalled_at(target: str, k: int, sig: str, args) -> list[str]:
    module, attr = target.split(":")
    script = textwrap.dedent(_KILLER.format(module=module, attr=attr, signal=sig))
    return [sys.executable, "-c", script, str(k), *map(str, args)]


def _state_of(pid: int) -> str:
    """The process state letter of /proc/PID/stat ("T": stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[1].split()[0]


def as_nobody(*args, cwd: Path) -> CliResult:
    """`pw ARGS` as the unprivileged user nobody (skips where that cannot be done)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("running pw as another user needs root and setpriv")
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's pw, whatever is installed
    proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", sys.executable, "-m",
                           "pw.cli", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def flip_a_byte(run: Path, line: int = 2) -> None:
    """Flip one bit in the middle of event `line + 1` (0-based line): damage, not a torn tail."""
    path = run / "ledger.jsonl"
    data = bytearray(path.read_bytes())
    start = sum(len(x) + 1 for x in data.split(b"\n")[:line])
    data[start + 30] ^= 0x01
    path.write_bytes(bytes(data))


def restore_ledger(scene) -> None:
    """What the damaged-ledger message asks for: the ledger restored from a copy of the run."""
    shutil.copy2(scene.template / "ledger.jsonl", scene.run / "ledger.jsonl")


def tear(run: Path) -> None:
    """An append cut short: a partial last line (a torn tail, which `pw repair` quarantines)."""
    with open(run / "ledger.jsonl", "ab") as f:
        f.write(b'{"seq":99,"id":"an append cut short')


def torn(argv: Callable[[Scene], list]) -> Callable[[Scene], list]:
    """An act: tear the run's ledger, then run `argv(scene)`."""

    def act(scene: Scene) -> list:
        tear(scene.run)
        return argv(scene)

    return act


def damaged(argv: Callable[[Scene], list]) -> Callable[[Scene], list]:
    """An act: flip a byte of event 3 (recording the damaged bytes as `scene.damaged`), then run
    `argv(scene)`."""

    def act(scene: Scene) -> list:
        flip_a_byte(scene.run)
        scene.damaged = (scene.run / "ledger.jsonl").read_bytes()
        return argv(scene)

    return act


def repair(scene: Scene) -> None:
    """A recovery: `pw repair` quarantines the torn tail (and rewrites the projections)."""
    result = pw_main("repair", scene.run)
    assert result.code == 0, result


# --- the check -------------------------------------------------------------------------------------


def event_hashes(run: Path) -> list[str]:
    path = run / "ledger.jsonl"
    return [e.hash for e in Ledger(path).events()] if path.is_file() and path.stat().st_size else []


def one_clean_line(fault: Fault, result: CliResult) -> None:
    assert result.code == fault.code, result
    assert "Traceback" not in result.err + result.out, result
    if fault.code == -signal.SIGKILL:
        return
    if result.err or fault.code not in (0, 1):
        assert result.err.endswith("\n") and result.err.count("\n") == 1, result.err
        assert result.err.startswith(f"pw {fault.verb}: "), result.err
    if fault.code == 0:  # a success says nothing on stderr but the chain head it anchored (ledger.anchor)
        assert all(line.startswith(f"pw {fault.verb}: anchor ") for line in result.err.splitlines()), result.err
    for words in fault.says:
        assert words in result.err + result.out, (words, result)


def assert_recovered(scene: Scene) -> None:
    run = scene.current
    if run is None:
        return
    ledger = Ledger(run / "ledger.jsonl")
    assert ledger.verify().ok, ledger.verify()
    events = ledger.events()
    now = [e.hash for e in events]
    assert now[: len(scene.before)] == scene.before, "events recorded before the fault were lost or changed"
    stages = Counter(e.data.stage for e in events if isinstance(e.data, ev.StageCompleted))
    assert all(n == 1 for n in stages.values()), f"a stage was recorded twice: {stages}"
    prepared = Counter(e.data.id for e in events if isinstance(e.data, ev.CandidatePrepared))
    assert all(n == 1 for n in prepared.values()), f"a candidate was prepared twice: {prepared}"
    left = [p.name for p in run.parent.iterdir() if p.name.endswith(".partial")]
    assert not left, f"half-made runs left behind: {left}"
    # ledger.files.write_atomic's temporaries (`.NAME.RANDOM`) among the projections and the evidence
    hidden = [*run.glob(".*"), *(run / "raw").rglob(".*")]
    stray = [p.relative_to(run).as_posix() for p in hidden if p.is_file() and p.name != ".projections.lock"]
    assert not stray, f"temporary files left behind: {stray}"
    audit = pw_main("audit", run)
    assert audit.code == 0 and audit.err == "", audit


def check(fault: Fault, scene: Scene) -> None:
    got = fault.act(scene)
    result = got if isinstance(got, CliResult) else scene.pw(*got)
    one_clean_line(fault, result)
    if fault.recover is not None:
        fault.recover(scene)
    assert_recovered(scene)


def ids(faults: list[Fault]) -> list[str]:
    names = [f.name for f in faults]
    assert len(set(names)) == len(names), "two faults share a name"
    return names
