"""The skill tree (skills/, AGENTS.md) stays honest against the real CLI, the registry and its budgets.

Every `pw ...` line an agent may copy from a skill must parse with the real parser; every registry
adapter has a child skill and every child is routed to; the hand-edited registry table agrees with
the generated registry.json; the files fit their o200k token budgets; paths and symlinks resolve.
"""

from __future__ import annotations

import json
import os
import re
import types
from pathlib import Path

import pytest

from pw.agent import skilltree
from pw.agent.tokens import count_tokens
from pw.cli import build_parser

ROOT = skilltree.REPO_ROOT
SKILLS = skilltree.SKILLS_DIR
ROOT_SKILL = SKILLS / skilltree.ROOT_SKILL / "SKILL.md"
REGISTRY_JSON = ROOT / "adapters" / "registry.json"
REGISTRY_MD = SKILLS / skilltree.ROOT_SKILL / "references" / "registry.md"
ROUTING_MD = SKILLS / skilltree.ROOT_SKILL / "references" / "routing.md"
STAGES = ("profile", "normalize", "optimize", "benchmark", "reprofile", "verify", "report")

ALL_SKILL_FILES = skilltree.find_skill_files(SKILLS, include_templates=True)
SKILL_FILES = skilltree.find_skill_files(SKILLS)
ALIAS_FILES = [p for p in SKILL_FILES if p.parent.name in skilltree.ALIAS_CHILDREN]
CHILD_FILES = [p for p in SKILL_FILES if p.parent.name != skilltree.ROOT_SKILL and p not in ALIAS_FILES]
PROFILER_CHILD_FILES = [p for p in CHILD_FILES if p.parent.name not in skilltree.SERVICE_CHILDREN]
TEMPLATE_SKILL = SKILLS / skilltree.TEMPLATES / "child-skill" / "SKILL.md"
MARKDOWN = skilltree.find_markdown(SKILLS) + [ROOT / "AGENTS.md"]


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def _commands() -> list[tuple[str, str]]:
    return [(_rel(p), line) for p in MARKDOWN for line in skilltree.pw_commands(p.read_text(encoding="utf-8"))]


COMMANDS = _commands()


def _registry() -> dict:
    return json.loads(REGISTRY_JSON.read_text(encoding="utf-8"))


def _verbs() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(sub.choices)


def _parse(line: str, capsys) -> object:
    try:
        return build_parser().parse_args(skilltree.argv(line))
    except SystemExit:
        err = capsys.readouterr().err.strip()
        pytest.fail(f"{line!r} -> {skilltree.argv(line)} does not parse with pw.cli.build_parser(): {err}")


# --- the tree exists and is well formed ----------------------------------------------------------------

def test_tree_has_root_children_and_template():
    assert ROOT_SKILL.is_file()
    assert TEMPLATE_SKILL.is_file()
    assert (TEMPLATE_SKILL.parent / "references" / "tool-notes.md").is_file()
    assert {"pw-perf", "pw-callgrind", "pw-pyspy"} <= {p.parent.name for p in CHILD_FILES}
    for p in CHILD_FILES:
        assert (p.parent / "references" / "tool-notes.md").is_file(), f"{_rel(p)}: no references/tool-notes.md"
    assert (ROUTING_MD).is_file() and REGISTRY_MD.is_file()


@pytest.mark.parametrize("path", ALL_SKILL_FILES, ids=_rel)
def test_frontmatter(path: Path):
    skill = skilltree.load_skill(path)
    assert skill.meta.get("name"), f"{_rel(path)}: frontmatter has no name"
    assert skill.meta.get("description", "").strip(), f"{_rel(path)}: frontmatter has no description"
    assert len(skill.meta["description"]) <= 1024, "descriptions longer than 1024 characters are cut by agents"
    assert skill.body.strip(), f"{_rel(path)}: empty body"
    if skilltree.TEMPLATES in path.relative_to(SKILLS).parts:
        assert "TODO" in skill.meta["name"], "the template's name must be an obvious placeholder"
    else:
        assert skill.meta["name"] == path.parent.name, f"{_rel(path)}: name must equal its folder"


@pytest.mark.parametrize("text, why", [
    ("name: x\n---\n", "first line"),
    ("---\nname: x\n", "unterminated"),
    ("---\nname x\n---\n", "key: value"),
    ("---\nname: a\nname: b\n---\n", "line 3: duplicate"),
    ("---\nname: [a, b]\n---\n", "text value"),
    ("---\nname: a\n  - b: [\n---\n", "line 3: not YAML"),
])
def test_frontmatter_parser_rejects_malformed(text, why):
    with pytest.raises(skilltree.FrontmatterError, match=why):
        skilltree.parse_frontmatter(text)


