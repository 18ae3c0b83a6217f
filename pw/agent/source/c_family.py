"""C, C++ and CUDA files -> `FileIndex`, through tree-sitter grammars (never regular expressions).

Only what the locator needs is extracted: function definitions with their parameters, calls, writes,
allocations, copies and loops; struct/class/union/enum definitions with their fields; typedef
aliases; file-scope variables and object-like macros. Preprocessor branches are parsed as code, so a
function under `#ifdef` is still found.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import PurePosixPath

from pw.agent.source.model import (
    AssignFromCall,
    CallSite,
    FileIndex,
    FunctionInfo,
    GlobalInfo,
    Loop,
    Macro,
    Move,
    Param,
    TypeInfo,
    Write,
)

C_SUFFIXES = {".c": "c", ".h": "c"}
CPP_SUFFIXES = {".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp"}
CUDA_SUFFIXES = {".cu": "cuda", ".cuh": "cuda"}
SUFFIXES = {**C_SUFFIXES, **CPP_SUFFIXES, **CUDA_SUFFIXES}

LOOP_TYPES = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
TYPE_SPECIFIERS = frozenset({"struct_specifier", "union_specifier", "class_specifier", "enum_specifier"})

# Calls that copy a buffer: name -> (index of destination argument, index of source argument).
MOVERS = {
    "memcpy": (0, 1),
    "memmove": (0, 1),
    "strcpy": (0, 1),
    "strncpy": (0, 1),
    "cudaMemcpy": (0, 1),
    "cudaMemcpyAsync": (0, 1),
    "cudaMemcpy2D": (0, 2),
    "cudaMemcpyToSymbol": (0, 1),
    "cudaMemcpyFromSymbol": (0, 1),
    "hipMemcpy": (0, 1),
    "hipMemcpyAsync": (0, 1),
    "copy": (2, 0),  # std::copy(first, last, dest)
    "copy_n": (2, 0),
}
# Calls that allocate into the variable whose address is their first argument.
OUT_ALLOCATORS = frozenset({"cudaMalloc", "cudaMallocManaged", "cudaMallocHost", "hipMalloc", "posix_memalign"})
# Calls that fill their first argument in place.
FILLERS = frozenset({"memset", "cudaMemset", "hipMemset", "fill", "fill_n", "fread", "iota"})
# C++ methods that mutate their receiver.
MUTATING_METHODS = frozenset(
    {"push_back", "emplace_back", "insert", "emplace", "resize", "assign", "push", "clear", "fill", "swap"}
)


@cache
def _parser(language: str):
    # Imported lazily so that importing pw.agent.source costs nothing until a C-family file is parsed.
    import tree_sitter

    if language == "c":
        import tree_sitter_c as grammar
    elif language == "cpp":
        import tree_sitter_cpp as grammar
    else:
        import tree_sitter_cuda as grammar
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))


def language_of(path: str) -> str | None:
    return SUFFIXES.get(PurePosixPath(path).suffix.lower())


def parse_tree(rel: str, data: bytes):
    """Parse with the grammar the suffix implies; a `.h` that C cannot parse cleanly is retried as C++."""
    language = language_of(rel) or "c"
    tree = _parser(language).parse(data)
    if language == "c" and rel.lower().endswith(".h") and tree.root_node.has_error:
        alt = _parser("cpp").parse(data)
        if _error_count(alt.root_node) < _error_count(tree.root_node):
            return "cpp", alt
    return language, tree


def parse_file(rel: str, data: bytes, macros: dict[str, Macro] | None = None) -> tuple[FileIndex, object]:
    """Index one file; also return the syntax tree for the access-pattern pass.

    `macros` are function-like macros visible from other files (headers); the file's own win.
    """
    language, tree = parse_tree(rel, data)
    own = collect_macros(rel, tree)
    visible = {**(macros or {}), **{m.name: m for m in own}}
    return index_tree(rel, language, tree, visible, own), tree


def inactive_ranges(tree, defines: frozenset[str] | None) -> list[tuple[int, int]]:
    """Byte ranges of `#ifdef`/`#ifndef` branches the build does not compile, given the names its
    flags define (`-DNAME`) plus those `#define`d earlier in the file; None (flags unknown): none.

    Only macro definitions are dropped from these ranges: a `SCALAR_VAL` shown to the agent must be
    the double branch of a double build, not the first one in the file. `#if` expressions and
    `#elif` chains are left alone (both sides stay visible, as before)."""
    if defines is None:
        return []
    defined = set(defines)
    out: list[tuple[int, int]] = []

    def inside(node) -> bool:
        return any(a <= node.start_byte < b for a, b in out)

    for node in walk(tree.root_node, skip_bodies=True):  # pre-order: a #define is seen before what follows
        if node.type in ("preproc_def", "preproc_function_def") and not inside(node):
            name = node.child_by_field_name("name")
            if name is not None:
                defined.add(text(name))
        elif node.type == "preproc_ifdef" and not inside(node):
            name = node.child_by_field_name("name")
            if name is None or not node.children:
                continue
            negated = node.children[0].type == "#ifndef"
            taken = (text(name) in defined) != negated
            alt = node.child_by_field_name("alternative")
            if not taken:
                out.append((name.end_byte, alt.start_byte if alt is not None else node.end_byte))
            elif alt is not None and alt.type == "preproc_else":
                out.append((alt.start_byte, alt.end_byte))
    return out


def _active(node, inactive: list[tuple[int, int]]) -> bool:
    return not any(a <= node.start_byte < b for a, b in inactive)


def collect_macros(rel: str, tree, inactive: list[tuple[int, int]] = ()) -> list[Macro]:  # type: ignore[assignment]
    out = []
    for node in walk(tree.root_node, skip_bodies=True):
        if node.type != "preproc_function_def" or not _active(node, inactive):
            continue
        params = node.child_by_field_name("parameters")
        value = node.child_by_field_name("value")
        names = [text(p) for p in params.named_children] if params is not None else []
        body = text(value).strip() if value is not None else ""
        if body and all(n.isidentifier() for n in names) and "#" not in body:
            out.append(Macro(name=text(node.child_by_field_name("name")), params=tuple(names), body=body, file=rel,
                             line=first_line(node)))
    return out


def index_tree(rel: str, language: str, tree, macros: dict[str, Macro], own: list[Macro] = (),
               inactive: list[tuple[int, int]] = ()) -> FileIndex:  # type: ignore[assignment]
    functions: list[FunctionInfo] = []
    types: list[TypeInfo] = []
    globals_: list[GlobalInfo] = []
    expander = Expander(macros, language)
    for node in walk(tree.root_node, skip_bodies=True):
        kind = node.type
        if kind == "function_definition":
            info = _function(node, rel, expander)
            if info is not None:
                functions.append(info)
        elif kind in TYPE_SPECIFIERS and node.child_by_field_name("body") is not None:
            types.extend(_type_definitions(node, rel))
        elif kind == "type_definition":
            types.extend(_typedef_aliases(node, rel))
        elif kind == "declaration" and _at_file_scope(node):
            globals_.extend(_file_scope_variables(node, rel))
        elif kind in ("preproc_def", "preproc_function_def"):
            name = node.child_by_field_name("name")
            if name is not None and _active(node, inactive):
                value = node.child_by_field_name("value")
                globals_.append(
                    GlobalInfo(
                        name=text(name),
                        file=rel,
                        line_start=first_line(node),
                        line_end=last_line(node),
                        type=text(value).strip() if value is not None else "",
                        kind="macro",
                    )
                )
    return FileIndex(file=rel, language=language, functions=tuple(functions), types=tuple(types),
                     globals=tuple(globals_), macros=tuple(own))


class Expander:
    """Expands calls of function-like macros into parsed expressions (one level, then nested calls).

    Parameters are replaced by whole argument texts at identifier nodes of the parsed macro body, and
    the result is parsed again: substitution follows the grammar, not the characters.
    """

    def __init__(self, macros: dict[str, Macro], language: str) -> None:
        self.macros = macros
        self.language = language
        self._cache: dict[str, object] = {}

    def expand(self, call, depth: int = 0):
        """Expression node the macro call stands for, or None if the callee is not a known macro."""
        if call is None or call.type != "call_expression" or depth > 3:
            return None
        function = call.child_by_field_name("function")
        if function is None or function.type != "identifier":
            return None
        macro = self.macros.get(text(function))
        arguments = call.child_by_field_name("arguments")
        if macro is None or arguments is None:
            return None
        args = [text(a) for a in arguments.named_children if a.type != "comment"]
        if len(args) != len(macro.params):
            return None
        key = f"{macro.name}({chr(0).join(args)})"
        if key not in self._cache:
            self._cache[key] = self._substitute(macro, args)
        node = self._cache[key]
        nested = strip(node)
        if nested is not None and nested.type == "call_expression" and nested != call:
            return self.expand(nested, depth + 1) or node
        return node

    def _substitute(self, macro: Macro, args: list[str]):
        body = self._fragment(macro.body)
        if body is None:
            return None
        source = body.text
        edits = [(n.start_byte - body.start_byte, n.end_byte - body.start_byte, args[macro.params.index(text(n))])
                 for n in walk(body) if n.type == "identifier" and text(n) in macro.params]
        out, cursor = [], 0
        for start, end, replacement in sorted(edits):
            out.append(source[cursor:start].decode("utf-8", "replace"))
            out.append(replacement if replacement.isidentifier() else f"({replacement})")
            cursor = end
        out.append(source[cursor:].decode("utf-8", "replace"))
        return self._fragment("".join(out))

    def _fragment(self, expression: str):
        tree = _parser(self.language).parse(f"void __pw_macro(void) {{ {expression}; }}".encode())
        body = next((n for n in walk(tree.root_node) if n.type == "compound_statement"), None)
        statement = body.named_children[0] if body is not None and body.named_children else None
        if statement is None or statement.type != "expression_statement" or statement.has_error:
            return None
        return statement.named_children[0] if statement.named_children else None


# ------------------------------------------------------------------------------------------ helpers


def walk(node, *, named: bool = True, skip_bodies: bool = False) -> Iterator:
    """Pre-order traversal without recursion (deep expression trees must not hit the stack limit).

    `named` leaves out punctuation and operator tokens (read through fields instead); `skip_bodies`
    does not descend into function bodies, for passes that only want file-scope definitions.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if skip_bodies and current.type == "function_definition":
            stack.extend(reversed([c for c in current.named_children if c.type != "compound_statement"]))
            continue
        stack.extend(reversed(current.named_children if named else current.children))


