"""A profiler that joins a run by the program's process id, from outside the sandbox and the launcher.

perf wraps the whole command from outside; py-spy needs the program itself. When py-spy was the
program's parent, the program could see it (a red team's read ``/proc/<ppid>/comm`` and was fast only
then); following the tree with ``--subprocesses`` from outside found a new process only every 100 ms
or so, blind to most of a short run. So the caller finds the program as soon as pw's launcher has
started it (the launcher's child, polled every millisecond) and starts the profiler on its host
process id: the program's parent is the launcher, as in every run, and nothing of the profiler is in
its PID namespace, file system or streams.

``find_program`` and ``Attacher`` are the two halves; ``adapters.process.run_process`` drives them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

POLL_S = 0.001
# Written to the profiler's log when the program ended before it could be found (a run too short to
# sample): the run counts, with an empty profile (``adapters.pyspy``).
NEVER_FOUND = "pw: the program ended before it could be attached to"


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def find_program(root: int, launcher: str) -> int | None:
    """The host process id of the program pw's launcher (its script path ``launcher``) started under
    ``root``, or None while there is none yet."""
    todo = [root]
    while todo:
        pid = todo.pop()
        kids = _children(pid)
        args = _cmdline(pid)
        if len(args) >= 4 and args[1:3] == ["-I", "-S"] and args[3] == launcher:
            return kids[0] if kids else None
        todo.extend(kids)
    return None


class Attacher:
    """Start ``argv`` (``{pid}`` replaced by the program's host process id) once the program under
    ``root`` is found; its own output goes to ``log``. ``finish`` waits for it after the run."""

    def __init__(self, root: int, launcher: str, argv: Sequence[str], log: Path, running) -> None:
        self._root, self._launcher, self._argv, self._log = root, launcher, list(argv), log
        self._running = running  # whether the run is still going (a callable)
        self._tool: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._attach, daemon=True)
        self._thread.start()

    def _attach(self) -> None:
        while self._running():
            pid = find_program(self._root, self._launcher)
            if pid is not None:
                with open(self._log, "wb") as log:
                    self._tool = subprocess.Popen([a.replace("{pid}", str(pid)) for a in self._argv],
                                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                  start_new_session=True)
                return
            time.sleep(POLL_S)
        self._log.write_text(NEVER_FOUND + "\n")

    def finish(self, timeout_s: float) -> None:
        """Wait for the profiler to write what it sampled (it stops when the program exits); stop it
        after ``timeout_s``."""
        self._thread.join(timeout_s)
        tool = self._tool
        if tool is None:
            return
        try:
            tool.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(tool.pid, signal.SIGKILL)
            tool.wait()
