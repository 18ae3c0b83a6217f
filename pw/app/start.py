"""`pw start`: from a workload directory to a trustworthy baseline, one recorded stage at a time.

contract -> copy -> preflight -> build -> oracle -> baseline timing -> profile (routing, hotspot,
source targets, brief). Every stage appends its events together with `StageCompleted` in one
atomic batch, so an interrupted start resumes (`--resume RUN`) by skipping the stages whose inputs
hash the same and never records a stage twice. A recorded stage whose outputs outside the ledger are
gone (a deleted build tree) runs again under the same inputs hash, after a `Note` saying why. Faults
are recorded as events and end the start with exit 1 and one clear line.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.contract import Contract, Metric
from ledger.errors import (
    DiskError,
    InputError,
    LedgerCorrupt,
    NewerLedger,
    TornTail,
    WorkloadError,
    disk_error,
)
from projections.state import RunState
from pw import diagnostics
from pw.app import campaign, profiled
from pw.app.run import RunHandle
from pw.rules import stages as decide
from pw.workload import containment, correctness, workspace
from pw.workload import steps as execute
from pw.workload.host import host_info, scheduler_node
from pw.workload.inference import infer_contract, slug
from pw.workload.manifest import MANIFEST, load_manifest, place_in_root

BASELINE_RUNS = 5  # timed runs after one warm-up; enough to estimate run-to-run variation
# A region a program times repeats to a few percent on a quiet machine; a wider spread says it holds
# something that is not the same work every run (driver start-up, a JIT, page faults of a first touch).
REGION_SPREAD_WARN = 0.10


class StartOptions(msgspec.Struct, frozen=True):
    workload: str | None = None
    resume: str | None = None
    iterations: int = 10
    repairs: int = 7
    runs_dir: str = "runs"
    baseline_runs: int = BASELINE_RUNS
    profile: bool = True
    # Judge every campaign on this function's or kernel's own cost (a metric of kind "operation"),
    # whatever the manifest's metric says.
    operation: str | None = None


class StartResult(msgspec.Struct, frozen=True):
    run_dir: str
    run_id: str
    status: str
    inferred: bool
    inference: list[str]
    skipped: list[str]
    completed: list[str]
    next: str
    message: str = ""
    oracle: str = ""  # what the oracle compares, in words
    # What a new user should know about this baseline, one line each: output lines set aside
    # because they vary, a timer that could be the metric and how to choose it (`notes`); a region
    # whose spread says it times something else than its kernels (`warnings`).
    notes: list[str] = []
    warnings: list[str] = []


Progress = Callable[[str], None]


def _digest(obj) -> str:
    return hashlib.sha256(msgspec.json.encode(obj, order="deterministic")).hexdigest()


def _new_run_id(runs_dir: Path, name: str) -> str:
    base = f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{slug(name)}"
    run_id, n = base, 1
    while (runs_dir / run_id).exists() or (runs_dir / f".{run_id}.partial").exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id


def _writable_runs_dir(runs_dir: Path) -> Path:
    """`runs_dir`, created if missing, or one line saying why runs cannot go there."""
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a fine place, with no room: the machine's fault
            raise DiskError(runs_dir, exc.errno, kept="no run was made") from None
        raise InputError(f"--runs-dir {runs_dir}: expected a directory runs can be written to "
                         f"({exc.strerror or exc})") from None
    if not os.access(runs_dir, os.W_OK | os.X_OK):
        raise InputError(f"--runs-dir {runs_dir}: expected a directory runs can be written to (not writable)")
    return runs_dir


def _load_contract(workload: Path) -> tuple[Contract, str | None, bool, list[str]]:
    if (workload / MANIFEST).exists() and not (workload / MANIFEST).is_file():
        raise InputError(f"{MANIFEST}: expected a file in {workload}, found a directory or special file")
    if (workload / MANIFEST).is_file():
        contract, raw = load_manifest(workload)
        contract, placed = place_in_root(contract, workload)
        return contract, hashlib.sha256(raw).hexdigest(), False, [f"contract: explicit {MANIFEST}", *placed]
    contract, decisions = infer_contract(workload)
    return contract, None, True, decisions


def create_run(opts: StartOptions, progress: Progress) -> RunHandle:
    """Validate the workload, copy its source tree and record RunStarted; the run directory
    appears under its final name only once that first event is on disk."""
    workload = Path(opts.workload or "")
    if not workload.is_dir():
        raise InputError(f"--workload {opts.workload}: expected a workload directory")
    if opts.iterations < 1 or opts.repairs < 0:
        raise InputError("--iterations must be >= 1 and --repairs >= 0")
    progress("reading the workload contract")
    try:  # a file or folder this user may not read is refused now, by name, not when a build fails
        contract, manifest_sha, inferred, decisions = _load_contract(workload)
        if opts.operation:
            if not opts.operation.replace("_", "").replace(":", "").isalnum():
                raise InputError(f"--operation {opts.operation!r}: expected the name of a function or kernel")
            contract = msgspec.structs.replace(contract, metric=Metric(kind="operation", operation=opts.operation))
            decisions = [*decisions, f"metric: {opts.operation}'s own cost in every timed run's profile (--operation)"]
        runs_dir = _writable_runs_dir(Path(opts.runs_dir))
        src_root = workload / contract.source.root
        files = workspace.source_files(src_root, exclude=list(contract.source.exclude), skip=(runs_dir,))
    except PermissionError as exc:
        raise workspace.unreadable(exc) from None
    source_sha = workspace.tree_digest(src_root, files)
    run_id = _new_run_id(runs_dir, contract.name)
    partial = runs_dir / f".{run_id}.partial"
    try:
        progress("copying the source tree to baseline/")
        copied_by = workspace.copy_files(src_root, partial / "baseline", files)
        handle = RunHandle(partial)
        started = ev.RunStarted(
            run_id=run_id,
            workload=str(workload),
            contract=contract,
            manifest_sha256=manifest_sha,
            inferred=inferred,
            inference=decisions,
            source_sha256=source_sha,
            budgets=ev.Budgets(iterations=opts.iterations, repairs=opts.repairs),
            host=host_info(),
            copied_by=copied_by,
        )
        handle.record(handle.state() if handle.ledger.exists() else _empty(), [started])
        final = runs_dir / run_id
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return RunHandle(final)


def _empty():
    from projections.state import initial

    return initial()


def baseline_target(handle: RunHandle, run: ev.RunStarted) -> execute.Target:
    files = workspace.source_files(handle.path / "baseline")
    from pw.workload import containment

    return execute.Target(
        label="baseline", src_dir=handle.path / "baseline", build_dir=handle.path / "build" / "baseline", files=files,
        hidden=containment.hidden_dirs(handle.path, run.workload),
    )


def build_outputs_lost(state: RunState, target: execute.Target, run_dir: Path) -> str | None:
    """Why the recorded baseline build no longer stands (its tree deleted, changed, or its last
    attempt failed), or None when the tree on disk is still what was recorded."""
    recorded = state.builds.get("baseline")
    where = target.build_dir.relative_to(run_dir).as_posix()
    if recorded is None or recorded.outcome != "ok":
        return "its last recorded build did not succeed"
    if not target.build_dir.is_dir():
        return f"its output tree {where}/ is missing"
    if execute.binary_digest(target) != recorded.binary_sha256:
        return f"its output tree {where}/ no longer hashes to the recorded {(recorded.binary_sha256 or '-')[:12]}"
    return None


class _Stage:
    """Runs one stage unless the ledger already has it for the same inputs."""

    def __init__(self, handle: RunHandle, progress: Progress, skipped: list[str], completed: list[str]) -> None:
        self.handle = handle
        self.progress = progress
        self.skipped = skipped
        self.completed = completed

    def __call__(self, state, stage: str, inputs: str, work: Callable[[], list[ev.Payload]],
                 outputs_lost: Callable[[RunState], str | None] | None = None):
        """`outputs_lost` looks at what a recorded stage left outside the ledger; when it names
        something gone, the stage runs again for the same inputs and the ledger says why."""
        redo = None
        if decide.stage_done(state, stage, inputs):
            redo = outputs_lost(state) if outputs_lost else None
            if redo is None:
                if diagnostics.debugging():
                    diagnostics.log().debug("stage skipped", stage=stage, reason="recorded for the same inputs")
                self.skipped.append(stage)
                return state
        self.progress(stage if redo is None else f"{stage} again: {redo}")
        results = work()
        state = self.handle.record(state, decide.decide_stage(state, stage, inputs, results, redo=redo))
        fault = next((e for e in results if isinstance(e, ev.FaultRecorded)), None)
        if fault is not None:
            log = f"; log: {self.handle.evidence.path_for(fault.log_sha256)}" if fault.log_sha256 else ""
            raise WorkloadError(f"{stage}: {fault.failure_class}: {fault.message}{log}",
                                failure_class=fault.failure_class)
        self.completed.append(stage)
        return state


def time_baseline_alone(contract: Contract, target: execute.Target, scratch: Path, *, runs: int, host: str,
                        binary: str, progress: Progress, stage: str = "baseline-timing",
                        profiling: campaign.Profiling | None = None) -> list[ev.Payload]:
    """`runs` timed runs of the baseline alone after one warm-up, as a baseline-variance
    `TimingRecorded` (or the fault that stopped them). One kind of run: with ``profiling`` every timed
    run is profiled as a campaign's are, and the profiles are kept with the runs."""
    series: dict[str, list[float]] = {}
    profiled: list[ev.ProfiledRun] = []
    version = ""
    for i in range(runs + 1):
        progress(f"{stage} run {i + 1}/{runs + 1}")
        done = campaign.timed_run(contract, target, scratch, argv=None, tag="timing",
                                  profiling=profiling if i > 0 else None, role="reference")
        out = done.outcome
        failure = execute.classify(out)
        if failure is not None or out.value is None:
            message = execute.failure_message(contract, out) if failure else (out.metric_error or "no metric")
            return [ev.FaultRecorded(stage=stage, target="baseline",
                                     failure_class=failure or "launch-failed", message=message)]
        if i == 0:  # the first run is a warm-up (page cache, CPU frequency) and is not kept
            continue
        p = out.process
        values = {"": out.value, "max_rss_kb": float(p.max_rss_kb), "user_s": p.user_s, "sys_s": p.sys_s,
                  "wall_s": p.wall_s, **done.series}
        for key, value in values.items():
            series.setdefault(f"baseline:{key}" if key else "baseline", []).append(round(value, 9))
        if done.profiled is not None:
            profiled.append(done.profiled)
            version = version or done.tool_version
    return [
        ev.TimingRecorded(
            purpose="baseline-variance",
            targets=["baseline"],
            metric=f"{contract.metric.kind}_time_s",
            unit="s",
            samples=series,
            order=["A"] * runs,
            seed=0,
            exploratory=False,
            conditions=ev.TimingConditions(
                host=host, argv=list(contract.run.argv), metric=contract.metric.kind,
                warmup_runs=1, sandbox=containment.describe(), node=scheduler_node(),
                arms={"baseline": ev.TimedArm(binary_before=binary, binary_after=execute.binary_digest(target),
                                              inputs_sha256=execute.inputs_digest(contract, target))},
            ),
            profiler=profiling.record(version) if profiling is not None else None,
            runs={"baseline": profiled} if profiling is not None else {},
        )
    ]