def text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def first_line(node) -> int:
    return node.start_point[0] + 1


def last_line(node) -> int:
    # A node ending at column 0 ends on the previous line (its last byte is the newline).
    row, column = node.end_point
    return row + 1 if column > 0 or row == node.start_point[0] else row


def _error_count(root) -> int:
    return sum(1 for n in walk(root, named=False) if n.type == "ERROR" or n.is_missing)


def strip(node):
    """Look through parentheses and casts to the expression that carries the value."""
    while node is not None:
        if node.type == "parenthesized_expression":
            inner = [c for c in node.named_children if c.type != "comment"]
            node = inner[0] if inner else None
        elif node.type == "cast_expression":
            node = node.child_by_field_name("value")
        else:
            return node
    return None


def subscript_indices(node) -> list:
    """Index expressions of one `a[...]` (C grammar: field `index`; C++/CUDA: `indices` list)."""
    index = node.child_by_field_name("index")
    if index is not None:
        return [index]
    indices = node.child_by_field_name("indices")
    if indices is None:
        return []
    return [c for c in indices.named_children if c.type != "comment"]


def operator(node) -> str:
    op = node.child_by_field_name("operator")
    return text(op) if op is not None else ""


def root_name(node) -> str | None:
    """The variable an lvalue or argument is rooted at: `A[i][j]`, `&x`, `p->f`, `(T*)buf + k` -> name."""
    while node is not None:
        kind = node.type
        if kind == "identifier":
            return text(node)
        if kind in ("subscript_expression", "pointer_expression", "field_expression"):
            argument = node.child_by_field_name("argument")
            if kind == "field_expression" and argument is not None and argument.type == "this":
                return text(node.child_by_field_name("field"))
            node = argument
        elif kind in ("parenthesized_expression", "cast_expression"):
            node = strip(node)
        elif kind == "binary_expression" and operator(node) in ("+", "-"):
            node = node.child_by_field_name("left")
        elif kind == "qualified_identifier":
            node = node.child_by_field_name("name")
        elif kind == "reference_declarator" or kind == "pointer_declarator":
            node = node.child_by_field_name("declarator") or (node.named_children or [None])[-1]
        else:
            return None
    return None


