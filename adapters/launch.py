"""A small launcher that runs one program and reports that program's own peak memory.

Run as `python -I -S launch.py REPORT` with a JSON spec `{"argv": [...], "env": {...}}` on stdin.

Why it exists: Linux keeps a process's memory high-water mark across `execve`, and a child that
Python forks (or vforks) starts from the parent's address space, so `wait4` reports
`max(parent's peak RSS, program's peak RSS)` for every program `pw` runs directly: a 12 MB
workload measured from a 200 MB `pw` process reads 200 MB, and a candidate that doubles its
memory goes unseen. This launcher is a fresh, small interpreter (no site, no imports beyond the
standard library); the program is spawned from it, so its floor is the launcher's ~8 MB instead
of `pw`'s heap. The launcher also takes the wall time around spawn and wait, which leaves its own
start-up (~40 ms) out of the measurement.

The report (JSON, written to REPORT after the program ends) holds the wait status as
`subprocess` returns codes (minus the signal), the wall time, the peak RSS in KB, and
`launch_error` when the program could not be executed. When the launcher itself is killed (a
timeout kills the whole process group), no report is written and the caller falls back to what
it saw.

Standard library only: `-I` leaves this package off `sys.path`.
"""

import json
import os
import sys
import time


def main() -> None:
    report_path = sys.argv[1]
    spec = json.loads(sys.stdin.buffer.read())
    argv, env = spec["argv"], spec["env"]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # posix_spawn (vfork-like: no copy of this interpreter's pages to set up and tear down) keeps
    # the measured wall time closest to the program's own; a fork costs ~1 ms more here. The child
    # starts from this small launcher's address space, which sets the floor of its peak RSS.
    start = time.perf_counter()
    try:
        pid = os.posix_spawnp(argv[0], argv, env)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
        reason = getattr(exc, "strerror", None) or exc
        os.write(2, f"cannot launch {argv[0]!r}: {reason}\n".encode())  # the program's log says why
        _write_report(report_path, {"returncode": 127, "wall_s": 0.0, "max_rss_kb": 0,
                                    "launch_error": f"{argv[0]}: {reason}"})
        return
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    _write_report(report_path, {"returncode": os.waitstatus_to_exitcode(status), "wall_s": wall,
                                "max_rss_kb": usage.ru_maxrss, "launch_error": None})


def _write_report(path: str, report: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
