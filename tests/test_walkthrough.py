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
from tests.conftest import pair_log_sd, skip_for_noise, skip_if_machine_changed, skip_if_profiles_too_noisy

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
            assert code == 0, f"{line}: exit {code}\n{out}"
            assert "verified" in out
            if argv[0] == "evaluate":  # after a win: where the time goes now, and the next command
                assert "brief for the next idea:" in out and "--candidate ID:current:MECHANISM" in out, out
        else:
            assert code == 0, f"{line}: exit {code}\n{out}"
    assert main(["audit", run_dir]) == 0

    # The skill's next step: ideas built on the best verified candidate so far (`ID:current:...`),
    # each judged against its parent. A comment-only step loads its parent's image, so it is not
    # timed and is no effect however fast its parent is; hoisting fill_matrix's loop-invariant row
    # key is a real step on top of the interchange, timed against it.
    run = Path(run_dir)
    steps = {}
    for cid, edit in (("comment", _comment_only), ("hoist", _hoist_row_key)):
        assert main(["prepare", run_dir, "--candidate", f"{cid}:current:{cid}"]) == 0
        capsys.readouterr()
        edit(run / "candidates" / cid / "src" / "matmul.c")
        steps[cid] = _json(["evaluate", run_dir, cid, "--json"], capsys)
        assert steps[cid]["reference"] == "loop-order", steps[cid]
    comment = steps["comment"]
    assert comment["status"] == "rejected" and comment["speedup"] is None, comment
    assert comment["reasons"][0].startswith("no-effect: the candidate builds to the same running image as loop-order")
    hoist = steps["hoist"]
    skip_if_machine_changed(hoist)
    if hoist["stop"] != "decided":
        _skip_if_pairs_too_noisy(run, "hoist", hoist)
    assert hoist["speedup"] > 1.05 and hoist["stop"] == "decided", hoist  # a real step over loop-order
    gates = {g["name"]: g["passed"] for g in hoist["gates"]}
    assert gates["significance"] and gates["correctness"], hoist
    assert hoist["cumulative"] > hoist["speedup"], hoist  # the step times loop-order's verified win
    assert main(["audit", run_dir]) == 0


# The hoist is about 1.2x over loop-order: a campaign whose pairs spread more than this in log runs
# out of its 40 pairs about half the time (simulated with pw.stats.adaptive), at 20% about 2%.
PAIRS_SD_MAX = 0.25


def _skip_if_pairs_too_noisy(run: Path, cid: str, out: dict) -> None:
    sd = pair_log_sd(run, cid)
    if sd > PAIRS_SD_MAX:
        skip_for_noise(f"the step's campaign paired runs spreading {sd:.0%} in log (> {PAIRS_SD_MAX:.0%}): "
                    f"too noisy to decide a 1.2x step in its budget ({out['status']}, stop {out['stop']})")


def _json(argv, capsys):
    code = main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _comment_only(path: Path) -> None:
    path.write_text("/* the next idea, before it is written */\n" + path.read_text())


def _hoist_row_key(path: Path) -> None:
    text = path.read_text()
    old = ("    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) {\n"
           "            uint64_t key = row_key(seed, which, i);   /* invariant in j */\n")
    assert old in text
    path.write_text(text.replace(old, "    for (int i = 0; i < n; i++) {\n        uint64_t key = row_key(seed, which, i);\n"
                                      "        for (int j = 0; j < n; j++) {\n"))
