"""Python files -> `FileIndex`, through the standard library `ast` parser.

Functions (module level, methods as `Class.method`, nested as `outer.inner`), classes with the
attributes they declare, and module-level assignments. Writes include in-place mutation through the
usual container methods (`append`, `update`, ...), since that is how Python code fills its data.
"""

from __future__ import annotations

import ast

from pw.agent.source.model import (
    AssignFromCall,
    CallSite,
    FileIndex,
    FunctionInfo,
    GlobalInfo,
    Loop,
    Param,
    TypeInfo,
    Write,
)

MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "add", "update", "pop", "remove", "clear", "setdefault", "sort",
     "discard", "appendleft", "extendleft", "popleft", "reverse", "__setitem__"}
)
# Names in annotations that describe a container or wrapper rather than the data's own class.
GENERIC_NAMES = frozenset(
    {"list", "dict", "set", "frozenset", "tuple", "List", "Dict", "Set", "FrozenSet", "Tuple", "Optional",
     "Union", "Sequence", "Mapping", "MutableMapping", "MutableSequence", "Iterable", "Iterator", "Any",
     "Callable", "int", "float", "str", "bytes", "bool", "None", "object", "type", "typing", "collections",
     "abc", "np", "numpy", "ndarray", "NDArray", "deque", "defaultdict", "Counter", "OrderedDict"}
)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def parse_file(rel: str, data: bytes) -> tuple[FileIndex, ast.Module]:
    """Index one file; also return the module tree for the access-pattern pass."""
    module = ast.parse(data, filename=rel)
    functions: list[FunctionInfo] = []
    types: list[TypeInfo] = []
    globals_: list[GlobalInfo] = []
    _collect(module.body, rel, prefix="", owner=None, functions=functions, types=types)
    for statement in module.body:
        for name in _assigned_names(statement):
            globals_.append(GlobalInfo(name=name, file=rel, line_start=statement.lineno,
                                       line_end=statement.end_lineno or statement.lineno,
                                       type=value_kind(getattr(statement, "value", None))))
    return FileIndex(file=rel, language="python", functions=tuple(functions), types=tuple(types),
                     globals=tuple(globals_)), module


# ------------------------------------------------------------------------------------------ helpers


