"""perf (Linux perf_events) sampling adapter: function and source-line CPU time for native code.

Capture: ``perf record -e cpu-clock -F <freq> --call-graph dwarf`` then ``perf script`` with
comm,pid,tid,period,event,ip,sym,dso,srcline (``--inline --full-source-path``).

Why these choices (measured on perf 6.1, 2-core VM, a 1.0 s -O2 -g program):
- ``cpu-clock`` is a *software* event, so it works where hardware counters are not exposed (VMs).
  ``-e cycles`` there silently falls back to cpu-clock, so the probe checks hardware support with
  ``perf stat`` instead of trusting ``record``.
- ``--call-graph dwarf``: -O2 code has no frame pointers, and ``-g`` (fp) unwinding yields garbage
  callers ("[unknown]" with random addresses). DWARF unwinding costs ~9-14 MB/s of perf.data.
- ``--no-bpf-event`` saves ~0.9 s: perf 6.1's BPF side-band thread waits out a 1 s poll at exit.
- ``--no-buildid-cache`` skips copying binaries into ~/.debug; build ids stay in the header.
- ``perf script`` with srcline (addr2line through libbfd) took ~0.3 s for ~1000 samples.

Numbers: each cpu-clock sample carries ``period`` = nanoseconds of CPU clock since the previous
sample of that thread, so ``cpu_time_s = sum(period) / 1e9`` (≈ samples / frequency, but exact under
throttling). Self = samples whose leaf frame is the operation; inclusive = samples where it is anywhere
on the stack (once per sample); call edges come from adjacent frames; line costs from the leaf frame's
srcline. Inlined functions appear as their own frames (perf ``--inline``), so an inlined hot loop is
attributed to the inlined function with its own file and lines.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Mapping

from adapters import kernel_map
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
    relative_to_root,
    require_artifact,
    run_tool,
    true_argv,
)
from adapters.symbolize import LINES_ROLE, Symbolizer, file_address
from ledger.profile import CallEdge, LineCost, Operation, Profile

SCRIPT_ROLE = "perf-script.txt"
DATA_ROLE = "perf.data"
SCRIPT_FIELDS = "comm,pid,tid,period,event,ip,sym,dso,srcline"
# Timed runs: symbol+offset instead of srcline (lines come from adapters.symbolize), no call graph.
TIMED_FIELDS = "comm,pid,tid,period,event,ip,sym,symoff,dso"
# Samples per second in a timed run (cpu-clock): see benchmarks/profiler_overhead.py for its cost.
TIMED_FREQUENCY = 499

SPEC = AdapterSpec(
    name="perf",
    tool="perf",
    measures=["cpu_time_s", "samples"],
    granularity=["process", "function", "line"],
    phases=["discovery", "diagnosis"],
    targets=["native", "cuda"],  # cuda: host-side CPU time of CUDA programs
    can_reprofile=True,
    partial=False,
    overhead_factor=1.3,
    setup_s=0.6,
    cost_note="measured: 1.0 s -O2 -g C program -> record 1.5 s + script 0.3 s (perf 6.1, 999 Hz, dwarf)",
)

# The comm of pw's launcher (adapters/launch.py, run by this interpreter): the program's parent in
# every run. Under a launched capture perf samples the sandbox and the launcher too; normalize keeps
# only the processes the launcher started (and theirs).
LAUNCHER_COMM = os.path.basename(sys.executable)[:15]

# event -> (metric the period converts to, divisor); cpu-clock/task-clock periods are nanoseconds.
_PERIOD_METRICS = {"cpu-clock": ("cpu_time_s", 1e9), "task-clock": ("cpu_time_s", 1e9),
                   "cycles": ("cycles", 1.0), "cpu-cycles": ("cycles", 1.0)}


class PerfAdapter(Adapter):
    spec = SPEC

    def __init__(self, tool_path: str | None = None, *, frequency: int = 999,
                 event: str = "cpu-clock", call_graph: str = "dwarf") -> None:
        super().__init__(tool_path)
        self.frequency = frequency
        self.event = event
        self.call_graph = call_graph
        self._symbolizer = Symbolizer()  # one per adapter object: a campaign resolves each address once
        self._tool_version: str | None = None

    # --- probe -------------------------------------------------------------------------------------
    def probe(self) -> Usability:
        exe = self.resolve_tool()
        if exe is None:
            return self.unusable_missing_tool()
        true = true_argv()
        try:
            ver = run_tool([exe, "--version"], timeout_s=10)
            version = ver.stdout.decode(errors="replace").strip().removeprefix("perf version ").strip()
            with tempfile.TemporaryDirectory(prefix="pw-perf-probe-") as tmp:
                rec = run_tool([exe, "record", "-q", "--no-bpf-event", "--no-buildid-cache",
                                "-e", "cpu-clock", "-F", "99", "-o", os.path.join(tmp, "p.data"),
                                "--", *true], timeout_s=20)
                if rec.returncode != 0:
                    return Usability(usable=False, version=version,
                                     reason=_record_failure_reason(rec.stderr, rec.returncode))
                hw = run_tool([exe, "stat", "-x,", "-e", "instructions", "--", *true], timeout_s=20)
        except CaptureError as exc:
            return Usability(usable=False, reason=f"perf probe failed: {exc}")
        hw_text = hw.stderr.decode(errors="replace")
        if hw.returncode != 0 or "<not supported>" in hw_text or "<not counted>" in hw_text:
            return Usability(usable=True, reason="cpu-clock sampling works", version=version,
                             mode="software-events-only",
                             notes=[("hardware events not supported (perf stat -e instructions: "
                                     "not supported); record -e cycles would silently fall back to "
                                     "cpu-clock, so only software events are used")])
        return Usability(usable=True, reason="cpu-clock sampling and hardware counters work",
                         version=version, mode="hardware-events")

    # --- capture -------------------------------------------------------------------------------------
    def capture(self, req: CaptureRequest) -> Capture:
        exe = self.require_tool()
        os.makedirs(req.out_dir, exist_ok=True)
        version = run_tool([exe, "--version"], timeout_s=10).stdout.decode().strip()
        version = version.removeprefix("perf version ").strip()
        data = os.path.join(req.out_dir, DATA_ROLE)
        script_out = os.path.join(req.out_dir, SCRIPT_ROLE)
        stdout = os.path.join(req.out_dir, "stdout.txt")
        prefix = [exe, "record", "-q", "--no-bpf-event", "--no-buildid-cache", "-e", self.event,
                  "-F", str(self.frequency), "--call-graph", self.call_graph, "-o", data, "--"]
        options = {"event": self.event, "frequency": self.frequency, "call_graph": self.call_graph,
                   "fields": SCRIPT_FIELDS}
        if req.launch:
            # perf outside, around the sandbox and pw's launcher: the program's parent is the
            # launcher, as in a timed run, and perf has no /proc entry in its PID namespace. The
            # launcher's and the sandbox's own samples are left out by normalize (task events).
            record = [*prefix, "<sandbox>", "<launcher>", *req.argv]
            rec = run_tool(req.argv, cwd=req.cwd, env=req.launch_env, timeout_s=req.timeout_s,
                           stdout_path=stdout, launcher=True, confine=req.confine, outer=prefix)
            options["program_under"] = LAUNCHER_COMM
        else:
            record = [*prefix, *req.argv]
            rec = run_tool(record, cwd=req.cwd, env=req.env, timeout_s=req.timeout_s, stdout_path=stdout,
                           wrap=req.wrap)
        stderr = os.path.join(req.out_dir, "stderr.txt")
        with open(stderr, "wb") as f:
            f.write(rec.stderr)
        if rec.returncode != 0:
            raise CaptureError(_record_failure_reason(rec.stderr, rec.returncode, req.argv))
        script = [exe, "script", "-i", data, "-F", SCRIPT_FIELDS, "--inline", "--full-source-path"]
        extra_wall = 0.0
        if req.launch:
            # The program's processes first, from the task events alone (no symbols: fast); then
            # symbols and source lines for their samples only. Resolving the sandbox's and the
            # launcher's samples too made perf 6.1's addr2line fail now and then on an `//anon` map.
            tasks = run_tool([exe, "script", "-i", data, "-F", "comm,pid,tid", "--show-task-events"], cwd=req.cwd,
                             timeout_s=max(60.0, req.timeout_s))
            if tasks.returncode != 0:
                raise CaptureError(f"perf script exited {tasks.returncode}: {last_line(tasks.stderr)}")
            pids = program_pids(tasks.stdout.decode(errors="replace"), LAUNCHER_COMM)
            if not pids:
                raise CaptureError("perf's task events do not show pw's launcher starting the program")
            script += ["--show-task-events", "--pid", ",".join(str(p) for p in sorted(pids))]
            extra_wall = tasks.wall_s
        scr = run_tool(script, cwd=req.cwd, timeout_s=max(60.0, req.timeout_s), stdout_path=script_out)
        if scr.returncode != 0:
            raise CaptureError(f"perf script exited {scr.returncode}: {last_line(scr.stderr)}")
        meta = self.write_meta(req.out_dir, tool_version=version, cwd=req.cwd, argv=list(req.argv),
                               options=options)
        return Capture(adapter=self.spec.name, label=req.label, wall_s=rec.wall_s + scr.wall_s + extra_wall,
                       tool_version=version, commands=[record, script], launched=req.launch, program=rec.program,
                       artifacts={DATA_ROLE: data, SCRIPT_ROLE: script_out, "capture.json": meta,
                                  "stdout.txt": stdout, "stderr.txt": stderr})

    # --- timed runs (one kind of run) -----------------------------------------------------------------
    def timed_options(self) -> dict[str, str | int | float | bool]:
        return {"event": self.event, "frequency": TIMED_FREQUENCY, "call_graph": "none", "mode": "timed",
                "fields": TIMED_FIELDS, "program_under": LAUNCHER_COMM}

    def timed_wrap(self, out_dir: str) -> RunWrap | None:
        exe = self.resolve_tool()
        if exe is None:
            return None
        # No call graph: instruction pointers only, with their inline chains from the line tables.
        # DWARF unwinding made a 1.0 s program take 1.5 s; sampling the ip alone at this frequency
        # costs what benchmarks/profiler_overhead.py measures (target <= 3%).
        return RunWrap(outer=[exe, "record", "-q", "--no-bpf-event", "--no-buildid-cache", "-e", self.event,
                              "-F", str(TIMED_FREQUENCY), "-o", os.path.join(out_dir, DATA_ROLE), "--"],
                       outer_when_confined=list(kernel_map.perf_prefix()))

    def use_debug_twins(self, twins: dict[str, str]) -> None:
        self._symbolizer.use_twins(twins)

    def timed_collect(self, out_dir: str, *, cwd: str, timeout_s: float) -> dict[str, bytes]:
        exe = self.require_tool()
        data = os.path.join(out_dir, DATA_ROLE)
        script_out = os.path.join(out_dir, SCRIPT_ROLE)
        # --kallsyms=/dev/null: the OS kernel's samples are the machine's, read by module alone
        # (pw.rules.attribution), and loading kallsyms was most of perf script's 0.2 s.
        scr = run_tool([exe, "script", "-i", data, "--kallsyms=/dev/null", "-F", TIMED_FIELDS, "--show-task-events"],
                       cwd=cwd, timeout_s=max(60.0, timeout_s), stdout_path=script_out)
        if scr.returncode != 0:
            raise CaptureError(f"perf script exited {scr.returncode}: {last_line(scr.stderr)}")
        text = open(script_out, "rb").read()
        decoded = text.decode(errors="replace")
        pids = program_pids(decoded, LAUNCHER_COMM)
        if not pids:
            raise CaptureError("perf's task events do not show pw's launcher starting the program")
        wanted: dict[str, set[int]] = defaultdict(set)
        where: dict[tuple[str, str], int] = {}  # (dso, "sym+0xoff") -> address in the dso
        for sample in parse_perf_script(decoded, offsets=True):
            if sample.pid in pids:
                for fr in sample.frames:
                    if fr.dso and fr.offset is not None and not fr.dso.startswith("["):
                        key = (fr.dso, _symoff(fr))
                        if key not in where and (addr := file_address(fr.dso, fr.sym, fr.offset)) is not None:
                            where[key] = addr
                            wanted[fr.dso].add(addr)
        table = self._symbolizer.resolve(dict(wanted))
        chains: dict[str, dict[str, list]] = defaultdict(dict)
        for (dso, name), addr in sorted(where.items()):
            chains[dso][name] = table[dso][addr]
        lines = json.dumps(chains, sort_keys=True).encode()
        version = self._version(exe)
        meta = json.dumps({"adapter": self.spec.name, "tool_version": version, "cwd": cwd, "argv": [],
                           "options": self.timed_options()}, sort_keys=True).encode()
        for leftover in (data, script_out):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        return {SCRIPT_ROLE: text, LINES_ROLE: lines, "capture.json": meta}

    def _version(self, exe: str) -> str:
        if self._tool_version is None:
            out = run_tool([exe, "--version"], timeout_s=10).stdout.decode().strip()
            self._tool_version = out.removeprefix("perf version ").strip()
        return self._tool_version

    # --- normalize (pure) ------------------------------------------------------------------------------
    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        meta = decode_meta(artifacts)
        text = require_artifact(artifacts, SCRIPT_ROLE, self.spec.name).decode(errors="replace")
        if meta.options.get("mode") == "timed":
            return _normalize_timed(text, artifacts.get(LINES_ROLE, b"{}"), meta, source_root, target)
        samples = parse_perf_script(text)
        under = meta.options.get("program_under")
        if isinstance(under, str) and under:
            pids = program_pids(text, under)
            # No launcher in the task events: nothing in this profile is known to be the program's.
            samples = [s for s in samples if s.pid in pids]
        # No cwd: with --full-source-path perf prints absolute paths for every file whose compile
        # directory the debug info records. A relative one ("./csu/../csu/libc-start.c") is a system
        # library's source, built elsewhere; joined onto the run's directory it would pass for the
        # user's file (issue 13: "kernels/2mm/stdio-common/printf_fp.c").
        event = meta.options.get("event")
        return build_profile(samples, source_root=source_root, cwd=None, target=target,
                             tool_version=meta.tool_version, event=event if isinstance(event, str) else None)



def _record_failure_reason(stderr: bytes, rc: int, argv: list[str] | None = None) -> str:
    text = stderr.decode(errors="replace")
    if "perf_event_paranoid" in text or "Permission denied" in text or "Access to performance" in text:
        return ("permission: perf_event_open refused (check /proc/sys/kernel/perf_event_paranoid "
                f"or run as root): {last_line(stderr)}")
    what = f" on {' '.join(argv)}" if argv else ""
    return f"perf record exited {rc}{what}: {last_line(stderr, 'no error output')}"


# --- parsing -----------------------------------------------------------------------------------------

_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<period>\d+)\s+"
                     r"(?P<event>\S+?):\s*$")
_FRAME = re.compile(r"^\t\s*(?P<ip>[0-9a-fA-F]+)\s+(?P<sym>.+?)(?:\s+\((?P<dso>[^()]*)\))?\s*$")
_SRCLINE = re.compile(r"^ +(?P<file>\S.*?):(?P<line>\d+)(?P<rest>\s.*)?$")


class Frame:
    __slots__ = ("dso", "file", "inlined", "ip", "line", "offset", "sym")

    def __init__(self, ip: str, sym: str, dso: str | None, offset: int | None = None) -> None:
        self.ip = ip
        self.sym = sym
        self.dso = dso
        self.file: str | None = None
        self.line: int | None = None
        self.inlined = dso is None
        self.offset = offset  # symoff (timed runs' script): the sample's offset into ``sym``


class Sample:
    __slots__ = ("event", "frames", "period", "pid")

    def __init__(self, event: str, period: int, pid: int = -1) -> None:
        self.event = event
        self.period = period
        self.pid = pid
        self.frames: list[Frame] = []  # leaf first


# A sample without a callchain, on one line: "comm pid/tid period event: ip sym+0xoff (dso)".
_ONE_LINE = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<period>\d+)\s+"
                       r"(?P<event>\S+?):\s+(?P<ip>[0-9a-fA-F]+)\s+(?P<sym>.+?)(?:\s+\((?P<dso>[^()]*)\))?\s*$")
_TASK = re.compile(r"^\s*(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+PERF_RECORD_(?P<rest>.*?)\s*$")
_FORK = re.compile(r"^FORK\((?P<pid>\d+):\d+\):\((?P<ppid>\d+):\d+\)")
_EXEC = re.compile(r"^COMM exec: (?P<name>.*):(?P<pid>\d+)/\d+$")


def program_pids(text: str, launcher_comm: str) -> set[int]:
    """The pids of the program pw's launcher started and of everything it started in turn, from the
    task events of ``perf script --show-task-events`` (pure). The launcher is the first process
    that execs with ``launcher_comm``; the sandbox above it and the launcher itself are not the
    program. Empty when no launcher is found."""
    parent: dict[int, int] = {}
    launcher: int | None = None
    for raw in text.splitlines():
        if "PERF_RECORD_" not in raw:
            continue
        m = _TASK.match(raw)
        if not m:
            continue
        rest = m["rest"]
        if (f := _FORK.match(rest)) and f["pid"] != f["ppid"]:
            parent.setdefault(int(f["pid"]), int(f["ppid"]))
        elif launcher is None and (e := _EXEC.match(rest)) and e["name"] == launcher_comm:
            launcher = int(e["pid"])
    if launcher is None:
        return set()
    out: set[int] = set()
    for pid in parent.keys() - {launcher}:
        seen, p = set(), pid
        while p in parent and p not in seen and p != launcher:
            seen.add(p)
            p = parent[p]
        if p == launcher:
            out.add(pid)
    return out


_SYMOFF = re.compile(r"^(?P<sym>.*)\+0x(?P<off>[0-9a-fA-F]+)$")


def _split_symoff(sym: str) -> tuple[str, int | None]:
    m = _SYMOFF.match(sym)
    return (m["sym"], int(m["off"], 16)) if m else (sym, None)


def parse_perf_script(text: str, *, offsets: bool = False) -> list[Sample]:
    """Parse ``perf script -F comm,pid,tid,period,event,ip,sym,dso,srcline`` output (with callchains);
    with ``offsets``, the timed runs' ``sym+0xOFF`` form (``TIMED_FIELDS``)."""
    samples: list[Sample] = []
    cur: Sample | None = None
    for raw in text.splitlines():
        if not raw.strip():
            cur = None
            continue
        if "PERF_RECORD_" in raw and _TASK.match(raw):
            cur = None  # a task event (--show-task-events): read by program_pids
            continue
        if offsets:  # no callchain: each sample is one line, "comm pid/tid period event: ip sym+0xoff (dso)"
            m = _ONE_LINE.match(raw.lstrip())
            if m:
                sym, off = _split_symoff(m["sym"])
                one = Sample(m["event"], int(m["period"]), int(m["pid"]))
                one.frames.append(Frame(m["ip"], sym, m["dso"], off))
                samples.append(one)
            cur = None
            continue
        if raw[0] == "\t":
            m = _FRAME.match(raw)
            if cur is not None and m:
                sym, off = _split_symoff(m["sym"]) if offsets else (m["sym"], None)
                cur.frames.append(Frame(m["ip"], sym, m["dso"], off))
            continue
        if raw[0] == " ":
            m = _SRCLINE.match(raw)
            if cur is not None and cur.frames and m and not m["file"].startswith("??"):
                fr = cur.frames[-1]
                fr.file, fr.line = m["file"], int(m["line"])
            continue
        m = _HEADER.match(raw)
        if m:
            cur = Sample(m["event"], int(m["period"]), int(m["pid"]))
            samples.append(cur)
    for s in samples:
        _assign_inline_dsos(s.frames)
    return samples


