"""GVProf adapter (partial): GPU value-redundancy CSVs captured elsewhere.

GVProf (an HPCToolkit + redshow pipeline: `gvprof -e redundancy <app>`, or hpcrun with
`-e gpu=nvidia,redundancy`) instruments every GPU memory access, which needs the sanitizer-patched
HPCToolkit that does not run here. Its redundancy analysis writes, under
`gvprof-measurements/redundancy/` (or the database directory), four CSVs per CPU thread N:
`spatial_read_tN.csv`, `spatial_write_tN.csv`, `temporal_read_tN.csv`, `temporal_write_tN.csv`.

Each file is a list of sections. A kernel section is a `kernel_id,<id>` line (the id is HPCToolkit's
calling-context id of the launch), a `redundant_access_count,total_access_count,redundancy_rate`
header with one row of numbers, then a header naming the per-PC detail columns and its rows (top
redundant values per PC, present when HPCRUN_SANITIZER_MEM_VIEWS is set). The last section of a file
is the thread's total (`cpu_thread,<n>` and the same three numbers).

What the numbers mean: spatial redundancy counts, per PC, the accesses that carry the PC's most
frequent value; temporal redundancy counts the accesses of a thread that read (or write) the value
it last read (wrote) at the same address. Both are counts of accesses, a proxy for wasted work
with no time dimension: the metric ids say `_count`, and the mechanism gate can never pass on them.
Operations are kernels, named by context id (GVProf does not print names; the HPCToolkit database
of the same measurement maps ids to kernels).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.partial import PartialAdapter, partial_spec, read_bytes, text_of
from ledger.errors import InputError
from ledger.profile import Operation, Profile

KINDS: dict[str, str] = {  # file stem -> pw metric id
    "spatial_read": "spatial_redundant_reads_count",
    "spatial_write": "spatial_redundant_writes_count",
    "temporal_read": "temporal_redundant_reads_count",
    "temporal_write": "temporal_redundant_writes_count",
}
_FILE = re.compile(r"^(?P<kind>spatial_read|spatial_write|temporal_read|temporal_write)_t(?P<thread>\d+)\.csv$")
TOTAL = "redundant_accesses_count"
ACCESSES = "monitored_accesses_count"
SUMMARY_HEADER = "redundant_access_count,total_access_count,redundancy_rate"

SPEC = partial_spec(
    "gvprof", "gvprof", measures=[TOTAL, *KINDS.values(), ACCESSES], granularity=["kernel"], targets=["cuda"],
    setup_s=0.1, time_metric=False,
    cost_note="import only: parsing the CSVs takes milliseconds; GVProf's own capture (two hpcrun passes, "
              "every access instrumented) happened elsewhere")


class GvprofAdapter(PartialAdapter):
    spec = SPEC
    expects = ("GVProf's redundancy CSVs ({spatial,temporal}_{read,write}_t<N>.csv), or the "
               "gvprof-measurements directory holding redundancy/")

    def read(self, path: str) -> dict[str, bytes]:
        p = self._require(path)
        folder = p / "redundancy" if (p / "redundancy").is_dir() else p
        files = sorted(f for f in folder.glob("*.csv") if _FILE.match(f.name)) if folder.is_dir() else []
        if not files:
            raise InputError(f"gvprof={path}: no redundancy CSVs; expected {self.expects}")
        return {f"redundancy/{f.name}": read_bytes(self.spec.name, f) for f in files}

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str,
                  known_files: Sequence[str] = ()) -> Profile:
        per_kernel: dict[str, dict[str, float]] = {}
        accesses: dict[str, float] = {}
        totals: dict[str, float] = {m: 0.0 for m in KINDS.values()}
        thread_accesses: dict[str, float] = {}
        for role in sorted(artifacts):
            m = _FILE.match(Path(role).name)
            if not m:
                continue
            metric = KINDS[m.group("kind")]
            for scope, ident, red, total in sections(text_of(artifacts, role, "gvprof"), role):
                if scope == "kernel_id":
                    k = per_kernel.setdefault(ident, {})
                    k[metric] = k.get(metric, 0.0) + red
                    # every file repeats the kernel's total accesses (reads and writes): keep one
                    accesses[ident] = max(accesses.get(ident, 0.0), total)
                else:
                    totals[metric] += red
                    thread = m.group("thread")
                    thread_accesses[thread] = max(thread_accesses.get(thread, 0.0), total)
        if not per_kernel and not any(totals.values()):
            raise ValueError("gvprof: no kernel_id or cpu_thread section in "
                             f"{', '.join(sorted(artifacts))}; expected GVProf redundancy CSVs")
        ops = []
        for ident, values in per_kernel.items():
            self_metrics = {TOTAL: sum(values.values()), **values, ACCESSES: accesses.get(ident, 0.0)}
            ops.append(Operation(id=f"kernel-context-{ident}@[gpu]", name=f"kernel (HPCToolkit context {ident})",
                                 kind="kernel", module="gpu", self_metrics=self_metrics,
                                 inclusive_metrics=dict(self_metrics)))
        totals_out = {TOTAL: sum(totals.values()), **totals, ACCESSES: sum(thread_accesses.values())}
        if not thread_accesses:  # files without a thread section (older redshow): add the kernels up
            for ident, values in per_kernel.items():
                for k, v in values.items():
                    totals_out[k] += v
                totals_out[TOTAL] += sum(values.values())
                totals_out[ACCESSES] += accesses.get(ident, 0.0)
        return Profile(tool="gvprof", tool_version="redshow redundancy CSV", target=target, granularity=["kernel"],
                       metrics=[TOTAL, *KINDS.values(), ACCESSES], totals=totals_out, operations=ops)


def sections(text: str, role: str) -> list[tuple[str, str, float, float]]:
    """(scope, id, redundant, total) of each `kernel_id,<id>` / `cpu_thread,<id>` section."""
    lines = [ln.strip() for ln in text.splitlines()]
    out = []
    for i, line in enumerate(lines):
        head, _, ident = line.partition(",")
        if head not in ("kernel_id", "cpu_thread"):
            continue
        if i + 2 >= len(lines) or lines[i + 1] != SUMMARY_HEADER:
            raise ValueError(f"gvprof {role} line {i + 2}: expected {SUMMARY_HEADER!r} after {line!r}")
        fields = lines[i + 2].split(",")
        try:
            red, total = float(fields[0]), float(fields[1])
        except (ValueError, IndexError):
            raise ValueError(f"gvprof {role} line {i + 3}: expected two numbers, got {lines[i + 2]!r}") from None
        out.append((head, ident.strip(), red, total))
    return out
