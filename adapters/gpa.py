"""GPA adapter (partial): the GPU Performance Advisor's advice report, captured elsewhere.

GPA (`gpa <app>`: hpcrun with PC sampling, hpcstruct, hpcprof with the GPU advisor) needs its own
HPCToolkit build and an NVIDIA GPU; neither is here. It writes `gpa-database/gpa.advice`, a text
report per GPU kernel, kernels ranked by running time:

    ***...***
    GPU Kernel <name or mangled signature>: <n>
    [<rank>,<thread>] Summary <blame metric>:            (a stall breakdown, one `name: x%` per line)
    Code Optimizers | Parallel Optimizers | Binary Optimizers
      Apply <Optimizer> optimization, ratio <x>%, estimate speedup <y>x
        <hint>
        <k>. Hot <blame> code, ratio <x>%, speedup <y>x
          Hot <blame> code, ratio <x>%, distance <d>, efficiency <e>%
            From <function> at <file>:<declaration line>
              0x<pc> at Line <n> [in Loop at Line <m>]
            To <function> at <file>:<declaration line>
              0x<pc> at Line <n>
    ---...---

What the numbers mean: an optimizer's ratio is the share of the kernel's sampled stalls its matched
code accounts for; its estimate speedup is what GPA's performance model predicts (`inf` for
occupancy suggestions with no ratio-weighted evidence: not ranked). Both are a model's reading of
PC samples, not a measured saving (the metric specs mark them simulated). The real source line of
a finding is the `at Line <n>` line, not the declaration line after `at <file>:`. The same kernel
may appear in several byte-identical blocks (one per launch site); they are merged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from adapters.partial import PartialAdapter, partial_spec, read_bytes, relative_by_suffix, text_of
from ledger.errors import InputError
from ledger.profile import LineCost, Operation, Profile

ROLE = "gpa.advice"
_KERNEL = re.compile(r"^GPU Kernel (?P<name>.+?):\s*(?P<n>[\d.eE+-]+)\s*$")
_SECTION = re.compile(r"^(Code|Parallel|Binary) Optimizers\s*$")
_APPLY = re.compile(r"^Apply (?P<opt>\w+) optimization, ratio (?P<ratio>[\d.]+)%,\s*estimate speedup "
                    r"(?P<speedup>inf|[\d.]+)x\s*$")
_HOT = re.compile(r"^(?:\d+\.\s*)?Hot (?P<blame>.+?) code, ratio (?P<ratio>[\d.]+)%")
_FROM_TO = re.compile(r"^(?:From|To) .* at (?P<file>.+):(?P<decl>\d+)\s*$")
_ADDR = re.compile(r"^0x[0-9a-fA-F]+ at Line (?P<line>\d+)")

SPEC = partial_spec(
    "gpa", "gpa", measures=["advice_stall_ratio", "advice_estimated_speedup"], granularity=["kernel", "line"],
    targets=["cuda"], setup_s=0.1, time_metric=False,
    cost_note="import only: parsing gpa.advice takes milliseconds; GPA's capture and analysis happened elsewhere",
    more_limits={"attribution": "its ratios and speedups are a model's estimates, not measurements"})


@dataclass
class Suggestion:
    kernel: str
    section: str
    optimizer: str
    ratio: float  # 0-1
    speedup: float | None  # None: `inf`, no ratio-weighted evidence
    locations: dict[tuple[str, int], float] = field(default_factory=dict)  # (file, line) -> governing ratio

    @property
    def impact(self) -> float:
        return self.ratio * max((self.speedup or 1.0) - 1.0, 0.0)


def parse(text: str) -> list[Suggestion]:
    """Every suggestion of every kernel block, identical blocks merged (pure)."""
    seen_blocks: set[str] = set()
    out: list[Suggestion] = []
    for block in re.split(r"^\*{5,}\s*$", text, flags=re.MULTILINE):
        if not block.strip() or block in seen_blocks:
            continue
        seen_blocks.add(block)
        kernel = section = None
        current: Suggestion | None = None
        governing = 0.0
        pending_file: str | None = None
        for raw in block.splitlines():
            line = raw.strip()
            if m := _KERNEL.match(line):
                kernel, current = m.group("name"), None
            elif m := _SECTION.match(line):
                section, current = m.group(1), None
            elif kernel and section and (m := _APPLY.match(line)):
                speedup = None if m.group("speedup") == "inf" else float(m.group("speedup"))
                current = Suggestion(kernel, section, m.group("opt"), float(m.group("ratio")) / 100, speedup)
                out.append(current)
            elif current and (m := _HOT.match(line)):
                governing = float(m.group("ratio")) / 100
            elif current and (m := _FROM_TO.match(line)):
                pending_file = m.group("file")
            elif current and pending_file and (m := _ADDR.match(line)):
                key = (pending_file, int(m.group("line")))
                current.locations[key] = max(current.locations.get(key, 0.0), governing)
                pending_file = None
    return merge(out)


def merge(suggestions: list[Suggestion]) -> list[Suggestion]:
    """One suggestion per (kernel, section, optimizer): the same kernel seen from several blocks."""
    by: dict[tuple[str, str, str], Suggestion] = {}
    for s in suggestions:
        key = (s.kernel, s.section, s.optimizer)
        if key not in by:
            by[key] = s
            continue
        have = by[key]
        have.ratio = max(have.ratio, s.ratio)
        if s.speedup is not None and (have.speedup is None or s.speedup > have.speedup):
            have.speedup = s.speedup
        for k, v in s.locations.items():
            have.locations[k] = max(have.locations.get(k, 0.0), v)
    return list(by.values())


class GpaAdapter(PartialAdapter):
    spec = SPEC
    expects = "GPA's gpa.advice report, or the gpa-database directory holding it"

    def read(self, path: str) -> dict[str, bytes]:
        p = self._require(path)
        f = p / ROLE if p.is_dir() else p
        if not f.is_file():
            raise InputError(f"gpa={path}: no {ROLE}; expected {self.expects}")
        data = read_bytes(self.spec.name, f)
        if not any(_KERNEL.match(ln.strip()) for ln in data.decode(errors="replace").splitlines()):
            raise InputError(f"gpa={path}: no 'GPU Kernel <name>: <n>' line; expected {self.expects}")
        return {ROLE: data}

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str,
                  known_files: Sequence[str] = ()) -> Profile:
        suggestions = parse(text_of(artifacts, ROLE, "gpa"))
        if not suggestions:
            raise ValueError("gpa gpa.advice: no 'Apply <Optimizer> optimization, ratio x%, estimate speedup yx' "
                             "line under a GPU Kernel block")
        ops: dict[str, Operation] = {}
        lines: dict[tuple[str, int, str], float] = {}
        for s in suggestions:
            oid = f"{s.kernel}@[gpu]"
            best = ops.get(oid)
            speedup = s.speedup if s.speedup is not None and math.isfinite(s.speedup) else 1.0
            if best is None or (s.ratio, speedup) > (best.self_metrics["advice_stall_ratio"],
                                                     best.self_metrics["advice_estimated_speedup"]):
                metrics = {"advice_stall_ratio": s.ratio, "advice_estimated_speedup": speedup}
                ops[oid] = Operation(id=oid, name=s.kernel, kind="kernel", module="gpu", self_metrics=metrics,
                                     inclusive_metrics=dict(metrics))
            for (file, line), ratio in s.locations.items():
                rel = relative_by_suffix(file, known_files)
                if rel:
                    key = (rel, line, oid)
                    lines[key] = max(lines.get(key, 0.0), ratio)
        return Profile(tool="gpa", tool_version="gpa.advice", target=target, granularity=["kernel", "line"],
                       metrics=list(SPEC.measures),
                       totals={"advice_stall_ratio": max(o.self_metrics["advice_stall_ratio"] for o in ops.values()),
                               "advice_estimated_speedup": max(o.self_metrics["advice_estimated_speedup"]
                                                               for o in ops.values())},
                       operations=list(ops.values()),
                       lines=[LineCost(file=f, line=ln, operation=o, self_metrics={"advice_stall_ratio": r})
                              for (f, ln, o), r in lines.items()])

    def findings(self, artifacts: Mapping[str, bytes], known_files: Sequence[str] = ()) -> list[str]:
        ranked = sorted((s for s in parse(text_of(artifacts, ROLE, "gpa")) if s.speedup is not None),
                        key=lambda s: (-s.impact, s.kernel, s.optimizer))
        out = []
        for s in ranked[:3]:
            where = sorted(s.locations.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
            at = ", ".join(f"{relative_by_suffix(f, known_files) or f}:{ln}" for (f, ln), _ in where)
            out.append(f"GPA {s.optimizer} on {s.kernel}: {s.ratio:.0%} of stalls, model estimate "
                       f"{s.speedup:.2f}x" + (f" at {at}" if at else ""))
        return out