def _assign_inline_dsos(frames: list[Frame]) -> None:
    """Inlined frames are printed without a dso. perf lists an inline chain innermost first, ending
    with the real frame at the same ip, whose dso they share. When perf names the real function only
    by its DWARF name (also printed as "inlined"), no frame shares the ip: the module stays unknown.
    """
    for i, fr in enumerate(frames):
        if fr.dso is not None:
            continue
        partner = next((f for f in frames[i + 1:] if f.ip == fr.ip and not f.inlined), None) or \
            next((f for f in reversed(frames[:i]) if f.ip == fr.ip and not f.inlined), None)
        fr.dso = partner.dso if partner else None


def module_name(dso: str | None) -> str:
    """'libc.so.6' for '/usr/lib/.../libc.so.6', 'kernel.kallsyms' for '[kernel.kallsyms]'."""
    if not dso:
        return "unknown"
    return posixpath.basename(dso).strip("[]") or dso.strip("[]") or "unknown"


def build_profile(samples: list[Sample], *, source_root: str, cwd: str | None, target: str,
                  tool_version: str, event: str | None = None) -> Profile:
    """Aggregate parsed samples into a Profile (see module docstring for the attribution rules).

    `event` is the event perf recorded: its metric is measured even when no sample fell in the
    program (a run shorter than the sampling period measured 0 s of CPU time, not "no time metric").
    """
    ids = _OperationIds(_files_of(samples, source_root, cwd), source_root, cwd)
    sums = _Sums(event)
    for s in samples:  # sums stay integers (periods in ns); converted to units once, at the end
        sums.add(s, ids)
    return sums.profile(ids.info, target=target, tool_version=tool_version)


