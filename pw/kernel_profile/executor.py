"""Spreads one batch over idle GPUs: one worker process per GPU (per GPU group for multi-GPU specs),
each with its own CUDA_VISIBLE_DEVICES, the specs chunked across them and run concurrently.

A worker that dies fails the spec it was measuring (it said `started` and never answered); the
specs it had not reached go to a fresh worker on the same devices. A spec that outlives its time
limit is killed the same way.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ledger.errors import InputError, ToolError
from pw.kernel_profile.protocol import Done, Failed, Job, JobSpec, Settings, Started, WorkerLine
from pw.kernel_profile.registry import Entry

REPO_ROOT = Path(__file__).resolve().parents[2]
_decoder = msgspec.json.Decoder(WorkerLine)
# Setup before timing (allocation, warm-up, compilation, the energy window) on top of the
# timing phase's own limit, before a spec counts as hung.
SPEC_SLACK_S = 120.0
# After this many workers in a row die without one answer, the slot gives up on its other specs.
MAX_BARREN_WORKERS = 3
# An autotuned kernel compiles and benchmarks every config of a new key before timing starts.
AUTOTUNE_SLACK_S = 300.0


def entry_autotunes(entry: Entry) -> bool:
    return "autotune" in entry.provenance_fields


@dataclass
class Devices:
    indices: list[int]
    pinned: bool
    warnings: list[str] = field(default_factory=list)
    busy: dict[int, str] = field(default_factory=dict)
    memory_bytes: int | None = None  # the smallest device's memory; None where NVML cannot say


def choose_devices() -> Devices:
    """`PW_PROFILE_GPUS` pins devices (bypassing the idle guard, with a warning); else NVML's idle ones."""
    from pw.kernel_profile import nvml

    pinned = os.environ.get("PW_PROFILE_GPUS", "").strip()
    if pinned:
        try:
            idx = [int(x) for x in pinned.split(",") if x.strip()]
        except ValueError:
            raise InputError(f"PW_PROFILE_GPUS={pinned!r}: expected comma-separated device indices, e.g. 0,1") from None
        if not idx or len(set(idx)) != len(idx) or min(idx) < 0:
            raise InputError(f"PW_PROFILE_GPUS={pinned!r}: expected distinct non-negative device indices")
        try:
            memory = _smallest([nvml.memory_total_bytes(i) for i in idx])
        except nvml.NvmlUnavailable:
            memory = None  # pinned devices need no NVML; the runner then meets the limit itself
        return Devices(idx, True, [f"PW_PROFILE_GPUS={pinned} pins devices {idx} and bypasses the idle-GPU "
                                   "guard: work there runs on top of anything else using them"],
                       memory_bytes=memory)
    try:
        idle, busy = nvml.idle_devices()
    except nvml.NvmlUnavailable as exc:
        raise nvml.NvmlUnavailable(f"cannot find idle GPUs: {exc}; set PW_PROFILE_GPUS to pin devices "
                                   "(and pass --gpu-name, the database key)") from None
    return Devices(idle, False, busy=busy, memory_bytes=_smallest([nvml.memory_total_bytes(i) for i in idle]))


def _smallest(sizes: list[int | None]) -> int | None:
    return None if not sizes or None in sizes else min(sizes)  # type: ignore[type-var]


def plan(counts: list[int], devices: Devices) -> dict[int, list[list[int]]]:
    """GPU count -> device groups (slots) that run specs of that count."""
    groups: dict[int, list[list[int]]] = {}
    for g in sorted(set(counts)):
        if g > len(devices.indices):
            busy = "; ".join(f"GPU {i}: {why}" for i, why in sorted(devices.busy.items()))
            raise ToolError(f"a spec needs {g} idle GPU(s), found {len(devices.indices)} "
                            f"({devices.indices or 'none'}){'; busy: ' + busy if busy else ''}")
        groups[g] = [devices.indices[i:i + g] for i in range(0, len(devices.indices) - g + 1, g)]
    return groups


def chunk(indices: list[int], costs: list[float], slots: int) -> list[list[int]]:
    """Longest-processing-time-first: the biggest spec goes to the least-loaded slot."""
    loads = [0.0] * slots
    out: list[list[int]] = [[] for _ in range(slots)]
    for i in sorted(indices, key=lambda i: -costs[i]):
        s = loads.index(min(loads))
        out[s].append(i)
        loads[s] += costs[i]
    return [sorted(c) for c in out]


def spec_cost(args: dict) -> float:
    prod = 1.0
    for v in args.values():
        if isinstance(v, int) and not isinstance(v, bool):
            prod *= float(v)
    return prod