def run_stages(handle: RunHandle, opts: StartOptions, progress: Progress) -> StartResult:
    state = handle.state()
    run = state.run
    if run is None:
        raise InputError(f"{handle.path}: the ledger has no RunStarted; expected a run made by `pw start`")
    contract = run.contract
    target = baseline_target(handle, run)
    skipped: list[str] = []
    completed: list[str] = []
    stage = _Stage(handle, progress, skipped, completed)
    scratch = handle.path / "scratch"

    from pw.app.preflight import run_preflight

    cache_dir = Path(opts.runs_dir) / ".preflight-cache"
    state = stage(state, "preflight", _digest([run.host, run.source_sha256]),
                  lambda: [run_preflight(run.host, run.source_sha256, cache_dir)])

    state = stage(state, "build", _digest([run.source_sha256, contract.build]),
                  lambda: _build_baseline(handle, contract, target),
                  lambda now: build_outputs_lost(now, target, handle.path))
    binary = state.builds["baseline"].binary_sha256 or ""

    def do_oracle() -> list[ev.Payload]:
        # The generators are tried on the baseline too: a range the program rejects would fail every
        # candidate later, so it fails here, with the input named.
        drawn: list[ev.Payload] = []
        fresh: list[list[str]] = []
        if contract.oracle.generators:
            from pw.app.targets import secret_seed
            from pw.workload.holdouts import draw_holdouts, drawn_from

            seed = secret_seed()
            fresh = draw_holdouts(drawn_from(contract), seed)
            drawn = [ev.HoldoutsDrawn(target="baseline", binary_sha256=binary, seed=seed, inputs=fresh)]
        result = correctness.check(contract, target, target.src_dir, scratch, handle.evidence,
                                   baseline=target, fresh=fresh)
        return drawn + [result.event] + ([result.fault] if result.fault else [])

    state = stage(state, "oracle", _digest([binary, contract.oracle, contract.run]), do_oracle)

    def do_timing() -> list[ev.Payload]:
        profiling = profiled.profiling_for(handle, state, target, [], profiled.operation_attribution(state, target))
        return time_baseline_alone(contract, target, scratch, runs=opts.baseline_runs, host=run.host.hostname,
                                   binary=binary, progress=progress, profiling=profiling)

    state = stage(state, "baseline-timing", _digest([binary, contract.run, contract.metric, opts.baseline_runs]),
                  do_timing)

    if opts.profile:
        from pw.app.profile_baseline import profile_stage

        state = stage(state, "profile", _digest([binary, "profile-v1"]),
                      lambda: profile_stage(handle, state, target, progress))

    shutil.rmtree(scratch, ignore_errors=True)
    return _ready(handle, state, run, skipped, completed)


