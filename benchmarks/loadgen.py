"""A bounded load generator: keeps about ``--cpus`` of the machine's CPUs busy until it is stopped.

Each whole CPU is a process spinning without pause; a fractional part is a process that spins for
``duty`` of every 50 ms period and sleeps the rest, so the load is steady at the timescale of a
timed run (0.1-1 s) rather than a few long bursts. Every process stops when the parent dies (it is
killed with its process group) or after ``--seconds``. Used by benchmarks/load_balance.py and the
busy-host tests; standard library only.

    python benchmarks/loadgen.py --cpus 1.5 --seconds 300
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

PERIOD_S = 0.05


def spin(duty: float, until: float) -> None:
    while time.monotonic() < until:
        start = time.monotonic()
        while time.monotonic() - start < duty * PERIOD_S:
            pass
        rest = PERIOD_S * (1.0 - duty)
        if rest > 0:
            time.sleep(rest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpus", type=float, default=1.5, help="CPUs to keep busy (default 1.5)")
    p.add_argument("--seconds", type=float, default=600.0, help="stop after this long (default 600)")
    args = p.parse_args(argv)
    if not 0 < args.cpus <= 64 or not args.seconds > 0:
        print("loadgen: expected 0 < --cpus <= 64 and --seconds > 0", file=sys.stderr)
        return 2
    until = time.monotonic() + args.seconds
    shares = [1.0] * int(args.cpus) + ([args.cpus - int(args.cpus)] if args.cpus % 1 else [])
    children = []
    for duty in shares:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            spin(duty, until)
            os._exit(0)
        children.append(pid)
    try:
        for pid in children:
            os.waitpid(pid, 0)
    except KeyboardInterrupt:
        pass
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