def declarator_name(node) -> tuple[str | None, int]:
    """Name declared by a (possibly pointer/array/reference) declarator, and its indirection level."""
    levels = 0
    while node is not None:
        kind = node.type
        if kind in ("identifier", "field_identifier", "type_identifier"):
            return text(node), levels
        if kind in ("pointer_declarator", "array_declarator", "reference_declarator",
                    "abstract_pointer_declarator", "abstract_array_declarator",
                    "abstract_reference_declarator"):
            levels += 1
        if kind in ("init_declarator", "pointer_declarator", "array_declarator", "attributed_declarator",
                    "parenthesized_declarator", "function_declarator"):
            inner = node.child_by_field_name("declarator")
            if inner is None:
                inner = next((c for c in node.named_children if "declarator" in c.type or c.type.endswith(
                    "identifier")), None)
            node = inner
        elif kind == "reference_declarator":
            node = next((c for c in node.named_children), None)
        elif kind in ("qualified_identifier",):
            node = node.child_by_field_name("name")
        else:
            return None, levels
    return None, levels


def type_base(type_node) -> tuple[str, str | None]:
    """(spelling, named base type) of a type specifier; primitives have no named base."""
    if type_node is None:
        return "", None
    kind = type_node.type
    if kind in TYPE_SPECIFIERS:
        name = type_node.child_by_field_name("name")
        return (text(name), text(name)) if name is not None else ("<anonymous>", None)
    if kind == "type_identifier":
        return text(type_node), text(type_node)
    if kind == "qualified_identifier":
        return type_base(type_node.child_by_field_name("name"))
    if kind == "template_type":
        name = type_node.child_by_field_name("name")
        args = type_node.child_by_field_name("arguments")
        inner = [c for c in walk(args) if c.type == "type_identifier"] if args is not None else []
        base = text(inner[0]) if inner else text(name)
        return text(type_node), base
    return text(type_node), None


