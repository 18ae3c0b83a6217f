"""What a candidate changed against its parent, as a unified diff over the parent's stored files."""

from __future__ import annotations

import difflib
from pathlib import Path

import msgspec

from ledger.evidence import EvidenceStore
from pw.workload import workspace


class TreeDiff(msgspec.Struct, frozen=True):
    changed: list[str]
    patch: bytes


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def diff_against_manifest(evidence: EvidenceStore, manifest_sha: str, root: Path, files: list[str]) -> TreeDiff:
    """Compare the files under `root` with the parent's manifest (path -> content sha256)."""
    parent: dict[str, str] = msgspec.json.decode(evidence.get(manifest_sha))
    now = {rel: workspace.file_sha256(root / rel) for rel in files}
    changed = sorted(rel for rel in set(parent) | set(now) if parent.get(rel) != now.get(rel))
    chunks: list[str] = []
    for rel in changed:
        old = _lines(evidence.get(parent[rel])) if rel in parent else []
        new = _lines((root / rel).read_bytes()) if rel in now else []
        a = f"a/{rel}" if rel in parent else "/dev/null"
        b = f"b/{rel}" if rel in now else "/dev/null"
        chunks.extend(difflib.unified_diff(old, new, fromfile=a, tofile=b))
        if chunks and not chunks[-1].endswith("\n"):
            chunks[-1] += "\n\\ No newline at end of file\n"
    return TreeDiff(changed=changed, patch="".join(chunks).encode())
