"""The source locator: from a measured hotspot function to a bounded set of source targets.

`locate` parses every C-family (or Python) file under the workload root with a real parser, finds
the hotspot's definition and emits targets by role, in priority order:

- hotspot: the definition, with its hot loop nest as `focus`;
- callee: functions it calls that are defined in the editable tree, to a bounded depth;
- data: declarations of what it touches (parameter/local struct types, globals, macros, classes);
- writer: code that builds the data passed to it (its callers' allocations, the fill functions
  they call, other functions writing the same struct type, global or attribute);
- sibling: up to three same-shaped definitions (name stem or parameter types) in the editable tree.

Slices are bounded (per slice and in total, see `slices`), the hotspot slice is always kept, and
the result depends only on the files' contents: the same tree gives byte-identical output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ledger.errors import InputError
from pw.agent.source import c_family, patterns, python_ast, slices
from pw.agent.source.model import (
    ROLES,
    AccessFact,
    FileIndex,
    FrontierEntry,
    FunctionInfo,
    GlobalInfo,
    Macro,
    SourceTargets,
    Target,
    TypeInfo,
)

MAX_SLICE_LINES = 80
MAX_TOTAL_LINES = 300
MAX_SIBLINGS = 3
MAX_CALLEES = 8
MAX_DATA = 8
MAX_WRITERS = 6
MAX_FRONTIER = 8
MAX_FRONTIER_ITEMS = 4
MAX_CALL_SITES = 4
MAX_FILES = 2000
MAX_FILE_BYTES = 1_000_000
PASS_THROUGH_HOPS = 2
IGNORED_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist", "site-packages", "CMakeFiles",
                          "venv", "env", "_build"})
PYTHON_SUFFIXES = frozenset({".py"})
# Builtins whose result is a scalar: an argument produced by them carries no data path worth listing.
SCALAR_PRODUCERS = frozenset({"int", "float", "str", "bool", "len", "abs", "min", "max", "round", "sum", "atoi",
                              "atol", "atof", "strtol", "strtod", "strtoul", "sizeof"})


# =========================================================================================== parsing


@dataclass
class _Tree:
    """Every parsed file under the root, with name lookups across files."""

    root: Path
    family: str  # "c" (C, C++, CUDA) or "python"
    files: dict[str, FileIndex] = field(default_factory=dict)
    syntax: dict[str, object] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    editable: set[str] = field(default_factory=set)
    functions: dict[str, list[FunctionInfo]] = field(default_factory=dict)
    types: dict[str, list[TypeInfo]] = field(default_factory=dict)
    globals: dict[str, list[GlobalInfo]] = field(default_factory=dict)
    macros: dict[str, Macro] = field(default_factory=dict)  # function-like, first definition by path
    call_sites: dict[tuple[str, int, str], list] = field(default_factory=dict)
    _all: list[FunctionInfo] | None = None
    _callers: dict[str, list] | None = None

    def add(self, rel: str, index: FileIndex, syntax: object, text: str) -> None:
        self.files[rel] = index
        self.syntax[rel] = syntax
        self.lines[rel] = [line.rstrip("\r") for line in text.split("\n")]
        for fn in index.functions:
            self.functions.setdefault(fn.name, []).append(fn)
        for info in index.types:
            self.types.setdefault(info.name, []).append(info)
        for info in index.globals:
            self.globals.setdefault(info.name, []).append(info)
        for macro in index.macros:
            self.macros.setdefault(macro.name, macro)

    def all_functions(self) -> list[FunctionInfo]:
        if self._all is None:
            self._all = [fn for rel in sorted(self.files) for fn in self.files[rel].functions]
        return self._all

    def callers(self) -> dict[str, list]:
        """Callee name -> [(caller, call)], in path and line order (built once)."""
        if self._callers is None:
            self._callers = {}
            for fn in self.all_functions():
                for call in fn.calls:
                    self._callers.setdefault(call.callee, []).append((fn, call))
        return self._callers


def _family(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in PYTHON_SUFFIXES:
        return "python"
    if suffix in c_family.SUFFIXES:
        return "c"
    raise InputError(
        f"cannot locate source in {path!r}: expected a C, C++, CUDA or Python file "
        f"({', '.join(sorted([*c_family.SUFFIXES, *PYTHON_SUFFIXES]))})"
    )


def _discover(root: Path, family: str) -> list[str]:
    """Source files of the family under root, sorted; hidden and build/vendor folders are skipped."""
    wanted = PYTHON_SUFFIXES if family == "python" else set(c_family.SUFFIXES)
    found: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in IGNORED_DIRS)
        for name in sorted(names):
            if PurePosixPath(name).suffix.lower() in wanted:
                path = Path(directory, name)
                found.append(path.relative_to(root).as_posix())
                if len(found) >= MAX_FILES:
                    return sorted(found)
    return sorted(found)


def _expand_editable(root: Path, globs: list[str]) -> set[str]:
    editable: set[str] = set()
    for pattern in globs:
        try:
            matches = sorted(root.glob(pattern))
        except (ValueError, NotImplementedError):
            raise InputError(f"editable pattern {pattern!r} must be a glob relative to the source root") from None
        for match in matches:
            if match.is_dir():
                editable.update(p.relative_to(root).as_posix() for p in match.rglob("*") if p.is_file())
            elif match.is_file():
                editable.add(match.relative_to(root).as_posix())
    return editable


def _parse_tree(root: Path, hotspot_file: str, editable: list[str], defines: frozenset[str] | None = None) -> _Tree:
    family = _family(hotspot_file)
    tree = _Tree(root=root, family=family, editable=_expand_editable(root, editable))
    files = _discover(root, family)
    if hotspot_file not in files:
        files = sorted({*files, hotspot_file})
    raw: list[tuple[str, bytes]] = []
    for rel in files:
        path = root / rel
        try:
            if path.stat().st_size > MAX_FILE_BYTES and rel != hotspot_file:
                continue
            raw.append((rel, path.read_bytes()))
        except OSError as error:
            if rel == hotspot_file:
                raise InputError(f"cannot read hotspot file {rel!r} under {root}: {error.strerror}") from None
    if family == "python":
        for rel, data in raw:
            try:
                index, syntax = python_ast.parse_file(rel, data)
            except (SyntaxError, ValueError) as error:
                if rel == hotspot_file:
                    raise InputError(f"cannot parse hotspot file {rel!r}: {error}") from None
                continue
            text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
            tree.add(rel, index, syntax, text)
        return tree
    # C family: macros first (a header's AT(g, i, j) is used by the .c files), then the index.
    parsed = [(rel, data, *c_family.parse_tree(rel, data)) for rel, data in raw]
    # Macro definitions in #ifdef branches the build's flags do not select are not the code compiled.
    inactive = {rel: c_family.inactive_ranges(syntax, defines) for rel, _, _, syntax in parsed}
    own = {rel: c_family.collect_macros(rel, syntax, inactive[rel]) for rel, _, _, syntax in parsed}
    visible: dict[str, Macro] = {}
    for rel in sorted(own):
        for macro in own[rel]:
            visible.setdefault(macro.name, macro)
    for rel, data, language, syntax in parsed:
        index = c_family.index_tree(rel, language, syntax, {**visible, **{m.name: m for m in own[rel]}}, own[rel],
                                    inactive[rel])
        tree.add(rel, index, syntax, data.decode("utf-8", "replace"))
    return tree


# ========================================================================================= resolution


@lru_cache(maxsize=4096)
def _stem_of(path: str) -> str:
    return PurePosixPath(path).stem


def _same_stem(a: str, b: str) -> bool:
    return _stem_of(a) == _stem_of(b)


def _resolve(tree: _Tree, name: str, near: FunctionInfo, receiver: str = "", editable_only: bool = False
             ) -> FunctionInfo | None:
    candidates = tree.functions.get(name, [])
    if editable_only:
        candidates = [c for c in candidates if c.file in tree.editable]
    if tree.family == "python" and receiver in ("self", "cls") and near.owner:
        own = [c for c in candidates if c.owner == near.owner]
        candidates = own or candidates
    if not candidates:
        return None

    def rank(c: FunctionInfo):
        return (0 if near.owner and c.owner == near.owner else 1,
                0 if c.file == near.file else 1 if _same_stem(c.file, near.file) else 2,
                c.file, c.line_start)

    return min(candidates, key=rank)


def _resolve_type(tree: _Tree, name: str | None, near_file: str) -> TypeInfo | None:
    for _ in range(5):  # typedef chains are short; a cycle must not loop forever
        if not name or name not in tree.types:
            return None
        info = min(tree.types[name], key=lambda t: (t.kind == "typedef", t.file != near_file,
                                                     not _same_stem(t.file, near_file), t.file, t.line_start))
        if info.alias_of is None:
            return info
        name = info.alias_of
    return None


def _resolve_global(tree: _Tree, name: str, near_file: str) -> GlobalInfo | None:
    candidates = tree.globals.get(name, [])
    if not candidates:
        return None
    return min(candidates, key=lambda g: (g.file != near_file, g.kind == "extern",
                                          not _same_stem(g.file, near_file), g.file not in tree.editable, g.file,
                                          g.line_start))


def _key(fn: FunctionInfo) -> tuple[str, int, str]:
    return (fn.file, fn.line_start, fn.qualname)


def _where(fn: FunctionInfo) -> str:
    return f"{fn.qualname}@{fn.file}:{fn.line_start}"


def _find_hotspot(tree: _Tree, hotspot_file: str, name: str, hot_lines: list[int] | None) -> FunctionInfo:
    defined = tree.files[hotspot_file].functions
    matches = [f for f in defined if name in (f.name, f.qualname) or f.qualname.endswith((f"::{name}", f".{name}"))]
    if not matches:
        listed = ", ".join(sorted({f.qualname for f in defined})[:12]) or "none"
        raise InputError(f"function {name!r} is not defined in {hotspot_file}; functions defined there: {listed}")
    hot = hot_lines or []
    return min(matches, key=lambda f: (-sum(f.line_start <= h <= f.line_end for h in hot), f.line_start))


def _focus(fn: FunctionInfo, hot_lines: list[int] | None) -> tuple[int, int] | None:
    tops = [loop for loop in fn.loops if loop.depth == 1]
    hot = [h for h in (hot_lines or []) if fn.line_start <= h <= fn.line_end]
    if hot:
        scored = [(sum(loop.line_start <= h <= loop.line_end for h in hot), -loop.line_start, loop) for loop in tops]
        best = max(scored, key=lambda s: s[:2], default=None)
        if best is not None and best[0] > 0:
            return best[2].line_start, best[2].line_end
        return min(hot), max(hot)
    if not tops:
        return None

    def nest_depth(top) -> int:
        return max(l.depth for l in fn.loops if top.line_start <= l.line_start and l.line_end <= top.line_end)

    best = max(tops, key=lambda l: (nest_depth(l), l.line_end - l.line_start, -l.line_start))
    return best.line_start, best.line_end


# ============================================================================================ roles


@dataclass
class _Pick:
    role: str
    file: str
    line_start: int
    line_end: int
    symbol: str
    reason: str
    focus: tuple[int, int] | None = None
    rank: int = 0


def _callees(tree: _Tree, hot: FunctionInfo, depth: int) -> list[_Pick]:
    seen = {_key(hot)}
    queue: list[tuple[FunctionInfo, int]] = [(hot, 0)]
    picks: list[_Pick] = []
    while queue and len(picks) < MAX_CALLEES:
        fn, level = queue.pop(0)
        if level >= depth:
            continue
        for call in fn.calls:
            target = _resolve(tree, call.callee, fn, call.receiver, editable_only=True)
            if target is None or _key(target) in seen:
                continue
            seen.add(_key(target))
            picks.append(_Pick("callee", target.file, target.line_start, target.line_end, target.qualname,
                               f"called by {fn.qualname} at line {call.line} (depth {level + 1})"))
            queue.append((target, level + 1))
            if len(picks) >= MAX_CALLEES:
                break
    return picks


def _type_names(hot: FunctionInfo) -> list[tuple[str, str]]:
    names = [(p.base_type, f"type of parameter {p.name}") for p in hot.params if p.base_type]
    names += [(base, f"type of local {local}") for local, base in hot.local_types]
    return names


def _data(tree: _Tree, hot: FunctionInfo) -> tuple[list[_Pick], list[TypeInfo], list[GlobalInfo]]:
    picks: list[_Pick] = []
    types: list[TypeInfo] = []
    seen: set[tuple[str, int]] = set()
    for name, reason in _type_names(hot):
        info = _resolve_type(tree, name, hot.file)
        if info is None or (info.file, info.line_start) in seen:
            continue
        seen.add((info.file, info.line_start))
        types.append(info)
        picks.append(_Pick("data", info.file, info.line_start, info.line_end, info.name, reason))
    if tree.family == "python" and hot.owner:
        owner = _resolve_type(tree, hot.owner, hot.file)
        if owner is not None and (owner.file, owner.line_start) not in seen:
            seen.add((owner.file, owner.line_start))
            types.append(owner)
            picks.append(_Pick("data", owner.file, owner.line_start, _class_head_end(tree, owner, hot), owner.name,
                               f"class of {hot.qualname}"))
    globals_: list[GlobalInfo] = []
    touched = sorted({*hot.reads, *(w.name for w in hot.writes)} - set(hot.locals) - {p.name for p in hot.params})
    for name in touched:
        info = _resolve_global(tree, name, hot.file)
        if info is None or (info.file, info.line_start) in seen:
            continue
        seen.add((info.file, info.line_start))
        globals_.append(info)
        how = "written" if any(w.name == name for w in hot.writes) else "read"
        what = "macro used" if info.kind == "macro" else f"global {how}"
        picks.append(_Pick("data", info.file, info.line_start, info.line_end, info.name, f"{what} by {hot.qualname}"))
    for call in hot.calls:
        macro = tree.macros.get(call.callee)
        if macro is None or call.callee in tree.functions:
            continue
        info = _resolve_global(tree, call.callee, hot.file)
        if info is None or (info.file, info.line_start) in seen:
            continue
        seen.add((info.file, info.line_start))
        picks.append(_Pick("data", info.file, info.line_start, info.line_end, info.name,
                           f"macro used by {hot.qualname}"))
    return picks[:MAX_DATA], types, globals_


def _class_head_end(tree: _Tree, owner: TypeInfo, hot: FunctionInfo) -> int:
    """A class slice shows its attributes: up to the end of __init__, or up to the first method."""
    methods = sorted((f for f in tree.files[owner.file].functions
                      if f.owner == owner.name and owner.line_start <= f.line_start <= owner.line_end),
                     key=lambda f: f.line_start)
    init = next((m for m in methods if m.name == "__init__"), None)
    if init is not None and init.line_end < hot.line_start:
        return init.line_end
    first = next((m for m in methods if m.line_start > owner.line_start), None)
    return max(owner.line_start, first.line_start - 1) if first is not None else owner.line_end


class _Frontier:
    """Builds frontier entries and writer picks while tracing the data passed into the hotspot."""

    def __init__(self, tree: _Tree, hot: FunctionInfo) -> None:
        self.tree = tree
        self.hot = hot
        self.entries: dict[str, dict[str, list[str]]] = {}
        self.types: dict[str, str] = {}
        self.writers: dict[tuple[str, int, str], tuple[FunctionInfo, set[int], str, int]] = {}
        self.traced: set[tuple[int, tuple[str, int, str], str]] = set()
        self.param_writes: dict[tuple[tuple[str, int, str], int, int], bool] = {}

    def entry(self, symbol: str, type_: str = "") -> dict[str, list[str]]:
        if symbol not in self.entries:
            self.entries[symbol] = {"producers": [], "movers": [], "consumers": []}
            self.types[symbol] = type_
        return self.entries[symbol]

    def writer(self, fn: FunctionInfo, lines: list[int], reason: str, rank: int) -> None:
        if _key(fn) == _key(self.hot):
            return
        key = _key(fn)
        if key in self.writers:
            self.writers[key][1].update(lines)
        else:
            self.writers[key] = (fn, set(lines), reason, rank)

    def writes_param(self, fn: FunctionInfo, index: int, hops: int = 0) -> bool:
        key = (_key(fn), index, hops)
        if key not in self.param_writes:
            self.param_writes[key] = False  # a recursive cycle answers "no" rather than looping
            self.param_writes[key] = self._writes_param(fn, index, hops)
        return self.param_writes[key]

    def _writes_param(self, fn: FunctionInfo, index: int, hops: int) -> bool:
        if index >= len(fn.params):
            return False
        name = fn.params[index].name
        if any(w.name == name for w in fn.writes):
            return True
        if hops >= 1:
            return False
        for call in fn.calls:
            for j, arg in enumerate(call.args):
                if arg == name:
                    target = _resolve(self.tree, call.callee, fn, call.receiver)
                    if target is not None and _key(target) != _key(fn) and self.writes_param(
                        target, j + _self_offset(target, call), hops + 1
                    ):
                        return True
        return False

    def trace(self, fn: FunctionInfo, name: str, entry: dict[str, list[str]], hops: int, skip_line: int,
              copied_from: bool = False) -> None:
        """Producers, movers and consumers of variable `name` of `fn`, which reaches the hotspot."""
        hot = self.hot
        seen_key = (id(entry), _key(fn), name)
        if seen_key in self.traced:
            return  # already followed for this datum: pass-through graphs can fan in
        self.traced.add(seen_key)
        tag = f" (into {name})" if copied_from else ""
        for assign in fn.assigns:
            if assign.name != name or assign.callee in SCALAR_PRODUCERS:
                continue
            target = _resolve(self.tree, assign.callee, fn)
            if target is not None and _key(target) != _key(hot):
                _add(entry["producers"], _where(target) + tag)
                self.writer(target, [], f"returns {name}, which {fn.qualname} passes to {hot.qualname}", 0)
                self.writer(fn, [assign.line], f"builds {name} for {hot.qualname}", 1)
            else:
                _add(entry["producers"], f"{assign.callee}@{fn.file}:{assign.line}{tag}")
                self.writer(fn, [assign.line], f"allocates {name} for {hot.qualname}", 1)
        assigned = {a.line for a in fn.assigns if a.name == name}
        # writes made by a call are attributed below, to the callee when it is defined in the tree
        direct = [w.line for w in fn.writes if w.name == name and w.line not in assigned and (
                  not w.via or (w.via not in c_family.MOVERS and w.via not in self.tree.functions))]
        if direct:
            _add(entry["producers"], f"{fn.qualname}@{fn.file}:{direct[0]}{tag}")
            self.writer(fn, direct, f"writes {name} before passing it to {hot.qualname}", 1)
        for move in fn.moves:
            if move.mover == "=" and move.dst == name and move.src:
                _add(entry["movers"], f"{fn.qualname}@{fn.file}:{move.line} (= {move.src})")
                if hops < PASS_THROUGH_HOPS:
                    self.trace(fn, move.src, entry, hops + 1, skip_line, copied_from=True)
        for call in fn.calls:
            if call.line == skip_line and call.callee == hot.name:
                continue
            positions = [j for j, arg in enumerate(call.args) if arg == name]
            if not positions:
                continue
            target = _resolve(self.tree, call.callee, fn, call.receiver)
            if target is not None:
                if _key(target) == _key(hot):
                    continue
                offset = _self_offset(target, call)
                if any(self.writes_param(target, j + offset) for j in positions):
                    _add(entry["producers"], _where(target) + tag)
                    self.writer(target, [], f"fills {name}, which {fn.qualname} passes to {hot.qualname}", 0)
                    self.writer(fn, [call.line], f"builds {name} for {hot.qualname}", 1)
                else:
                    _add(entry["consumers"], _where(target))
                continue
            if call.callee in c_family.MOVERS:
                move = next((m for m in fn.moves if m.line == call.line and m.mover == call.callee), None)
                _add(entry["movers"], f"{call.callee}@{fn.file}:{call.line}")
                self.writer(fn, [call.line], f"copies {name} for {hot.qualname}", 1)
                if move is not None and move.dst == name and move.src and hops < PASS_THROUGH_HOPS:
                    self.trace(fn, move.src, entry, hops + 1, skip_line, copied_from=True)
                continue
            if call.callee in c_family.FILLERS:
                _add(entry["producers"], f"{call.callee}@{fn.file}:{call.line}{tag}")
                self.writer(fn, [call.line], f"fills {name} for {hot.qualname}", 1)
        params = [p.name for p in fn.params]
        if name in params and hops < PASS_THROUGH_HOPS:
            _add(entry["movers"], f"{_where(fn)} (passes)")
            index = params.index(name)
            for caller, call in _call_sites(self.tree, fn):
                arg_index = index - _self_offset(fn, call)
                if 0 <= arg_index < len(call.args) and call.args[arg_index]:
                    self.trace(caller, call.args[arg_index], entry, hops + 1, call.line)

    def result(self) -> tuple[FrontierEntry, ...]:
        out = []
        for symbol, parts in self.entries.items():
            if not (parts["producers"] or parts["movers"] or len(parts["consumers"]) > 1):
                continue
            out.append(FrontierEntry(symbol=symbol, type=self.types[symbol],
                                     producers=_cap(parts["producers"]), movers=_cap(parts["movers"]),
                                     consumers=_cap(parts["consumers"])))
        return tuple(out[:MAX_FRONTIER])


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _cap(items: list[str]) -> tuple[str, ...]:
    if len(items) <= MAX_FRONTIER_ITEMS:
        return tuple(items)
    return (*items[:MAX_FRONTIER_ITEMS - 1], f"+{len(items) - MAX_FRONTIER_ITEMS + 1} more")


def _self_offset(target: FunctionInfo, call) -> int:
    """Python methods called as `obj.m(a)` bind `a` to their second parameter."""
    if target.owner and target.params and target.params[0].name in ("self", "cls") and call.receiver:
        return 1
    return 0


def _call_sites(tree: _Tree, callee: FunctionInfo) -> list:
    """Up to MAX_CALL_SITES (caller, call) pairs that resolve to `callee`, in path and line order."""
    key = _key(callee)
    if key not in tree.call_sites:
        sites = []
        for fn, call in tree.callers().get(callee.name, []):
            if _key(fn) != key:
                target = _resolve(tree, call.callee, fn, call.receiver)
                if target is not None and _key(target) == key:
                    sites.append((fn, call))
                    if len(sites) >= MAX_CALL_SITES:
                        break
        tree.call_sites[key] = sites
    return tree.call_sites[key]


def _is_data_param(tree: _Tree, hot: FunctionInfo, index: int) -> bool:
    param = hot.params[index]
    if tree.family == "python":
        return param.name not in ("self", "cls") and param.type not in ("int", "float", "bool", "str")
    return param.indirection > 0 or _resolve_type(tree, param.base_type, hot.file) is not None


def _writers_and_frontier(tree: _Tree, hot: FunctionInfo, types: list[TypeInfo], globals_: list[GlobalInfo]
                          ) -> tuple[list[_Pick], tuple[FrontierEntry, ...]]:
    frontier = _Frontier(tree, hot)
    here = _where(hot)
    for index, param in enumerate(hot.params):
        if not _is_data_param(tree, hot, index):
            continue
        entry = frontier.entry(param.name, param.type)
        _add(entry["consumers"], here)
        for caller, call in _call_sites(tree, hot):
            arg_index = index - _self_offset(hot, call)
            if 0 <= arg_index < len(call.args) and call.args[arg_index]:
                frontier.trace(caller, call.args[arg_index], entry, 0, call.line)

    # Other code writing the same struct type, global or attribute.
    struct_names = {t.name for t in types}
    for fn in tree.all_functions():
        if _key(fn) == _key(hot):
            continue
        typed = {p.name: p.base_type for p in fn.params if p.base_type}
        typed.update(dict(fn.local_types))
        if tree.family == "python":
            break
        for w in fn.writes:
            resolved = _resolve_type(tree, typed.get(w.name), fn.file)
            if resolved is None or resolved.name not in struct_names:
                continue
            frontier.writer(fn, [w.line], f"writes struct {resolved.name} read by {hot.qualname}", 2)
            for param in hot.params:
                if _resolve_type(tree, param.base_type, hot.file) == resolved:
                    _add(frontier.entry(param.name, param.type)["producers"], _where(fn))
            for local, base in hot.local_types:
                if _resolve_type(tree, base, hot.file) == resolved and local not in {p.name for p in hot.params}:
                    entry = frontier.entry(local, resolved.name)
                    _add(entry["consumers"], here)
                    _add(entry["producers"], _where(fn))
    for info in globals_:
        if info.kind == "macro":
            continue
        entry = frontier.entry(info.name, info.type)
        _add(entry["consumers"], here)
        for fn in tree.all_functions():
            if _key(fn) == _key(hot):
                continue
            lines = [w.line for w in fn.writes if w.name == info.name and info.name not in fn.locals]
            lines += [m.line for m in fn.moves if m.mover == "=" and m.dst == info.name and info.name not in fn.locals]
            if lines:
                _add(entry["producers"], _where(fn))
                frontier.writer(fn, lines, f"writes global {info.name} used by {hot.qualname}", 2)
            elif info.name in fn.reads:
                _add(entry["consumers"], _where(fn))
    if hot.owner and tree.family == "python":
        for attr in sorted({r for r in hot.reads if r.startswith(("self.", "cls."))}):
            entry = frontier.entry(attr)
            _add(entry["consumers"], here)
            for fn in tree.all_functions():
                if fn.owner != hot.owner or fn.file != hot.file or _key(fn) == _key(hot):
                    continue
                lines = [w.line for w in fn.writes if w.name == attr]
                if lines:
                    _add(entry["producers"], _where(fn))
                    frontier.writer(fn, lines, f"writes {attr} read by {hot.qualname}", 2)

    picks = []
    ordered = sorted(frontier.writers.values(), key=lambda w: (w[3], w[0].file, w[0].line_start))
    for fn, lines, reason, rank in ordered[:MAX_WRITERS]:
        focus = (min(lines), max(lines)) if lines else None
        picks.append(_Pick("writer", fn.file, fn.line_start, fn.line_end, fn.qualname, reason, focus, rank))
    return picks, frontier.result()


def _stem(name: str) -> str:
    """First word of an identifier: `matmul_blocked` -> matmul, `stepParticles` -> step."""
    word = ""
    for i, ch in enumerate(name.lstrip("_")):
        if ch == "_" or (ch.isupper() and i > 0 and word and not word[-1].isupper()):
            break
        word += ch
    return word.lower()


def _shape(fn: FunctionInfo) -> tuple[str, ...]:
    return tuple(p.type.replace("const ", "") for p in fn.params if p.name not in ("self", "cls"))


def _name_related(a: str, b: str) -> bool:
    """`matmul` ~ `matmul_blocked` / `matmulBlocked` / `matmul2`; `matmul_naive` ~ `matmul_tiled`."""
    if a.lower() == b.lower():
        return True
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) >= 3 and longer.lower().startswith(shorter.lower()):
        boundary = longer[len(shorter)]
        if boundary in "_0123456789" or boundary.isupper():
            return True
    return _stem(a) == _stem(b) and len(_stem(a)) >= 3


def _similarity(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    if not a and not b:
        return 1.0
    return sum(x == y for x, y in zip(a, b)) / max(len(a), len(b))


def _siblings(tree: _Tree, hot: FunctionInfo, taken: set[tuple[str, int, str]], limit: int) -> list[_Pick]:
    """Same-shaped definitions: a related name with mostly the same parameter types, or identical types."""
    shape = _shape(hot)
    scored = []
    for fn in tree.all_functions():
        if _key(fn) in taken or _key(fn) == _key(hot) or fn.name in ("main", "__init__"):
            continue
        if fn.file not in tree.editable and fn.file != hot.file:
            continue
        other = _shape(fn)
        similarity = _similarity(shape, other)
        score, why = 0.0, []
        if _name_related(fn.name, hot.name) and similarity >= 0.5:
            score += 2
            why.append("related name")
        if shape and other == shape and (len(shape) >= 2 or any("*" in t or "[" in t for t in shape)):
            score += 2
            why.append(f"same parameter types ({', '.join(shape)})")
        elif similarity > 0:
            score += similarity
            why.append(f"{similarity:.0%} of parameter types shared")
        if score >= 2:
            scored.append((-score, fn.file != hot.file, fn.file, fn.line_start, fn, "; ".join(why)))
    scored.sort(key=lambda s: s[:4])
    return [_Pick("sibling", fn.file, fn.line_start, fn.line_end, fn.qualname, why)
            for *_, fn, why in scored[:limit]]


# ============================================================================================ facts


def _facts(tree: _Tree, hot: FunctionInfo) -> tuple[AccessFact, ...]:
    syntax = tree.syntax[hot.file]
    if tree.family == "python":
        node = python_ast.find_function_node(syntax, hot.def_line, hot.name)
        return tuple(patterns.python_facts(node, syntax, hot)) if node is not None else ()
    node = c_family.find_function_node(syntax, hot.line_start, hot.name)

    def fields_of(type_name: str):
        info = _resolve_type(tree, type_name, hot.file)
        return (info.name, info.fields) if info is not None and info.fields else None

    expander = c_family.Expander({**tree.macros, **{m.name: m for m in tree.files[hot.file].macros}},
                                 tree.files[hot.file].language)
    return tuple(patterns.c_facts(node, hot, fields_of, expander)) if node is not None else ()


# =========================================================================================== slicing


def _bound(tree: _Tree, picks: list[_Pick], hot_lines: list[int], max_slice: int, max_total: int
           ) -> tuple[list[Target], dict[str, str], list[str], int]:
    targets: list[Target] = []
    rendered: dict[str, str] = {}
    omitted: list[str] = []
    sliced: list[tuple[str, int, int, str]] = []  # (file, start, end, slice name)
    remaining = max_total
    for pick in picks:
        editable = pick.file in tree.editable
        name = None
        container = next((s for s in sliced if s[0] == pick.file and s[1] <= pick.line_start
                          and pick.line_end <= s[2]), None)
        if container is not None:
            name = container[3]
        else:
            lines = tree.lines[pick.file]
            hot = hot_lines if pick.role == "hotspot" else ()
            cap = min(max_slice, max_total) if pick.role == "hotspot" else min(max_slice, remaining)
            text = None
            if cap >= 2:
                text = slices.render(pick.file, pick.role, pick.symbol, pick.line_start, pick.line_end, lines,
                                     cap, pick.focus, hot)
                full = slices.render(pick.file, pick.role, pick.symbol, pick.line_start, pick.line_end, lines,
                                     max_slice, pick.focus, hot)
                if text != full:
                    if pick.role != "hotspot" and cap < slices.MIN_TRIMMED:
                        text = None
                    else:
                        omitted.append(f"{pick.role} {pick.symbol}: trimmed to {slices.line_count(text)} lines "
                                       "by the total line budget")
            if text is None:
                omitted.append(f"{pick.role} {pick.symbol} {pick.file}:{pick.line_start}-{pick.line_end}: "
                               "dropped by the total line budget")
            else:
                name = f"{pick.role}:{pick.symbol}"
                if name in rendered:
                    name = f"{name}@{pick.file}:{pick.line_start}"
                rendered[name] = text
                remaining -= slices.line_count(text)
                sliced.append((pick.file, pick.line_start, pick.line_end, name))
        targets.append(Target(role=pick.role, file=pick.file, line_start=pick.line_start, line_end=pick.line_end,
                              symbol=pick.symbol, editable=editable, focus=pick.focus, reason=pick.reason,
                              slice=name))
    return targets, rendered, omitted, max_total - remaining


# ============================================================================================== API


def locate(
    root: Path,
    editable: list[str],
    hotspot_file: str,
    hotspot_function: str,
    hot_lines: list[int] | None = None,
    callee_depth: int = 2,
    *,
    max_slice_lines: int = MAX_SLICE_LINES,
    max_total_lines: int = MAX_TOTAL_LINES,
    max_siblings: int = MAX_SIBLINGS,
    defines: frozenset[str] | None = None,
) -> SourceTargets:
    """Source targets and bounded slices for one measured hotspot function.

    `editable` are globs relative to `root`; `hotspot_file` is relative to `root`; `hot_lines` are
    line numbers in that file that the profiler attributed time to. `defines` are the macro names the
    build's flags define (`-D`), when known: `#ifdef` branches are then shown as compiled.
    """
    root = Path(root)
    if max_slice_lines < 2 or max_total_lines < 2:
        raise InputError("slice limits must allow at least a header and one line (>= 2)")
    hotspot_file = PurePosixPath(hotspot_file.replace(os.sep, "/")).as_posix()
    if hotspot_file.startswith("../") or PurePosixPath(hotspot_file).is_absolute():
        raise InputError(f"hotspot file must be relative to the source root and inside it, got {hotspot_file!r}")
    if not (root / hotspot_file).is_file():
        raise InputError(f"hotspot file {hotspot_file!r} does not exist under {root}")
    hot_lines = sorted(set(hot_lines or []))
    tree = _parse_tree(root, hotspot_file, editable, defines)
    hot = _find_hotspot(tree, hotspot_file, hotspot_function, hot_lines)
    focus = _focus(hot, hot_lines)

    picks = [_Pick("hotspot", hot.file, hot.line_start, hot.line_end, hot.qualname,
                   "measured hotspot", focus)]
    picks += _callees(tree, hot, max(0, callee_depth))
    data, types, globals_ = _data(tree, hot)
    picks += data
    writers, frontier = _writers_and_frontier(tree, hot, types, globals_)
    taken = {(p.file, p.line_start) for p in picks}
    picks += [w for w in writers if (w.file, w.line_start) not in taken]
    taken_keys = {(p.file, p.line_start, p.symbol) for p in picks}
    picks += _siblings(tree, hot, taken_keys, max_siblings)
    picks.sort(key=lambda p: ROLES.index(p.role))  # stable: keeps the order inside each role

    targets, rendered, omitted, used = _bound(tree, picks, hot_lines, max_slice_lines, max_total_lines)
    return SourceTargets(
        hotspot_file=hot.file,
        hotspot_function=hot.qualname,
        language=tree.files[hot.file].language,
        targets=tuple(targets),
        slices=rendered,
        frontier=frontier,
        facts=_facts(tree, hot),
        omitted=tuple(omitted),
        slice_lines=used,
    )
