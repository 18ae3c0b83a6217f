"""The agent skill tree under ``skills/`` as data: SKILL.md files, frontmatter, commands, token costs.

Pure helpers (no network, no environment): tests use them to keep the markdown honest against the
real CLI parser and the adapter registry, and ``pw tokens`` uses them to measure what an agent pays
to load each file. The one mapping from adapter names to child skills lives here
(``ADAPTER_CHILDREN``), so "every adapter has a child, every child is in the registry" is checkable.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from ledger.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
SKILLS_DIR = REPO_ROOT / "skills"
SKILL_FILE = "SKILL.md"
ROOT_SKILL = "profile-weaver"
TEMPLATES = "templates"  # skills/templates/<kind>/ hold copy-me skeletons, not routable children

#: adapter name (adapters/registry.json) -> child skill folder. callgrind's cache-simulation variant
#: is the same tool with one more flag, so pw-callgrind documents both.
# Children that are not profilers of the optimisation loop but services with their own verbs: no
# seven stages, no gate table, never routed to.
SERVICE_CHILDREN: dict[str, str] = {
    "pw-kernel-profile": "the kernel-profile cache, `pw kernel-profile` (docs/kernel-profile.md)",
}

# Old child names a user may have typed, each a short SKILL.md that points at the new name (the
# documents call the GPU children pw-nsight-systems and pw-nsight-compute). Never routed to.
ALIAS_CHILDREN: dict[str, str] = {
    "pw-nsys": "pw-nsight-systems",
    "pw-ncu": "pw-nsight-compute",
}

ADAPTER_CHILDREN: dict[str, str] = {
    "perf": "pw-perf",
    "callgrind": "pw-callgrind",
    "callgrind-cachesim": "pw-callgrind",
    "py-spy": "pw-pyspy",
    "cupti": "pw-nsight-systems",  # the GPU timeline, whichever backend records it
    "nsys": "pw-nsight-systems",
    "ncu": "pw-nsight-compute",
    # partial children: they import what the tool wrote elsewhere (`pw import`), never capture
    "hpctoolkit": "pw-hpctoolkit",
    "gvprof": "pw-gvprof",
    "drgpum": "pw-drgpum",
    "gpa": "pw-gpa",
}

#: o200k_base token budgets for files an agent loads (DESIGN §12 for the brief).
ROOT_SKILL_LIMIT = 1500
CHILD_SKILL_LIMIT = 1200
BRIEF_LIMIT = 320

#: Concrete stand-ins for the placeholders used in skill command lines, so they can be parsed.
PLACEHOLDERS: dict[str, str] = {
    "<run-id>": "20260101-000000-matmul-c",
    "RUN": "runs/20260101-000000-matmul-c",
    "DIR": "workloads/matmul-c",
    "ID2": "blocked",
    "ID": "loop-order",
    "MECHANISM": "loop-interchange",
    "FUNCTION": "matmul",
    "N": "3",
}

#: Variables only one agent product expands; skills are written for the common denominator.
AGENT_SPECIFIC = re.compile(
    r"\$\{?(?:CLAUDE_[A-Z_]*|CODEX_[A-Z_]*|SKILL_DIR|ARGUMENTS|PLUGIN_ROOT)\}?|\$ARGUMENTS\b|\$[0-9]\b"
)

#: Top-level folders of the repository; a backticked path starting with one must exist.
REPO_FOLDERS = ("adapters", "benchmarks", "ledger", "projections", "pw", "schemas", "skills", "tests",
                "workloads")
_PATH_TOKEN = re.compile(r"`((?:" + "|".join(REPO_FOLDERS) + r")/[^`\s]*)`")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
WALKTHROUGH_MARKER = "<!-- walkthrough -->"


@dataclass(frozen=True)
class CodeBlock:
    info: str      # the fence's info string ("bash", "" ...)
    text: str      # the lines between the fences
    line: int      # 1-based line of the opening fence
    marker: str    # the last non-blank line before the fence (e.g. "<!-- walkthrough -->"), or ""


@dataclass(frozen=True)
class Skill:
    path: Path               # the SKILL.md file
    meta: dict[str, str]     # its frontmatter
    body: str                # the markdown after the frontmatter


class FrontmatterError(InputError):
    """A SKILL.md whose front matter is not the YAML mapping of text an agent reads."""


# The YAML text starts on line 2 of the file; PyYAML counts lines from 0.
_FIRST_LINE = 2


class _FrontmatterLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice is an error instead of last-one-wins."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise FrontmatterError(f"frontmatter line {key_node.start_mark.line + _FIRST_LINE}: "
                                       f"duplicate key {key!r}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def find_skill_files(root: Path = SKILLS_DIR, *, include_templates: bool = False) -> list[Path]:
    """Every SKILL.md under ``root``, sorted; templates only when asked for."""
    out = []
    for p in sorted(root.rglob(SKILL_FILE)):
        if not include_templates and TEMPLATES in p.relative_to(root).parts:
            continue
        out.append(p)
    return out


def find_markdown(root: Path = SKILLS_DIR) -> list[Path]:
    """Every markdown file of the tree (skills, references, templates, README), sorted."""
    return sorted(root.rglob("*.md"))


def parse_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """The ``---`` delimited YAML block at the top of a SKILL.md, and the body after it.

    Parsed by a real YAML parser (PyYAML's safe loader), so ``|`` keeps its newlines and ``>`` folds
    them as YAML says. What agents read from it is a flat mapping of text (name, description), so
    the block must be a mapping whose values are strings; a repeated key is an error (PyYAML alone
    would keep the last one silently).
    """
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise FrontmatterError("no frontmatter: the first line must be '---'")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise FrontmatterError("unterminated frontmatter: no closing '---'") from None
    try:
        data = yaml.load("\n".join(lines[1:end]) + "\n", Loader=_FrontmatterLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + _FIRST_LINE if exc.problem_mark else _FIRST_LINE
        raise FrontmatterError(f"frontmatter line {line}: not YAML ({exc.problem})") from None
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"frontmatter: not YAML ({exc})") from None
    if data is None:
        return {}, "\n".join(lines[end + 1:])
    if not isinstance(data, dict):
        raise FrontmatterError(f"frontmatter: expected 'key: value' lines, got a {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise FrontmatterError(f"frontmatter key {key!r}: expected 'key: value' with a text value, "
                                   f"got {type(value).__name__}")
    return data, "\n".join(lines[end + 1:])


def load_skill(path: Path) -> Skill:
    meta, body = parse_frontmatter(path.read_text(encoding="utf-8"))
    return Skill(path=path, meta=meta, body=body)


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Fenced code blocks in order, each with the marker line just above it."""
    out: list[CodeBlock] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(2), m.group(3).strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        prev = [ln.strip() for ln in lines[:start] if ln.strip()]
        out.append(CodeBlock(info=info, text="\n".join(body), line=start + 1, marker=prev[-1] if prev else ""))
        i += 1
    return out


def command_lines(block_text: str, program: str = "pw") -> list[str]:
    """Lines of a code block that invoke ``program`` (a leading ``$ `` prompt is dropped,
    backslash continuations are joined, comments are removed by the caller's shlex)."""
    joined: list[str] = []
    pending = ""
    for raw in block_text.split("\n"):
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    out = []
    for line in joined:
        line = line.removeprefix("$ ").strip()
        if line == program or line.startswith(program + " "):
            out.append(line)
    return out


def pw_commands(markdown: str) -> list[str]:
    """Every ``pw ...`` command line in the fenced code blocks of a markdown text."""
    return [c for b in code_blocks(markdown) for c in command_lines(b.text)]


_INLINE = re.compile(r"`(?:\.venv/bin/)?(pw [^`]*)`")


def inline_commands(markdown: str) -> list[str]:
    """Backticked ``pw ...`` mentions in prose (``.venv/bin/pw`` written as ``pw``); a bare verb
    (``pw evaluate``) or an elided one (``pw confirm ... --fresh``) is kept as written."""
    return [m.group(1).strip() for m in _INLINE.finditer(markdown)]


def is_complete(command: str) -> bool:
    """Whether an inline mention is a whole command line (arguments given, nothing elided)."""
    parts = command.split()
    return len(parts) > 2 and "..." not in command


def walkthrough(markdown: str) -> list[str]:
    """The ``pw`` commands of the code block headed by ``<!-- walkthrough -->``, in order."""
    blocks = [b for b in code_blocks(markdown) if b.marker == WALKTHROUGH_MARKER]
    if len(blocks) != 1:
        raise ValueError(f"expected exactly one code block after {WALKTHROUGH_MARKER}, found {len(blocks)}")
    return command_lines(blocks[0].text)


def substitute(line: str, mapping: Mapping[str, str] = PLACEHOLDERS) -> str:
    """Replace placeholder words (whole words, longest first) with concrete strings."""
    for key in sorted(mapping, key=len, reverse=True):
        if key.startswith("<"):
            line = line.replace(key, mapping[key])
        else:
            line = re.sub(rf"(?<![\w-]){re.escape(key)}(?![\w-])", mapping[key], line)
    return line


def argv(line: str, mapping: Mapping[str, str] = PLACEHOLDERS) -> list[str]:
    """The arguments after ``pw`` of a skill command line, placeholders made concrete."""
    return shlex.split(substitute(line, mapping), comments=True)[1:]


def repo_paths(markdown: str) -> list[str]:
    """Backticked repository-relative paths (``skills/...``, ``workloads/...``) without placeholders."""
    out = []
    for m in _PATH_TOKEN.finditer(markdown):
        p = m.group(1).rstrip(".,:;")
        if any(ch in p for ch in "<>*{}$") or re.search(r"\b(RUN|ID|DIR)\b", p):
            continue
        out.append(p)
    return out


def agent_specific_variables(text: str) -> list[str]:
    return sorted({m.group(0) for m in AGENT_SPECIFIC.finditer(text)})


def token_limit(path: Path, root: Path = SKILLS_DIR) -> int | None:
    """The budget a skill file must fit: the root skill, each child skill; None for others."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    if rel.name != SKILL_FILE or TEMPLATES in rel.parts:
        return None
    return ROOT_SKILL_LIMIT if rel.parts[0] == ROOT_SKILL else CHILD_SKILL_LIMIT


@dataclass(frozen=True)
class Cost:
    kind: str          # skill | reference | template | readme | instructions | brief | view
    path: str          # as shown (repository- or run-relative)
    tokens: int
    limit: int | None

    @property
    def within(self) -> bool:
        return self.limit is None or self.tokens <= self.limit


def _kind(rel: Path) -> str:
    if TEMPLATES in rel.parts:
        return "template"
    if rel.name == SKILL_FILE:
        return "skill"
    if "references" in rel.parts:
        return "reference"
    return "readme"


def skill_costs(root: Path = SKILLS_DIR, count=None) -> list[Cost]:
    """Measured o200k_base cost of every markdown file of the skill tree (and AGENTS.md beside it)."""
    if count is None:
        from pw.agent.tokens import count_tokens as count
    out = []
    base = root.parent
    for p in find_markdown(root):
        rel = p.relative_to(root)
        out.append(Cost(_kind(rel), str(p.relative_to(base)), count(p.read_text(encoding="utf-8")),
                        token_limit(p, root)))
    agents = base / "AGENTS.md"
    if agents.is_file():
        out.append(Cost("instructions", "AGENTS.md", count(agents.read_text(encoding="utf-8")), None))
    return out


RUN_FILES: tuple[tuple[str, str, int | None], ...] = (
    ("brief", "agent-brief.txt", BRIEF_LIMIT),
    ("view", "agent-view.json", None),
)


def run_costs(run_dir: Path, count=None) -> list[Cost]:
    """Cost of what a run emitted for the agent: the brief, the view, and the source slices."""
    if count is None:
        from pw.agent.tokens import count_tokens as count
    out = []
    for kind, name, limit in RUN_FILES:
        p = run_dir / name
        if p.is_file():
            out.append(Cost(kind, name, count(p.read_text(encoding="utf-8", errors="replace")), limit))
    for p in sorted((run_dir / "source-slices").glob("*.txt")):
        out.append(Cost("slice", str(p.relative_to(run_dir)),
                        count(p.read_text(encoding="utf-8", errors="replace")), None))
    for p in sorted((run_dir / "imports").glob("*/agent-brief.txt")):  # `pw import` briefs
        out.append(Cost("import-brief", str(p.relative_to(run_dir)),
                        count(p.read_text(encoding="utf-8", errors="replace")), BRIEF_LIMIT))
    return out


def children(root: Path = SKILLS_DIR) -> list[str]:
    """Folder names of the child skills (every skill but the root and templates)."""
    return [p.parent.name for p in find_skill_files(root) if p.parent.name != ROOT_SKILL]


def registry_names(doc: Mapping) -> list[str]:
    return [a["name"] for a in doc.get("adapters", [])]


def unmapped(names: Iterable[str]) -> list[str]:
    return [n for n in names if n not in ADAPTER_CHILDREN]
