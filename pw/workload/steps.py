"""Build, run and check a target (the baseline or a candidate) inside the run directory.

A build always starts from a fresh copy of the target's pristine source, so what is timed is
what was built from that source, and the binary tree is hashed (a tree pw cannot judge, such as
one with a path beyond PATH_MAX, fails the build with the reason: ``pw.workload.changes``). Each
run gets its own empty HOME and TMPDIR and sees its tree through a throwaway overlay where the
sandbox can make one (else before/after snapshots, and what it created is removed); what it
changed is reported, so results cannot be cached across runs through the workspace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import msgspec

from adapters.base import RunWrap, log_said
from adapters.process import ProcessResult, describe, run_process
from ledger import events as ev
from ledger.contract import Contract, Step
from ledger.errors import DiskError, WorkloadError
from ledger.evidence import EvidenceStore
from pw import diagnostics
from pw.workload import changes, workspace
from pw.workload.compare import Comparison, compare_text
from pw.workload.image import image_digest

_CREATED_KEEP_BYTES = 64 << 20  # larger files a run creates are reported, not compared
_UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# Environment passed through to workloads; everything else is dropped for reproducibility.
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "LC_NUMERIC", "TERM", "LD_LIBRARY_PATH", "CC", "CXX", "CUDA_VISIBLE_DEVICES",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "PYTHONHASHSEED")


class Target(msgspec.Struct, frozen=True):
    """Where a target's pristine source is, and where it is built and run."""

    label: str
    src_dir: Path
    build_dir: Path
    files: list[str]
    # Directories its sandbox hides (pw.workload.containment.hidden_dirs): the runs directory, the
    # user's workload directory. Every command of the target runs in a sandbox where only
    # build_dir is writable and these are not mounted.
    hidden: list[str] = []
    # Directories of pw's own tools its sandbox shows read-only, even inside a hidden directory or a
    # scratch tmpfs: the `-g` compiler wrappers of a profiling build (pw.workload.debug_build), which
    # pw wrote and which hold nothing of the run's references.
    tools: list[str] = []


class RunOutcome(msgspec.Struct, frozen=True):
    process: ProcessResult
    stdout: str
    value: float | None
    metric_error: str | None
    side_effects: list[str]
    output_file: bytes | None
    outside_writes: list[str] = []
    stderr: str = ""
    leftover_processes: list[str] = []  # names of processes still running when the program exited
    created: dict[str, str] = {}  # files the run created in its build tree (relative path -> text)
    profiler_said: str = ""  # what the profiler said in its log (its error), when it joined a run that failed


def left_behind(outcome: RunOutcome) -> list[str]:
    """What a run left for the next one, in words: files created in or deleted from its tree (a
    modified one is listed too), files written outside its tree, processes left running."""
    out = [f"{s} in its tree" for s in outcome.side_effects]
    out += [f"wrote {p} outside its tree" for p in outcome.outside_writes]
    out += [f"left a process running ({name})" for name in outcome.leftover_processes]
    return out


def caught(outcome: RunOutcome, allowed: list[str]) -> list[str]:
    """``left_behind`` less what the baseline's own oracle run left (``allowed``): a program is not
    blamed for what the workload does anyway."""
    return [item for item in left_behind(outcome) if item not in set(allowed)]


def confine_for(target: Target, cwd: Path, writable: list[str] = (), changes: Path | None = None):  # type: ignore[assignment]
    """The target's sandbox, ``writable`` bound writable too (a profiler's output, the CUDA driver's
    per-target JIT cache); with ``changes`` (``RunTree``), its tree shown through a throwaway overlay."""
    from pw.workload import containment

    cache = cuda_jit_cache(target)
    return containment.confinement(target.build_dir, target.hidden, cwd, tools=[Path(t) for t in target.tools],
                                   extra_writable=[Path(w) for w in writable] + ([cache] if cache is not None else []),
                                   changes=changes)


CUDA_SOURCES = (".cu", ".cuh")