def _build_baseline(handle: RunHandle, contract: Contract, target: execute.Target) -> list[ev.Payload]:
    """The build stage's events: the build, and a fault naming the failed step and its log."""
    built = execute.build(contract, target, handle.evidence, handle.logs)
    if built.outcome == "ok":
        return [built]
    from pw.workload import build_log

    last = built.steps[-1]
    what = "timed out" if last.timed_out else f"failed (exit {last.exit_code}, signal {last.signal})"
    errors, _ = build_log.summary(built, handle.evidence)
    said = f"; first errors: {build_log.one_line(errors)}" if errors else ""
    if built.problem is not None:  # every step passed, but the tree it built is one pw will not judge
        what = f"passed, but {built.problem}"
    fault = ev.FaultRecorded(
        stage="build",
        target="baseline",
        failure_class="timeout" if built.outcome == "timeout" else "build-failed",
        message=f"`{' '.join(last.argv)}` {what}{said}; log evidence {last.log_sha256[:12] if last.log_sha256 else '-'}",
        log_sha256=last.log_sha256,
    )
    return [built, fault]


def _ready(handle: RunHandle, state: RunState, run: ev.RunStarted, skipped: list[str],
           completed: list[str]) -> StartResult:
    """What `pw start` reports once every stage is recorded, with the agent's next command."""
    next_cmd = f"pw prepare {handle.path} --candidate <id>:baseline:<mechanism>"
    oracle = state.oracles.get("baseline")
    message = ""
    if oracle is not None and oracle.compares_nothing:
        # A contract failure, not a pass: said now, and every verdict is capped at proposed.
        message = (f"the oracle compares nothing: {oracle.compares_nothing}; until it does, no candidate "
                   "can be verified (ceiling: proposed)")
    notes = varying_notes(handle, run.contract, oracle)
    warnings = region_warnings(run.contract, state)
    return StartResult(
        run_dir=str(handle.path),
        run_id=run.run_id,
        status="ready",
        inferred=run.inferred,
        inference=run.inference,
        skipped=skipped,
        completed=completed,
        next=next_cmd,
        message=message,
        oracle=oracle.compared if oracle is not None and oracle.compared else "",
        notes=notes,
        warnings=warnings,
    )


