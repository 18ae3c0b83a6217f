"""Functions fit a screen: at most MAX_LONG functions of product code run over MAX_LINES lines
(issue 23). Every def counts, nested ones and methods too, from its `def` line to its last line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("pw", "ledger", "projections", "adapters")
MAX_LINES = 80
# Left long on purpose (docs/architecture.md, "Functions over 80 lines"): the CLI's verb table, and the
# per-rank body of the NCCL runner, whose ranks must issue the same collectives in the same order.
MAX_LONG = 5


def long_functions(roots: list[Path], max_lines: int = MAX_LINES) -> list[tuple[int, str]]:
    """(lines, "path:line name") of every function longer than ``max_lines``, longest first."""
    out = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > max_lines:
                        out.append((lines, f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def test_at_most_five_functions_of_product_code_run_over_80_lines():
    found = long_functions([ROOT / d for d in PRODUCT])
    assert len(found) <= MAX_LONG, (
        f"{len(found)} functions over {MAX_LINES} lines (at most {MAX_LONG}): "
        + "; ".join(f"{where} ({n} lines)" for n, where in found))


def test_the_count_sees_nested_functions_and_methods(tmp_path: Path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(
        f"def short():\n    def inner():\n{body.replace('    ', '        ')}\n    return inner\n\n"
        f"class C:\n    def method(self):\n{body.replace('    ', '        ')}\n")
    names = [where.split()[-1] for _, where in long_functions([tmp_path])]
    assert sorted(names) == ["inner", "method", "short"]