def _at_file_scope(node) -> bool:
    parent = node.parent
    while parent is not None:
        kind = parent.type
        if kind in ("translation_unit",):
            return True
        if kind in ("declaration_list", "linkage_specification", "namespace_definition") or kind.startswith(
            "preproc_"
        ):
            parent = parent.parent
            continue
        return False
    return False


def _enclosing_class(node) -> str | None:
    parent = node.parent
    while parent is not None:
        if parent.type in ("class_specifier", "struct_specifier"):
            name = parent.child_by_field_name("name")
            return text(name) if name is not None else None
        if parent.type in ("translation_unit", "function_definition"):
            return None
        parent = parent.parent
    return None


# -------------------------------------------------------------------------------------- definitions


def _function_declarator(node):
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in declarator.named_children if "declarator" in c.type), None)
        declarator = inner
    return declarator


def _function(node, rel: str, expander: Expander) -> FunctionInfo | None:
    declarator = _function_declarator(node)
    if declarator is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    qualname = text(name_node)
    leaf = name_node
    while leaf is not None and leaf.type in ("qualified_identifier", "template_function"):
        leaf = leaf.child_by_field_name("name")
    name = text(leaf) if leaf is not None else qualname
    if not name:
        return None
    owner = _enclosing_class(node)
    if owner and "::" not in qualname:
        qualname = f"{owner}::{qualname}"
    elif "::" in qualname and owner is None:
        owner = qualname.rsplit("::", 1)[0].rsplit("::", 1)[-1]
    start_node = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
    params = _params(declarator.child_by_field_name("parameters"))
    body = node.child_by_field_name("body")
    facts = _body_facts(body, expander) if body is not None else _BodyFacts()
    return FunctionInfo(
        name=name,
        qualname=qualname,
        file=rel,
        line_start=first_line(start_node),
        line_end=last_line(node),
        def_line=first_line(name_node),
        params=params,
        calls=tuple(facts.calls),
        writes=tuple(facts.writes),
        reads=tuple(sorted(facts.reads - facts.locals - {p.name for p in params})),
        locals=tuple(sorted(facts.locals)),
        local_types=tuple(sorted(facts.local_types.items())),
        assigns=tuple(facts.assigns),
        moves=tuple(facts.moves),
        loops=tuple(facts.loops),
        owner=owner,
    )


