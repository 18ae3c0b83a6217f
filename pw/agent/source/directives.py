"""What C-family source text says to the preprocessor and the assembler, line by line (pure).

Two things a candidate can write inside a function act outside it, where a reading by function
regions does not look (red team, session 16):

- a **preprocessor directive** (``#define``, ``#undef``, ``#if``, ``#include``, ``#pragma``): it acts on
  every line after it, in any function. A ``#define`` inside the hotspot's braces rewrote a helper
  defined further down, so "the hotspot's change alone" (the hybrid arm) carried a saving made in
  the helper;
- **inline assembly**: it can emit code, symbols and debug information anywhere.

And two things rewrite the line tables pw reads a run's samples by: ``#line`` (and GNU linemarkers,
``# 12 "file"``) and the assembler's ``.loc``, ``.file``, ``.line`` and ``.stab*`` directives. A red team's
``#line 2`` put a fifth of the hotspot's loop on the file's header comment.

The reading is conservative where the language is subtle: comments become blanks (their line breaks
kept), a backslash-newline joins lines, and a line whose first characters are ``#``, the digraph ``%:``
or the trigraph ``??=`` counts as a directive. A line that a compiler would not take as a directive may
be read as one (an edit is then treated as reaching beyond its function), never the other way.
"""

from __future__ import annotations

import re

_DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:|\?\?=)[ \t\f\v]*([A-Za-z_]\w*|\d)?")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_RAW_STRING = re.compile(r'(?<![\w])(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')
# The assembler's line-table directives, as they are written (`.loc 1 12 3`, `.file 2 "x.c"`).
_AS_LINE_CONTROL = re.compile(r'(?:^|[\s;])\.(?:loc\s+\d|line\s+\d|file\s+(?:\d+\s+)?"|stab[snd]\s)')


class Text:
    """One C-family file read for directives, inline assembly and string literals, by physical line."""

    def __init__(self, data: bytes) -> None:
        text = data.decode("utf-8", errors="replace")
        self.code, self.strings = _blank_comments_and_strings(text)
        self.lines = self.code.split("\n")
        self._logical = _logical_starts(self.lines)

    def directive(self, line: int) -> str | None:
        """The directive a physical line (1-based) begins or continues ("define", "line", "1" for a
        linemarker, "" for a null directive), or None when it is no directive's."""
        start = self._logical.get(line)
        if start is None:
            return None
        m = _DIRECTIVE.match(self._joined(start))
        return None if m is None else (m.group(1) or "")

    def has_asm(self, line: int) -> bool:
        return 1 <= line <= len(self.lines) and _ASM.search(self.lines[line - 1]) is not None

    def line_control(self, line: int) -> str | None:
        """What on this line rewrites the line tables: a ``#line`` or linemarker, or an assembler
        line directive in its code or in a string literal on it (None when nothing does)."""
        kind = self.directive(line)
        if kind == "line" or (kind and kind.isdigit()):
            return "#line" if kind == "line" else "a linemarker (# N \"file\")"
        texts = [self.lines[line - 1]] if 1 <= line <= len(self.lines) else []
        texts += self.strings.get(line, [])
        for t in texts:
            m = _AS_LINE_CONTROL.search(t.replace("\\n", "\n").replace("\\t", "\t"))
            if m is not None:
                return f"the assembler's {m.group(0).strip().split()[0]}"
        return None

    def _joined(self, start: int) -> str:
        out, k = [], start
        while k <= len(self.lines):
            row = self.lines[k - 1]
            if row.endswith("\\"):
                out.append(row[:-1])
                k += 1
                continue
            out.append(row)
            break
        return "".join(out)


def _logical_starts(lines: list[str]) -> dict[int, int]:
    """Physical line -> the physical line its logical line (backslash-newline joined) starts on."""
    out: dict[int, int] = {}
    start = 1
    for k, row in enumerate(lines, 1):
        out[k] = start
        if not row.endswith("\\"):
            start = k + 1
    return out


def _blank_comments_and_strings(text: str) -> tuple[str, dict[int, list[str]]]:
    """The text with comments blanked (line breaks kept) and string and character literals emptied
    (their quotes kept), and each string literal's contents by the line it starts on."""
    out: list[str] = []
    strings: dict[int, list[str]] = {}
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            while j != -1 and text[j - 1] == "\\":  # a line comment goes on past a backslash-newline
                j = text.find("\n", j + 1)
            j = n if j == -1 else j
            out.append(" " + "\n" * text.count("\n", i, j))
            line += text.count("\n", i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            line += text.count("\n", i, j)
            i = j
        elif (raw := _RAW_STRING.match(text, i)) is not None:  # C++: R"delim( ... )delim"
            j = text.find(f"){raw.group(1)}\"", raw.end())
            j = n if j == -1 else j + len(raw.group(1)) + 2
            strings.setdefault(line, []).append(text[raw.end():j])
            breaks = text.count("\n", i, j)
            out.append('""' + "\n" * breaks)
            line += breaks
            i = j
        elif c in "\"'":
            # A literal ends at its closing quote or at the end of its line (where a compiler would
            # stop with an error): a misread literal never hides the lines after it.
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            body = text[i + 1:min(j, n)]
            if c == '"':
                strings.setdefault(line, []).append(body)
            breaks = body.count("\n")  # a backslash-newline inside it
            out.append(c + "\n" * breaks + c)
            line += breaks
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), strings
