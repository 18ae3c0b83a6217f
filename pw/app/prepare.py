"""`pw prepare`: a workspace per candidate, copied from its parent, and the files the agent may edit."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger import events as ev
from pw.app.run import RunHandle
from pw.rules import candidates
from pw.workload import workspace


class Prepared(msgspec.Struct, frozen=True):
    id: str
    parent: str
    workspace: str
    editable: list[str]
    targets: list[str]


def parent_source_dir(handle: RunHandle, parent: str) -> Path:
    return handle.path / "baseline" if parent == "baseline" else handle.path / "candidates" / parent / "src"


def store_manifest(handle: RunHandle, root: Path, files: list[str]) -> tuple[str, str]:
    """Put every file of a tree in the evidence store; return (tree digest, manifest sha256)."""
    manifest = {rel: handle.evidence.put((root / rel).read_bytes()) for rel in files}
    digest = workspace.tree_digest(root, files)
    return digest, handle.evidence.put(msgspec.json.encode(manifest, order="deterministic"))


def prepare(handle: RunHandle, texts: list[str]) -> list[Prepared]:
    state = handle.state()
    specs = [candidates.parse_candidate(t) for t in texts]
    plan = candidates.decide_prepare(state, specs)
    contract = state.run.contract
    hot_files = [t for t in (state.source_targets.editable if state.source_targets else [])]
    events: list[ev.Payload] = []
    out: list[Prepared] = []
    made: list[Path] = []
    try:
        for spec, parent in plan:
            src = parent_source_dir(handle, parent)
            files = workspace.source_files(src)
            digest, manifest_sha = store_manifest(handle, src, files)
            if parent != "baseline":
                recorded = state.candidates[parent].diff
                if recorded is not None and recorded.source_sha256 != digest:
                    from ledger.errors import RejectedCommand

                    raise RejectedCommand(
                        f"parent {parent!r} was edited after its evaluation; evaluate it again or choose another parent"
                    )
            dest = handle.path / "candidates" / spec.id / "src"
            made.append(dest.parent)
            workspace.fresh_copy(src, dest, files)
            workspace.share_with_agent(dest)  # the judge-uid set-up: the agent's one writable place
            protected = candidates.protected_files(contract)
            editable = [f for f in files if candidates.is_editable(f, contract) and f not in protected]
            targets = [f for f in hot_files if f in editable] or editable
            rel_ws = dest.relative_to(handle.path).as_posix()
            events.append(
                ev.CandidatePrepared(
                    id=spec.id,
                    parent=spec.parent,
                    resolved_parent=parent,
                    mechanism=spec.mechanism,
                    workspace=rel_ws,
                    parent_source_sha256=digest,
                    parent_manifest_sha256=manifest_sha,
                    editable=editable,
                    targets=targets,
                )
            )
            out.append(Prepared(spec.id, parent, str(dest), editable, targets))
        handle.record(state, events)
    except BaseException:
        import shutil

        for path in made:  # nothing half-made: no workspace without its event
            shutil.rmtree(path, ignore_errors=True)
        raise
    return out