def test_frontmatter_parser_reads_quotes_and_folded_blocks():
    meta, body = skilltree.parse_frontmatter('---\nname: "pw-x"\ndescription: >-\n  one\n  two\n---\nbody\n')
    assert meta == {"name": "pw-x", "description": "one two"}
    assert body == "body\n"


@pytest.mark.parametrize("header, want", [
    # YAML's block scalars: `|` keeps every newline, `>` folds single newlines into spaces but keeps
    # a blank line as a newline; both keep one final newline unless chomped with `-`.
    ("|", "first line\n  indented\n\nafter a blank\n"),
    ("|-", "first line\n  indented\n\nafter a blank"),
    (">", "first line\n  indented\n\nafter a blank\n"),
    (">-", "first line\n  indented\n\nafter a blank"),
])
def test_frontmatter_block_scalars_follow_yaml(header, want):
    text = f"---\nname: x\ndescription: {header}\n  first line\n    indented\n\n  after a blank\n---\n"
    meta, _ = skilltree.parse_frontmatter(text)
    assert meta["description"] == want


def test_frontmatter_literal_block_keeps_newlines_and_folded_block_joins_lines():
    meta, _ = skilltree.parse_frontmatter("---\nname: x\nlit: |\n  a\n  b\nfold: >\n  a\n  b\n---\n")
    assert meta["lit"] == "a\nb\n"
    assert meta["fold"] == "a b\n"


# --- every command an agent may copy parses with the real CLI ------------------------------------------

def test_commands_were_found():
    files = {f for f, _ in COMMANDS}
    assert _rel(ROOT_SKILL) in files
    for p in CHILD_FILES:
        assert _rel(p) in files, f"{_rel(p)} shows no pw command"
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("source, line", COMMANDS, ids=[f"{f}:{ln}" for f, ln in COMMANDS])
def test_command_parses_with_real_parser(source, line, capsys):
    args = _parse(line, capsys)
    assert args.verb == skilltree.argv(line)[0]
    from pw.rules.candidates import parse_candidate

    for text in (args.candidate if args.verb == "prepare" else []):
        spec = parse_candidate(text)  # raises InputError for a malformed ID:PARENT:MECHANISM
        assert spec.parent in ("baseline", "current") or re.fullmatch(r"[a-z0-9][a-z0-9-]*", spec.parent)


def test_a_broken_command_fails_the_check(capsys):
    """The parse check can fail: a missing argument or an unknown flag is caught."""
    for bad in ("pw evaluate RUN", "pw prepare RUN --kandidate ID:baseline:x", "pw frobnicate RUN"):
        with pytest.raises(pytest.fail.Exception):
            _parse(bad, capsys)


INLINE = [(_rel(p), c) for p in MARKDOWN for c in skilltree.inline_commands(p.read_text(encoding="utf-8"))]


def test_inline_commands_name_real_verbs():
    verbs = _verbs()
    assert INLINE
    for source, command in INLINE:
        verb = command.split()[1] if len(command.split()) > 1 else ""
        if verb.startswith("-") or verb == "...":
            continue  # `pw --help`, `pw ...`
        assert verb in verbs, f"{source} mentions `{command}`: {verb} is not a verb of pw.cli ({sorted(verbs)})"


@pytest.mark.parametrize("source, line", [(f, c) for f, c in INLINE if skilltree.is_complete(c)],
                         ids=[f"{f}:{c}" for f, c in INLINE if skilltree.is_complete(c)])
def test_inline_command_parses_with_real_parser(source, line, capsys):
    assert _parse(line, capsys).verb == skilltree.argv(line)[0]


def test_placeholders_become_concrete():
    line = "pw prepare RUN --candidate ID2:current:MECHANISM"
    assert skilltree.argv(line) == ["prepare", "runs/20260101-000000-matmul-c", "--candidate",
                                    "blocked:current:loop-interchange"]
    assert skilltree.substitute("RUNS RUN/x runs/<run-id>") == (
        "RUNS runs/20260101-000000-matmul-c/x runs/20260101-000000-matmul-c")


def test_command_lines_join_continuations_and_drop_prompts():
    text = "$ pw prepare RUN \\\n    --candidate a:baseline:x\nls -l\n# pw not a command\npw status RUN  # comment"
    assert skilltree.command_lines(text) == ["pw prepare RUN --candidate a:baseline:x", "pw status RUN  # comment"]
    assert skilltree.argv("pw status RUN  # comment") == ["status", "runs/20260101-000000-matmul-c"]