def cuda_jit_cache(target: Target) -> Path | None:
    """The CUDA driver's JIT cache of a target whose sources are CUDA, or None: pw's directory,
    outside the target's tree (a file there is no output and no cache of results), one per target
    (a candidate never reads the baseline's compiled code), kept across the target's runs (only the
    first run compiles the PTX of a binary built with no -arch). The driver's default, under HOME,
    would be a file each run leaves in its scratch, which pw reports as written outside the tree."""
    if not any(f.endswith(CUDA_SOURCES) for f in target.files):
        return None
    cache = target.build_dir.parent / ".cuda-jit" / target.build_dir.name
    cache.mkdir(parents=True, exist_ok=True)  # bound into the sandbox, so it must exist first
    return cache


def cuda_env(target: Target | None) -> dict[str, str]:
    """What every run of a CUDA target gets (timed, oracle, profiled alike): its JIT cache, and
    eager module loading, so the driver loads (and JIT-compiles) every module when the context is
    made, before the program's first timer starts, not inside the first timed region."""
    cache = cuda_jit_cache(target) if target is not None else None
    if cache is None:
        return {}
    return {"CUDA_CACHE_PATH": str(cache.resolve()), "CUDA_MODULE_LOADING": "EAGER"}


def base_env(step: Step, scratch: Path, target: Target | None = None) -> dict[str, str]:
    """The environment of a target's run: a fixed few variables passed through, a fresh HOME and
    TMPDIR, a CUDA target's driver settings (``cuda_env``), then the step's own (which win)."""
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LC_ALL", "C")
    env["HOME"] = str(scratch / "home")
    env["TMPDIR"] = str(scratch / "tmp")
    # Python's bytecode cache is a file a run writes into its own tree for the next run to read:
    # a cache across runs, which pw rejects. No run writes one (every arm, every kind of run alike).
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(cuda_env(target))
    env.update(step.env)
    return env


def _fresh_scratch(scratch: Path) -> None:
    if scratch.exists():
        shutil.rmtree(scratch)
    (scratch / "home").mkdir(parents=True)
    (scratch / "tmp").mkdir()


def step_outcome(result: ProcessResult, log_sha: str | None) -> ev.StepOutcome:
    return ev.StepOutcome(
        argv=result.argv,
        exit_code=result.exit_code,
        signal=result.signal,
        duration_s=round(result.wall_s, 6),
        timed_out=result.timed_out,
        log_sha256=log_sha,
    )


def _store_log(evidence: EvidenceStore, result: ProcessResult) -> str:
    out = Path(result.stdout_path).read_bytes() if Path(result.stdout_path).exists() else b""
    err = Path(result.stderr_path).read_bytes() if Path(result.stderr_path).exists() else b""
    header = f"$ {' '.join(result.argv)}\n".encode()
    return evidence.put(header + b"== stdout ==\n" + out + b"\n== stderr ==\n" + err)