def _params(parameter_list) -> tuple[Param, ...]:
    if parameter_list is None:
        return ()
    params = []
    for child in parameter_list.named_children:
        if child.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        spelled, base = type_base(child.child_by_field_name("type"))
        name, levels = declarator_name(child.child_by_field_name("declarator"))
        if spelled == "void" and name is None and levels == 0:
            continue  # f(void)
        params.append(Param(name=name or f"_{len(params)}", type=spelled + "*" * levels, base_type=base,
                            indirection=levels))
    return tuple(params)


def _fields(body) -> list[str]:
    fields: list[str] = []
    for member in body.named_children:
        if member.type == "field_declaration":
            declarators = member.children_by_field_name("declarator")
            for declarator in declarators:
                name, _ = declarator_name(declarator)
                if name:
                    fields.append(name)
            inner = member.child_by_field_name("type")
            if not declarators and inner is not None and inner.child_by_field_name("body") is not None:
                fields.extend(_fields(inner.child_by_field_name("body")))  # anonymous struct/union member
        elif member.type == "enumerator":
            fields.append(text(member.child_by_field_name("name")))
    return fields


def _type_definitions(node, rel: str) -> list[TypeInfo]:
    kind = node.type.split("_")[0]
    fields = _fields(node.child_by_field_name("body"))
    outer = node.parent
    span = outer if outer is not None and outer.type in ("type_definition", "declaration") else node
    names = []
    tag = node.child_by_field_name("name")
    if tag is not None:
        names.append(text(tag))
    if span.type == "type_definition":
        for declarator in span.children_by_field_name("declarator"):
            alias, levels = declarator_name(declarator)
            if alias and levels == 0 and alias not in names:
                names.append(alias)
    return [
        TypeInfo(name=name, file=rel, line_start=first_line(span), line_end=last_line(span), kind=kind,
                 fields=tuple(fields))
        for name in names
    ]


def _typedef_aliases(node, rel: str) -> list[TypeInfo]:
    type_node = node.child_by_field_name("type")
    if type_node is None or (type_node.type in TYPE_SPECIFIERS and type_node.child_by_field_name("body")):
        return []  # a typedef with a body is indexed with the struct itself
    _, base = type_base(type_node)
    out = []
    for declarator in node.children_by_field_name("declarator"):
        alias, _ = declarator_name(declarator)
        if alias and base and alias != base:
            out.append(TypeInfo(name=alias, file=rel, line_start=first_line(node), line_end=last_line(node),
                                kind="typedef", alias_of=base))
    return out


