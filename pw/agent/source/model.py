"""Data shapes of the source locator: what a parser extracts, and what `locate` returns.

Two layers live here. The *index* layer (`FileIndex` and the Structs it holds) is a language-neutral
summary that the C-family and Python parsers both produce, so the locator never looks at a syntax
tree. The *result* layer (`SourceTargets` and its parts) is what the agent brief and `pw inspect`
consume; it holds relative paths only, so the same tree gives byte-identical results anywhere.
"""

from __future__ import annotations

import msgspec

# Roles in priority order: when the line budget is short, slices are dropped from the end first.
ROLES = ("hotspot", "callee", "data", "writer", "sibling")


# --------------------------------------------------------------------------------------------- index


class Param(msgspec.Struct, frozen=True):
    name: str
    type: str  # short normalized spelling, e.g. "double*", "particle*", "list[Item]"
    base_type: str | None  # the named type behind it (struct tag, typedef, class), None for primitives
    indirection: int = 0  # pointer, array and reference levels (C family); 0 for Python


class CallSite(msgspec.Struct, frozen=True):
    callee: str  # unqualified name
    line: int
    args: tuple[str | None, ...]  # the variable each argument is rooted at, None for literals etc.
    receiver: str = ""  # "self" / "cls" / object text for method calls, "" for plain calls


class Loop(msgspec.Struct, frozen=True):
    line_start: int
    line_end: int
    var: str | None  # induction variable when the parser can tell
    depth: int  # 1 = outermost loop of the function
    iterable: str = ""  # Python: text of what is iterated


class Write(msgspec.Struct, frozen=True):
    name: str  # root variable written (element, field or whole), "self.attr" for Python attributes
    line: int
    via: str = ""  # a call that writes it (memset, memcpy, push_back, append ...), "" for an assignment


class AssignFromCall(msgspec.Struct, frozen=True):
    name: str  # variable that receives the result (or whose address is passed to an allocator)
    callee: str
    line: int


class Move(msgspec.Struct, frozen=True):
    mover: str  # memcpy, cudaMemcpy, std::copy ..., or "=" for a plain pointer/reference copy `a = b`
    dst: str | None
    src: str | None
    line: int


class FunctionInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    qualname: str
    file: str
    line_start: int
    line_end: int
    def_line: int  # line of the name itself (after decorators / template heads)
    params: tuple[Param, ...] = ()
    calls: tuple[CallSite, ...] = ()
    writes: tuple[Write, ...] = ()
    reads: tuple[str, ...] = ()  # identifiers read that are not locals (sorted)
    locals: tuple[str, ...] = ()  # names declared or bound inside (sorted)
    local_types: tuple[tuple[str, str], ...] = ()  # (local name, base type)
    assigns: tuple[AssignFromCall, ...] = ()
    moves: tuple[Move, ...] = ()
    loops: tuple[Loop, ...] = ()
    owner: str | None = None  # enclosing class, if a method


class TypeInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    file: str
    line_start: int
    line_end: int
    kind: str  # struct / union / class / enum / typedef
    fields: tuple[str, ...] = ()
    alias_of: str | None = None  # typedef without a body: the name it stands for


class Macro(msgspec.Struct, frozen=True, kw_only=True):
    """A function-like C preprocessor macro, kept so that `AT(g, i, j)` can be seen as `g[i * NY + j]`."""

    name: str
    params: tuple[str, ...]
    body: str
    file: str
    line: int


class GlobalInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    file: str
    line_start: int
    line_end: int
    type: str = ""
    kind: str = "variable"  # variable / extern / macro


class FileIndex(msgspec.Struct, frozen=True, kw_only=True):
    file: str
    language: str  # c / cpp / cuda / python
    functions: tuple[FunctionInfo, ...] = ()
    types: tuple[TypeInfo, ...] = ()
    globals: tuple[GlobalInfo, ...] = ()
    macros: tuple[Macro, ...] = ()


# -------------------------------------------------------------------------------------------- result


class AccessFact(msgspec.Struct, frozen=True, kw_only=True):
    """One syntax fact about memory access or work inside the hotspot's loops."""

    kind: str  # strided / indirect / aos-field / reduction-dependency / linear-membership / ...
    file: str
    line: int
    detail: str
    loop_depth: int
    symbol: str = ""  # the array, field base or container the fact is about
    tags: tuple[str, ...] = ()  # qualifiers: memory, scalar, macro, pointer-chase, type-unknown ...
    fields_touched: int = 0  # aos-field only: fields the loop nest uses ...
    fields_declared: int = 0  # ... of the fields the struct declares (0 when not in the tree)


class Target(msgspec.Struct, frozen=True, kw_only=True):
    role: str  # one of ROLES
    file: str  # relative to the root, '/'-separated
    line_start: int
    line_end: int
    symbol: str
    editable: bool
    focus: tuple[int, int] | None = None  # hot loop nest (hotspot) or the relevant lines (writer)
    reason: str = ""
    slice: str | None = None  # key into SourceTargets.slices; None when the line budget dropped it


class FrontierEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Producer -> mover -> consumer path of one datum, as short `function@file:line` strings."""

    symbol: str
    type: str = ""
    producers: tuple[str, ...] = ()
    movers: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()

    def render(self) -> str:
        parts = [f"{self.symbol}{' ' + self.type if self.type else ''}"]
        if self.producers:
            parts.append("<- " + ", ".join(self.producers))
        if self.movers:
            parts.append("~ " + ", ".join(self.movers))
        if self.consumers:
            parts.append("-> " + ", ".join(self.consumers))
        return " ".join(parts)


class SourceTargets(msgspec.Struct, frozen=True, kw_only=True):
    hotspot_file: str
    hotspot_function: str
    language: str
    targets: tuple[Target, ...]
    slices: dict[str, str]
    frontier: tuple[FrontierEntry, ...] = ()
    facts: tuple[AccessFact, ...] = ()
    omitted: tuple[str, ...] = ()  # "<role> <symbol>: dropped|trimmed (...)" for budget decisions
    slice_lines: int = 0

    def frontier_lines(self) -> list[str]:
        return [entry.render() for entry in self.frontier]
