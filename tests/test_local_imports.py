"""Imports stand at the top of a module. Only `pw/cli` imports inside its functions (so `pw --help`
stays fast); anywhere else a function-level import needs an entry below, naming why
(docs/architecture.md, "Local imports")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pw", "ledger", "projections", "adapters")
EXEMPT = ("pw/cli/",)

# (module path, top-level package it imports inside a function) -> why that import stays local
_TORCH = "torch is optional: installed on GPU hosts only, and imported only where a GPU is used"
ALLOWED: dict[tuple[str, str], str] = {
    ("pw/agent/source/c_family.py", "tree_sitter"): "native parser, loaded on the first C-family parse",
    ("pw/agent/source/c_family.py", "tree_sitter_c"): "each grammar loads only when a file of its language is parsed",
    ("pw/agent/source/c_family.py", "tree_sitter_cpp"): "each grammar loads only when a file of its language is parsed",
    ("pw/agent/source/c_family.py", "tree_sitter_cuda"): "each grammar loads only when a file of its language is parsed",
    ("pw/agent/tokens.py", "bpe_openai"): "about 1 s of rank tables; imported inside a DeprecationWarning filter",
    ("pw/app/plots.py", "matplotlib"): "heavy; only drawing a report's plots needs it",
    ("pw/diagnostics.py", "structlog"): "every verb imports pw.diagnostics; structlog is needed only under PW_DEBUG",
    ("pw/kernel_profile/diagnostic.py", "torch"): _TORCH,
    ("pw/kernel_profile/diagnostic.py", "matplotlib"): "heavy; only the diagnostic's figure needs it",
    ("pw/kernel_profile/nvml.py", "pynvml"): "optional: NVML exists on GPU hosts only",
    ("pw/kernel_profile/precision.py", "scipy"): "scipy.stats costs about 2 s to import; only a t quantile needs it",
    ("pw/kernel_profile/runners/compute.py", "torch"): _TORCH,
    ("pw/kernel_profile/runners/nccl_comm.py", "torch"): _TORCH,
    ("pw/kernel_profile/runners/torch_ops.py", "torch"): _TORCH,
    ("pw/kernel_profile/runners/triton_gemm.py", "torch"): _TORCH,
    ("pw/kernel_profile/timing.py", "torch"): _TORCH,
    ("adapters/hpctoolkit.py", "hatchet"): "optional extra (`profileweaver[hpctoolkit]`)",
    ("adapters/torch_trace_run.py", "torch"): _TORCH,
}


def local_imports(path: Path, rel: str) -> list[tuple[str, str, int]]:
    """(module path, imported top-level package, line) for each import inside a function body."""
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                out.extend((rel, a.name.split(".")[0], child.lineno) for a in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                top = "." * child.level + (child.module or "").split(".")[0]
                out.append((rel, top, child.lineno))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=rel), False)
    return out


def product_local_imports(root: Path = ROOT) -> list[tuple[str, str, int]]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith(EXEMPT):
                found.extend(local_imports(path, rel))
    return found


def test_function_level_imports_outside_the_cli_are_only_the_allowed_ones():
    unexpected = [f"{rel}:{line} imports {top}" for rel, top, line in product_local_imports()
                  if (rel, top) not in ALLOWED]
    assert unexpected == [], "move these to the module's top, or add them to ALLOWED with the reason"


def test_every_allowed_entry_is_still_used():
    used = {(rel, top) for rel, top, _ in product_local_imports()}
    assert sorted(set(ALLOWED) - used) == []


def test_the_check_finds_imports_in_functions_only(tmp_path: Path):
    (tmp_path / "pw" / "cli").mkdir(parents=True)
    (tmp_path / "ledger").mkdir()
    (tmp_path / "pw" / "m.py").write_text(
        "import json\n"
        "def f():\n    from ledger import store\n    import os.path\n"
        "class C:\n    def g(self):\n        from . import sibling\n"
        "h = lambda: __import__('x')\n"
    )
    (tmp_path / "pw" / "cli" / "verb.py").write_text("def run():\n    from pw import m\n")
    (tmp_path / "ledger" / "n.py").write_text("if True:\n    import sys\ntry:\n    import zlib\nexcept ImportError:\n    pass\n")
    assert product_local_imports(tmp_path) == [("pw/m.py", "ledger", 3), ("pw/m.py", "os", 4), ("pw/m.py", ".", 7)]