def _files_of(samples: list[Sample], source_root: str, cwd: str | None) -> dict[tuple[str, str], Counter[str]]:
    """Pass 1: which in-root files each (sym, module) was seen in. Frames without line info join
    the only file seen for that function, so one function never splits into two ids."""
    files_of: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for s in samples:
        for fr in s.frames:
            rel = relative_to_root(fr.file, source_root, cwd) if fr.file else None
            if rel:
                files_of[(fr.sym, module_name(fr.dso))][rel] += 1
    return files_of


_UNKNOWN = "[unknown]@[unknown]"


class _OperationIds:
    """A frame's operation id, ``sym@file`` inside the root or ``sym@[module]`` outside it, and
    what each id stands for (``info``: id -> (name, module, file))."""

    def __init__(self, files_of: dict[tuple[str, str], Counter[str]], source_root: str, cwd: str | None) -> None:
        self.files_of, self.source_root, self.cwd = files_of, source_root, cwd
        self.info: dict[str, tuple[str, str, str | None]] = {}

    def rel(self, file: str | None) -> str | None:
        return relative_to_root(file, self.source_root, self.cwd)

    def __call__(self, fr: Frame) -> str:
        mod = module_name(fr.dso)
        rel = self.rel(fr.file) if fr.file else None
        seen = self.files_of.get((fr.sym, mod))
        if rel is None and seen and len(seen) == 1:
            rel = next(iter(seen))
        oid = f"{fr.sym}@{rel}" if rel else f"{fr.sym}@[{mod}]"
        self.info.setdefault(oid, (fr.sym, mod, rel))
        return oid


