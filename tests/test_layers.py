"""Imports point down the layout table (AGENTS.md): each folder of `pw/` imports only the folders
below it, and nothing outside `pw/` (and the tests) imports `pw` at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# folder of pw/ -> the parts of pw/ it may import (itself always)
ALLOWED: dict[str, set[str]] = {
    "cli": {"app", "rules", "stats", "workload", "agent", "export", "kernel_profile", "remote", "diagnostics"},
    "app": {"rules", "stats", "workload", "agent", "export", "diagnostics"},
    "rules": {"stats"},
    "stats": set(),
    "workload": {"export", "diagnostics"},
    "agent": set(),
    "export": set(),
    "kernel_profile": {"diagnostics"},
    "remote": {"kernel_profile", "diagnostics"},
}


def pw_imports(path: Path) -> set[str]:
    """The parts of pw/ a module imports (`pw.app.run` -> app, `from pw import diagnostics` -> diagnostics)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "pw":
                out.update(parts[1:2] or [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("pw."))
    return out


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_each_folder_of_pw_imports_only_what_lies_below_it(folder: str):
    wrong = {}
    for path in sorted((ROOT / "pw" / folder).rglob("*.py")):
        extra = pw_imports(path) - ALLOWED[folder] - {folder}
        if extra:
            wrong[str(path.relative_to(ROOT))] = sorted(extra)
    assert wrong == {}


@pytest.mark.parametrize("folder", ["ledger", "projections", "adapters"])
def test_nothing_below_pw_imports_pw(folder: str):
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / folder).rglob("*.py")) if pw_imports(p)]
    assert offenders == []


def test_the_check_sees_both_import_forms(tmp_path: Path):
    probe = tmp_path / "m.py"
    probe.write_text("from pw import diagnostics\nfrom pw.app.run import RunHandle\nimport pw.cli.common\n")
    assert pw_imports(probe) == {"diagnostics", "app", "cli"}
