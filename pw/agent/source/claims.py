"""The agent's mechanism text is its claim: kept for audit, read by no gate, checked against the patch.

When the changed code and the claim disagree (the claim names a loop interchange and the patch never
reorders a loop; it names tiling and no loop nest got deeper), the report says so as a finding for
the reader. The check reads each function the patch touched, as the parent and the candidate have
it, with the parsers (tree-sitter for C, C++ and CUDA): the loop nests' variables, outermost first.
Pure: bytes in, sentences out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pw.agent.source import c_family
from pw.agent.source.regions import changed_lines, function_regions

_INTERCHANGE = re.compile(r"interchang|loop[- ]order|reorder(?:ed|ing)? (?:the )?loops?|swap(?:ped)? loops?", re.I)
_TILING = re.compile(r"\btil(?:e|ed|ing)\b|\bblock(?:ed|ing)\b|cache[- ]block", re.I)


def _children_loops(node):
    """The loops directly nested in ``node`` (no other loop between)."""
    out = []
    for child in node.children:
        if child.type in c_family.LOOP_TYPES:
            out.append(child)
        else:
            out.extend(_children_loops(child))
    return out


def _paths(loop) -> list[tuple[str | None, ...]]:
    """Every chain of nested loops from ``loop`` down to an innermost one, as loop variables."""
    here = c_family.loop_var(loop)
    inner = _children_loops(loop)
    return [(here,)] if not inner else [(here, *rest) for child in inner for rest in _paths(child)]


def _nests(source: bytes, rel: str, name: str) -> list[tuple[str | None, ...]] | None:
    """Every loop nest of function ``name`` in one file, as chains of loop variables from the outside
    in. None when the file is not C, C++ or CUDA."""
    if c_family.language_of(rel) is None:
        return None
    _, tree = c_family.parse_tree(rel, source)
    out: list[tuple[str | None, ...]] = []
    for node in c_family.walk(tree.root_node):
        if node.type == "function_definition" and name in c_family.text(node).split("(", 1)[0]:
            for loop in _children_loops(node):
                out.extend(_paths(loop))
    return out


def _reordered(before: list[tuple], after: list[tuple]) -> bool:
    """Whether some nest of ``after`` runs the loops of a nest of ``before`` in another order."""
    return any(sorted(map(str, a)) == sorted(map(str, b)) and a != b for a in after for b in before if len(a) > 1)


def claim_findings(claim: str, parent: Mapping[str, bytes], candidate: Mapping[str, bytes], patch: bytes) -> list[str]:
    """Sentences for the report where the changed code does not show what ``claim`` names."""
    lines = changed_lines(patch)
    touched = [r for r in function_regions(candidate) if any(r.start <= ln <= r.end for ln in lines.get(r.file, ()))]
    pairs = []
    for r in touched:
        if r.file in parent:
            before, after = _nests(parent[r.file], r.file, r.name), _nests(candidate[r.file], r.file, r.name)
            if before is not None and after is not None:
                pairs.append((r.name, before, after))
    if not pairs:
        return []
    out = []
    if _INTERCHANGE.search(claim) and not any(_reordered(b, a) for _, b, a in pairs):
        names = ", ".join(n for n, _, _ in pairs)
        out.append(f"the claim names a loop interchange, but no loop nest of the changed code ({names}) was "
                   "reordered")
    if _TILING.search(claim) and not any(max(map(len, a), default=0) > max(map(len, b), default=0)
                                         for _, b, a in pairs):
        names = ", ".join(n for n, _, _ in pairs)
        out.append(f"the claim names tiling or blocking, but no loop nest of the changed code ({names}) got deeper")
    return out
