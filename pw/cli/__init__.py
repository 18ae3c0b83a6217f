"""The `pw` command line: a table of verbs, each a small function imported only when it runs.

Keeping heavy imports (numpy, scipy, rich, msgspec types) inside the verbs keeps `pw --help` fast.
Errors from the one family in `ledger.errors` are rendered here, and only here, as one line on
stderr with the exit code their class carries (`ledger.errors.EXIT_CODES`): 0 success, 1 a verdict
or check that did not pass, 2 bad input or usage, 3 an external tool or the machine failed (nothing
was judged), 4 another writer appended first (nothing was written; run it again).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# verb -> "module:function"; the module is imported only when the verb runs.
VERBS: dict[str, str] = {
    "start": "pw.cli.begin:start",
    "prepare": "pw.cli.loop:prepare",
    "evaluate": "pw.cli.loop:evaluate",
    "confirm": "pw.cli.loop:confirm",
    "status": "pw.cli.loop:status",
    "report": "pw.cli.look:report",
    "demo": "pw.cli.begin:demo",
    "inspect": "pw.cli.look:inspect",
    "doctor": "pw.cli.upkeep:doctor",
    "tokens": "pw.cli.upkeep:tokens",
    "log": "pw.cli.look:log",
    "replay": "pw.cli.look:replay",
    "audit": "pw.cli.upkeep:audit",
    "rebuild": "pw.cli.upkeep:rebuild",
    "repair": "pw.cli.upkeep:repair",
    "validate": "pw.cli.upkeep:validate",
    "kernel-profile": "pw.cli.kernel_cache:kernel_profile",
    "import": "pw.cli.imports:import_verb",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for any bad input
        self.exit(2, f"pw: error: {message} (see: {self.prog} --help)\n")


def _verb(sub, name: str, help: str, *, run: bool = True, json_help: str | None = None) -> argparse.ArgumentParser:
    """A verb's parser. Every verb takes --json (README, "Verbs"); most take RUN first."""
    p = sub.add_parser(name, help=help)
    if run:
        p.add_argument("run", metavar="RUN", help="a run directory, or any file inside one")
    p.add_argument("--json", action="store_true", help=json_help or "print the result as JSON")
    return p


def build_parser() -> argparse.ArgumentParser:
    from ledger.errors import EXIT_CODES
    from pw.cli.common import add_remote_args

    parser = _Parser(
        prog="pw",
        description="ProfileWeaver: measure why a program is slow and judge rewrites with six trust gates.",
        epilog="exit codes: " + "; ".join(f"{code}: {what}" for code, what in EXIT_CODES.items()),
    )
    parser.add_argument("--version", action="version", version="profileweaver 0.1.0")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)

    p = _verb(sub, "start", "build, check and time a workload's baseline, then profile it", run=False,
              json_help="print a JSON object with at least run_dir")
    p.add_argument("--workload", metavar="DIR", help="the workload directory (read only; never modified)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted start of this run")
    p.add_argument("--iterations", type=int, default=10, metavar="N", help="candidate budget (default 10)")
    p.add_argument("--repairs", type=int, default=7, metavar="N", help="repair budget per candidate (default 7)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR", help="where run directories go (default runs/)")
    p.add_argument("--no-profile", action="store_true", help="stop after the baseline timing")
    p.add_argument("--operation", metavar="NAME",
                   help="judge every campaign on this function's or kernel's own cost (whole-process time "
                        "becomes the collateral check)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="TOOL=PATH",
                   help="after start, import a pre-captured profile of a tool that does not run here "
                        "(hpctoolkit, gvprof, drgpum, gpa); repeatable; same as `pw import`")

    p = _verb(sub, "prepare", "make candidate workspaces for the agent to edit")
    p.add_argument("--candidate", action="append", required=True, metavar="ID:PARENT:MECHANISM",
                   help="PARENT is baseline, current (best verified so far) or a candidate id; repeatable")

    p = _verb(sub, "evaluate", "build, check and time a candidate with its profiler in every run; apply the six gates")
    p.add_argument("id", metavar="ID", nargs="+",
                   help="one candidate, or several: one quiet batch (every build and oracle check, then the "
                        "campaigns one at a time)")
    p.add_argument("--max-pairs", type=int, metavar="N",
                   help="pair budget of the adaptive campaign (default: the manifest's sampling.max_pairs)")
    p.add_argument("--max-time", type=float, metavar="SECONDS",
                   help="campaign time budget (default: the manifest's sampling.max_time_s)")
    p.add_argument("--more", type=int, nargs="?", const=-1, metavar="N",
                   help="continue a campaign that ran out of budget undecided, by up to N pairs (default: what its variance suggests)")
    add_remote_args(p, "the campaigns")

    p = _verb(sub, "confirm", "confirm a candidate: its profiled pairs plus 5 unprofiled pairs (--fresh runs a new campaign first)")
    p.add_argument("id", metavar="ID")
    p.add_argument("--fresh", action="store_true", help="run a new profiled campaign first instead of reusing the recorded pairs")
    add_remote_args(p, "the confirmation")

    p = _verb(sub, "status", "the candidate ledger at a glance")

    p = _verb(sub, "report", "rebuild report.json, report.md and their plots")

    p = _verb(sub, "demo", "the whole loop on workloads/matmul-c with three bundled candidates", run=False,
              json_help="print run_dir and each candidate's status and gates")
    p.add_argument("--runs-dir", default="runs", metavar="DIR", help="where the run directory goes (default runs/)")

    p = _verb(sub, "inspect", "one bounded diagnostic view (profile, lines, mechanisms, routing, ...)")
    p.add_argument("--section", default="profile",
                   choices=("profile", "lines", "mechanisms", "facts", "routing", "timing", "gates", "diff", "slices",
                            "ncu", "imports"))
    p.add_argument("--candidate", metavar="ID", help="a candidate's view (gates, timing, diff, ncu: its delta "
                   "against its parent and the baseline, profile, imports)")
    p.add_argument("--group", metavar="G", help="only items mentioning G (e.g. a function or metric); with "
                   "--section ncu: memory, compute, occupancy, stalls, rules or roofline")
    p.add_argument("--format", choices=("text", "json", "speedscope"), default="text",
                   help="speedscope: the normalized profile as a flame-graph file")

    p = _verb(sub, "doctor", "which profilers are usable on this machine, and why not", run=False)
    p.add_argument("--runs-dir", default="runs", metavar="DIR",
                   help="whose runs' captures give the measured overheads (default runs/)")

    p = _verb(sub, "tokens", "measured o200k token cost of every skill, reference and brief", run=False)
    p.add_argument("--run", metavar="RUN", help="also count a run's emitted brief and view")

    p = _verb(sub, "log", "show the run's events as a table", json_help="one JSON object per event")

    p = _verb(sub, "replay", "show the run state as of an event")
    p.add_argument("--until", type=int, metavar="SEQ", help="last event to fold (default: all)")

    p = _verb(sub, "audit", "verify the chain and recompute every projection and verdict")
    p.add_argument("--anchor", action="append", default=[], metavar="SEQ:HASH",
                   help="a chain head pw printed earlier (`anchor SEQ:HASH`): the ledger must extend it too")

    p = _verb(sub, "rebuild", "rewrite every projection file from the ledger")

    p = _verb(sub, "repair", "quarantine a torn ledger tail and record the repair")

    p = _verb(sub, "validate", "check a run file or profileweaver.json against its schema", run=False)
    p.add_argument("file", metavar="FILE")

    p = _verb(sub, "import", "import pre-captured profiles of tools that do not run here (partial children)")
    p.add_argument("artifacts", nargs="+", metavar="TOOL=PATH",
                   help="TOOL: hpctoolkit (database dir), gvprof (redundancy CSVs), drgpum (memory_liveness/), "
                        "gpa (gpa.advice)")
    p.add_argument("--target", default="baseline", metavar="ID",
                   help="what was profiled: baseline (default) or a prepared candidate")

    from pw.cli.kernel_cache import add_parser as add_kernel_profile  # argparse only; no heavy imports

    add_kernel_profile(sub, _verb)
    return parser