def varying_notes(handle: RunHandle, contract: Contract, oracle: ev.OracleChecked | None) -> list[str]:
    """The lines the inferred oracle set aside because they vary run to run, and, for a run timed
    by its wall clock, the labelled timer among them offered as the region to time instead."""
    from pw.workload.compare import decode_streams, is_bundle, timer_labels, unchecked_text

    if oracle is None or not oracle.output_sha256 or not handle.evidence.has(oracle.output_sha256):
        return []
    stored = handle.evidence.get(oracle.output_sha256)
    if not is_bundle(stored):
        return []
    bundle = decode_streams(stored)
    if not bundle.vary:
        return []
    notes = [unchecked_text(bundle.vary) + "; the rest of the output is compared"]
    timers = timer_labels(bundle.stdout, bundle.vary.get("stdout", []))
    if timers and contract.metric.kind == "wall":
        shown = ", ".join(f'"{label}" (line {n})' for n, label in timers[:3])
        label = timers[0][1].replace('"', '\\"')
        notes.append(f"timers: {shown}; to judge rewrites by a region the program times rather than its whole "
                     f'wall time, add to profileweaver.json: "metric": {{"kind": "roi", "timer": "{label}"}}')
    return notes


def region_warnings(contract: Contract, state: RunState) -> list[str]:
    """A region-of-interest metric whose baseline runs spread widely, or that lasts far longer than
    the device work the profile found in one run: it times something besides the kernels."""
    if contract.metric.kind != "roi":
        return []
    import statistics

    timing = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    xs = list(timing.samples.get("baseline", [])) if timing is not None else []
    out: list[str] = []
    if len(xs) > 1 and statistics.fmean(xs) > 0:
        cv = statistics.stdev(xs) / statistics.fmean(xs)
        if cv > REGION_SPREAD_WARN:
            out.append(f"the timed region varies {cv:.0%} run to run (over {REGION_SPREAD_WARN:.0%}): it may time "
                       "driver start-up (lazy module loading, a PTX JIT), allocation or first-touch page faults "
                       "rather than the same work every run; a speedup measured on it may not be the kernel's")
    region = (state.brief.numbers.get("region") if state.brief is not None else None) or {}
    if region.get("warning"):
        out.append(region["warning"])
    return out


