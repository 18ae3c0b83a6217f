"""Capture a target with an adapter, keep the raw evidence, normalize it, and record both.

Raw artifacts go to the content-addressed store untouched; the normalized profile is stored too,
so an auditor can re-run the adapter's pure `normalize` on the raw bytes and compare.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from adapters.base import CaptureError, CaptureRequest, read_artifacts
from adapters.registry import adapter_by_name
from ledger import events as ev
from ledger.contract import Contract
from ledger.errors import ToolError
from ledger.evidence import EvidenceStore
from ledger.profile import Profile, encode_profile
from pw.workload.steps import Target

CUDA_SUFFIXES = (".cu", ".cuh")


def language_of(argv: list[str], editable: list[str] | tuple[str, ...] = ()) -> str:
    """'cuda' when an editable source is CUDA (its discovery is the GPU timeline), 'python' for a
    Python interpreter or script, else 'native'."""
    if any(e.endswith(CUDA_SUFFIXES) for e in editable):
        return "cuda"
    exe = argv[0].rsplit("/", 1)[-1]
    if exe.startswith("python") or (argv and argv[0].endswith(".py")):
        return "python"
    return "native"


# Profilers slow programs down; the capture gets this many times the run's own timeout.
CAPTURE_TIMEOUT_FACTOR = 60.0


class ProfileResult(msgspec.Struct, frozen=True):
    captured: ev.ProfileCaptured
    normalized: ev.ProfileNormalized
    profile: Profile
    stdout: bytes = b""  # the profiled program's stdout, checked against its oracle-checked output


def sandbox_prefix(contract: Contract, target: Target, cwd: Path, out_dir: Path, scratch: Path) -> list[str]:
    """The argv prefix that runs a profiler that must be inside (valgrind is the program's process
    image, py-spy follows one process tree), and the program under it, in the target's sandbox;
    its output directory is bound writable too. `env -i` gives the program exactly the environment
    of a timed run. perf does not use it: it wraps the timed run's sandbox and launcher from outside
    (``CaptureRequest.launch``), so the program's parent is the launcher as in a timed run, and the
    samples of the sandbox's set-up and of the launcher are left out by its normalize.
    """
    from adapters import sandbox as sb
    from pw.workload import containment
    from pw.workload.steps import base_env, cuda_jit_cache

    cache = cuda_jit_cache(target)
    conf = containment.confinement(target.build_dir, target.hidden, cwd,
                                   extra_writable=[out_dir, *([cache] if cache is not None else [])])
    if conf is None:
        return []
    env = sb.environment(base_env(contract.run, scratch, target))
    envs = [f"{k}={v}" for k, v in sorted(env.items())]
    return sb.wrap(conf.sandbox, conf.layout, []) + [shutil.which("env") or "/usr/bin/env", "-i", *envs]


def capture(
    contract: Contract, target: Target, adapter_name: str, evidence: EvidenceStore, scratch: Path,
    focus: tuple[str, int] | None = None, source_root: str | None = None, argv: list[str] | None = None,
) -> ProfileResult:
    """``focus`` (operation name, launch count) narrows adapters that filter (ncu: one kernel).
    ``argv``: the command line to profile, when not the manifest's (a fresh input drawn like a timed
    pair's, so that the program cannot tell its profiled run by its input).
    ``source_root``: the build tree the binary's debug paths refer to, when not ``target.build_dir``
    (another run of a target profiled before, in a run directory copied since: its binary still
    names the tree it was built in, and its profiles must line up with the earlier ones)."""
    adapter = adapter_by_name(adapter_name)
    if focus is not None:
        adapter.focus(*focus)
    out_dir = scratch / f"profile-{target.label}-{adapter_name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    req = _capture_request(contract, target, out_dir, scratch, argv)
    cap = _capture_leaving_no_files(adapter, adapter_name, req, target)
    artifacts = read_artifacts(cap)
    stdout = artifacts.get("stdout.txt", b"")
    shas = {role: evidence.put(data) for role, data in sorted(artifacts.items())}
    root = source_root or str(target.build_dir.resolve())
    profile = adapter.normalize(artifacts, root, target.label)
    profile_sha = evidence.put(encode_profile(profile))
    shutil.rmtree(out_dir, ignore_errors=True)
    primary = profile.primary_metric
    return ProfileResult(
        captured=ev.ProfileCaptured(
            adapter=adapter_name,
            target=target.label,
            artifacts=shas,
            wall_s=round(cap.wall_s, 6),
            tool_version=cap.tool_version or None,
            command=cap.commands[0] if cap.commands else [],
            can_reprofile=adapter.spec.can_reprofile,
            source_root=root,
            launched=cap.launched,
            program_wall_s=round(cap.program.wall_s, 6) if cap.program is not None else None,
            program_cpu_s=round(cap.program.user_s + cap.program.sys_s, 6) if cap.program is not None else None,
        ),
        normalized=ev.ProfileNormalized(
            adapter=adapter_name,
            target=target.label,
            profile_sha256=profile_sha,
            primary_metric=primary,
            total=profile.totals.get(primary, 0.0),
        ),
        profile=profile,
        stdout=stdout,
    )


def _capture_request(contract: Contract, target: Target, out_dir: Path, scratch: Path,
                     argv: list[str] | None) -> CaptureRequest:
    """The profiled run, launched as a timed run is: the same launcher, environment and sandbox."""
    from pw.workload import containment
    from pw.workload.steps import base_env, confine_for, cuda_env, cuda_jit_cache

    cwd = target.build_dir / contract.run.cwd
    cache = cuda_jit_cache(target)
    return CaptureRequest(
        argv=list(argv if argv is not None else contract.run.argv),
        cwd=str(cwd.resolve()),
        out_dir=str(out_dir.absolute()),  # the tool writes there from the program's cwd
        label=target.label,
        # Profilers that run the program themselves (the GPU ones) lay this over their own
        # environment: a CUDA target's driver settings, as in every timed run, then the step's.
        env={**cuda_env(target), **contract.run.env},
        timeout_s=contract.run.timeout_s * CAPTURE_TIMEOUT_FACTOR,
        wrap=sandbox_prefix(contract, target, cwd, out_dir, scratch),
        # Launched as a timed run is: the same launcher, environment and sandbox (perf wraps them
        # from outside); the launcher's report is the evidence that the profiled run is the timed
        # program (the mechanism gate's profile-consistency check, gate rules v5).
        launch=True,
        launch_env=base_env(contract.run, scratch, target),
        confine=confine_for(target, cwd),
        tool_confine=containment.confinement(target.build_dir, target.hidden, cwd,
                                             extra_writable=[out_dir, *([cache] if cache is not None else [])]),
    )


def _capture_leaving_no_files(adapter, adapter_name: str, req: CaptureRequest, target: Target):
    """The adapter's capture; a tool's failure as a ToolError, and no file left in the build tree."""
    from pw.workload import workspace

    before = workspace.snapshot(target.build_dir)
    try:
        return adapter.capture(req)
    except CaptureError as exc:
        raise ToolError(f"{adapter_name}: {exc}") from None
    finally:
        # Files the profiled run leaves in the build tree would change the tree's hash, and every
        # later campaign would then see a "swapped" binary: remove them, as a timed run would.
        for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
            (target.build_dir / rel).unlink(missing_ok=True)


def renormalize(evidence: EvidenceStore, captured: ev.ProfileCaptured, build_dir: str) -> bytes:
    """The profile the adapter's pure normalize gives for the stored raw bytes (for audit)."""
    adapter = adapter_by_name(captured.adapter)
    artifacts = {role: evidence.get(sha) for role, sha in captured.artifacts.items()}
    return encode_profile(adapter.normalize(artifacts, captured.source_root or build_dir, captured.target))