def span(node) -> tuple[int, int]:
    """Definition range including decorators."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno] + [d.lineno for d in decorators])
    return start, node.end_lineno or node.lineno


def dotted(node) -> str | None:
    """`a.b.c` for a chain of attributes rooted at a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def root_name(node) -> str | None:
    """The variable an argument or assignment target is rooted at; `self.x[i]` -> "self.x"."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Starred, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                return f"{node.value.id}.{node.attr}"
            node = node.value
        else:
            return None


def annotation_base(annotation) -> str | None:
    if annotation is None:
        return None
    for node in ast.walk(annotation):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name and name not in GENERIC_NAMES:
            return name
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            return node.value  # forward reference "Node"
    return None


def value_kind(value) -> str:
    """What an assigned value evidently is: a literal's type (`list`, `dict`, `str` ...), the name of
    the function that made it with `()` (`deque()`, `sorted()`), or "" when the syntax does not say."""
    if value is None:
        return ""
    if isinstance(value, (ast.List, ast.ListComp)):
        return "list"
    if isinstance(value, ast.Tuple):
        return "tuple"
    if isinstance(value, (ast.Set, ast.SetComp)):
        return "set"
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return "dict"
    if isinstance(value, ast.JoinedStr):
        return "str"
    if isinstance(value, ast.Constant):
        return type(value.value).__name__
    if isinstance(value, ast.Call):
        name = dotted(value.func) or ""
        return name.rsplit(".", 1)[-1] + "()"
    return ""


def _assigned_names(statement) -> list[str]:
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    else:
        return []
    names = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.append(node.id)
    return names


# -------------------------------------------------------------------------------------- definitions


def _collect(body, rel, *, prefix, owner, functions, types) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(_function(node, rel, prefix, owner))
            _collect(node.body, rel, prefix=f"{prefix}{node.name}.", owner=None, functions=functions,
                     types=types)
        elif isinstance(node, ast.ClassDef):
            types.append(_class(node, rel))
            _collect(node.body, rel, prefix=f"{prefix}{node.name}.", owner=node.name, functions=functions,
                     types=types)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            # definitions under `if TYPE_CHECKING:` / `try:` at the same level still count
            for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                _collect(block, rel, prefix=prefix, owner=owner, functions=functions, types=types)


def _class(node: ast.ClassDef, rel: str) -> TypeInfo:
    fields: list[str] = []
    for statement in node.body:
        fields.extend(n for n in _assigned_names(statement) if n not in fields)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "__init__":
            for sub in ast.walk(statement):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self" and sub.attr not in fields):
                    fields.append(sub.attr)
    fields = [f for f in fields if f != "__slots__"]
    start, end = span(node)
    return TypeInfo(name=node.name, file=rel, line_start=start, line_end=end, kind="class", fields=tuple(fields))


def _params(args: ast.arguments) -> tuple[Param, ...]:
    every = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
             *([args.kwarg] if args.kwarg else [])]
    return tuple(
        Param(name=a.arg, type=ast.unparse(a.annotation) if a.annotation is not None else "",
              base_type=annotation_base(a.annotation))
        for a in every
    )


def own_nodes(function) -> list[ast.AST]:
    """Nodes of a function body, not descending into nested functions, lambdas or classes."""
    out = []
    stack = list(reversed(function.body))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _function(node, rel: str, prefix: str, owner: str | None) -> FunctionInfo:
    params = _params(node.args)
    param_names = {p.name for p in params}
    nodes = own_nodes(node)
    declared_global = {n for s in nodes if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    stored = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    stored |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    stored |= {a.asname or a.name.split(".")[0] for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names}
    locals_ = (stored - declared_global) | param_names
    calls: list[CallSite] = []
    writes: list[Write] = []
    reads: set[str] = set()
    local_types: dict[str, str] = {}
    assigns: list[AssignFromCall] = []
    for p in params:
        if p.base_type:
            local_types[p.name] = p.base_type
    for sub in nodes:
        if isinstance(sub, ast.Call):
            callee, receiver = _callee(sub.func)
            if callee:
                args = tuple(root_name(a) for a in sub.args) + tuple(root_name(k.value) for k in sub.keywords)
                calls.append(CallSite(callee=callee, line=sub.lineno, args=args, receiver=receiver))
                if callee in MUTATING_METHODS and isinstance(sub.func, ast.Attribute):
                    target = root_name(sub.func.value)
                    if target:
                        writes.append(Write(name=target, line=sub.lineno, via=callee))
        elif isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                for leaf in _target_leaves(target):
                    name = root_name(leaf)
                    if name:
                        writes.append(Write(name=name, line=sub.lineno))
                        value = sub.value
                        if isinstance(leaf, ast.Name) and isinstance(value, ast.Call):
                            callee, _ = _callee(value.func)
                            if callee:
                                assigns.append(AssignFromCall(name=name, callee=callee, line=sub.lineno))
                                if callee[:1].isupper():
                                    local_types[name] = callee
                        if isinstance(sub, ast.AnnAssign) and isinstance(leaf, ast.Name):
                            base = annotation_base(sub.annotation)
                            if base:
                                local_types[name] = base
        elif isinstance(sub, ast.Delete):
            for target in sub.targets:
                name = root_name(target)
                if name and not isinstance(target, ast.Name):
                    writes.append(Write(name=name, line=sub.lineno))
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in locals_:
            reads.add(sub.id)
        elif (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
              and sub.value.id in ("self", "cls") and isinstance(sub.ctx, ast.Load)):
            reads.add(f"{sub.value.id}.{sub.attr}")
    start, end = span(node)
    return FunctionInfo(
        name=node.name,
        qualname=f"{prefix}{node.name}",
        file=rel,
        line_start=start,
        line_end=end,
        def_line=node.lineno,
        params=params,
        calls=tuple(calls),
        writes=tuple(writes),
        reads=tuple(sorted(reads)),
        locals=tuple(sorted(locals_)),
        local_types=tuple(sorted(local_types.items())),
        assigns=tuple(assigns),
        loops=tuple(_loops(node)),
        owner=owner,
    )


def _target_leaves(target) -> list:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for element in target.elts for leaf in _target_leaves(element)]
    return [target]


def _callee(func) -> tuple[str, str]:
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        receiver = dotted(func.value) or ast.unparse(func.value)
        return func.attr, receiver
    return "", ""


def loop_entries(function) -> list[tuple[ast.AST, int, str | None, str]]:
    """(node, depth, loop variable, iterable text) for every loop and comprehension generator."""
    out: list[tuple[ast.AST, int, str | None, str]] = []

    def visit(node, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.For, ast.AsyncFor)):
                var = root_name(_target_leaves(child.target)[0])
                out.append((child, depth + 1, var, ast.unparse(child.iter)))
                visit(child, depth + 1)
            elif isinstance(child, ast.While):
                out.append((child, depth + 1, None, ""))
                visit(child, depth + 1)
            elif isinstance(child, COMPREHENSIONS):
                inner = depth
                for generator in child.generators:
                    inner += 1
                    var = root_name(_target_leaves(generator.target)[0])
                    out.append((child, inner, var, ast.unparse(generator.iter)))
                visit(child, inner)
            else:
                visit(child, depth)

    visit(function, 0)
    return out


def _loops(function) -> list[Loop]:
    return [
        Loop(line_start=node.lineno, line_end=node.end_lineno or node.lineno, var=var, depth=depth,
             iterable=iterable)
        for node, depth, var, iterable in loop_entries(function)
    ]


def find_function_node(module: ast.Module, def_line: int, name: str):
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == def_line \
                and node.name == name:
            return node
    return None
