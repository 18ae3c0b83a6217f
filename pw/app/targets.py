"""Where each arm of a campaign is built and run, and what its timed runs are checked against.

The baseline is built from the run's `baseline/` copy, a candidate from its workspace, a chained
candidate's reference from its parent's workspace; each build tree is hashed, and a tree that no
longer hashes to what was built is rebuilt identically or refused. Shared by `pw start`,
`pw evaluate` and `pw confirm`.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from ledger import events as ev
from ledger.errors import RejectedCommand, ToolError
from projections.state import RunState
from pw.app import campaign
from pw.app.run import RunHandle
from pw.workload import containment, host, output_check, workspace
from pw.workload import steps as execute


def hidden_dirs(handle: RunHandle, state: RunState) -> list[str]:
    """What a target's sandbox hides (the runs directory, the user's workload directory)."""
    return containment.hidden_dirs(handle.path, state.run.workload)


def candidate_target(handle: RunHandle, state: RunState, cid: str, ws: Path, files: list[str]) -> execute.Target:
    return execute.Target(label=cid, src_dir=ws, build_dir=handle.path / "build" / cid, files=files,
                          hidden=hidden_dirs(handle, state))


def workspace_target(handle: RunHandle, state: RunState, cid: str) -> execute.Target:
    """A prepared candidate's target, from its workspace as it is now."""
    ws = handle.path / state.candidates[cid].prepared.workspace
    return candidate_target(handle, state, cid, ws, workspace.source_files(ws))


def baseline_target(handle: RunHandle, state: RunState) -> execute.Target:
    src = handle.path / "baseline"
    return execute.Target(label="baseline", src_dir=src, build_dir=handle.path / "build" / "baseline",
                          files=workspace.source_files(src), hidden=hidden_dirs(handle, state))


def ensure_baseline_built(handle: RunHandle, state: RunState) -> execute.Target:
    """The baseline build tree must still hash to what was built; if it is gone, rebuild it identically."""
    target = baseline_target(handle, state)
    recorded = state.builds["baseline"].binary_sha256
    if not target.build_dir.is_dir():
        rebuilt = execute.build(state.run.contract, target, handle.evidence, handle.logs)
        if rebuilt.binary_sha256 != recorded:
            raise ToolError("the baseline build tree was missing and a rebuild does not hash the same; start a new run")
    return target


def reference_target(handle: RunHandle, state: RunState, cand) -> execute.Target:
    """What a candidate is timed against: the baseline, or for a chained candidate (parent not the
    baseline) its parent's build, reused when its tree still hashes to what was built, rebuilt
    from the parent's workspace otherwise (and refused if the rebuild hashes differently)."""
    parent = cand.prepared.resolved_parent
    if parent == "baseline":
        return ensure_baseline_built(handle, state)
    built = state.builds.get(parent)
    if built is None or built.outcome != "ok":
        raise RejectedCommand(f"parent {parent!r} has no successful build to time against; evaluate it first")
    target = workspace_target(handle, state, parent)
    if target.build_dir.is_dir() and execute.binary_digest(target) == built.binary_sha256:
        return target
    rebuilt = execute.build(state.run.contract, target, handle.evidence, handle.logs)
    if rebuilt.binary_sha256 != built.binary_sha256:
        raise ToolError(f"the build tree of parent {parent!r} changed and a rebuild does not hash the same; "
                        "prepare the candidate on another parent")
    return target


def tool_versions(state: RunState) -> dict[str, str]:
    """The versions in force now: compilers asked again (a cheap `--version` each, so a compiler
    upgraded since `pw start` shows up as a changed condition), profilers as probed at preflight."""
    pf = state.preflight
    out = {p.name: p.version or "" for p in pf.profilers} if pf else {}
    out.update({c.name: c.version or "" for c in (host.tool_version(n) for n in host.COMPILERS) if c.path is not None})
    return dict(sorted(out.items()))


def stable_reference(handle: RunHandle, state: RunState) -> str | None:
    if state.run.contract.oracle.kind not in ("stable", "baseline"):
        return None
    sha = state.oracles["baseline"].output_sha256
    return handle.evidence.get(sha).decode(errors="replace") if sha else None


def secret_seed() -> int:
    """A seed nobody can know before it is drawn (the OS's entropy), recorded once it is used."""
    return secrets.randbits(63)


def expected_output(handle: RunHandle, oracle: ev.OracleChecked | None) -> output_check.Expected:
    def stored(sha: str | None) -> bytes | None:
        return handle.evidence.get(sha) if sha else None

    if oracle is None:
        return output_check.Expected(stdout=None, stderr=None, output_file_sha256=None)
    return output_check.expected(stored(oracle.output_sha256), stored(oracle.stderr_sha256),
                                 oracle.output_file_sha256)


def run_checks(handle: RunHandle, state: RunState, labels: list[str]) -> dict[str, campaign.RunChecks]:
    """Each arm's timed runs against its own oracle-checked output; a candidate's (and a hybrid arm's)
    may leave behind only what the baseline's oracle run left."""
    base = state.oracles.get("baseline")
    out = {"baseline": campaign.RunChecks(expected=expected_output(handle, base))}
    for label in labels:
        out[label] = campaign.RunChecks(expected=expected_output(handle, state.oracles.get(label)),
                                        allowed=list(base.left_behind) if base is not None else [])
    return out