def executable_digest(contract: Contract, target: Target) -> str | None:
    """sha256 of the program's executable file alone (``argv[0]`` inside the build tree): what must
    be byte-identical for a profile to be reused. None when ``argv[0]`` is looked up on PATH (an
    interpreter: its script imports other files, so no single file stands for the program)."""
    import hashlib

    exe = contract.run.argv[0] if contract.run.argv else ""
    if "/" not in exe:
        return None
    root = target.build_dir.resolve()
    path = (target.build_dir / contract.run.cwd / exe).resolve()
    if not path.is_file() or not path.is_relative_to(root):
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def measured(result: ProfileResult, timed_wall_s: float | None, executable_sha256: str | None) -> ProfileResult:
    """The capture with its observed overhead (profiled wall / uninstrumented timed wall) and the
    timed build's executable hash recorded on it."""
    wall = result.captured.wall_s
    overhead = round(wall / timed_wall_s, 3) if timed_wall_s and timed_wall_s > 0 and wall > 0 else None
    captured = msgspec.structs.replace(result.captured, timed_wall_s=timed_wall_s, overhead=overhead,
                                       executable_sha256=executable_sha256)
    return msgspec.structs.replace(result, captured=captured)


def reuse(contract: Contract, target: Target, source: ev.ProfileCaptured, evidence: EvidenceStore) -> ProfileResult:
    """A capture of ``target`` that reuses ``source``'s raw evidence (same adapter, byte-identical
    executable): normalized again under ``target``'s label, recorded with ``reused_from``; no
    profiler runs."""
    adapter = adapter_by_name(source.adapter)
    artifacts = {role: evidence.get(sha) for role, sha in source.artifacts.items()}
    profile = adapter.normalize(artifacts, source.source_root, target.label)
    profile_sha = evidence.put(encode_profile(profile))
    primary = profile.primary_metric
    captured = msgspec.structs.replace(source, target=target.label, timed_wall_s=None, overhead=None,
                                       reused_from=source.target)
    return ProfileResult(
        captured=captured,
        normalized=ev.ProfileNormalized(adapter=source.adapter, target=target.label, profile_sha256=profile_sha,
                                        primary_metric=primary, total=profile.totals.get(primary, 0.0)),
        profile=profile, stdout=artifacts.get("stdout.txt", b""),
    )
