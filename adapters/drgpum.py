"""DrGPUM adapter (partial): GPU memory liveness captured elsewhere. Its objective is peak bytes.

DrGPUM runs on the GVProf/HPCToolkit stack (`gvprof -e memory_liveness <app>`, often with
`-ck HPCRUN_SANITIZER_LIVENESS_ONGPU=1`), which does not run here. Its liveness analysis writes a
`memory_liveness/` folder under the measurements directory:

- `memory_liveness.csv`: a header of `memory_peak_kernel: <op>` (newer versions),
  `optimal_memory_peak: <n> B` and `current_memory_peak: <n> B`, a blank line, then one
  `op_id: <op>, <KIND> <ctx>` line per recorded operation (ALLOC, FREE, ACCESS, SET, COPYT, COPYF);
- `memory_size_list.txt`: `op_id=<alloc op>, size=<bytes>` per allocation, largest first;
- `memory_liveness.txt`: `[<alloc op>]: <op>(<kind>), ...` the operations that touched each
  allocation, kind as DrGPUM numbers them (0 alloc, 1 set, 2 copy to, 3 copy from, 4 kernel access,
  5 free);
- `kernel_list.txt`, `memory_growth_sequence.txt` and others, kept as evidence, not read.

What the numbers mean: `current_memory_peak` is the largest sum of live device allocations during
the run (DrGPUM prints it less 512 B of its own); `optimal_memory_peak` the largest sum of the
objects one kernel touched, a lower bound on what the peak could be. Neither is time: the profile's
metrics are bytes (`device_peak_bytes`, `allocated_bytes`, ...), so a rewrite guided by DrGPUM is judged
on peak memory, not on speed, and the mechanism gate can never pass on these numbers. Operations are
allocations; one no kernel, memset or copy touched counts its size as `unaccessed_bytes`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from adapters.partial import PartialAdapter, partial_spec, text_of
from ledger.errors import InputError
from ledger.profile import Operation, Profile

REQUIRED = {"memory_liveness.csv": True, "memory_size_list.txt": True, "memory_liveness.txt": False,
            "kernel_list.txt": False, "memory_growth_sequence.txt": False}
USES = (1, 2, 3, 4)  # set, copy to, copy from, kernel access
_PEAK = re.compile(r"^(optimal|current)_memory_peak:\s*(-?\d+)\s*B\s*$")
_SIZE = re.compile(r"^op_id=(\d+),\s*size=(\d+)\s*$")
_OP = re.compile(r"^op_id:\s*(\d+),\s*([A-Z]+)\s*(-?\d+)\s*$")
_LIVE = re.compile(r"^\[(\d+)\]:\s*(.*)$")
_USE = re.compile(r"(\d+)\((\d+)\)")

SPEC = partial_spec(
    "drgpum", "drgpum", measures=["allocated_bytes", "unaccessed_bytes", "device_peak_bytes", "device_min_peak_bytes"],
    granularity=["process"], targets=["cuda"], setup_s=0.1, time_metric=False,
    cost_note="import only: parsing memory_liveness/ takes milliseconds; DrGPUM's capture happened elsewhere")


class DrgpumAdapter(PartialAdapter):
    spec = SPEC
    expects = "DrGPUM's memory_liveness/ folder (memory_liveness.csv, memory_size_list.txt, memory_liveness.txt)"

    def read(self, path: str) -> dict[str, bytes]:
        p = self._require(path)
        folder = p / "memory_liveness" if (p / "memory_liveness").is_dir() else p
        if not folder.is_dir():
            raise InputError(f"drgpum={path}: not a directory; expected {self.expects}")
        return self._files(folder, REQUIRED)

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str,
                  known_files: Sequence[str] = ()) -> Profile:
        peaks: dict[str, float] = {}
        contexts: dict[str, str] = {}
        for line in text_of(artifacts, "memory_liveness.csv", "drgpum").splitlines():
            line = line.strip()
            if m := _PEAK.match(line):
                peaks[m.group(1)] = float(m.group(2))
            elif m := _OP.match(line):
                if m.group(2) == "ALLOC":
                    contexts[m.group(1)] = m.group(3)
        if set(peaks) != {"optimal", "current"}:
            raise ValueError("drgpum memory_liveness.csv: expected 'optimal_memory_peak: N B' and "
                             "'current_memory_peak: N B' lines")
        sizes: dict[str, float] = {}
        for n, line in enumerate(text_of(artifacts, "memory_size_list.txt", "drgpum").splitlines(), 1):
            if not line.strip():
                continue
            m = _SIZE.match(line.strip())
            if not m:
                raise ValueError(f"drgpum memory_size_list.txt line {n}: expected 'op_id=N, size=BYTES', got {line!r}")
            sizes[m.group(1)] = float(m.group(2))
        used: dict[str, bool] = {}
        if "memory_liveness.txt" in artifacts:
            for line in text_of(artifacts, "memory_liveness.txt", "drgpum").splitlines():
                if m := _LIVE.match(line.strip()):
                    used[m.group(1)] = any(int(kind) in USES for _, kind in _USE.findall(m.group(2)))
        ops = []
        for op, size in sizes.items():
            unaccessed = size if op in used and not used[op] else 0.0
            ctx = contexts.get(op)
            ops.append(Operation(id=f"allocation-{op}@[device]",
                                 name=f"allocation op {op}" + (f" (HPCToolkit context {ctx})" if ctx else ""),
                                 kind="allocation", module="device",
                                 self_metrics={"allocated_bytes": size, "unaccessed_bytes": unaccessed},
                                 inclusive_metrics={"allocated_bytes": size, "unaccessed_bytes": unaccessed}))
        totals = {"allocated_bytes": sum(sizes.values()),
                  "unaccessed_bytes": sum(o.self_metrics["unaccessed_bytes"] for o in ops),
                  "device_peak_bytes": peaks["current"], "device_min_peak_bytes": peaks["optimal"]}
        return Profile(tool="drgpum", tool_version="DrGPUM memory_liveness", target=target,
                       granularity=["process"], metrics=list(SPEC.measures), totals=totals, operations=ops)
