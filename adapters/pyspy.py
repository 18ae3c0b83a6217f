"""py-spy adapter: sampled Python-level CPU time per function and per source line.

Capture: ``py-spy record --format speedscope --full-filenames --rate <hz> -o pyspy.speedscope.json
-- argv`` (no ``--native``, no ``--idle``). Speedscope JSON is parsed rather than the collapsed
"raw" text because function names and paths may contain ';', ' ' or '(' which the text format does
not escape.

What the numbers mean: py-spy writes one "sampled" profile per thread; each sample is a stack of
frame indices (root first) with weight = 1/rate seconds. ``cpu_time_s = samples / rate`` (the sum of
the weights): an *estimate* of on-CPU Python time, because idle threads are not sampled without
``--idle``, and py-spy may fall behind its rate under load (then time is under-estimated, not
stretched). A frame's line is the line executing *now* (for callers: the call site), so:
- self = samples whose leaf frame is the function; line costs come from the leaf frame's line;
- inclusive = samples with the function anywhere on the stack (once per sample);
- ``line_start``/``line_end`` are the first/last *sampled* lines of the function, never its ``def``
  line (py-spy can report def lines only with ``--function``, which loses the line view).
Samples with an empty stack count in the totals as operation ``[no-python-frame]@[py-spy]``.

Caveat (py-spy 0.4.3): py-spy exits 0 even when the profiled program fails, so a capture cannot see
the program's exit status; the workload's oracle must. py-spy's own lines never reach the program's
streams (``apart``).

In a timed run py-spy joins from outside, as perf does. Where this user may trace a process that is
not its own child (root, or Yama's ptrace_scope 0), pw starts ``py-spy record --pid`` on the program as
soon as its launcher has started it (``adapters.attach``); elsewhere ``py-spy record --subprocesses``
runs around the sandbox and follows the tree down (an ancestor may trace under every Yama scope, but
it finds a new process only every 100 ms or so). Either way the program's parent is the launcher, as
in every other kind of run, and nothing of py-spy is in its PID namespace, file system or streams (a
red team's program read ``/proc/<ppid>/comm`` when py-spy was its parent, took a dict only then, and
was verified 2.4x while 1.08x unprofiled). Its exit status is its own again (the launcher reports
it), and py-spy's output and log lie where it cannot write. ``--nonblocking`` reads the program's
memory without stopping it: no pauses to time. Following the tree also samples the launcher (Python
too): the process frames py-spy puts at the root of each stack leave it out (``program_samples``). A
run too short to attach to (``NEVER_FOUND``, ``GONE``) ran, unsampled: an empty profile.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import msgspec

from adapters.attach import NEVER_FOUND
from adapters.base import (
    Adapter,
    AdapterSpec,
    Capture,
    CaptureError,
    CaptureRequest,
    RunWrap,
    Usability,
    decode_meta,
    last_line,
    log_said,
    relative_to_root,
    require_artifact,
    run_tool,
)
from ledger.profile import CallEdge, LineCost, Operation, Profile

OUT_ROLE = "pyspy.speedscope.json"
NO_FRAME = "[no-python-frame]@[py-spy]"

SPEC = AdapterSpec(
    name="py-spy",
    tool="py-spy",
    measures=["cpu_time_s", "samples"],
    granularity=["process", "function", "line"],
    phases=["discovery", "diagnosis"],
    targets=["python"],
    can_reprofile=True,
    partial=False,
    overhead_factor=1.1,
    setup_s=0.3,
    cost_note="measured: 1.0 s CPython loop -> ~1.1 s under py-spy 0.4.3 at 200 Hz",
)

# py-spy prints its own lines ("py-spy> Sampling ...", warnings, errors) to the streams it was
# given, and the program it starts inherits them: two processes writing one stdout interleave as the
# scheduler pleases (on a busy host the banner lands after the program's first line), so no pattern
# can take py-spy's lines off again. Instead py-spy never shares the program's streams: a shell keeps
# them on fds 3 and 4, starts py-spy with its own streams in LOG_ROLE, and a second shell (py-spy's
# child, exec'd into what py-spy runs: the program at `pw start`, the sandbox in a timed run) hands
# them back as 1 and 2.
LOG_ROLE = "pyspy.log"
# What says the run ended before py-spy could sample it: pw never found the program to attach to, the
# program was gone when py-spy looked, or (following the tree) no Python process was left in it. The
# run ran, and nothing of it was sampled. The log lies outside the sandbox: the program cannot write it.
GONE = (rf"^(?:{re.escape(NEVER_FOUND)}|Error: No python processes found|Error: Failed to (?:get process executable "
        r"name|open process|find python version)|Error: No such process)")
# The process frames py-spy puts at the root of each stack with --subprocesses: `process PID:"CMDLINE"`.
_PROCESS_FRAME = re.compile(r'^process \d+:"(.*)"$', re.DOTALL)
_GIVE_BACK = 'exec "$@" >&3 2>&4 3>&- 4>&-'


def apart(record: list[str], log: str) -> list[str]:
    """An argv prefix that runs ``record -- <the program>`` with py-spy's own output in ``log`` and
    the program's stdout and stderr untouched (the program's argv follows the prefix)."""
    start = (f"exec 3>&1 4>&2; exec {shlex.join(record)} -- /bin/sh -c {shlex.quote(_GIVE_BACK)} sh "
             f'"$@" >{shlex.quote(log)} 2>&1')
    return ["/bin/sh", "-c", start, "sh"]


def said(log: str) -> str:
    """What py-spy said in ``log``: its error, when it failed."""
    return log_said(log, "no error output")


_PROBE_SCRIPT = "import time\nt = time.time()\nwhile time.time() - t < 0.3:\n    pass\n"


class _Frame(msgspec.Struct):
    name: str
    file: str | None = None
    line: int | None = None


class _Sampled(msgspec.Struct):
    type: str
    samples: list[list[int]] = []
    weights: list[float] = []


class _Shared(msgspec.Struct):
    frames: list[_Frame]


class _Speedscope(msgspec.Struct):
    shared: _Shared
    profiles: list[_Sampled]
    exporter: str = ""


class PySpyAdapter(Adapter):
    spec = SPEC

    def __init__(self, tool_path: str | None = None, *, rate: int = 200,
                 python: str | None = None) -> None:
        super().__init__(tool_path)
        self.rate = rate
        self.python = python or sys.executable  # interpreter for the probe only
        self._tool_version: str | None = None

    def resolve_tool(self) -> str | None:
        """PATH first; then beside the running interpreter (py-spy is a dependency of this package,
        installed into the venv's bin, which need not be on PATH)."""
        found = super().resolve_tool()
        if found is None and self.tool_path is None:
            cand = os.path.join(os.path.dirname(sys.executable), "py-spy")
            if os.access(cand, os.X_OK):
                return cand
        return found

    def _record(self, exe: str, out: str) -> list[str]:
        return [exe, "record", "--format", "speedscope", "--full-filenames", "--rate", str(self.rate),
                "-o", out]

    def _timed_record(self, exe: str, out: str) -> list[str]:
        return [exe, "record", "--nonblocking", "--format", "speedscope", "--full-filenames", "--rate",
                str(self.rate), "-o", out]

    def probe(self) -> Usability:
        exe = self.resolve_tool()
        if exe is None:
            return self.unusable_missing_tool()
        try:
            version = _version(exe)
            with tempfile.TemporaryDirectory(prefix="pw-pyspy-probe-") as tmp:
                out = os.path.join(tmp, "p.json")
                r = run_tool([*self._record(exe, out), "--", self.python, "-c", _PROBE_SCRIPT],
                             timeout_s=30)
                if r.returncode != 0 or not os.path.exists(out):
                    why = last_line(r.stderr, "no error output")
                    if "ermission" in why or "ptrace" in why:
                        why = f"permission: {why} (py-spy needs ptrace rights: root or CAP_SYS_PTRACE)"
                    return Usability(usable=False, version=version, reason=f"py-spy probe failed: {why}")
                doc = msgspec.json.decode(Path(out).read_bytes(), type=_Speedscope)
        except (CaptureError, OSError, msgspec.DecodeError) as exc:
            return Usability(usable=False, reason=f"py-spy probe failed: {exc}")
        n = sum(len(p.samples) for p in doc.profiles)
        if n == 0:
            return Usability(usable=False, version=version, reason="py-spy probe collected no samples")
        return Usability(usable=True, reason=f"py-spy sampled a 0.3 s loop ({n} samples)",
                         version=version, mode="python-frames",
                         notes=["py-spy exits 0 even when the profiled program fails"])

    def capture(self, req: CaptureRequest) -> Capture:
        exe = self.require_tool()
        os.makedirs(req.out_dir, exist_ok=True)
        version = _version(exe)
        out = os.path.join(req.out_dir, OUT_ROLE)
        stdout = os.path.join(req.out_dir, "stdout.txt")
        stderr = os.path.join(req.out_dir, "stderr.txt")
        log = os.path.join(req.out_dir, LOG_ROLE)
        cmd = [*apart(self._record(exe, out), log), *req.argv]
        r = run_tool(cmd, cwd=req.cwd, env=req.env, timeout_s=req.timeout_s, stdout_path=stdout, wrap=req.wrap)
        with open(stderr, "wb") as f:
            f.write(r.stderr)
        if r.returncode != 0 or not os.path.exists(out):
            raise CaptureError(f"py-spy record exited {r.returncode} on {' '.join(req.argv)}: {said(log)}")
        meta = self.write_meta(req.out_dir, tool_version=version, cwd=req.cwd, argv=list(req.argv),
                               options={"rate": self.rate})
        return Capture(adapter=self.spec.name, label=req.label, wall_s=r.wall_s, tool_version=version,
                       commands=[cmd], artifacts={OUT_ROLE: out, "capture.json": meta,
                                                  "stdout.txt": stdout, "stderr.txt": stderr})

    # --- timed runs (one kind of run): py-spy samples from outside the sandbox and the launcher -------
    def timed_options(self) -> dict[str, str | int | float | bool]:
        # How py-spy joined, recorded so each run is normalized as it was taken: "attach" on the program's
        # own process id; "under": following the tree, the program being the launcher's subtree
        # (``program_samples``); neither: py-spy was the program's parent (before either).
        if may_trace_others():
            return {"rate": self.rate, "mode": "timed", "attach": "pid"}
        return {"rate": self.rate, "mode": "timed", "under": LAUNCHER_MARK}

    def timed_wrap(self, out_dir: str) -> RunWrap | None:
        exe = self.resolve_tool()
        if exe is None:
            return None
        log, out = os.path.join(out_dir, LOG_ROLE), os.path.join(out_dir, OUT_ROLE)
        if may_trace_others():
            return RunWrap(attach=[*self._timed_record(exe, out), "--pid", "{pid}"], log=log)
        return RunWrap(outer=apart([*self._timed_record(exe, out), "--subprocesses"], log), log=log)

    def timed_collect(self, out_dir: str, *, cwd: str, timeout_s: float) -> dict[str, bytes]:
        out = os.path.join(out_dir, OUT_ROLE)
        if self._tool_version is None:
            self._tool_version = _version(self.require_tool())
        version = self._tool_version
        log = os.path.join(out_dir, LOG_ROLE)
        try:
            data = Path(out).read_bytes()
        except OSError:
            if re.search(GONE, said(log)) is None:
                raise CaptureError(f"py-spy wrote no profile for the timed run: {said(log)}") from None
            # The run ended before py-spy found a Python process in it: it ran, and nothing was sampled.
            data = msgspec.json.encode(_Speedscope(shared=_Shared(frames=[]), profiles=[], exporter=f"py-spy@{version}"))
        meta = msgspec.json.encode({"adapter": self.spec.name, "tool_version": version, "cwd": cwd, "argv": [],
                                    "options": self.timed_options()}, order="deterministic")
        return {OUT_ROLE: data, "capture.json": meta}

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        meta = decode_meta(artifacts)
        raw = require_artifact(artifacts, OUT_ROLE, self.spec.name)
        try:
            doc = msgspec.json.decode(raw, type=_Speedscope)
        except msgspec.DecodeError as exc:
            raise ValueError(f"py-spy: {OUT_ROLE} is not py-spy speedscope JSON: {exc}") from None
        version = doc.exporter.removeprefix("py-spy@") or meta.tool_version
        under = meta.options.get("under")
        if isinstance(under, str) and under:
            doc = program_samples(doc, under)
        return build_profile(doc, source_root=source_root, cwd=meta.cwd or None, target=target,
                             tool_version=version)


def may_trace_others() -> bool:
    """Whether this user may trace a process that is not its own descendant: root (CAP_SYS_PTRACE)
    unless Yama forbids all tracing (scope 3), anyone under Yama scope 0 or without Yama.
    ``PW_PYSPY_FOLLOW_TREE=1`` says no (the way a user under Yama scope 1 runs; tests use it)."""
    if os.environ.get("PW_PYSPY_FOLLOW_TREE") == "1":
        return False
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        scope = 0
    return scope == 0 or (os.geteuid() == 0 and scope < 3)


# What names pw's launcher in a process frame's command line: `INTERPRETER -I -S .../launch.py FD`
# (adapters/process.py), the whole line (the shell and the sandbox around it carry it as arguments).
LAUNCHER_MARK = "/launch.py"


def _is_launcher(cmdline: str, mark: str) -> bool:
    parts = cmdline.split(" ")
    return len(parts) == 5 and parts[1:3] == ["-I", "-S"] and parts[3].endswith(mark) and parts[4].isdigit()


def program_samples(doc: _Speedscope, mark: str) -> _Speedscope:
    """The samples of the program and what it started, without py-spy's process frames: a sample
    counts when a process frame below the launcher's is on its stack. The launcher is the outermost
    process frame whose command line is the launcher's, so a process of the program that renamed
    itself after the launcher is still below it, and counted."""
    kinds: list[str | None] = []  # per frame: "launcher", "process", or None (a Python frame)
    for fr in doc.shared.frames:
        m = _PROCESS_FRAME.match(fr.name) if not fr.file else None
        kinds.append(None if m is None else "launcher" if _is_launcher(m.group(1), mark) else "process")
    profiles = []
    for prof in doc.profiles:
        samples, weights = [], []
        for stack, weight in zip(prof.samples, prof.weights):
            procs = [k for k, i in enumerate(stack) if kinds[i] is not None]
            first = next((k for k in procs if kinds[stack[k]] == "launcher"), None)
            if first is None or procs[-1] == first:
                continue  # outside the launcher's subtree, or the launcher's own
            samples.append([i for i in stack if kinds[i] is None])
            weights.append(weight)
        profiles.append(msgspec.structs.replace(prof, samples=samples, weights=weights))
    return msgspec.structs.replace(doc, profiles=profiles)


def _version(exe: str) -> str:
    return run_tool([exe, "--version"], timeout_s=10).stdout.decode().strip().removeprefix("py-spy ")


_SITE = re.compile(r"/(?:site|dist)-packages/(.+)$")
_STDLIB = re.compile(r"/lib/python\d+(?:\.\d+)?/(.+)$")


def python_module(file: str | None) -> str:
    """A host-independent label for code outside the source root: 'numpy/core/_methods.py',
    'json/decoder.py', '<frozen importlib._bootstrap>'."""
    if not file:
        return "unknown"
    for pat in (_SITE, _STDLIB):
        m = pat.search(file)
        if m:
            return m.group(1)
    return os.path.basename(file) or file


def build_profile(doc: _Speedscope, *, source_root: str, cwd: str | None, target: str,
                  tool_version: str) -> Profile:
    frames = doc.shared.frames
    info: dict[str, tuple[str, str, str | None]] = {}
    frame_op: list[str] = []
    frame_rel: list[str | None] = []
    for fr in frames:
        rel = relative_to_root(fr.file, source_root, cwd) if fr.file else None
        mod = rel or python_module(fr.file)
        oid = f"{fr.name}@{rel}" if rel else f"{fr.name}@[{mod}]"
        info.setdefault(oid, (fr.name, mod, rel))
        frame_op.append(oid)
        frame_rel.append(rel)

    metrics = ["cpu_time_s", "samples"]
    zero = dict.fromkeys(metrics, 0.0)
    self_m: dict[str, dict[str, float]] = defaultdict(lambda: dict(zero))
    incl_m: dict[str, dict[str, float]] = defaultdict(lambda: dict(zero))
    edge_m: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict(zero))
    line_m: dict[tuple[str, int, str], dict[str, float]] = defaultdict(lambda: dict(zero))
    lines_seen: dict[str, set[int]] = defaultdict(set)
    totals = dict(zero)

    for prof in doc.profiles:
        if prof.type != "sampled":
            continue
        for stack, weight in zip(prof.samples, prof.weights):
            w = {"cpu_time_s": float(weight), "samples": 1.0}
            for m in metrics:
                totals[m] += w[m]
            if not stack:
                info.setdefault(NO_FRAME, ("[no-python-frame]", "py-spy", None))
                for acc in (self_m[NO_FRAME], incl_m[NO_FRAME]):
                    for m in metrics:
                        acc[m] += w[m]
                continue
            ops = [frame_op[i] for i in stack]  # root first
            for i in stack:
                if frame_rel[i] is not None and frames[i].line:
                    lines_seen[frame_op[i]].add(frames[i].line)
            leaf = stack[-1]
            for m in metrics:
                self_m[ops[-1]][m] += w[m]
            for oid in set(ops):
                for m in metrics:
                    incl_m[oid][m] += w[m]
            for e in {(ops[i], ops[i + 1]) for i in range(len(ops) - 1)}:
                for m in metrics:
                    edge_m[e][m] += w[m]
            if frame_rel[leaf] is not None and frames[leaf].line:
                acc = line_m[(frame_rel[leaf], frames[leaf].line, ops[-1])]
                for m in metrics:
                    acc[m] += w[m]

    operations = []
    for oid, inc in incl_m.items():
        name, mod, rel = info[oid]
        seen = lines_seen.get(oid)
        kind = "other" if oid == NO_FRAME else "function"
        operations.append(Operation(id=oid, name=name, kind=kind, module=mod, file=rel,
                                    line_start=min(seen) if seen else None,
                                    line_end=max(seen) if seen else None,
                                    self_metrics=dict(self_m[oid]), inclusive_metrics=dict(inc)))
    lines = [LineCost(file=f, line=ln, operation=oid, self_metrics=v) for (f, ln, oid), v in line_m.items()]
    edges = [CallEdge(caller=a, callee=b, metrics=v) for (a, b), v in edge_m.items()]
    gran = ["process", "function"] + (["line"] if lines else [])
    return Profile(tool="py-spy", tool_version=tool_version, target=target, granularity=gran,
                   metrics=metrics, totals=totals, operations=operations, lines=lines, edges=edges)
