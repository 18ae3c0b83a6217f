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

# Profilers slow programs down; the capture gets this many times the run's own timeout.
CAPTURE_TIMEOUT_FACTOR = 60.0


class ProfileResult(msgspec.Struct, frozen=True):
    captured: ev.ProfileCaptured
    normalized: ev.ProfileNormalized
    profile: Profile
    stdout: bytes = b""  # the profiled program's stdout, checked against its oracle-checked output


def sandbox_prefix(contract: Contract, target: Target, cwd: Path, out_dir: Path, scratch: Path) -> list[str]:
    """The argv prefix that runs the profiler, and the program under it, in the target's sandbox.

    The profiler is inside (measured: with perf outside wrapping `bwrap ... prog`, bwrap's own set-up
    took 4 of 48 samples of a 50 ms program; inside, every sample is the program's, and valgrind
    and py-spy, which follow one process, need to be inside anyway). Its output directory is bound
    writable too. `env -i` gives the program exactly the environment of a timed run.
    """
    from adapters import sandbox as sb
    from pw.workload import containment
    from pw.workload.steps import base_env

    conf = containment.confinement(target.build_dir, target.hidden, cwd, extra_writable=[out_dir])
    if conf is None:
        return []
    env = sb.environment(base_env(contract.run, scratch))
    envs = [f"{k}={v}" for k, v in sorted(env.items())]
    return sb.wrap(conf.sandbox, conf.layout, []) + [shutil.which("env") or "/usr/bin/env", "-i", *envs]


def capture(
    contract: Contract, target: Target, adapter_name: str, evidence: EvidenceStore, scratch: Path,
    focus: tuple[str, int] | None = None, source_root: str | None = None,
) -> ProfileResult:
    """``focus`` (operation name, launch count) narrows adapters that filter (ncu: one kernel).
    ``source_root``: the build tree the binary's debug paths refer to, when not ``target.build_dir``
    (another run of a target profiled before, in a run directory copied since: its binary still
    names the tree it was built in, and its profiles must line up with the earlier ones)."""
    adapter = adapter_by_name(adapter_name)
    if focus is not None:
        adapter.focus(*focus)
    out_dir = scratch / f"profile-{target.label}-{adapter_name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    cwd = target.build_dir / contract.run.cwd
    req = CaptureRequest(
        argv=list(contract.run.argv),
        cwd=str(cwd.resolve()),
        out_dir=str(out_dir.absolute()),  # the tool writes there from the program's cwd
        label=target.label,
        env=dict(contract.run.env),
        timeout_s=contract.run.timeout_s * CAPTURE_TIMEOUT_FACTOR,
        wrap=sandbox_prefix(contract, target, cwd, out_dir, scratch),
    )
    from pw.workload import workspace

    before = workspace.snapshot(target.build_dir)
    try:
        cap = adapter.capture(req)
    except CaptureError as exc:
        raise ToolError(f"{adapter_name}: {exc}") from None
    finally:
        # Files the profiled run leaves in the build tree would change the tree's hash, and every
        # later campaign would then see a "swapped" binary: remove them, as a timed run would.
        for rel in sorted(set(workspace.snapshot(target.build_dir)) - set(before)):
            (target.build_dir / rel).unlink(missing_ok=True)
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


def renormalize(evidence: EvidenceStore, captured: ev.ProfileCaptured, build_dir: str) -> bytes:
    """The profile the adapter's pure normalize gives for the stored raw bytes (for audit)."""
    adapter = adapter_by_name(captured.adapter)
    artifacts = {role: evidence.get(sha) for role, sha in captured.artifacts.items()}
    return encode_profile(adapter.normalize(artifacts, captured.source_root or build_dir, captured.target))
