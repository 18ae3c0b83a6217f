"""The hybrid arm: the candidate's change to the hotspot alone, spliced into its parent (gate rules 19).

When a candidate's patch reaches beyond the hotspot's own function (``Attribution.beyond``), a
truthful profile can still mislead: a saving made elsewhere can be shown as the hotspot's by moving
the hotspot's work into code the profile does not tie to it. The mechanism is then asked causally:
the parent with only the hotspot's changed function(s) taken from the candidate (the *hybrid*) is
built, checked by the same oracle, and timed as a third, interleaved arm of the candidate's campaign;
it must carry at least half of the candidate's saving (``pw.rules.gates``).

The splice is by the parsers' function regions (tree-sitter for C, C++ and CUDA; ``ast`` for Python):
the reference's lines of the hotspot's function are replaced by the candidate's lines of the same
function. A hybrid that does not build or fails the oracle means the changes hang together (a data
layout change touching a struct and every function): the verdict says so and the mechanism is judged
by changed-code attribution alone. Every step is an event (``HybridPrepared``, its BuildFinished and
OracleChecked), and the hybrid's tree is kept as evidence, so audit replays them.
"""

from __future__ import annotations

import shutil

import msgspec

from ledger import events as ev
from ledger.errors import InputError
from projections.state import RunState
from pw.agent.source import regions
from pw.app import profiled
from pw.app.run import RunHandle
from pw.app.targets import hidden_dirs
from pw.workload import correctness, diffing, workspace
from pw.workload import steps as execute


def label_of(cid: str) -> str:
    """The hybrid arm's target label (a '.' no candidate id may hold, so it never collides)."""
    return f"{cid}.hybrid"


def splice(parent: dict[str, bytes], candidate: dict[str, bytes], name: str, file: str | None
           ) -> tuple[dict[str, bytes] | None, list[str], str]:
    """(the parent's files with the candidate's version of the function ``name`` (in ``file``), the
    functions spliced, why not when None)."""
    ref = [r for r in regions.function_regions(parent) if r.name == name and (file is None or r.file == file)]
    cand = [r for r in regions.function_regions(candidate) if r.name == name and (file is None or r.file == file)]
    if not ref or not cand:
        side = "parent" if not ref else "candidate"
        return None, [], f"the hotspot's function {name} is not a function of the {side}'s source"
    out = dict(parent)
    done = []
    for r in sorted(ref, key=lambda r: (r.file, -r.start)):  # bottom up: earlier line numbers stay valid
        match = next((c for c in cand if c.file == r.file), None)
        if match is None:
            continue
        old = parent[r.file].decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
        new = candidate[match.file].decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
        lines = old[: r.start - 1] + new[match.start - 1: match.end] + old[r.end:]
        out[r.file] = "".join(lines).encode("utf-8", errors="surrogateescape")
        done.append(f"{name}@{r.file}")
    return out, sorted(done), ""


def prepare(handle: RunHandle, state: RunState, cid: str, attempt: int, candidate: execute.Target,
            attribution: ev.Attribution | None, fresh: list[list[str]], reference: execute.Target,
            progress) -> tuple[RunState, execute.Target | None]:
    """Build and check the hybrid arm when the patch reaches beyond the hotspot; (state, its target or
    None). Records HybridPrepared (and the hybrid's build and oracle) whenever one was needed."""
    hot = state.hotspot
    if attribution is None or not attribution.beyond or hot is None:
        return state, None
    label = label_of(cid)
    parent = profiled.parent_files(handle, state.candidates[cid].prepared.parent_manifest_sha256)
    mine = profiled.tree_files(candidate.src_dir, candidate.files)
    spliced, functions, why = splice(parent, mine, hot.name, hot.file)

    def record(status: str, **extra) -> RunState:
        return handle.record(state, [ev.HybridPrepared(id=cid, attempt=attempt, label=label, status=status,
                                                       functions=functions, **extra)])

    if spliced is None:
        return record(f"coupled: {why}"), None
    if (inside := _reaching_inside(handle, state, cid, mine, hot.name, hot.file)):
        # Spliced with the function, a #define (or inline assembly) would act on the parent's code after
        # it as well: the hybrid would not be the hotspot's change alone (a red team's #define inside the
        # hotspot rewrote a helper further down, and the hybrid carried the helper's saving).
        return record(f"coupled: the hotspot's change holds {inside}, which acts beyond its function"), None
    if spliced == parent:
        return record("hotspot-unchanged: the candidate leaves the hotspot's own function as its parent has it"), None
    progress(f"hybrid arm: the parent with only {', '.join(functions)} from {cid}")
    src = handle.path / "hybrids" / cid
    shutil.rmtree(src, ignore_errors=True)
    for rel, data in spliced.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    files = sorted(spliced)
    manifest = {rel: handle.evidence.put(spliced[rel]) for rel in files}
    manifest_sha = handle.evidence.put(msgspec.json.encode(manifest, order="sorted"))
    patch = diffing.diff_against_manifest(handle.evidence, state.candidates[cid].prepared.parent_manifest_sha256,
                                          src, files).patch
    target = execute.Target(label=label, src_dir=src, build_dir=handle.path / "build" / label, files=files,
                            hidden=hidden_dirs(handle, state))
    built = execute.build(state.run.contract, target, handle.evidence, handle.logs)
    state = handle.record(state, [built])
    evidence = {"source_sha256": manifest_sha, "patch_sha256": handle.evidence.put(patch)}
    if built.outcome != "ok":
        return record("coupled: the hybrid does not build (the hotspot's change needs the rest of the patch)",
                      **evidence), None
    oracle = correctness.check(
        state.run.contract, target, handle.path / "baseline", handle.path / "scratch" / label, handle.evidence,
        stable_reference=_stable(handle, state), baseline=reference if reference.label == "baseline" else None,
        fresh=fresh, allowed=list(state.oracles["baseline"].left_behind) if "baseline" in state.oracles else [],
    )
    state = handle.record(state, [oracle.event])
    if not oracle.event.passed:
        return record(f"coupled: the hybrid fails the oracle ({oracle.event.detail[:160]})", **evidence), None
    return record("built", **evidence), target


