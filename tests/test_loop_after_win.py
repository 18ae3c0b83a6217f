"""The loop after the first win (issue 17): how `pw` is found, and what the next step says."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import pw_main

SKILLS = Path(__file__).resolve().parent.parent / "skills"


def test_every_skill_says_how_pw_is_found_in_its_first_lines():
    for skill in sorted(SKILLS.glob("*/SKILL.md")):
        body = skill.read_text().split("---", 2)[2]
        head = "\n".join(body.strip().splitlines()[:6])
        assert ".venv/bin/pw" in head and "pw doctor" in head, skill


def test_doctor_says_which_pw_runs_and_from_where():
    result = pw_main("doctor", "--json")
    assert result.code == 0, result
    where = result.json()["pw"]
    package = Path(where["package"])
    assert (package / "cli" / "__init__.py").is_file()  # the package that is answering, not a guess
    assert Path(where["python"]).name.startswith("python")