class _Slot(threading.Thread):
    """Runs its share of a batch on one device group, restarting the worker after a death."""

    def __init__(self, entry: Entry, settings: Settings, devices: list[int], specs: list[JobSpec],
                 report: Callable[[WorkerLine], None]) -> None:
        super().__init__(daemon=True)
        self.entry, self.settings, self.devices = entry, settings, devices
        self.pending = list(specs)
        self.report = report
        self.job_extra: dict = {}  # Job fields beyond the cache mode (the measure diagnostic's)
        self.last_death = ""

    def run(self) -> None:
        deaths = 0  # workers in a row that died without answering a single spec
        while self.pending:
            answered = self._one_worker()
            deaths = 0 if answered else deaths + 1
            if deaths >= MAX_BARREN_WORKERS and self.pending:
                # The same death again and again is the environment, not a spec: stop paying a
                # worker start-up per spec and say so for every spec left.
                for spec in self.pending:
                    self.report(Failed(spec.index, "worker_crash", f"not measured: {deaths} workers in a row died "
                                       f"before answering any spec; last: {self.last_death}"))
                self.pending = []

    def _one_worker(self) -> bool:
        """One worker process over the pending specs; True when it answered at least one."""
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.devices))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        job = Job(table=self.entry.table, backend=self.entry.backend, runner=self.entry.runner,
                  settings=self.settings, specs=self.pending, nvml_indices=self.devices, **self.job_extra)
        proc = subprocess.Popen([sys.executable, "-m", "pw.kernel_profile.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT)
        lines: queue.Queue = queue.Queue()
        err_tail: list[bytes] = []

        def pump_out():
            for raw in proc.stdout:
                lines.put(raw)
            lines.put(None)

        def pump_err():
            for raw in proc.stderr:
                err_tail.append(raw)
                del err_tail[:-20]

        threading.Thread(target=pump_out, daemon=True).start()
        threading.Thread(target=pump_err, daemon=True).start()
        proc.stdin.write(msgspec.json.encode(job))
        proc.stdin.close()
        in_flight: int | None = None
        limit = self.settings.timeout_s + SPEC_SLACK_S + float(self.job_extra.get("duration_s", 0))
        limit += AUTOTUNE_SLACK_S if entry_autotunes(self.entry) else 0.0
        deadline = time.monotonic() + limit
        remaining = {s.index for s in self.pending}
        answered = 0
        while True:
            try:
                raw = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                proc.kill()
                proc.wait()
                if in_flight is not None:
                    self._fail(in_flight, "timeout", f"no answer within {limit:.0f} s; worker killed", remaining)
                break
            if raw is None:
                proc.wait()
                if in_flight is not None:
                    code = proc.returncode
                    how = f"signal {-code}" if code < 0 else f"exit code {code}"
                    tail = b"".join(err_tail).decode(errors="replace").strip().splitlines()[-1:] or [""]
                    self._fail(in_flight, "worker_crash", f"worker died ({how}) measuring this spec: {tail[0][:300]}",
                               remaining)
                elif remaining:  # died between specs, or before the first one
                    first = min(remaining)
                    self._fail(first, "worker_crash", f"worker exited (code {proc.returncode}) before answering",
                               remaining)
                break
            try:
                line = _decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # a library printed to stdout; only our lines are JSON of this shape
            if isinstance(line, Started):
                in_flight = line.index
                deadline = time.monotonic() + limit
            else:
                in_flight = None
                remaining.discard(line.index)
                answered += 1
                self.report(line)
        self.pending = [s for s in self.pending if s.index in remaining]
        return answered > 0

    def _fail(self, index: int, error: str, message: str, remaining: set[int]) -> None:
        remaining.discard(index)
        self.last_death = message
        self.report(Failed(index, error, message))


@dataclass
class BatchOutcome:
    results: dict[int, Done | Failed]
    devices: Devices
    slots: dict[int, list[list[int]]]
    wall_s: float
    device_groups: dict[int, list[int]] = field(default_factory=dict)


def run_batch(entry: Entry, specs: list[dict], settings: Settings, devices: Devices | None = None, *,
              autotune_dir: str = "", autotune_store: bool = True) -> BatchOutcome:
    """Measure `specs` (arg dicts, positions are their ids) on idle GPUs; every spec gets an answer.

    Every worker shares `autotune_dir`, the autotune cache of the database the batch fills."""
    devices = devices or choose_devices()
    counts = [entry.gpu_count(entry.args(**a)) for a in specs]
    slots = plan(counts, devices)
    results: dict[int, Done | Failed] = {}
    lock = threading.Lock()

    progress = os.environ.get("PW_PROFILE_PROGRESS") == "1"
    t_start = time.monotonic()

    where: dict[int, list[int]] = {}  # spec -> the device group that answered it

    def report(line, group=None):
        with lock:
            results[line.index] = line
            if group is not None:
                where[line.index] = group
            if progress:  # one line per answered spec, for watching a long batch
                what = f"{line.wall_s:.2f}s" if isinstance(line, Done) else f"{line.error}: {line.message[:200]}"
                sys.stderr.write(f"pw kernel-profile: {len(results)}/{len(specs)} at "
                                 f"{time.monotonic() - t_start:.1f}s: spec {line.index} {what}\n")
                sys.stderr.flush()

    threads = []
    t0 = time.monotonic()
    costs = [spec_cost(a) for a in specs]
    for g, groups in slots.items():
        mine = [i for i, c in enumerate(counts) if c == g]
        for group, share in zip(groups, chunk(mine, costs, len(groups))):
            if share:
                slot = _Slot(entry, settings, group, [JobSpec(i, specs[i]) for i in share],
                             lambda line, g=group: report(line, g))
                slot.job_extra = {"autotune_dir": autotune_dir, "autotune_store": autotune_store}
                threads.append(slot)
    # Groups of different sizes would share GPUs: run one size class after another.
    by_size: dict[int, list[_Slot]] = {}
    for t in threads:
        by_size.setdefault(len(t.devices), []).append(t)
    for size in sorted(by_size):
        for t in by_size[size]:
            t.start()
        for t in by_size[size]:
            t.join()
    for i in range(len(specs)):
        results.setdefault(i, Failed(i, "worker_crash", "no worker answered for this spec"))
    return BatchOutcome(results, devices, slots, time.monotonic() - t0, where)
