"""callgrind (valgrind) adapter: exact instruction counts per function, per source line, per call edge.

Capture: ``valgrind --tool=callgrind --dump-instr=no --compress-strings=no --compress-pos=no
--callgrind-out-file=callgrind.out [--cache-sim=yes] -- argv``. The parser below also reads the
compressed forms ("(id) name" strings, "+n"/"-n"/"*" positions), so files written with valgrind's
defaults work too.

What the numbers mean (callgrind format, version 1):
- A cost line "<line> <Ir> [<D1mr> ...]" is *self* cost of the current function at that line; the
  source file of the line is the current ``fi=``/``fe=`` file (inlined code) or else ``fl=``.
- After ``calls=<count> <target>`` the next cost line is the *inclusive* cost of those calls, charged
  at the call site; it is not self cost of the caller.
- ``Ir`` is instructions executed, counted exactly under valgrind's virtual CPU: deterministic for a
  deterministic program, independent of machine load, but not time. Cache events (``--cache-sim``)
  are from valgrind's cache *simulation*, not hardware counters (metrics are flagged simulated).

Inclusive of a function = its self + the inclusive cost of its calls to *other* functions (a call to
itself is already inside its self + other calls). Mutual recursion can still over-count; inclusive is
capped at the program total. Inlined code is charged to the function it was inlined into (callgrind
sees machine code, not inlining); its lines keep their own file. Runs ~27x slower than native here.
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from adapters.base import (
    Adapter,
    AdapterSpec,
    Capture,
    CaptureError,
    CaptureRequest,
    Usability,
    decode_meta,
    last_line,
    relative_to_root,
    require_artifact,
    run_tool,
    true_argv,
)
from ledger.profile import CallEdge, LineCost, Operation, Profile

OUT_ROLE = "callgrind.out"
LOG_ROLE = "valgrind.log"

SPEC = AdapterSpec(
    name="callgrind",
    tool="valgrind",
    measures=["instructions", "calls"],
    granularity=["process", "function", "line"],
    phases=["discovery", "diagnosis"],
    targets=["native"],
    can_reprofile=True,
    partial=False,
    overhead_factor=27.0,
    setup_s=1.0,
    cost_note="measured: 1.0 s -O2 -g C program -> 27.1 s under callgrind (valgrind 3.19)",
)

CACHESIM_SPEC = AdapterSpec(
    name="callgrind-cachesim",
    tool="valgrind",
    measures=["instructions", "calls", "d1_read_misses", "d1_write_misses", "i1_misses", "ll_misses"],
    granularity=["process", "function", "line"],
    phases=["diagnosis"],
    targets=["native"],
    can_reprofile=True,
    partial=False,
    overhead_factor=110.0,
    setup_s=1.0,
    cost_note="measured: 1.0 s -O2 -g C program -> ~110 s with --cache-sim=yes; misses are SIMULATED",
)

# callgrind event name -> our metric id (ll_misses sums three events).
_EVENT_METRIC = {"Ir": "instructions", "D1mr": "d1_read_misses", "D1mw": "d1_write_misses",
                 "I1mr": "i1_misses", "ILmr": "ll_misses", "DLmr": "ll_misses", "DLmw": "ll_misses"}


class CallgrindAdapter(Adapter):
    def __init__(self, tool_path: str | None = None, *, cache_sim: bool = False) -> None:
        super().__init__(tool_path)
        self.cache_sim = cache_sim
        self.spec = CACHESIM_SPEC if cache_sim else SPEC

    def _options(self, out_file: str, log_file: str) -> list[str]:
        opts = ["--tool=callgrind", "--dump-instr=no", "--compress-strings=no", "--compress-pos=no",
                f"--callgrind-out-file={out_file}", f"--log-file={log_file}"]
        return opts + (["--cache-sim=yes"] if self.cache_sim else [])

    def probe(self) -> Usability:
        exe = self.resolve_tool()
        if exe is None:
            return self.unusable_missing_tool()
        try:
            version = _version(exe)
            with tempfile.TemporaryDirectory(prefix="pw-callgrind-probe-") as tmp:
                out, log = os.path.join(tmp, "cg.out"), os.path.join(tmp, "vg.log")
                r = run_tool([exe, *self._options(out, log), "--", *true_argv()], timeout_s=60)
                ok = r.returncode == 0 and os.path.exists(out) and b"events:" in Path(out).read_bytes()
                log_text = Path(log).read_bytes() if os.path.exists(log) else r.stderr
        except (CaptureError, OSError) as exc:
            return Usability(usable=False, reason=f"callgrind probe failed: {exc}")
        if not ok:
            return Usability(usable=False, version=version,
                             reason=f"callgrind on 'true' failed (exit {r.returncode}): {last_line(log_text)}")
        mode = "cache-simulation" if self.cache_sim else "instruction-counts"
        notes = ["cache misses are simulated by valgrind, not hardware counters"] if self.cache_sim else []
        return Usability(usable=True, reason="callgrind ran 'true'", version=version, mode=mode,
                         notes=notes)

    def capture(self, req: CaptureRequest) -> Capture:
        exe = self.require_tool()
        os.makedirs(req.out_dir, exist_ok=True)
        version = _version(exe)
        out = os.path.join(req.out_dir, OUT_ROLE)
        log = os.path.join(req.out_dir, LOG_ROLE)
        stdout = os.path.join(req.out_dir, "stdout.txt")
        stderr = os.path.join(req.out_dir, "stderr.txt")
        cmd = [exe, *self._options(out, log), "--", *req.argv]
        r = run_tool(cmd, cwd=req.cwd, env=req.env, timeout_s=req.timeout_s, stdout_path=stdout, wrap=req.wrap)
        with open(stderr, "wb") as f:
            f.write(r.stderr)
        if r.returncode != 0 or not os.path.exists(out):
            log_text = Path(log).read_bytes() if os.path.exists(log) else b""
            why = last_line(log_text) or last_line(r.stderr, "no error output")
            raise CaptureError(f"valgrind --tool=callgrind exited {r.returncode} on {' '.join(req.argv)}: {why}")
        meta = self.write_meta(req.out_dir, tool_version=version, cwd=req.cwd, argv=list(req.argv),
                               options={"cache_sim": self.cache_sim})
        return Capture(adapter=self.spec.name, label=req.label, wall_s=r.wall_s, tool_version=version,
                       commands=[cmd], artifacts={OUT_ROLE: out, LOG_ROLE: log, "capture.json": meta,
                                                  "stdout.txt": stdout, "stderr.txt": stderr})

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        meta = decode_meta(artifacts)
        text = require_artifact(artifacts, OUT_ROLE, self.spec.name).decode(errors="replace")
        parsed = parse_callgrind(text)
        return build_profile(parsed, source_root=source_root, target=target,
                             tool_version=parsed.version or meta.tool_version)


def _version(exe: str) -> str:
    return run_tool([exe, "--version"], timeout_s=10).stdout.decode().strip().removeprefix("valgrind-")



# --- parsing ------------------------------------------------------------------------------------------

FnKey = tuple[str, str, str]  # (object, file, function name) as callgrind names them


class Parsed:
    """Raw aggregates from a callgrind file, keyed by callgrind's own (ob, fl, fn) names."""

    def __init__(self) -> None:
        self.version = ""
        self.events: list[str] = []
        self.summary: list[int] | None = None
        self.self_cost: dict[FnKey, list[int]] = {}
        self.line_cost: dict[tuple[FnKey, str, int], list[int]] = {}
        self.calls: dict[tuple[FnKey, FnKey], list[int]] = {}  # inclusive cost of calls
        self.call_counts: dict[tuple[FnKey, FnKey], int] = defaultdict(int)


