"""Drive ProfileWeaver exactly as the root skill tells an agent to, from `pw start` to `pw confirm`.

The command lines come from the `<!-- walkthrough -->` block of skills/profile-weaver/SKILL.md;
the only thing the test adds is the agent's edit (the bundled loop-interchange patch) at the point
where the skill says to edit, and the run directory `pw start` printed in place of RUN.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pw.agent import skilltree
from pw.app.demo import apply_patch
from pw.cli import main
from tests.conftest import skip_for_noise, skip_if_machine_changed, skip_if_profiles_too_noisy

REPO = Path(__file__).resolve().parent.parent
ROOT_SKILL = REPO / "skills" / "profile-weaver" / "SKILL.md"


@pytest.mark.slow
def test_root_skill_walkthrough_runs_from_start_to_confirm(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    commands = skilltree.walkthrough(ROOT_SKILL.read_text())
    verbs = [shlex.split(c)[1] for c in commands]
    assert verbs[0] == "start" and "confirm" in verbs, verbs
    run_dir = None
    for line in commands:
        argv = shlex.split(line)[1:]
        if argv[0] == "start":
            argv += ["--runs-dir", str(tmp_path / "runs"), "--json"]
        else:
            argv = [run_dir if a == "RUN" else a for a in argv]
        code = main(argv)
        out = capsys.readouterr().out
        if argv[0] == "start":
            assert code == 0, out
            run_dir = json.loads(out)["run_dir"]
            assert (Path(run_dir) / "agent-brief.txt").is_file()
        elif argv[0] == "prepare":
            assert code == 0, out
            workspace = Path(run_dir) / "candidates" / "loop-order" / "src"
            assert "matmul.c" in out
            # The agent's edit, where the skill says to make it.
            apply_patch(REPO / "workloads" / "matmul-c" / "candidates" / "interchange.patch", workspace)
        elif argv[0] in ("evaluate", "confirm"):
            skip_if_machine_changed(out)
            if code != 0:
                skip_if_profiles_too_noisy(Path(run_dir), "loop-order")
                if "inconclusive" in out and "budget of" in out:  # spent undecided: the host's noise
                    skip_for_noise(f"{line}: {out.strip()[:220]}")
            assert code == 0, f"{line}: exit {code}\n{out}"
            assert "verified" in out
            if argv[0] == "evaluate":  # after a win: where the time goes now, and the next command
                assert "brief for the next idea:" in out and "--candidate ID:current:MECHANISM" in out, out
        else:
            assert code == 0, f"{line}: exit {code}\n{out}"
    assert main(["audit", run_dir]) == 0

    # The skill's next step: ideas built on the best verified candidate so far (`ID:current:...`),
    # each judged against its parent. A comment-only step loads its parent's image, so it is not
    # timed and is no effect however fast its parent is (a timed step on a verified parent:
    # tests/test_chained_candidates.py).
    run = Path(run_dir)
    assert main(["prepare", run_dir, "--candidate", "comment:current:comment"]) == 0
    capsys.readouterr()
    _comment_only(run / "candidates" / "comment" / "src" / "matmul.c")
    comment = _json(["evaluate", run_dir, "comment", "--json"], capsys)
    assert comment["reference"] == "loop-order", comment
    assert comment["status"] == "rejected" and comment["speedup"] is None, comment
    assert comment["reasons"][0].startswith("no-effect: the candidate builds to the same running image as loop-order")
    assert main(["audit", run_dir]) == 0


def _json(argv, capsys):
    code = main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _comment_only(path: Path) -> None:
    path.write_text("/* the next idea, before it is written */\n" + path.read_text())
