"""Which code a candidate changed, as function regions and lines of its tree (gate rules 19).

``function_regions`` lists every function definition of a tree's C, C++, CUDA and Python files,
with the same parsers the source locator uses (tree-sitter, ``ast``). ``changed_lines`` reads a
unified diff (the recorded patch) for the lines each file gained or changed on the new side; a
deletion marks the new-side lines around it, since the code there changed. ``attribution`` puts them
together into the ``ledger.events.Attribution`` a campaign records: what counts as the hotspot's part
in each arm's runs, and what the patch touches beyond the hotspot's own function.

Pure functions of bytes; the caller reads the files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ledger.events import Attribution, CodeRegion, CodeSide
from pw.agent.source import c_family, directives, python_ast

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def function_regions(files: Mapping[str, bytes]) -> list[CodeRegion]:
    """Every function definition in ``files`` (relative path -> contents) a parser can read."""
    out: list[CodeRegion] = []
    for rel, data in sorted(files.items()):
        try:
            if rel.endswith(".py"):
                index, _ = python_ast.parse_file(rel, data)
            elif c_family.language_of(rel) is not None:
                index, _ = c_family.parse_file(rel, data)
            else:
                continue
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue  # a file no parser reads has no functions to attribute; its lines still count
        out.extend(CodeRegion(file=rel, name=f.name, start=f.line_start, end=f.line_end) for f in index.functions)
    return out


def changed_lines(patch: bytes) -> dict[str, list[int]]:
    """New-side line numbers each file of a unified diff added or changed (file relative, no a/ b/)."""
    out: dict[str, set[int]] = {}
    current: str | None = None
    new_line = 0
    for raw in patch.decode("utf-8", errors="replace").splitlines():
        if raw.startswith("+++ "):
            path = raw[4:].split("\t", 1)[0].strip()
            current = None if path == "/dev/null" else path.removeprefix("b/")
            continue
        if raw.startswith("--- "):
            continue
        m = _HUNK.match(raw)
        if m:
            new_line = int(m.group(1))
            continue
        if current is None or not raw or raw.startswith("\\"):
            continue
        kind = raw[0]
        if kind == "+":
            out.setdefault(current, set()).add(new_line)
            new_line += 1
        elif kind == "-":
            # The code around a deletion changed: mark the lines on both sides of it.
            out.setdefault(current, set()).update(x for x in (new_line - 1, new_line) if x >= 1)
        elif kind == " ":
            new_line += 1
    return {f: sorted(v) for f, v in sorted(out.items())}


def reaching_lines(files: Mapping[str, bytes], lines: Mapping[str, list[int]]) -> list[tuple[str, int, str]]:
    """(file, line, what) of the changed lines of C-family files whose effect is not confined to the
    function they sit in: a preprocessor directive, or inline assembly (``pw.agent.source.directives``)."""
    out = []
    for rel, changed in sorted(lines.items()):
        if rel not in files or c_family.language_of(rel) is None:
            continue
        text = directives.Text(files[rel])
        for ln in changed:
            kind = text.directive(ln)
            if kind is not None:
                out.append((rel, ln, f"a preprocessor directive (#{kind})" if kind else "a preprocessor directive"))
            elif text.has_asm(ln):
                out.append((rel, ln, "inline assembly"))
    return out


def line_control(files: Mapping[str, bytes], patch: bytes) -> list[str]:
    """The patch's changed lines that rewrite the build's line tables (``#line``, a linemarker, the
    assembler's ``.loc``/``.file``/``.line``), each as "file:line (what)": pw reads where a run's time
    went from those tables, so a candidate may not write them."""
    out = []
    for rel, changed in sorted(changed_lines(patch).items()):
        if rel not in files or c_family.language_of(rel) is None:
            continue
        text = directives.Text(files[rel])
        out.extend(f"{rel}:{ln} ({what}: it rewrites the line tables pw reads a run's time by)"
                   for ln in changed if (what := text.line_control(ln)) is not None)
    return out


def _touched(regions: list[CodeRegion], lines: dict[str, list[int]]) -> list[CodeRegion]:
    return [r for r in regions if any(r.start <= ln <= r.end for ln in lines.get(r.file, ()))]


def attribution(hotspot_operation: str, hotspot_name: str, hotspot_file: str | None,
                reference_files: Mapping[str, bytes], candidate_files: Mapping[str, bytes],
                patch: bytes) -> Attribution:
    """What counts as the hotspot's part in each arm (``ledger.events.Attribution``).

    The hotspot's own code is its function's regions by name (in its file when the profile knew it);
    an operation that is no function of the tree (a kernel of a library, a function without source)
    is matched by name. In the candidate's runs every function the patch touched and every line it
    changed count too; in the reference's, the ceiling's reach adds the same functions as they were."""
    ref_regions = function_regions(reference_files)
    cand_regions = function_regions(candidate_files)
    lines = changed_lines(patch)

    def own(regions: list[CodeRegion]) -> list[CodeRegion]:
        return [r for r in regions if r.name == hotspot_name and (hotspot_file is None or r.file == hotspot_file)]

    hot_ref, hot_cand = own(ref_regions), own(cand_regions)
    touched = _touched(cand_regions, lines)
    changed = {(r.file, r.name) for r in touched}
    reach = [r for r in ref_regions if (r.file, r.name) in changed]
    beyond_fns = sorted(f"{r.name}@{r.file}" for r in touched if r not in hot_cand)
    inside = {(r.file, ln) for r in touched for ln in range(r.start, r.end + 1)}
    loose = sorted({f for f, ls in lines.items() if any((f, ln) not in inside for ln in ls)})
    # A directive or inline assembly inside a function acts beyond it (a #define rewrites every function
    # after it): the patch then reaches beyond the hotspot even when all its lines are inside it.
    reaching = [f"{what} at {rel}:{ln}" for rel, ln, what in reaching_lines(candidate_files, lines)
                if (rel, ln) in inside]
    hotspot = CodeSide(regions=hot_ref, operations=[] if hot_ref else [hotspot_name])
    return Attribution(
        hotspot_operation=hotspot_operation,
        hotspot=hotspot,
        changed=CodeSide(regions=_unique(hot_cand + touched), lines=lines,
                         operations=[] if hot_cand else [hotspot_name]),
        reach=CodeSide(regions=_unique(hot_ref + reach), operations=hotspot.operations),
        changed_functions=sorted(f"{r.name}@{r.file}" for r in touched),
        beyond=beyond_fns + [f"lines of {f} outside any function" for f in loose] + reaching,
    )


def _unique(regions: list[CodeRegion]) -> list[CodeRegion]:
    seen: dict[tuple[str, str, int], CodeRegion] = {}
    for r in regions:
        seen.setdefault((r.file, r.name, r.start), r)
    return [seen[k] for k in sorted(seen)]
