"""Line-level access facts inside a function's loops, read off the syntax tree.

These are syntax facts, not measurements: they say what the code does on a line (walks a row-major
array down a column, loads an index before the element, touches two fields of a wide struct, scans
a list inside a loop). The mechanism catalog combines them with what was measured.

C family kinds: `strided`, `indirect`, `aos-field`, `reduction-dependency`.
Python kinds: `linear-membership`, `repeated-attribute-lookup`, `quadratic-nesting`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from pw.agent.source import c_family as cf
from pw.agent.source.model import AccessFact, FunctionInfo
from pw.agent.source.python_ast import value_kind

# A literal stride below this is treated as dense (interleaved pairs such as re/im are normal).
MIN_CONSTANT_STRIDE = 4
# `x in (a, b, c)` over a short literal is a constant-time idiom, not a scan worth reporting.
SMALL_LITERAL = 8

FieldsOf = Callable[[str], tuple[str, tuple[str, ...]] | None]  # type name -> (struct name, fields)


def _sorted(facts: list[AccessFact]) -> list[AccessFact]:
    """One fact per (line, kind, symbol), the first in source order, sorted by line."""
    unique: dict[tuple[int, str, str], AccessFact] = {}
    for fact in facts:
        unique.setdefault((fact.line, fact.kind, fact.symbol), fact)
    return [unique[key] for key in sorted(unique)]


# ============================================================================================ C family


def c_facts(function_node, fn: FunctionInfo, fields_of: FieldsOf | None = None,
            expander: cf.Expander | None = None) -> list[AccessFact]:
    """Facts inside the loops of one C/C++/CUDA function; `expander` sees through function-like macros."""
    body = function_node.child_by_field_name("body")
    if body is None:
        return []
    var_types = {p.name: p.base_type for p in fn.params if p.base_type}
    var_types.update(dict(fn.local_types))
    facts: list[AccessFact] = []
    aos: dict[str, list[tuple[int, str, int]]] = {}  # array -> [(line, field, depth)]

    def handle(node, loops, line: int | None = None, via: str = "") -> None:
        kind = node.type
        depth = len(loops)
        var = cf.loop_var(loops[0])
        loop_vars = {v for v in (cf.loop_var(loop) for loop in loops) if v}

        def add(kind: str, at, detail: str, depth: int, symbol: str, tags: tuple[str, ...] = ()) -> None:
            if via:  # name the macro call the reader sees, not its expansion
                detail = f"{via} (macro expansion): {detail.split(': ', 1)[-1]}"
                tags = (*tags, "macro")
            facts.append(AccessFact(kind=kind, file=fn.file, line=line or cf.first_line(at), detail=detail,
                                    loop_depth=depth, symbol=symbol, tags=tags))

        if kind == "subscript_expression" and not _is_chain_inner(node):
            _subscript_facts(node, var, depth, add)
        elif kind == "field_expression":
            argument = cf.strip(node.child_by_field_name("argument"))
            field = cf.text(node.child_by_field_name("field"))
            arrow = cf.operator(node) == "->"
            if argument is not None and argument.type == "subscript_expression":
                indices = cf.subscript_indices(argument)
                if not any(_names(i) & loop_vars for i in indices):
                    return
                base = cf.text(argument.child_by_field_name("argument"))
                if arrow:
                    add("indirect", node, f"{cf.text(node)}: element is a pointer, dereferenced per iteration",
                        depth, base, ("pointer-element",))
                else:
                    aos.setdefault(base, []).append((line or cf.first_line(node), field, depth))
            elif arrow and argument is not None and argument.type == "binary_expression" and (
                _names(argument) & loop_vars
            ):
                base = cf.root_name(argument) or cf.text(argument)
                aos.setdefault(base, []).append((line or cf.first_line(node), field, depth))
        elif kind == "assignment_expression" and not via:
            _assignment_facts(node, loops, var, depth, add)

    for node in cf.walk(body):
        if node.type not in ("subscript_expression", "field_expression", "assignment_expression",
                             "call_expression"):
            continue
        loops = _enclosing_loops(node, body)
        if not loops:
            continue
        if node.type == "call_expression":
            expanded = expander.expand(node) if expander is not None else None
            if expanded is not None:
                for sub in cf.walk(expanded):
                    handle(sub, loops, cf.first_line(node), cf.text(node))
            continue
        handle(node, loops)

    for base, uses in aos.items():
        resolved = fields_of(var_types[base]) if fields_of and base in var_types else None
        facts += _aos_facts(fn, base, uses, resolved)
    return _sorted(facts)


def _aos_facts(fn: FunctionInfo, base: str, uses: list[tuple[int, str, int]],
               resolved: tuple[str, tuple[str, ...]] | None) -> list[AccessFact]:
    """One `aos-field` fact per line where a loop nest reads fields of the array of structs `base`,
    unless it touches every declared field (then the layout wastes no bandwidth)."""
    order = {name: i for i, name in enumerate(resolved[1])} if resolved is not None else {}
    uses = sorted(uses, key=lambda u: (u[0], order.get(u[1], len(order)), u[1]))
    touched = sorted(dict.fromkeys(field for _, field, _ in uses), key=lambda f: (order.get(f, len(order)), f))
    if resolved is not None and len(touched) >= len(resolved[1]):
        return []
    facts = []
    for line in sorted({line for line, _, _ in uses}):
        on_line = list(dict.fromkeys(f for ln, f, _ in uses if ln == line))
        depth = min(d for ln, _, d in uses if ln == line)
        if resolved is not None:
            declared = f"{len(touched)} of {len(resolved[1])} declared fields of {resolved[0]}"
        else:
            declared = f"{len(touched)} fields (declaration not in tree)"
        facts.append(AccessFact(
            kind="aos-field", file=fn.file, line=line, loop_depth=depth, symbol=base,
            detail=f"{base}[].{{{','.join(on_line)}}}: loop nest touches {declared}: {','.join(touched)}",
            fields_touched=len(touched), fields_declared=len(resolved[1]) if resolved is not None else 0,
        ))
    return facts


def _enclosing_loops(node, stop) -> list:
    loops = []
    parent = node.parent
    while parent is not None and parent != stop:
        if parent.type in cf.LOOP_TYPES:
            loops.append(parent)
        parent = parent.parent
    return loops


def _is_chain_inner(node) -> bool:
    parent = node.parent
    return parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name(
        "argument") == node


def _names(node) -> set[str]:
    return {cf.text(n) for n in cf.walk(node) if n.type == "identifier"} if node is not None else set()


def _chain(node) -> tuple[list, object]:
    indices: list = []
    while node is not None and node.type == "subscript_expression":
        indices = cf.subscript_indices(node) + indices
        node = node.child_by_field_name("argument")
    return indices, node


def _subscript_facts(node, var: str | None, depth: int, add) -> None:
    indices, base = _chain(node)
    symbol = cf.text(cf.strip(base) or base)
    expression = cf.text(node)
    for index in indices:
        inner = next((n for n in cf.walk(index) if n.type == "subscript_expression"), None)
        if inner is not None:
            add("indirect", node, f"{expression}: index loaded from {cf.text(inner)} before the element", depth,
                symbol, ("index-array",))
            return
    if var is None or not indices:
        return
    for position, index in enumerate(indices[:-1]):
        if var in _names(index):
            add("strided", node, f"{expression}: innermost loop variable {var} indexes dimension {position} of "
                f"{len(indices)} (consecutive iterations are a row apart)", depth, symbol, ("dimension",))
            return
    scale = _scale(indices[-1], var)
    if scale is None:
        return
    if scale[0] == "sym":
        add("strided", node, f"{expression}: innermost loop variable {var} is scaled by {scale[1]} "
            f"(stride {scale[1]} elements)", depth, symbol, ("symbolic-stride",))
    elif scale[0] == "const" and abs(int(scale[1])) >= MIN_CONSTANT_STRIDE:
        add("strided", node, f"{expression}: constant stride {scale[1]} elements in {var}", depth, symbol,
            ("constant-stride",))


def _scale(node, var: str):
    """How an index expression moves per step of `var`: ('const', n), ('sym', text), ('nonlinear',) or None."""
    node = cf.strip(node)
    if node is None or var not in _names(node):
        return None
    kind = node.type
    if kind == "identifier":
        return ("const", 1)
    if kind == "binary_expression":
        op = cf.operator(node)
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        in_left, in_right = var in _names(left), var in _names(right)
        if op in ("+", "-"):
            if in_left and in_right:
                return ("nonlinear",)
            return _scale(left if in_left else right, var)
        if op == "*":
            if in_left and in_right:
                return ("nonlinear",)
            inner = _scale(left if in_left else right, var)
            other = cf.strip(right if in_left else left)
            if inner is None or inner[0] == "nonlinear" or other is None:
                return ("nonlinear",)
            if other.type == "number_literal" and inner[0] == "const":
                try:
                    return ("const", inner[1] * int(cf.text(other), 0))
                except ValueError:
                    return ("sym", cf.text(other))
            prefix = "" if inner == ("const", 1) else f"{inner[1]}*"
            return ("sym", prefix + cf.text(other))
        if op == "<<" and in_left and not in_right:
            inner = _scale(left, var)
            shift = cf.strip(right)
            if inner and inner[0] == "const" and shift is not None and shift.type == "number_literal":
                try:
                    return ("const", inner[1] << int(cf.text(shift), 0))
                except ValueError:
                    pass
            return ("sym", f"2^{cf.text(shift)}")
    return ("nonlinear",)


def _assignment_facts(node, loops, var: str | None, depth: int, add) -> None:
    left = cf.strip(node.child_by_field_name("left"))
    right = node.child_by_field_name("right")
    op = cf.operator(node)
    # A pointer chase: p = p->next inside a loop (body or update clause) serialises the loads.
    value = cf.strip(right)
    if (op == "=" and left is not None and left.type == "identifier" and value is not None
            and value.type == "field_expression" and cf.operator(value) == "->"
            and cf.root_name(value.child_by_field_name("argument")) == cf.text(left)):
        add("indirect", node, f"{cf.text(node)}: pointer chase, each load waits for the previous one", depth,
            cf.text(left), ("pointer-chase",))
        return
    innermost = loops[0]
    if any(n.type in cf.LOOP_TYPES for n in cf.walk(innermost) if n != innermost):
        return  # only the innermost loop carries the dependency that limits issue
    if left is None:
        return
    accumulates = op not in ("=",) or cf.text(left) in {cf.text(n) for n in cf.walk(right)}
    if not accumulates:
        return
    body = innermost.child_by_field_name("body")
    declared_inside = {cf.declarator_name(d)[0] for n in cf.walk(body) if n.type == "declaration"
                       for d in n.children_by_field_name("declarator")} if body is not None else set()
    if left.type == "identifier":
        name = cf.text(left)
        if name == var or name in declared_inside:
            return
        add("reduction-dependency", node, f"{cf.text(node)}: scalar {name} carried across iterations of "
            f"{var or 'the loop'}", depth, name, ("scalar",))
    elif left.type == "subscript_expression" and var is not None:
        indices, base = _chain(left)
        if any(var in _names(i) for i in indices) or var in _names(base):
            return
        add("reduction-dependency", node, f"{cf.text(node)}: {cf.text(left)} accumulated in memory across "
            f"iterations of {var}", depth, cf.text(base), ("memory",))


# ============================================================================================== Python

_LIST_KINDS = {"list", "tuple", "list()", "sorted()", "tuple()", "deque()", "values()", "List", "Sequence",
               "Tuple", "MutableSequence", "deque", "Deque"}
_HASH_KINDS = {"set", "dict", "set()", "frozenset()", "dict()", "defaultdict()", "Counter()", "OrderedDict()",
               "keys()", "items()", "Set", "Dict", "Mapping", "MutableMapping", "FrozenSet", "frozenset",
               "defaultdict", "Counter", "OrderedDict", "range()", "range"}
_TEXT_KINDS = {"str", "bytes", "str()", "bytes()", "join()", "format()", "JoinedStr"}


def _kind_of_annotation(annotation) -> str:
    if annotation is None:
        return ""
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    if isinstance(head, ast.Name):
        return head.id
    if isinstance(head, ast.Attribute):
        return head.attr
    return ""


def _bindings(function, module: ast.Module, owner) -> dict[str, set[str]]:
    """What each name (and `self.attr`) is bound to, as coarse container kinds."""
    kinds: dict[str, set[str]] = {}

    def note(name: str | None, kind: str) -> None:
        if name and kind:
            kinds.setdefault(name, set()).add(kind)

    def scan(statements) -> None:
        for node in statements:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        note(_target_name(target), value_kind(sub.value))
                elif isinstance(sub, ast.AnnAssign):
                    note(_target_name(sub.target), _kind_of_annotation(sub.annotation) or
                         value_kind(sub.value))

    for statement in module.body:  # module globals
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            scan([statement])
    if owner is not None:
        scan(owner.body)
    scan(function.body)
    every = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    for arg in every:
        note(arg.arg, _kind_of_annotation(arg.annotation))
    return kinds


def _target_name(target) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return f"self.{target.attr}"
    return None


def _container(node, kinds: dict[str, set[str]]) -> str | None:
    """'list' when the container is scanned linearly, 'unknown' when that cannot be told, None if hashed."""
    if isinstance(node, (ast.Set, ast.SetComp, ast.Dict, ast.DictComp)):
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        if len(node.elts) <= SMALL_LITERAL and all(isinstance(e, ast.Constant) for e in node.elts):
            return None
        return "list"
    if isinstance(node, ast.ListComp):
        return "list"
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return None
    if isinstance(node, ast.Call):
        kind = value_kind(node)
        if kind in _LIST_KINDS:
            return "list"
        if kind in _HASH_KINDS or kind in _TEXT_KINDS:
            return None
        return "unknown"
    name = _target_name(node)
    bound = kinds.get(name, set()) if name else set()
    if bound & (_HASH_KINDS | _TEXT_KINDS):
        return None
    if bound & _LIST_KINDS:
        return "list"
    return "unknown"


def python_facts(function, module: ast.Module, fn: FunctionInfo) -> list[AccessFact]:
    owner = next((n for n in ast.walk(module) if isinstance(n, ast.ClassDef) and function in n.body), None)
    walk = _LoopWalk(fn, _bindings(function, module, owner))
    for statement in function.body:
        walk.visit(statement, [])
    walk.add_repeated_lookups()
    return _sorted(walk.facts)


def _membership_facts(node, kinds: dict[str, set[str]], depth: int, add) -> None:
    """`x in xs`, `xs.index(x)`, `xs.count(x)`, `xs.remove(x)` where `xs` may be a list: a linear scan."""
    if isinstance(node, ast.Compare):
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                container = _container(right, kinds)
                if container is not None:
                    text = ast.unparse(right)
                    how = "a list" if container == "list" else "a container whose type is not inferred"
                    add("linear-membership", node.lineno, f"`{ast.unparse(node)}`: {text} is {how}; each "
                        "test scans it", depth, text, ("list",) if container == "list" else ("type-unknown",))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
        "index", "count", "remove"
    ):
        container = _container(node.func.value, kinds)
        if container is not None and (node.func.attr != "remove" or container == "list"):
            text = ast.unparse(node.func.value)
            add("linear-membership", node.lineno, f"`{text}.{node.func.attr}(...)` scans {text} linearly",
                depth, text, ("list",) if container == "list" else ("type-unknown",))


def _sized(iterable) -> bool:
    """Whether a loop's iterable can grow with the input (not a literal of constants or a constant range)."""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
        return not all(isinstance(a, ast.Constant) for a in iterable.args)
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return not all(isinstance(e, ast.Constant) for e in iterable.elts)
    return not isinstance(iterable, ast.Constant)