class _Sums:
    """Integer sums per metric (samples, and the period's metric) of each operation's self and
    inclusive cost, each call edge and each leaf line, in the order the metrics were first seen."""

    def __init__(self, event: str | None) -> None:
        self.metrics_used: list[str] = []
        self.scale: dict[str, float] = {"samples": 1.0}
        recorded_metric, recorded_div = _PERIOD_METRICS.get((event or "").split(":", 1)[0], (None, 1.0))
        if recorded_metric:
            self.metrics_used += [recorded_metric, "samples"]
            self.scale[recorded_metric] = recorded_div
        self.self_m: dict = defaultdict(lambda: defaultdict(int))
        self.incl_m: dict = defaultdict(lambda: defaultdict(int))
        self.edge_m: dict = defaultdict(lambda: defaultdict(int))
        self.line_m: dict = defaultdict(lambda: defaultdict(int))
        self.lines_seen: dict[str, set[int]] = defaultdict(set)
        self.totals: dict[str, int] = defaultdict(int)

    def add(self, s: Sample, ids: _OperationIds) -> None:
        # An event's modifiers do not change its unit: perf without capabilities (paranoid 2, as in
        # pw's sandbox) counts user space only and names the event `cpu-clock:u`.
        metric, div = _PERIOD_METRICS.get(s.event.split(":", 1)[0], (None, 1.0))
        w = {"samples": 1}
        if metric:
            w[metric] = s.period
            self.scale[metric] = div
        for m, v in w.items():
            if m not in self.metrics_used:
                self.metrics_used.append(m)
            self.totals[m] += v
        if not s.frames:
            ids.info.setdefault(_UNKNOWN, ("[unknown]", "unknown", None))
        keys = [ids(fr) for fr in s.frames] or [_UNKNOWN]
        for k, fr in zip(keys, s.frames):
            if fr.line is not None and ids.info[k][2] is not None and ids.rel(fr.file) == ids.info[k][2]:
                self.lines_seen[k].add(fr.line)
        for m, v in w.items():
            self.self_m[keys[0]][m] += v
        for k in set(keys):
            for m, v in w.items():
                self.incl_m[k][m] += v
        for e in {(keys[i + 1], keys[i]) for i in range(len(keys) - 1)}:
            for m, v in w.items():
                self.edge_m[e][m] += v
        leaf = s.frames[0] if s.frames else None
        if leaf is not None and leaf.line is not None:
            rel = ids.rel(leaf.file)
            if rel:
                for m, v in w.items():
                    self.line_m[(rel, leaf.line, keys[0])][m] += v

    def unit(self, d: dict) -> dict[str, float]:
        return {m: d.get(m, 0) / self.scale[m] for m in self.metrics_used}

    def profile(self, info: dict[str, tuple[str, str, str | None]], *, target: str, tool_version: str) -> Profile:
        unit = self.unit
        ops = []
        for k, inc in self.incl_m.items():
            name, mod, rel = info[k]
            seen = self.lines_seen.get(k)
            ops.append(Operation(id=k, name=name, kind="function", module=mod, file=rel,
                                 line_start=min(seen) if seen else None,
                                 line_end=max(seen) if seen else None,
                                 self_metrics=unit(self.self_m[k]), inclusive_metrics=unit(inc)))
        lines = [LineCost(file=f, line=ln, operation=k, self_metrics=unit(v)) for (f, ln, k), v in self.line_m.items()]
        edges = [CallEdge(caller=a, callee=b, metrics=unit(v)) for (a, b), v in self.edge_m.items()]
        # Primary metric first: the time metric when there is one (the totals' keys follow it;
        # the operations', lines' and edges' keep the order the metrics were first seen in).
        self.metrics_used.sort(key=lambda m: (m == "samples", m))
        gran = ["process", "function"] + (["line"] if lines else [])
        return Profile(tool="perf", tool_version=tool_version, target=target, granularity=gran,
                       metrics=self.metrics_used or ["samples"], totals=unit(self.totals), operations=ops,
                       lines=lines, edges=edges)