def build(contract: Contract, target: Target, evidence: EvidenceStore, logs: Path) -> ev.BuildFinished:
    """Fresh copy, then every build step; the outcome names the first failing step."""
    workspace.fresh_copy(target.src_dir, target.build_dir, target.files)
    inputs = workspace.tree_digest(target.src_dir, target.files)
    steps: list[ev.StepOutcome] = []
    outcome = "ok"
    start = time.perf_counter()
    scratch = logs / f"scratch-build-{target.label}"
    for i, step in enumerate(contract.build):
        _fresh_scratch(scratch)
        result = run_process(
            step.argv,
            cwd=target.build_dir / step.cwd,
            env=base_env(step, scratch),
            timeout_s=step.timeout_s,
            stdout_path=logs / f"build-{target.label}-{i}.out",
            stderr_path=logs / f"build-{target.label}-{i}.err",
            confine=confine_for(target, target.build_dir / step.cwd),  # no .incbin of a reference
        )
        diagnostics.process_ran(result, what=f"build {target.label} step {i}")
        log_sha = _store_log(evidence, result)
        steps.append(step_outcome(result, log_sha))
        if not result.ok:
            from pw.workload import build_log

            refused = build_log.refused_write(evidence.get(log_sha), target.build_dir)
            if refused is not None and not result.timed_out:
                # The disk failed, not the code: nothing is recorded, and the same build runs again
                # once there is room (a candidate must not be rejected for a full disk).
                shutil.rmtree(scratch, ignore_errors=True)
                raise DiskError(target.build_dir, refused, kept=f"nothing of this build was recorded (its log: "
                                f"{evidence.path_for(log_sha)})")
            outcome = "timeout" if result.timed_out else "build-failed"
            break
    shutil.rmtree(scratch, ignore_errors=True)
    binary = image = problem = None
    if outcome == "ok":
        try:
            files = _all_files(target.build_dir)
            binary, image = workspace.tree_digest(target.build_dir, files), image_digest(target.build_dir, files)
        except WorkloadError as exc:  # a tree pw cannot hash or time (changes.built_files): a failed build, said why
            outcome, problem = "build-failed", exc.message
        except OSError as exc:  # it changed under the walk (a file made unreadable)
            outcome, problem = "build-failed", f"its built tree could not be hashed ({exc.strerror or exc})"
        if problem is not None and diagnostics.debugging():
            diagnostics.log().warning("tree-rejected", target=target.label, problem=problem)
    return ev.BuildFinished(
        target=target.label,
        inputs_sha256=inputs,
        outcome=outcome,
        steps=steps,
        duration_s=round(time.perf_counter() - start, 6),
        binary_sha256=binary,
        image_sha256=image,
        problem=problem,
    )


def _all_files(root: Path) -> list[str]:
    """The built tree's regular files; a ``WorkloadError`` (one line) for a tree pw will not judge."""
    return changes.built_files(root)


def declared_output(contract: Contract) -> str | None:
    """The oracle's output file, relative to the build tree, when the oracle compares one."""
    if contract.oracle.kind == "file" and contract.oracle.path:
        return (Path(contract.run.cwd) / contract.oracle.path).as_posix().removeprefix("./")
    return None