def _file_scope_variables(node, rel: str) -> list[GlobalInfo]:
    spelled, _ = type_base(node.child_by_field_name("type"))
    storage = {text(c) for c in node.children if c.type == "storage_class_specifier"}
    out = []
    for declarator in node.children_by_field_name("declarator"):
        if any(n.type == "function_declarator" for n in _declarator_chain(declarator)):
            continue  # a prototype, not a variable
        name, levels = declarator_name(declarator)
        if name:
            out.append(GlobalInfo(name=name, file=rel, line_start=first_line(node), line_end=last_line(node),
                                  type=spelled + "*" * levels, kind="extern" if "extern" in storage else
                                  "variable"))
    return out


def _declarator_chain(node) -> Iterator:
    while node is not None:
        yield node
        if node.type == "init_declarator":
            node = node.child_by_field_name("declarator")
        else:
            node = node.child_by_field_name("declarator")


# ------------------------------------------------------------------------------------- function body


class _BodyFacts:
    def __init__(self) -> None:
        self.calls: list[CallSite] = []
        self.writes: list[Write] = []
        self.reads: set[str] = set()
        self.locals: set[str] = set()
        self.local_types: dict[str, str] = {}
        self.assigns: list[AssignFromCall] = []
        self.moves: list[Move] = []
        self.loops: list[Loop] = []


def loop_var(loop) -> str | None:
    if loop.type == "for_range_loop":
        name, _ = declarator_name(loop.child_by_field_name("declarator"))
        return name
    if loop.type != "for_statement":
        return None
    init = loop.child_by_field_name("initializer")
    if init is not None:
        if init.type == "declaration":
            declarators = init.children_by_field_name("declarator")
            if declarators:
                return declarator_name(declarators[0])[0]
        if init.type == "assignment_expression":
            return root_name(init.child_by_field_name("left"))
        if init.type == "comma_expression":
            left = init.child_by_field_name("left")
            if left is not None and left.type == "assignment_expression":
                return root_name(left.child_by_field_name("left"))
    update = loop.child_by_field_name("update")
    if update is not None:
        if update.type == "update_expression":
            return root_name(update.child_by_field_name("argument"))
        if update.type == "assignment_expression":
            return root_name(update.child_by_field_name("left"))
    return None


def loop_depth(node, stop) -> int:
    depth = 0
    parent = node.parent
    while parent is not None and parent != stop:
        if parent.type in LOOP_TYPES:
            depth += 1
        parent = parent.parent
    return depth


def callee_name(call) -> tuple[str, str]:
    """(unqualified callee name, receiver text) of a call expression."""
    function = call.child_by_field_name("function")
    receiver = ""
    while function is not None:
        kind = function.type
        if kind == "identifier":
            return text(function), receiver
        if kind == "field_expression":
            receiver = text(function.child_by_field_name("argument"))
            function = function.child_by_field_name("field")
        elif kind in ("qualified_identifier", "template_function"):
            function = function.child_by_field_name("name")
        elif kind in ("field_identifier", "destructor_name", "operator_name"):
            return text(function), receiver
        elif kind == "parenthesized_expression":
            function = strip(function)
        else:
            return "", receiver
    return "", receiver


