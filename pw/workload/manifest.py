"""Load `profileweaver.json` into a `Contract`, with checks the schema alone cannot express.

Every error is one line naming the field and what was expected, e.g.
`profileweaver.json: run.timeout_s: expected a number > 0, got "ten"`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

import msgspec

from ledger.contract import Contract, Metric, Oracle
from ledger.errors import InputError
from pw.export.validation import decode_as
from pw.workload.root import check_ancestor, discover_root, is_ancestor_path, rebase

MANIFEST = "profileweaver.json"


def load_manifest(workload: Path) -> tuple[Contract, bytes]:
    path = workload / MANIFEST
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{MANIFEST}: cannot read ({exc.strerror})") from None
    contract = decode_as(raw, Contract, name=MANIFEST)
    check_contract(contract, workload, name=MANIFEST)
    return contract, raw


def _relative(value: str, field: str, name: str) -> None:
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or "\x00" in value:
        raise InputError(f"{name}: {field}: expected a path inside the workload, got {value!r}")


def _argv_env(step, field: str, name: str) -> None:
    # A NUL byte or '=' in a variable name cannot be passed to exec(); say so now, not as a crash later.
    for j, arg in enumerate(step.argv):
        if "\x00" in arg:
            raise InputError(f"{name}: {field}.argv[{j}]: expected a string without NUL bytes")
    for key, value in getattr(step, "env", {}).items():
        if not key or "=" in key or "\x00" in key or "\x00" in value:
            raise InputError(f"{name}: {field}.env: expected NAME=value pairs (no '=' in names, no NUL), "
                             f"got {key!r}")


def _generator(gen, field: str, name: str) -> None:
    from pw.workload.holdouts import placeholders

    for j, arg in enumerate(gen.argv):
        if "\x00" in arg:
            raise InputError(f"{name}: {field}.argv[{j}]: expected a string without NUL bytes")
    used = placeholders(gen)
    missing = [p for p in used if p not in gen.ranges]
    if missing:
        raise InputError(f"{name}: {field}.ranges: expected a [low, high] range for placeholder {missing[0]!r}")
    unused = sorted(set(gen.ranges) - set(used))
    if unused:
        raise InputError(f"{name}: {field}.ranges: {unused[0]!r} is not a placeholder of argv "
                         f"(expected one of {used})")
    for key, (low, high) in sorted(gen.ranges.items()):
        if low > high:
            raise InputError(f"{name}: {field}.ranges.{key}: expected [low, high] with low <= high, got [{low}, {high}]")
    if gen.seed is not None and gen.seed not in gen.ranges:
        raise InputError(f"{name}: {field}.seed: expected the name of a placeholder (one of {used}) or null, "
                         f"got {gen.seed!r}")


def check_contract(c: Contract, workload: Path, *, name: str) -> None:
    """Cross-field rules: paths stay inside the workload, each oracle kind has what it needs. The
    checks run in this order, and the first that fails is the one line the user sees."""
    ancestor = is_ancestor_path(c.source.root)
    _check_commands_and_paths(c, workload, ancestor, name)
    _check_metric(c.metric, name)
    _check_oracle(c.oracle, name)
    _check_files_exist(c, workload if ancestor else workload / c.source.root, name)


def _check_commands_and_paths(c: Contract, workload: Path, ancestor: bool, name: str) -> None:
    """Every command's argv and environment, the oracle's generators, and every path relative."""
    if ancestor or PurePosixPath(c.source.root).is_absolute():
        # the project's root above the workload; every other path stays relative to the workload
        check_ancestor(c.source.root, workload, name)
    else:
        _relative(c.source.root, "source.root", name)
    _argv_env(c.run, "run", name)
    for i, step in enumerate(c.build):
        _argv_env(step, f"build[{i}]", name)
    for i, h in enumerate(c.oracle.holdout):
        _argv_env(h, f"oracle.holdout[{i}]", name)
    for i, gen in enumerate(c.oracle.generators):
        _generator(gen, f"oracle.generators[{i}]", name)
    if c.oracle.generators and c.oracle.kind in ("exit", "command"):
        raise InputError(f"{name}: oracle.generators: expected an output-comparing oracle kind (stdout, file, "
                         f"baseline or stable), got {c.oracle.kind!r}")
    for j, arg in enumerate(c.oracle.argv or []):
        if "\x00" in arg:
            raise InputError(f"{name}: oracle.argv[{j}]: expected a string without NUL bytes")
    for i, glob in enumerate(c.source.editable):
        _relative(glob, f"source.editable[{i}]", name)
    for i, step in enumerate(c.build):
        _relative(step.cwd, f"build[{i}].cwd", name)
    _relative(c.run.cwd, "run.cwd", name)
    for i, item in enumerate(c.inputs):
        _relative(item, f"inputs[{i}]", name)


def _check_metric(m: Metric, name: str) -> None:
    """An operation metric names its operation; a region metric names exactly one way to read it."""
    if m.kind == "operation" and not (m.operation or "").strip():
        raise InputError(f"{name}: metric.operation: expected the function or kernel to judge when kind is 'operation'")
    given = [f for f in ("timer", "pattern", "json_key") if getattr(m, f)]
    if m.kind != "roi" and given:
        raise InputError(f"{name}: metric.{given[0]}: expected only with kind 'roi' (a region the program times), "
                         f"got kind {m.kind!r}")
    if m.kind != "roi":
        return
    if not given:
        raise InputError(f"{name}: metric: expected 'timer' (the label of a timer line the program prints, "
                         "e.g. \"GPU Runtime\"), 'pattern' or 'json_key' when kind is 'roi'")
    if len(given) > 1:
        raise InputError(f"{name}: metric: expected one of 'timer', 'pattern' or 'json_key', got "
                         + " and ".join(repr(f) for f in given))
    if m.timer is not None and (not m.timer.strip(" :") or "\n" in m.timer or "\x00" in m.timer):
        raise InputError(f"{name}: metric.timer: expected the label of one output line (e.g. \"GPU Runtime\"), "
                         f"got {m.timer!r}")
    if m.pattern:
        try:
            compiled = re.compile(m.pattern)
        except re.error as exc:
            raise InputError(f"{name}: metric.pattern: expected a regular expression ({exc})") from None
        if compiled.groups < 1:
            raise InputError(f"{name}: metric.pattern: expected one capture group around the number")


def _check_oracle(o: Oracle, name: str) -> None:
    """Each oracle kind has the fields it compares by, and its paths are relative."""
    if o.streams is not None:
        if o.kind != "stable":
            raise InputError(f"{name}: oracle.streams: expected only with kind 'stable', got kind {o.kind!r}")
        if len(set(o.streams)) != len(o.streams):
            raise InputError(f"{name}: oracle.streams: expected each of stdout, stderr, files at most once")
    if o.kind in ("stdout", "file") and not o.reference:
        raise InputError(f"{name}: oracle.reference: expected a reference file when kind is {o.kind!r}")
    if o.kind == "file" and not o.path:
        raise InputError(f"{name}: oracle.path: expected the output file the run writes when kind is 'file'")
    if o.kind == "command" and not o.argv:
        raise InputError(f"{name}: oracle.argv: expected a command when kind is 'command'")
    for field in ("reference", "path"):
        value = getattr(o, field)
        if value:
            _relative(value, f"oracle.{field}", name)


def _check_files_exist(c: Contract, root: Path, name: str) -> None:
    """The source root, the oracle's reference files and a file for every editable glob exist."""
    o = c.oracle
    if not root.is_dir():
        raise InputError(f"{name}: source.root: expected a directory inside the workload, got {c.source.root!r}")
    for i, h in enumerate(o.holdout):
        _relative(h.reference, f"oracle.holdout[{i}].reference", name)
        if not (root / h.reference).is_file():
            raise InputError(f"{name}: oracle.holdout[{i}].reference: file {h.reference!r} not found")
    if o.reference and not (root / o.reference).is_file():
        raise InputError(f"{name}: oracle.reference: file {o.reference!r} not found in the workload")
    for i, glob in enumerate(c.source.editable):
        try:
            matched = any(p.is_file() for p in root.glob(glob))
        except (ValueError, IndexError, NotImplementedError):  # '', '.', 'a**' are not usable globs
            raise InputError(f"{name}: source.editable[{i}]: expected a file glob, got {glob!r}") from None
        if not matched:
            raise InputError(f"{name}: source.editable[{i}]: {glob!r} matches no file in the workload")


def place_in_root(contract: Contract, workload: Path) -> tuple[Contract, list[str]]:
    """A checked manifest made relative to the tree pw copies, and the decision line saying which.

    `source.root` naming an ancestor is taken as given; a manifest at the default root whose build
    reaches outside the workload gets the discovered root, as an inferred contract would."""
    if is_ancestor_path(contract.source.root):
        root = (workload / contract.source.root).resolve()
        rel = workload.resolve().relative_to(root).as_posix()
        line = f"root: source.root {contract.source.root!r} names {root} -> build and run from {rel}/ inside it"
        return rebase(contract, rel), [line]
    if contract.source.root != ".":
        return contract, []
    decision = discover_root(workload)
    if not decision.is_ancestor:
        return contract, []
    found = msgspec.structs.replace(
        contract, source=msgspec.structs.replace(contract.source, root=os.path.relpath(decision.root, workload.resolve())))
    line = (f"root: {decision.reason} -> copy {decision.root} and build and run from {decision.workload_rel}/ "
            "inside it")
    return rebase(found, decision.workload_rel), [line]