def with_its_own_side(handle: RunHandle, state: RunState, cid: str, attribution: ev.Attribution | None,
                      arm: execute.Target | None) -> ev.Attribution | None:
    """``attribution`` with the hybrid arm's part read in the hybrid's own tree: its hotspot's code and
    the lines its own diff against the parent changed (the candidate's changed lines are numbered in
    the candidate's files, not in the hybrid's)."""
    hot = state.hotspot
    if attribution is None or arm is None or hot is None:
        return attribution
    manifest = state.candidates[cid].prepared.parent_manifest_sha256
    mine = profiled.tree_files(arm.src_dir, arm.files)
    patch = diffing.diff_against_manifest(handle.evidence, manifest, arm.src_dir, arm.files).patch
    own = regions.attribution(hot.operation, hot.name, hot.file, profiled.parent_files(handle, manifest), mine, patch)
    return msgspec.structs.replace(attribution, hybrid=own.changed)


def _reaching_inside(handle: RunHandle, state: RunState, cid: str, mine: dict[str, bytes], name: str,
                     file: str | None) -> str:
    """The first changed line inside the hotspot's function (in the candidate) whose effect reaches
    beyond it, as "what at file:line"; "" when there is none."""
    patch = handle.evidence.get(state.candidates[cid].diff.patch_sha256)
    own = [r for r in regions.function_regions(mine) if r.name == name and (file is None or r.file == file)]
    for rel, ln, what in regions.reaching_lines(mine, regions.changed_lines(patch)):
        if any(r.file == rel and r.start <= ln <= r.end for r in own):
            return f"{what} at {rel}:{ln}"
    return ""


def _stable(handle: RunHandle, state: RunState) -> str | None:
    from pw.app.targets import stable_reference

    return stable_reference(handle, state)


def rebuilt(handle: RunHandle, state: RunState, cid: str) -> execute.Target | None:
    """The hybrid arm of ``cid``'s latest campaign, its build tree checked (``--more``, ``confirm``)."""
    label = label_of(cid)
    src = handle.path / "hybrids" / cid
    if not src.is_dir() or label not in state.builds:
        return None
    target = execute.Target(label=label, src_dir=src, build_dir=handle.path / "build" / label,
                            files=workspace.source_files(src), hidden=hidden_dirs(handle, state))
    if not target.build_dir.is_dir() or execute.binary_digest(target) != state.builds[label].binary_sha256:
        execute.build(state.run.contract, target, handle.evidence, handle.logs)
    return target


def recorded_arm(handle: RunHandle, state: RunState, cid: str) -> execute.Target:
    """The hybrid arm an attempt recorded as built, for the pairs that continue its campaign (a
    resumed evaluation, `--more`): without it those pairs would time two arms where the recorded
    ones timed three, so a tree that is gone refuses the command instead."""
    target = rebuilt(handle, state, cid)
    if target is None:
        raise InputError(f"{handle.path / 'hybrids' / cid}: the hybrid arm {cid!r}'s campaign was timed with is "
                         "gone (its source tree or its build record); restore it, or edit the candidate's "
                         "workspace to start a new attempt")
    return target