class RunTree:
    """The build tree around one run: shown through a throwaway overlay where the sandbox makes one
    (``changes`` is where its changes land, listed and discarded after the run), else snapshotted
    before and after (what the run created is removed). Either way ``after`` names every change in
    ``pw.workload.changes``' words and returns the output files the run wrote."""

    def __init__(self, root: Path, changes_dir: Path | None, before: changes.TreeState | None) -> None:
        self.root, self.changes, self.state = root, changes_dir, before

    @classmethod
    def before(cls, target: Target, scratch: Path, tag: str) -> RunTree:
        """``tag`` names the run in logs only: every run of one scratch directory (both arms of a
        campaign, one run after the other) shares its changes directory, kept between runs while
        its upper layer is empty (making and removing it cost more than the overlay itself)."""
        from pw.workload import containment

        del tag
        where = containment.throwaway_changes(target.build_dir, scratch.parent / f".{scratch.name}.changes")
        if where is not None:
            if changes.names_anything(where / "upper"):
                changes.discard(where)  # a run's changes not discarded (pw was killed): not the next run's
            return cls(target.build_dir, where, None)
        return cls(target.build_dir, None, changes.tree_state(target.build_dir))

    def after(self, declared: str | None) -> tuple[list[str], dict[str, str], bytes | None]:
        """(the run's changes in words, text of the files it created (its outputs), the bytes of
        the oracle's declared output file)."""
        skip = frozenset([declared] if declared else [])
        if self.changes is not None:
            upper = self.changes / "upper"
            found = changes.overlay_changes(upper, self.root, skip=skip) if upper.is_dir() else \
                changes.Changes(words=[], created_files=[], where=str(upper))
            where = upper
        else:
            now = changes.tree_state(self.root)
            found = changes.state_changes(self.state, now, skip=skip)
            where = self.root
        output = _read(where / declared) if declared else None
        created = {rel: text for rel in found.created_files
                   if (text := _read_text(where / rel, _CREATED_KEEP_BYTES)) is not None}
        if self.changes is None:
            changes.remove_created(self.root, self.state, now)
            if declared:
                (self.root / declared).unlink(missing_ok=True)
        return list(found.words), created, output

    def discard(self) -> None:
        """Drop what the run changed: the whole changes directory when its upper layer holds
        anything, else nothing (an empty upper layer is the next run's too)."""
        if self.changes is not None and changes.names_anything(self.changes / "upper"):
            changes.discard(self.changes)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def _read_text(path: Path, limit: int) -> str | None:
    """A created file's text (an output the stable oracle compares), when it is small enough."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text(errors="replace")
    except OSError:
        return None


def inputs_digest(contract: Contract, target: Target) -> str:
    """sha256 over the contract's declared inputs as found in the target's built tree (path and
    content of each; a missing one counts as missing): what the significance gate compares, so a
    candidate that edits its input to do less work is not timed against the baseline's."""
    h = hashlib.sha256()
    for rel in sorted(contract.inputs):
        path = target.build_dir / rel
        digest = workspace.file_sha256(path) if path.is_file() else "missing"
        h.update(rel.encode() + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()


def binary_digest(target: Target) -> str:
    """Hash of the whole built tree: what is about to be timed."""
    return workspace.tree_digest(target.build_dir, _all_files(target.build_dir))


def metric_value(contract: Contract, result: ProcessResult, stdout: str) -> tuple[float | None, str | None]:
    m = contract.metric
    if m.kind in ("wall", "operation"):  # an operation's cost replaces it once the run's profile is read
        return result.wall_s, None
    scale = _UNIT_SCALE[m.unit]
    pattern = m.region_pattern
    if pattern:
        found = re.findall(pattern, stdout)
        if not found:
            what = f"timer {m.timer!r}" if m.timer is not None else f"pattern {m.pattern!r}"
            return None, f"metric {what} not found in the output"
        raw = found[-1] if isinstance(found[-1], str) else found[-1][0]
    else:
        raw = None
        for line in reversed(stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(obj, dict) and m.json_key in obj:
                    raw = obj[m.json_key]
                    break
        if raw is None:
            return None, f"metric key {m.json_key!r} not found in any JSON line of the output"
    try:
        value = float(raw) * scale
    except (TypeError, ValueError):
        return None, f"metric value {raw!r} is not a number"
    if not value > 0:
        return None, f"metric value {value} is not positive"
    return value, None


def run_once(
    contract: Contract,
    target: Target,
    scratch: Path,
    *,
    argv: list[str] | None = None,
    tag: str = "run",
    trace_writes: bool = False,
    wrap: RunWrap | None = None,
) -> RunOutcome:
    """One execution in the built tree; every change it makes there is named (``side_effects``,
    in ``pw.workload.changes``' words) and none reaches the next run (``RunTree``).

    The run is sandboxed (``_confine``): stdout and stderr are pipes, the environment is the same
    for every kind of run, and nothing traces it, so a timed, oracle, holdout or profiled run look
    alike from inside. Files it leaves in the sandbox's scratch tmpfs are reported in
    `outside_writes`, processes it leaves running in `leftover_processes`.

    With ``wrap`` the run is also a profiled run (one kind of run): the profiler's prefixes, its
    environment and its output directory as ``adapters.base.RunWrap`` says, the same for every arm.

    Only where no sandbox can be made does `trace_writes` (and strace installed) trace the run for
    files written outside the build tree and its scratch directory: then it is the one defence
    left against a cache in /tmp, at the price of a tell (TracerPid) that the verdict's `proposed`
    ceiling already accounts for.
    """
    from pw.workload import write_trace as writes

    step = contract.run
    cwd = target.build_dir / step.cwd
    _fresh_scratch(scratch)
    tree = RunTree.before(target, scratch, tag)
    # Absolute: strace opens it from the run's working directory, not ours.
    trace_log = (scratch.parent / f".{scratch.name}-{tag}.strace").absolute()
    confine = confine_for(target, cwd, wrap.writable if wrap is not None else [], changes=tree.changes)
    prefix = writes.strace_prefix(trace_log) if trace_writes and confine is None else None
    env = base_env(step, scratch, target)
    if wrap is not None:
        env.update(wrap.env)
    try:
        result = run_process(
            (prefix or []) + list(argv or step.argv),
            cwd=cwd,
            env=env,
            timeout_s=step.timeout_s,
            outer=([*(wrap.outer_when_confined if confine is not None else []), *wrap.outer]
                   if wrap is not None else ()),
            attach=wrap.attach if wrap is not None else (),
            attach_log=Path(wrap.log) if wrap is not None and wrap.log else None,
            # Named by pw for pw: the program writes to pipes and never sees these paths.
            stdout_path=scratch / f"{tag}.out",
            stderr_path=scratch / f"{tag}.err",
            own_peak_rss=True,  # the no-collateral gate compares it; without, it is pw's own peak
            confine=confine,
        )
        diagnostics.process_ran(result, what=f"{tag} {target.label}")
        stdout = Path(result.stdout_path).read_text(errors="replace")
        stderr = Path(result.stderr_path).read_text(errors="replace") if Path(result.stderr_path).exists() else ""
        side_effects, created, output_file = tree.after(declared_output(contract))
    finally:
        tree.discard()
    outside_writes: list[str] = list(result.scratch_files)
    if prefix is not None:
        result = msgspec.structs.replace(result, argv=list(argv or step.argv))
        try:
            traced = trace_log.read_text(errors="replace")
        except FileNotFoundError:
            traced = ""
        trace_log.unlink(missing_ok=True)
        found = writes.written_paths(traced, str(cwd.resolve()))
        own = [str(target.build_dir.resolve()), str(scratch.resolve())]
        cache = cuda_jit_cache(target)
        outside_writes = writes.outside(found, own + ([str(cache.resolve())] if cache is not None else []))
    leftovers = [p.split(" ", 1)[-1] for p in result.leftover_processes]
    said = _profiler_said(wrap) if wrap is not None and not result.ok else ""
    value, metric_error = metric_value(contract, result, stdout) if result.ok else (None, None)
    return RunOutcome(result, stdout, value, metric_error, side_effects, output_file, outside_writes,
                      stderr=stderr, leftover_processes=leftovers, created=created, profiler_said=said)


def _profiler_said(wrap: RunWrap) -> str:
    """What the profiler said in its own log (RunWrap.log), "" when it has none."""
    return log_said(wrap.log) if wrap.log else ""


def classify(outcome: RunOutcome) -> str | None:
    """The failure class of a run, or None when it ran to a clean exit."""
    r = outcome.process
    if r.launch_error:
        return "launch-failed"
    if r.timed_out:
        return "timeout"
    if r.signal:
        return "crashed"
    if r.exit_code != 0:
        return "launch-failed"
    return None


def failure_message(contract: Contract, outcome: RunOutcome) -> str:
    said = f"; the profiler said: {outcome.profiler_said}" if outcome.profiler_said else ""
    return f"`{' '.join(outcome.process.argv)}` {describe(outcome.process, contract.run.timeout_s)}{said}"


def compare_with_reference(contract: Contract, src_dir: Path, outcome: RunOutcome, reference: str) -> Comparison:
    """Compare one run's output with a reference file from the (pristine, protected) source tree."""
    o = contract.oracle
    skip = contract.metric.region_pattern
    want = (src_dir / reference).read_text(errors="replace")
    if o.kind == "file":
        if outcome.output_file is None:
            return Comparison(False, f"the run did not write {o.path}")
        return compare_text(outcome.output_file.decode(errors="replace"), want, rtol=o.rtol, atol=o.atol)
    return compare_text(outcome.stdout, want, rtol=o.rtol, atol=o.atol, skip_pattern=skip)
