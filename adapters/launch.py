"""A small launcher that runs one program and reports that program's own peak memory.

Run as `python -I -S launch.py REPORT` with a JSON spec `{"argv": [...], "env": {...}}` on stdin.

Why it exists: Linux keeps a process's memory high-water mark across `execve`, and a child that
Python forks (or vforks) starts from the parent's address space, so `wait4` reports
`max(parent's peak RSS, program's peak RSS)` for every program `pw` runs directly: a 12 MB
workload measured from a 200 MB `pw` process reads 200 MB, and a candidate that doubles its
memory goes unseen. This launcher is a fresh, small interpreter (no site, no imports beyond the
standard library); the program is forked from it, so its floor is a few MB instead of `pw`'s
heap. The launcher also takes the wall time around fork and wait, which leaves its own start-up
out of the measurement.

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
    errors_r, errors_w = os.pipe()  # both close-on-exec: an exec that succeeds sends nothing
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(errors_r)
        try:
            os.execvpe(argv[0], argv, env)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
            reason = getattr(exc, "strerror", None) or exc
            os.write(errors_w, f"{argv[0]}: {reason}".encode())
            os.write(2, f"cannot launch {argv[0]!r}: {reason}\n".encode())  # the program's log says why
        os._exit(127)
    os.close(errors_w)
    chunks = []
    while chunk := os.read(errors_r, 4096):
        chunks.append(chunk)
    os.close(errors_r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    launch_error = b"".join(chunks).decode(errors="replace") or None
    report = {
        "returncode": os.waitstatus_to_exitcode(status),
        "wall_s": wall,
        "max_rss_kb": usage.ru_maxrss,
        "launch_error": launch_error,
    }
    tmp = report_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, report_path)


if __name__ == "__main__":
    main()