# --- the root skill's walkthrough ----------------------------------------------------------------------

def test_walkthrough_is_the_documented_loop():
    lines = skilltree.walkthrough(ROOT_SKILL.read_text(encoding="utf-8"))
    assert lines[0] == "pw start --workload workloads/matmul-c --iterations 10 --repairs 7"
    assert [skilltree.argv(ln)[0] for ln in lines] == ["start", "prepare", "evaluate", "confirm", "status", "report"]
    assert "pw prepare RUN --candidate loop-order:baseline:loop-interchange" in lines
    assert "pw evaluate RUN loop-order" in lines and "pw confirm RUN loop-order" in lines
    assert all(ln.split()[2] == "RUN" for ln in lines[1:]), "every step after start addresses RUN"
    assert (ROOT / "workloads" / "matmul-c").is_dir()


def test_walkthrough_needs_exactly_one_marked_block():
    with pytest.raises(ValueError, match="exactly one"):
        skilltree.walkthrough("no block here\n")
    two = f"{skilltree.WALKTHROUGH_MARKER}\n```\npw status RUN\n```\n" * 2
    with pytest.raises(ValueError, match="exactly one"):
        skilltree.walkthrough(two)


# --- registry and children agree -----------------------------------------------------------------------

def test_every_registry_adapter_has_a_child_skill():
    names = skilltree.registry_names(_registry())
    assert names, "registry.json lists no adapters"
    assert not skilltree.unmapped(names), f"adapters without a child in ADAPTER_CHILDREN: {skilltree.unmapped(names)}"
    for name in names:
        child = SKILLS / skilltree.ADAPTER_CHILDREN[name] / "SKILL.md"
        assert child.is_file(), f"adapter {name}: no {_rel(child)}"


def test_every_child_skill_is_in_the_registry():
    names = set(skilltree.registry_names(_registry()))
    stale = set(skilltree.ADAPTER_CHILDREN) - names
    assert not stale, f"ADAPTER_CHILDREN maps adapters not in registry.json: {sorted(stale)}"
    routed = set(skilltree.ADAPTER_CHILDREN.values())
    for child in skilltree.children(SKILLS):
        if child in skilltree.SERVICE_CHILDREN or child in skilltree.ALIAS_CHILDREN:
            continue
        assert child in routed, f"skills/{child} is not mapped to any registry adapter (never routed to)"


