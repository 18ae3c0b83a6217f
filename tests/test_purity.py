"""The pure folders stay pure: `pw/rules/`, `pw/stats/` and `projections/` (its materializer aside)
import no process, file-system or clock module and do no file I/O, so what they decide is a
function of their arguments alone, and `pw audit` can recompute it from the ledger."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE = [*sorted((ROOT / "pw" / "rules").glob("*.py")), *sorted((ROOT / "pw" / "stats").glob("*.py")),
        *sorted(p for p in (ROOT / "projections").glob("*.py") if p.name != "materialize.py")]
FORBIDDEN_MODULES = {"os", "subprocess", "shutil", "time", "tempfile", "socket", "pathlib", "io", "glob",
                     "datetime", "random", "fcntl", "signal", "threading", "multiprocessing"}
FILE_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "unlink", "mkdir", "rmdir", "touch",
                "iterdir", "glob", "rglob", "rename", "replace_file", "open"}
# The only way out of a pure module that is allowed: a lazily imported module of ours that is pure too.
OUR_IMPURE = {"projections.materialize", "ledger.store", "ledger.evidence", "ledger.files", "adapters.process",
              "adapters.registry"}


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in FORBIDDEN_MODULES or name in OUR_IMPURE or name.startswith(("pw.app", "pw.workload", "pw.cli")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in {"open", "print", "input", "exec", "eval"}:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: calls {func.id}()")
            elif isinstance(func, ast.Attribute) and func.attr in FILE_METHODS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: calls .{func.attr}()")
    return found


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_module_does_no_io(path: Path):
    assert violations(path) == []


def test_the_check_can_fail():
    """The checker itself finds each kind of impurity (so a green run means something)."""
    probe = ROOT / "tests" / "data" / "_purity_probe.py"  # under ROOT: violations() reports relative paths
    probe.write_text("import os\nfrom subprocess import run\nfrom pw.workload import steps\n"
                     "def f(p):\n    open(p)\n    return p.read_text()\n")
    try:
        found = violations(probe)
    finally:
        probe.unlink()
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports os", "imports subprocess", "imports pw.workload", "calls open()", "calls .read_text()"]