_SPEC_LINE = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn|calls|jump|jcnd)=(.*)$")
_HEADER = re.compile(r"^([A-Za-z][\w ]*):\s*(.*)$")
_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s(.*))?$")


def _add(acc: dict, key, costs: list[int], n: int) -> None:
    cur = acc.get(key)
    if cur is None:
        acc[key] = costs[:n] + [0] * (n - len(costs[:n]))
    else:
        for i, c in enumerate(costs[:n]):
            cur[i] += c


def parse_callgrind(text: str) -> Parsed:
    """Parse a callgrind profile (format version 1, compressed or not; all parts summed)."""
    r = _Reader()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        c = line[0]
        if c.isdigit() or c in "+-*" or line.startswith("0x"):
            r.cost_line(line)
            continue
        m = _SPEC_LINE.match(line)
        if m:
            r.spec_line(m.group(1), m.group(2))
            continue
        m = _HEADER.match(line)
        if m:
            r.header_line(m.group(1), m.group(2))
    return r.parsed()


# Which table of compressed names each position key's "(id) name" strings share.
_NAME_SPACE = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
               "fn": "fn", "cfn": "fn"}


class _Reader:
    """Where a pass through a callgrind file stands: the current object, file, inlined file and
    function; the callee named since the last ``calls=``; the last positions (later ones may be
    relative to them); and the names that compressed strings stand for."""

    def __init__(self) -> None:
        self.p = Parsed()
        self.names: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
        self.npos = 1
        self.last_pos: list[int] = [0]
        self.ob = self.fl = self.fi = ""
        self.fn: FnKey | None = None
        self.cob: str | None = None
        self.cfi: str | None = None
        self.cfn: str | None = None
        self.pending_call: tuple[FnKey, int] | None = None
        self.skip_next = False
        # "totals:" equals the sum of the cost lines written; "summary:" can differ (a real 3.19 capture
        # with --cache-sim had summary = totals + 2 Ir), so totals wins when present.
        self.sums: dict[str, dict[int, int]] = {"summary": {}, "totals": {}}

    def resolve(self, key: str, value: str) -> str:
        m = _COMPRESSED.match(value)
        if not m:
            return value
        table = self.names[_NAME_SPACE[key]]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), f"({m.group(1)})")

    def cost_line(self, line: str) -> None:
        """Self cost of the current function at a line, or the inclusive cost of the call before it."""
        fields = line.split()
        pos, costs = fields[:self.npos], fields[self.npos:]
        for i, tok in enumerate(pos):  # positions may be relative to the previous line
            if tok == "*":
                val = self.last_pos[i]
            elif tok[0] in "+-":
                val = self.last_pos[i] + int(tok, 0)
            else:
                val = int(tok, 0)
            self.last_pos[i] = val
        if self.skip_next:
            self.skip_next = False
            return
        vals = [int(x) for x in costs]
        fn, p = self.fn, self.p
        if fn is None:
            return
        if self.pending_call is not None:
            callee, count = self.pending_call
            self.pending_call = None
            _add(p.calls, (fn, callee), vals, len(p.events))
            p.call_counts[(fn, callee)] += count
            return
        _add(p.self_cost, fn, vals, len(p.events))
        _add(p.line_cost, (fn, self.fi, self.last_pos[-1]), vals, len(p.events))

    def spec_line(self, key: str, value: str) -> None:
        """A position line (``fn=``, ``cfl=``, ...) or a call or jump announcing the next cost line."""
        if key in ("calls", "jump", "jcnd"):
            if key == "calls" and self.fn is not None:
                callee = (self.cob or self.ob, self.cfi if self.cfi is not None else self.fl, self.cfn or "")
                self.pending_call = (callee, int(value.split()[0]))
            else:
                self.skip_next = key != "calls"
            self.cob = self.cfi = self.cfn = None
            return
        name = self.resolve(key, value)
        if key == "ob":
            self.ob = name
        elif key == "fl":
            self.fl = self.fi = name
        elif key in ("fi", "fe"):
            self.fi = name
        elif key == "fn":
            self.fn = (self.ob, self.fl, name)
            self.fi = self.fl
        elif key == "cob":
            self.cob = name
        elif key in ("cfi", "cfl"):
            self.cfi = name
        elif key == "cfn":
            self.cfn = name

    def header_line(self, key: str, value: str) -> None:
        if key == "events":
            self.p.events = value.split()
        elif key == "positions":
            self.npos = len(value.split())
            self.last_pos = [0] * self.npos
        elif key in ("summary", "totals"):
            acc = self.sums[key]
            for i, v in enumerate(int(x) for x in value.split()):
                acc[i] = acc.get(i, 0) + v
        elif key == "creator":
            self.p.version = value.strip().removeprefix("callgrind-")
        elif key == "part":
            self.ob = self.fl = self.fi = ""
            self.fn = None

    def parsed(self) -> Parsed:
        chosen = self.sums["totals"] or self.sums["summary"]
        self.p.summary = [chosen[i] for i in sorted(chosen)] if chosen else None
        return self.p