class _LoopWalk:
    """One walk over a Python function's body, carrying the stack of loops (for, while and
    comprehension generators) around each node; collects facts and, per loop, the attribute chains
    it loads and the names it binds."""

    def __init__(self, fn: FunctionInfo, kinds: dict[str, set[str]]) -> None:
        self.fn = fn
        self.kinds = kinds
        self.facts: list[AccessFact] = []
        self.lookups: dict[int, dict[str, list[int]]] = {}  # loop id -> dotted name -> lines
        self.stores: dict[int, set[str]] = {}  # loop id -> names bound inside it
        self.loop_info: dict[int, tuple[ast.AST, int, str | None]] = {}

    def add(self, kind: str, line: int, detail: str, depth: int, symbol: str, tags: tuple[str, ...] = ()) -> None:
        self.facts.append(AccessFact(kind=kind, file=self.fn.file, line=line, detail=detail, loop_depth=depth,
                                     symbol=symbol, tags=tags))

    def check(self, node, stack) -> None:
        _membership_facts(node, self.kinds, len(stack), self.add)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = _dotted(node)
            if name:
                self.lookups.setdefault(id(stack[-1][0]), {}).setdefault(name, []).append(node.lineno)
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            for entry in stack:
                self.stores.setdefault(id(entry[0]), set()).add(node.id)

    def enter(self, loop_node, iterable, var, stack, line):
        entry = (loop_node, var, iterable, line)
        self.loop_info[id(loop_node)] = (loop_node, len(stack) + 1, var)
        outer = next((e for e in reversed(stack) if e[2] is not None), None)
        if iterable is not None and outer is not None and _sized(iterable) and _sized(outer[2]):
            self.add("quadratic-nesting", line, f"loop over {ast.unparse(iterable)} runs inside the loop over "
                     f"{ast.unparse(outer[2])} (line {outer[3]})", len(stack) + 1, ast.unparse(iterable))
        return [*stack, entry]

    def visit_loop_body(self, node, inner, stack) -> None:
        """A loop's body runs inside it; its ``else`` runs once, after it."""
        for child in node.body:
            self.visit(child, inner)
        for child in node.orelse:
            self.visit(child, stack)

    def visit(self, node, stack) -> None:
        visit = self.visit
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if stack:
            self.check(node, stack)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            visit(node.iter, stack)  # evaluated once, outside the loop
            inner = self.enter(node, node.iter, _first_name(node.target), stack, node.lineno)
            visit(node.target, inner)
            self.visit_loop_body(node, inner, stack)
        elif isinstance(node, ast.While):
            inner = self.enter(node, None, None, stack, node.lineno)
            visit(node.test, inner)
            self.visit_loop_body(node, inner, stack)
        elif isinstance(node, ast.comprehension):
            return  # handled by the comprehension itself
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = stack
            for generator in node.generators:
                visit(generator.iter, inner)
                inner = self.enter(generator, generator.iter, _first_name(generator.target), inner,
                                   generator.iter.lineno)
                visit(generator.target, inner)
                for condition in generator.ifs:
                    visit(condition, inner)
            for part in ("elt", "key", "value"):
                if hasattr(node, part):
                    visit(getattr(node, part), inner)
        elif isinstance(node, ast.Attribute):
            base = node.value  # only the whole chain `a.b.c` counts as one lookup site
            while isinstance(base, ast.Attribute):
                base = base.value
            visit(base, stack)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, stack)

    def add_repeated_lookups(self) -> None:
        """An attribute chain loaded in a loop that binds none of its names: hoistable."""
        for loop_id, names in self.lookups.items():
            _, depth, var = self.loop_info[loop_id]
            bound = self.stores.get(loop_id, set())
            for name, lines in sorted(names.items(), key=lambda item: (min(item[1]), item[0])):
                root = name.split(".", 1)[0]
                chain = name.count(".")
                if root == var or root in bound:
                    continue  # per-element attribute, or rebound each iteration: not hoistable
                if chain >= 2 or len(lines) >= 2:
                    self.add("repeated-attribute-lookup", min(lines), f"{name} looked up {len(lines)}x per "
                             f"iteration ({chain} attribute step{'s' if chain > 1 else ''}); the lookup result "
                             "is loop-invariant", depth, name)


def _dotted(node) -> str | None:
    parent_chain = node
    parts = []
    while isinstance(parent_chain, ast.Attribute):
        parts.append(parent_chain.attr)
        parent_chain = parent_chain.value
    if isinstance(parent_chain, ast.Name):
        return ".".join([parent_chain.id, *reversed(parts)])
    return None


def _first_name(target) -> str | None:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            return node.id
    return None