def _normalize_timed(text: str, lines_json: bytes, meta, source_root: str, target: str) -> Profile:
    """A timed run's profile (pure): the program's samples, each one frame with its offset, expanded
    into its inline chain from the run's resolved lines (``adapters.symbolize``), innermost first as
    perf's ``--inline`` prints it, then aggregated as every perf profile is."""
    table = json.loads(lines_json.decode() or "{}")
    samples = parse_perf_script(text, offsets=True)
    pids = program_pids(text, str(meta.options.get("program_under") or LAUNCHER_COMM))
    kept = []
    for s in samples:
        if s.pid not in pids:
            continue
        if s.frames:
            fr = s.frames[0]
            chain = table.get(fr.dso or "", {}).get(_symoff(fr), []) if fr.offset is not None else []
            if chain:
                frames = []
                for k, (function, file, line) in enumerate(chain):
                    outer = k == len(chain) - 1
                    f = Frame(fr.ip, fr.sym if outer else (function or fr.sym), fr.dso if outer else None)
                    f.file, f.line = file, line
                    frames.append(f)
                s.frames = frames
                _assign_inline_dsos(s.frames)
        kept.append(s)
    event = meta.options.get("event")
    return build_profile(kept, source_root=source_root, cwd=None, target=target, tool_version=meta.tool_version,
                         event=event if isinstance(event, str) else None)


def _symoff(fr: Frame) -> str:
    return f"{fr.sym}+{fr.offset:#x}"