# Verbs that pick up from what the ledger holds when run again (their next step rewrites the
# projections too): after a refused write, the same command is what continues, not `pw rebuild`.
_GO_ON_BY_RUNNING_AGAIN = frozenset({"evaluate", "confirm", "report"})


def _again(argv: list[str]) -> str:
    """The command as it was typed: what continues after a refused write (every verb resumes from
    what the ledger holds, or changed nothing)."""
    import shlex

    return " ".join(["pw", *(shlex.quote(a) for a in argv)])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # what a remote node runs again, without --remote (pw.remote.campaign)
    if args.verb is None:
        parser.print_help()
        return 2
    module_name, func_name = VERBS[args.verb].split(":")
    from ledger import anchor
    from ledger.errors import DiskError, PWError, disk_error

    anchor.begin()
    printed = False  # an error's one line stays the only line: its anchor is kept, not printed
    try:
        try:
            handler = getattr(importlib.import_module(module_name), func_name)
            code = int(handler(args) or 0)
            printed = True
            return code
        except OSError as exc:
            # A write the machine refused somewhere no layer named it (a log, a plot, a scratch
            # folder): the same one line, naming the path the OS named. Anything else is a bug.
            err = disk_error(exc)
            if err is None:
                raise
            raise err from None
    except PWError as exc:
        from pw import diagnostics

        if diagnostics.debugging():
            diagnostics.log().debug("error", verb=args.verb, error=type(exc).__name__, exc_info=True)
        if isinstance(exc, DiskError):
            exc = exc.with_resume(_again(argv), replace=args.verb in _GO_ON_BY_RUNNING_AGAIN)
        sys.stderr.write(f"pw {args.verb}: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"pw {args.verb}: interrupted; the ledger holds every completed step\n")
        return 130
    except BrokenPipeError:
        return 0
    finally:
        _anchor(args.verb, printed)


def _anchor(verb: str, printed: bool) -> None:
    """Anchor the head of every ledger this command appended to, outside the run (ledger.anchor),
    and, when the command did not fail, print it: one line on stderr a person or CI can keep
    (`pw audit --anchor SEQ:HASH`)."""
    from ledger import anchor

    kept, why = anchor.flush(verb)
    for a in kept if printed else []:
        sys.stderr.write(f"pw {verb}: anchor {a.seq}:{a.hash} for {a.ledger}"
                         + (f" (not kept: {why})" if why else f" (kept in {anchor.log_path()})") + "\n")


if __name__ == "__main__":
    sys.exit(main())