def _body_facts(body, expander: Expander) -> _BodyFacts:
    facts = _BodyFacts()
    callee_starts: set[int] = set()  # byte offsets of identifiers that name a called function
    read_bytes: set[bytes] = set()
    for node in walk(body):
        kind = node.type
        if kind == "identifier":  # the most frequent node: keep this branch cheap
            if node.start_byte not in callee_starts:
                read_bytes.add(node.text)
            continue
        if kind in LOOP_TYPES:
            facts.loops.append(Loop(line_start=first_line(node), line_end=last_line(node), var=loop_var(node),
                                    depth=loop_depth(node, body) + 1))
            if kind == "for_range_loop":
                name, _ = declarator_name(node.child_by_field_name("declarator"))
                if name:
                    facts.locals.add(name)
        elif kind == "declaration":
            _, base = type_base(node.child_by_field_name("type"))
            for declarator in node.children_by_field_name("declarator"):
                name, _ = declarator_name(declarator)
                if not name:
                    continue
                facts.locals.add(name)
                if base:
                    facts.local_types[name] = base
                if declarator.type == "init_declarator":
                    value = strip(declarator.child_by_field_name("value"))
                    if value is not None and value.type == "identifier":
                        facts.moves.append(Move(mover="=", dst=name, src=text(value), line=first_line(node)))
                    else:
                        _note_assignment(facts, name, value, first_line(node))
        elif kind == "assignment_expression":
            left = node.child_by_field_name("left")
            bare = strip(left)
            name = root_name(expander.expand(bare) or left)
            right = strip(node.child_by_field_name("right"))
            if name and bare is not None and bare.type == "identifier" and right is not None \
                    and right.type == "identifier" and operator(node) == "=":
                # `a = b` copies a pointer (or a value): a move of b, not new data
                facts.moves.append(Move(mover="=", dst=name, src=text(right), line=first_line(node)))
            elif name:
                facts.writes.append(Write(name=name, line=first_line(node)))
                _note_assignment(facts, name, right, first_line(node))
        elif kind == "update_expression":
            argument = node.child_by_field_name("argument")
            name = root_name(expander.expand(strip(argument)) or argument)
            if name:
                facts.writes.append(Write(name=name, line=first_line(node)))
        elif kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "identifier":
                callee_starts.add(function.start_byte)
            _note_call(facts, node)
            expanded = expander.expand(node)
            if expanded is not None:
                read_bytes.update(n.text for n in walk(expanded) if n.type == "identifier")
    facts.reads = {b.decode("utf-8", "replace") for b in read_bytes}
    return facts


def _note_assignment(facts: _BodyFacts, name: str, value, line: int) -> None:
    if value is None:
        return
    if value.type == "call_expression":
        callee, _ = callee_name(value)
        if callee:
            facts.assigns.append(AssignFromCall(name=name, callee=callee, line=line))
    elif value.type == "new_expression":
        facts.assigns.append(AssignFromCall(name=name, callee="new", line=line))


def _note_call(facts: _BodyFacts, node) -> None:
    callee, receiver = callee_name(node)
    if not callee:
        return
    arguments = node.child_by_field_name("arguments")
    args = tuple(root_name(a) for a in arguments.named_children if a.type != "comment") if arguments else ()
    line = first_line(node)
    facts.calls.append(CallSite(callee=callee, line=line, args=args, receiver=receiver))
    if callee in MOVERS:
        dst_i, src_i = MOVERS[callee]
        dst = args[dst_i] if dst_i < len(args) else None
        src = args[src_i] if src_i < len(args) else None
        facts.moves.append(Move(mover=callee, dst=dst, src=src, line=line))
        if dst:
            facts.writes.append(Write(name=dst, line=line, via=callee))
    elif callee in OUT_ALLOCATORS and args and args[0]:
        facts.assigns.append(AssignFromCall(name=args[0], callee=callee, line=line))
    elif callee in FILLERS and args and args[0]:
        facts.writes.append(Write(name=args[0], line=line, via=callee))
    elif receiver and callee in MUTATING_METHODS:
        function = node.child_by_field_name("function")
        name = root_name(function.child_by_field_name("argument")) if function is not None else None
        if name:
            facts.writes.append(Write(name=name, line=line, via=callee))


def find_function_node(tree, line_start: int, name: str):
    """The function_definition node a `FunctionInfo` was built from."""
    for node in walk(tree.root_node, skip_bodies=True):
        if node.type == "function_definition":
            start = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
            if first_line(start) == line_start:
                declarator = _function_declarator(node)
                if declarator is not None and name in text(declarator.child_by_field_name("declarator")):
                    return node
    return None