def start(opts: StartOptions, progress: Progress = lambda _: None) -> StartResult:
    handle = None
    try:
        if opts.resume:
            handle = _resumed(opts)
            opts = msgspec.structs.replace(opts, runs_dir=str(handle.path.parent))
        else:
            handle = create_run(opts, progress)
        return run_stages(handle, opts, progress)
    except (DiskError, OSError) as exc:  # an OSError: a refused write no layer below named (a log)
        err = disk_error(exc)
        if err is None:
            raise
        if handle is None:  # no run was made: the same command, once there is room (the CLI says it)
            raise DiskError(err.path, err.errno, kept="no run was made, its partial copy is removed") from None
        # Every completed stage is recorded: --resume brings the projections up and goes on.
        raise err.with_resume(f"pw start --resume {handle.path}", replace=True) from None


def _resumed(opts: StartOptions) -> RunHandle:
    from pw.app.runpath import resolve_run

    handle = RunHandle(resolve_run(opts.resume).path)
    if not handle.ledger.exists():
        raise InputError(f"--resume {opts.resume}: expected a run directory made by `pw start`")
    try:
        state = handle.state()
    except LedgerCorrupt as exc:  # name the file, as every other error does
        from pw.app.damage import advice

        detail = str(exc).removeprefix("ledger: ")
        if isinstance(exc, TornTail):
            hint = f"; run `pw repair {handle.path}`"
        elif isinstance(exc, NewerLedger):
            hint = ""
        else:  # damage before the tail: what still stands, and what to do
            hint = f"; {advice(handle.ledger.path, exc)}"
        raise InputError(f"--resume {opts.resume}: {handle.ledger.path}: {detail}{hint}") from None
    if state.run is not None:
        # Killed between an append and its projection write: the ledger is the truth, so bring
        # the projections up to it even when every stage is skipped and nothing is recorded.
        handle.materialize(state)
    return handle