def _metric_values(events: list[str], costs: list[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for ev, c in zip(events, costs):
        m = _EVENT_METRIC.get(ev)
        if m:
            out[m] = out.get(m, 0.0) + float(c)
    return out


def build_profile(p: Parsed, *, source_root: str, target: str, tool_version: str) -> Profile:
    """Aggregate parsed callgrind costs into a Profile keyed by stable operation ids."""
    info: dict[str, tuple[str, str, str | None]] = {}

    def op_id(k: FnKey) -> str:
        ob, fl, name = k
        rel = relative_to_root(fl, source_root)
        mod = posixpath.basename(ob) if ob and ob != "???" else "unknown"
        oid = f"{name}@{rel}" if rel else f"{name}@[{mod}]"
        info.setdefault(oid, (name, mod, rel))
        return oid

    metrics = [m for m in dict.fromkeys(_EVENT_METRIC[e] for e in p.events if e in _EVENT_METRIC)]
    zero = dict.fromkeys(metrics, 0.0)
    self_m: dict[str, dict[str, float]] = defaultdict(lambda: dict(zero))
    for k, costs in p.self_cost.items():
        acc = self_m[op_id(k)]
        for m, v in _metric_values(p.events, costs).items():
            acc[m] += v
    incl_m: dict[str, dict[str, float]] = {oid: dict(v) for oid, v in self_m.items()}
    edge_m: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: {**zero, "calls": 0.0})
    for (caller, callee), costs in p.calls.items():
        a, b = op_id(caller), op_id(callee)
        vals = _metric_values(p.events, costs)
        e = edge_m[(a, b)]
        for m, v in vals.items():
            e[m] += v
        e["calls"] += p.call_counts[(caller, callee)]
        if a != b:  # recursion: the inner call's cost is already in self + other calls
            acc = incl_m.setdefault(a, dict(zero))
            for m, v in vals.items():
                acc[m] += v
        self_m.setdefault(b, dict(zero))
        incl_m.setdefault(b, dict(zero))
    totals = (_metric_values(p.events, p.summary) if p.summary
              else {m: sum(v[m] for v in self_m.values()) for m in metrics})
    for acc in incl_m.values():  # cap mutual-recursion over-count at the program total
        for m, v in acc.items():
            acc[m] = min(v, totals.get(m, v))

    lines_seen: dict[str, set[int]] = defaultdict(set)
    line_m: dict[tuple[str, int, str], dict[str, float]] = defaultdict(lambda: dict(zero))
    for (k, file, ln), costs in p.line_cost.items():
        rel = relative_to_root(file, source_root)
        if rel is None or ln <= 0:
            continue
        oid = op_id(k)
        if rel == info[oid][2]:
            lines_seen[oid].add(ln)
        acc = line_m[(rel, ln, oid)]
        for m, v in _metric_values(p.events, costs).items():
            acc[m] += v

    ops = []
    for oid, incl in incl_m.items():
        name, mod, rel = info[oid]
        seen = lines_seen.get(oid)
        ops.append(Operation(id=oid, name=name, kind="function", module=mod, file=rel,
                             line_start=min(seen) if seen else None, line_end=max(seen) if seen else None,
                             self_metrics=dict(self_m[oid]), inclusive_metrics=incl))
    lines = [LineCost(file=f, line=ln, operation=oid, self_metrics=v) for (f, ln, oid), v in line_m.items()]
    edges = [CallEdge(caller=a, callee=b, metrics=v) for (a, b), v in edge_m.items()]
    gran = ["process", "function"] + (["line"] if lines else [])
    return Profile(tool="callgrind", tool_version=tool_version, target=target, granularity=gran,
                   metrics=metrics + ["calls"], totals=totals, operations=ops, lines=lines, edges=edges)
