"""`pw import RUN TOOL=PATH`: bring a pre-captured profile of a tool that does not run here into a run.

The partial adapter reads the files at PATH (``read``, the only I/O), normalizes them (pure), and the
run records one ProfileImported event: every artifact by hash under raw/, the normalized profile,
the gates the evidence can never pass and a bounded brief. Nothing is re-measured; candidates are
still built, checked and timed by `pw evaluate`, whose timed runs carry the run's own profiler.
"""

from __future__ import annotations

import os
from pathlib import Path

from adapters.partial import PartialAdapter
from adapters.registry import partial_adapters
from ledger import events as ev
from ledger.errors import InputError, RejectedCommand
from ledger.profile import encode_profile
from pw.agent.import_brief import render
from pw.agent.tokens import TOKENIZER, count_tokens
from pw.app.run import RunHandle

# Files of the target's tree the profile's paths are matched against (a capture machine's absolute
# paths end with them). A tree larger than this is matched on its first files only.
MAX_KNOWN_FILES = 5000


def parse_spec(text: str) -> tuple[PartialAdapter, str]:
    """``TOOL=PATH`` -> (the partial adapter, PATH)."""
    by_name = {a.spec.name: a for a in partial_adapters()}
    tool, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(f"{text!r}: expected TOOL=PATH with TOOL one of {', '.join(sorted(by_name))}")
    if tool not in by_name:
        raise InputError(f"{text!r}: {tool!r} is not an importing (partial) adapter; expected one of "
                         f"{', '.join(sorted(by_name))}")
    return by_name[tool], path


def known_files(tree: Path) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            out.append(str(Path(root, f).relative_to(tree)))
            if len(out) >= MAX_KNOWN_FILES:
                return out
    return out


def import_profiles(run_dir: Path, specs: list[str], *, target: str = "baseline",
                    actor: str = "cli") -> list[ev.ProfileImported]:
    """Read and normalize every TOOL=PATH, then record them in one append: all or none."""
    parsed = [parse_spec(spec) for spec in specs]
    handle = RunHandle(run_dir)
    state = handle.state()
    if state.run is None:
        raise RejectedCommand(f"{run_dir}: the run has not started; run `pw start` first")
    if target == "baseline":
        tree = run_dir / "baseline"
    elif target in state.candidates:
        tree = run_dir / "candidates" / target / "src"
    else:
        known = ", ".join(sorted(state.candidates)) or "none"
        raise InputError(f"--target {target!r}: expected baseline or a prepared candidate (known: {known})")
    files = known_files(tree) if tree.is_dir() else []
    events = [_prepare(handle, adapter, path, spec, tree, files, target) for (adapter, path), spec in zip(parsed, specs)]
    handle.record(state, list(events), actor=actor)
    return events


def _prepare(handle: RunHandle, adapter: PartialAdapter, path: str, spec: str, tree: Path, files: list[str],
             target: str) -> ev.ProfileImported:
    usable = adapter.probe()
    if not usable.usable:
        raise InputError(f"{spec}: {usable.reason}")
    artifacts = adapter.read(path)
    try:
        profile = adapter.normalize(artifacts, str(tree), target, known_files=files)
        findings = adapter.findings(artifacts, files)
    except ValueError as exc:
        raise InputError(f"{spec}: {exc}") from None
    # Stored before the event that names them: unreferenced blobs are harmless, a reference to a
    # missing one is not.
    hashes = {role: handle.evidence.put(data) for role, data in sorted(artifacts.items())}
    profile_sha = handle.evidence.put(encode_profile(profile))
    brief, tokens = render(profile, adapter=adapter.spec.name, tool=adapter.spec.tool, source=path,
                           gate_limits=adapter.spec.gate_limits, ceiling=adapter.spec.ceiling,
                           findings=findings, run=str(handle.path), count=count_tokens)
    return ev.ProfileImported(
        adapter=adapter.spec.name, target=target, source=path, artifacts=hashes, tool_version=profile.tool_version,
        profile_sha256=profile_sha, primary_metric=profile.primary_metric,
        total=profile.totals.get(profile.primary_metric, 0.0), ceiling=adapter.spec.ceiling,
        gate_limits=dict(adapter.spec.gate_limits), brief=brief, tokens=tokens, tokenizer=TOKENIZER,
        files=referenced_files(profile))


def referenced_files(profile) -> list[str]:
    """The run files a profile names. Matching a capture path against only these gives the same
    file as matching it against the whole tree (each chosen file is the longest match there)."""
    return sorted({o.file for o in profile.operations if o.file} | {lc.file for lc in profile.lines})


def renormalize_import(evidence, imported: ev.ProfileImported) -> bytes:
    """The profile an imported event's stored artifacts normalize to today (for `pw audit`)."""
    from adapters.registry import adapter_by_name

    adapter = adapter_by_name(imported.adapter)
    artifacts = {role: evidence.get(sha) for role, sha in imported.artifacts.items()}
    return encode_profile(adapter.normalize(artifacts, "", imported.target, known_files=imported.files))