def _table(md: str, heading: str) -> list[dict[str, str]]:
    """The first markdown table after ``## heading``, as dicts keyed by header."""
    section = md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = [ln.strip() for ln in section.splitlines() if ln.strip().startswith("|")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    head, body = cells[0], [c for c in cells[2:]]
    return [dict(zip(head, c, strict=True)) for c in body]


def _items(cell: str) -> set[str]:
    return {x.strip() for x in cell.split(",") if x.strip()}


def _yes(cell: str) -> bool:
    assert cell in ("yes", "no"), f"expected yes/no, got {cell!r}"
    return cell == "yes"


def test_registry_md_installed_table_agrees_with_registry_json():
    rows = {r["adapter"]: r for r in _table(REGISTRY_MD.read_text(encoding="utf-8"), "Installed")}
    specs = {a["name"]: a for a in _registry()["adapters"]}
    assert set(rows) == set(specs), f"registry.md installed {sorted(rows)} != registry.json {sorted(specs)}"
    for name, spec in specs.items():
        row = rows[name]
        where = f"registry.md row {name}"
        assert row["child"] == skilltree.ADAPTER_CHILDREN[name], where
        assert float(row["overhead ×"]) == pytest.approx(spec["overhead_factor"]), f"{where}: overhead"
        assert float(row["setup s"]) == pytest.approx(spec["setup_s"]), f"{where}: setup"
        assert _yes(row["rebuild"]) == spec["needs_rebuild"], f"{where}: rebuild"
        assert _yes(row["can_reprofile"]) == spec["can_reprofile"], f"{where}: can_reprofile"
        assert _yes(row["partial"]) == spec["partial"], f"{where}: partial"
        assert _items(row["granularity"]) == set(spec["granularity"]), f"{where}: granularity"
        assert _items(row["measures"]) == set(spec["measures"]), f"{where}: measures"
        assert _items(row["phases"]) == set(spec["phases"]), f"{where}: phases"
        assert _items(row["targets"]) == set(spec["targets"]), f"{where}: targets"


def test_registry_md_lists_candidate_children():
    rows = {r["child"]: r for r in _table(REGISTRY_MD.read_text(encoding="utf-8"), "Candidate children")}
    assert rows, "registry.md has no candidate children table"
    installed = set(skilltree.ADAPTER_CHILDREN.values())
    assert not installed & set(rows), "a child is listed both as installed and as a candidate"
    columns = {c for r in rows.values() for c in _items(re.sub(r"\s*\(.*?\)", "", r["taxonomy column"]))}
    routing = ROUTING_MD.read_text(encoding="utf-8")
    for col in columns:
        assert f"| {col} |" in routing, f"taxonomy column {col} is not a row of routing.md"


def test_the_documents_partial_children_are_installed_and_declared_partial():
    """pw-gvprof, pw-gpa, pw-drgpum and pw-hpctoolkit exist, each routed from a partial adapter whose
    registry row says partial and no reprofile, and each child says its ceiling is `proposed`."""
    rows = {r["adapter"]: r for r in _table(REGISTRY_MD.read_text(encoding="utf-8"), "Installed")}
    for adapter, child in (("gvprof", "pw-gvprof"), ("gpa", "pw-gpa"), ("drgpum", "pw-drgpum"),
                           ("hpctoolkit", "pw-hpctoolkit")):
        assert skilltree.ADAPTER_CHILDREN[adapter] == child
        assert rows[adapter]["partial"] == "yes" and rows[adapter]["can_reprofile"] == "no"
        body = skilltree.load_skill(SKILLS / child / "SKILL.md").body
        assert "PARTIAL" in body and "`proposed`" in body and f"pw import RUN {adapter}=" in body, child


def test_old_child_names_redirect_to_the_documents_names():
    assert {p.parent.name for p in ALIAS_FILES} == set(skilltree.ALIAS_CHILDREN)
    for old, new in skilltree.ALIAS_CHILDREN.items():
        skill = skilltree.load_skill(SKILLS / old / "SKILL.md")
        assert skill.meta["name"] == old and new in skill.meta["description"]
        assert f"`skills/{new}/SKILL.md`" in skill.body and (SKILLS / new / "SKILL.md").is_file()
        assert count_tokens(skill.body) < 200, "a redirect stays a redirect"
        assert new in skilltree.ADAPTER_CHILDREN.values() and old not in skilltree.ADAPTER_CHILDREN.values()


def test_routing_md_maps_the_documents_five_rungs_onto_the_ladder():
    from pw.rules.routing import LADDER

    text = ROUTING_MD.read_text(encoding="utf-8")
    section = text.split("## The documents' five rungs", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in _table("## x\n" + section, "x")]
    assert len(rows) == 5, "the documents' ladder has five rungs"
    mapped = [n for r in rows for n in re.findall(r"`([a-z-]+)`", r["our rungs"])]
    assert sorted(mapped) == sorted(r.name for r in LADDER), "each rung of ours sits in exactly one documented rung"


def test_routing_md_names_every_ladder_rung():
    from pw.rules.routing import LADDER

    text = ROUTING_MD.read_text(encoding="utf-8")
    for rung in LADDER:
        assert f"`{rung.name}`" in text, f"routing.md does not name rung {rung.name}"
    assert "overhead_factor × runtime + setup_s" in text


# --- method: seven stages and six gates everywhere -----------------------------------------------------

def _gate_names() -> tuple[str, ...]:
    from pw.rules.gates import GATE_NAMES

    return GATE_NAMES


@pytest.mark.parametrize("path", [*PROFILER_CHILD_FILES, TEMPLATE_SKILL], ids=_rel)
def test_child_has_seven_stages_in_order_and_gate_table(path: Path):
    body = skilltree.load_skill(path).body
    positions = [body.find(f"**{stage}**") for stage in STAGES]
    assert all(p >= 0 for p in positions), f"{_rel(path)}: missing stages {[s for s, p in zip(STAGES, positions) if p < 0]}"
    assert positions == sorted(positions), f"{_rel(path)}: stages out of order"
    for gate in _gate_names():
        assert f"| {gate} |" in body, f"{_rel(path)}: gate table lacks {gate}"


def test_root_has_gate_table_and_statuses():
    body = skilltree.load_skill(ROOT_SKILL).body
    for gate in _gate_names():
        assert f"| {gate} |" in body, f"root skill gate table lacks {gate}"
    for status in ("verified", "proposed", "rejected", "inconclusive"):
        assert f"| {status} |" in body


def test_templates_have_todos_and_children_do_not():
    for p in (TEMPLATE_SKILL, TEMPLATE_SKILL.parent / "references" / "tool-notes.md"):
        assert "TODO" in p.read_text(encoding="utf-8")
    for p in CHILD_FILES:
        for f in (p, p.parent / "references" / "tool-notes.md"):
            assert "TODO" not in f.read_text(encoding="utf-8"), f"{_rel(f)} has an unfilled TODO"


# --- budgets, portability, paths, symlinks -------------------------------------------------------------

@pytest.mark.parametrize("path", SKILL_FILES, ids=_rel)
def test_token_budget(path: Path):
    limit = skilltree.token_limit(path, SKILLS)
    assert limit == (1500 if path == ROOT_SKILL else 1200)
    tokens = count_tokens(path.read_text(encoding="utf-8"))
    assert 0 < tokens < limit, f"{_rel(path)}: {tokens} o200k tokens, budget {limit}"


def test_budget_check_can_fail():
    big = Path(CHILD_FILES[0])
    assert count_tokens(big.read_text(encoding="utf-8") * 3) > skilltree.token_limit(big, SKILLS)


@pytest.mark.parametrize("path", MARKDOWN, ids=_rel)
def test_no_agent_specific_variables(path: Path):
    found = skilltree.agent_specific_variables(path.read_text(encoding="utf-8"))
    assert not found, f"{_rel(path)} uses agent-specific variables {found}"


def test_agent_specific_variable_check_can_fail():
    assert skilltree.agent_specific_variables("run ${CLAUDE_SKILL_DIR}/x and $ARGUMENTS") == [
        "$ARGUMENTS", "${CLAUDE_SKILL_DIR}"]


@pytest.mark.parametrize("path", MARKDOWN, ids=_rel)
def test_repository_paths_exist(path: Path):
    missing = [p for p in skilltree.repo_paths(path.read_text(encoding="utf-8")) if not (ROOT / p).exists()]
    assert not missing, f"{_rel(path)} names paths that do not exist: {missing}"


def test_repo_paths_skip_placeholders():
    text = "`skills/pw-<tool>/SKILL.md` `workloads/nope.c` `RUN/agent-brief.txt` `adapters/base.py`."
    assert skilltree.repo_paths(text) == ["workloads/nope.c", "adapters/base.py"]


@pytest.mark.parametrize("link, target", [
    (".claude/skills", "skills"), (".agents/skills", "skills"), ("CLAUDE.md", "AGENTS.md")])
def test_symlinks_resolve(link, target):
    path = ROOT / link
    assert path.is_symlink(), f"{link} must be a symlink"
    assert not os.path.isabs(os.readlink(path)), f"{link} must be a relative link"
    assert path.resolve() == (ROOT / target).resolve()
    assert (ROOT / target).exists()


# --- pw tokens -----------------------------------------------------------------------------------------

def test_tokens_json_measures_every_skill_file(capsys):
    from pw.cli.upkeep import tokens

    assert tokens(types.SimpleNamespace(json=True)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tokenizer"] == "o200k_base"
    by_path = {f["path"]: f for f in doc["files"]}
    for p in skilltree.find_markdown(SKILLS):
        assert by_path[_rel(p)]["tokens"] == count_tokens(p.read_text(encoding="utf-8"))
    assert by_path[_rel(ROOT_SKILL)]["limit"] == 1500
    assert by_path["AGENTS.md"]["kind"] == "instructions"
    assert doc["total"] == sum(f["tokens"] for f in doc["files"])


def test_tokens_includes_a_runs_brief_and_flags_overruns(run_dir: Path, capsys):
    from pw.cli.upkeep import tokens

    (run_dir / "agent-brief.txt").write_text("hotspot matmul 85%\n", encoding="utf-8")
    (run_dir / "source-slices").mkdir()
    (run_dir / "source-slices" / "matmul.c-1-20.txt").write_text("for (;;) {}\n", encoding="utf-8")
    assert tokens(types.SimpleNamespace(json=True, run=str(run_dir / "ledger.jsonl"))) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    kinds = {f["path"]: (f["kind"], f["limit"]) for f in run["files"]}
    assert kinds == {"agent-brief.txt": ("brief", 320), "source-slices/matmul.c-1-20.txt": ("slice", None)}

    (run_dir / "agent-brief.txt").write_text("word " * 400, encoding="utf-8")
    assert tokens(types.SimpleNamespace(json=False, run=str(run_dir))) == 1
    assert "over budget: agent-brief.txt" in capsys.readouterr().out
