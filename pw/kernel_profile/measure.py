"""`pw kernel-profile measure`: the cache-free diagnostic, in one worker on one idle GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ledger.errors import InputError, ToolError
from pw.kernel_profile.protocol import Done, JobSpec, Settings
from pw.kernel_profile.registry import Entry
from pw.kernel_profile.specs import as_dict

OUTPUTS = ("runtimes.csv", "telemetry.csv", "summary.json", "runtime.png", "telemetry.png")


def measure(entry: Entry, specs: list, out: Path, *, duration_s: float, telemetry_hz: float,
            settings: Settings) -> dict:
    from pw.kernel_profile import executor

    if entry.kernel_kind == "comm":
        raise InputError(f"{entry.table}/{entry.backend}: a comm kernel; measure accepts only compute kernels "
                         "timed through the CUPTI timer")
    if len(specs) != 1:
        raise InputError(f"--spec: measure takes exactly one spec, got {len(specs)}")
    if not (math.isfinite(duration_s) and duration_s > 0 and math.isfinite(telemetry_hz) and telemetry_hz > 0):
        raise InputError("--duration-s and --telemetry-hz: expected positive, finite numbers")
    if out.exists() and not out.is_dir():
        raise InputError(f"--output-dir {out}: exists and is not a directory")
    taken = [f for f in OUTPUTS if (out / f).exists()]
    if taken:
        raise InputError(f"--output-dir {out}: already holds measure outputs ({', '.join(taken)})")
    devices = executor.choose_devices()
    slots = executor.plan([1], devices)[1]
    made = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    got: list = []
    try:
        slot = executor._Slot(entry, settings, slots[0], [JobSpec(0, as_dict(specs[0]))], got.append)
        slot.job_extra = {"mode": "measure", "measure_dir": str(out.resolve()), "duration_s": duration_s,
                          "telemetry_hz": telemetry_hz}
        slot.run()
        if not got or not isinstance(got[0], Done):
            why = got[0].message if got else "no answer"
            raise ToolError(f"measure {entry.table}/{entry.backend}: {why}")
    except BaseException:
        _clean(out, made)
        raise
    summary = json.loads((out / "summary.json").read_text())
    return {"table": entry.table, "backend": entry.backend, "args": as_dict(specs[0]), "output_dir": str(out),
            "files": sorted(p.name for p in out.iterdir()), "device": slots[0], "warnings": devices.warnings,
            "summary": summary}



def _clean(out: Path, made: list[Path]) -> None:
    """After a failed window: the outputs it left (none was there before it), and the folders this call
    made."""
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    for d in made:  # innermost first
        try:
            d.rmdir()
        except OSError:
            break
