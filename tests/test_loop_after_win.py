"""The loop after the first win (issue 17): how `pw` is found, and what the next step says."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_winner_only_cadence_defers_the_exact_count_channel_to_confirm(copy_workload, tmp_path):
    """Every timed run carries the discovery profiler whatever the cadence; `winner-only` defers the
    diagnosis adapter's exact counts (and a GPU's counters) to `pw confirm` of the winner."""
    import json

    from ledger import events as ev
    from tests.conftest import apply_patch, ledger_events, skip_if_undecided, start_run

    workload = copy_workload("matmul-c")
    manifest = json.loads((workload / "profileweaver.json").read_text())
    manifest["profiling"] = {"cadence": "winner-only"}
    (workload / "profileweaver.json").write_text(json.dumps(manifest))
    run = start_run(workload, tmp_path / "runs")
    assert pw_main("prepare", run, "--candidate", "a:baseline:interchange").code == 0
    apply_patch(run / "candidates" / "a" / "src", workload / "candidates" / "interchange.patch")
    evaluated = pw_main("evaluate", run, "a", "--json").json()
    skip_if_undecided(evaluated)
    assert evaluated["status"] == "verified", evaluated  # the timed runs' own profiles judged it
    events = ledger_events(run)
    timing = next(e.data for e in events if isinstance(e.data, ev.TimingRecorded) and "a" in e.data.targets)
    assert timing.profiler is not None and timing.profiler.adapter == "perf", timing.profiler
    assert not [e for e in events if isinstance(e.data, ev.ProfileCaptured) and e.data.target == "a"]  # deferred
    climbed = [e.data.chosen for e in events if isinstance(e.data, ev.RoutingDecided)
               and e.data.phase == "diagnosis" and e.data.chosen is not None]

    before = events[-1].seq
    confirmed = pw_main("confirm", run, "a")
    assert confirmed.code == 0 and "a: verified" in confirmed.out, confirmed
    after = [e for e in ledger_events(run) if e.seq > before]
    captured = [e.data.adapter for e in after if isinstance(e.data, ev.ProfileCaptured) and e.data.target == "a"]
    assert captured == climbed[-1:], (captured, climbed)  # the diagnosis adapter routing climbed to, if any
    if climbed:
        assert "captured what cadence winner-only deferred" in confirmed.out, confirmed.out
    # the profiled pairs were reused; confirm added its unprofiled pairs only
    timings = [e.data for e in after if isinstance(e.data, ev.TimingRecorded)]
    assert [t.purpose for t in timings] == ["unprofiled"], [t.purpose for t in timings]
    assert pw_main("audit", run).code == 0


FAST_TINY_C = """\
#include <stdio.h>
int main(void)
{
    unsigned long n = 300000, s = (n / 7) * 21;
    for (unsigned long r = 0; r < n % 7; r++)
        s += r;
    printf("sum %lu\\n", s);
    return 0;
}
"""


@pytest.mark.slow
def test_winner_confirmation_screening_ranks_and_status_names_the_one_to_confirm(tmp_path):
    import json

    from tests.conftest import SAME_SPEED_TINY_C, start_run, write_tiny_c_workload

    workload = write_tiny_c_workload(tmp_path / "workload")
    manifest = json.loads((workload / "profileweaver.json").read_text())
    manifest["sampling"] = {"mode": "winner-confirmation"}
    (workload / "profileweaver.json").write_text(json.dumps(manifest))
    run = start_run(workload, tmp_path / "runs", "--no-profile")
    assert pw_main("prepare", run, "--candidate", "same:baseline:an unread global",
                   "--candidate", "closed:baseline:formula").code == 0
    (run / "candidates" / "same" / "src" / "tiny.c").write_text(SAME_SPEED_TINY_C)
    (run / "candidates" / "closed" / "src" / "tiny.c").write_text(FAST_TINY_C)
    screened = {}
    for cid in ("same", "closed"):
        out = pw_main("evaluate", run, cid, "--json").json()
        assert out["status"] == "inconclusive" and out["exploratory"], out
        assert out["speedup"] is not None and out["interval"] is None, out  # one pair: an estimate, no interval
        assert "exploratory screening: one pair gives" in out["reasons"][0], out
        screened[cid] = out["speedup"]

    status = pw_main("status", run, "--json").json()
    ranking = [r["id"] for r in status["screening_ranking"]]
    assert ranking == sorted(screened, key=lambda c: -screened[c])
    assert status["to_confirm"] == ranking[0]
    text = pw_main("status", run)
    assert "next: pw confirm" in text.out and f"{ranking[0]}   (best one-pair screening estimate" in text.out
    assert all(r["exploratory"] for r in status["candidates"])


@pytest.mark.slow
def test_every_json_file_of_a_run_has_a_schema_and_validates(matmul_interchange):
    from pw.export.schemas import type_for_file

    run = matmul_interchange
    assert (run / "profile.baseline.json").is_file()
    files = [p for p in run.rglob("*.json") if "raw" not in p.relative_to(run).parts
             and not {"baseline", "src", "build", "scratch"} & set(p.relative_to(run).parts)]
    assert any(p.name == "campaign-result.json" for p in files), files
    for path in files:
        assert type_for_file(path) is not None, path
        result = pw_main("validate", path)
        assert result.code == 0, (path, result)


@pytest.mark.slow
def test_a_verified_candidate_gets_a_refreshed_brief_for_the_next_idea(matmul_interchange):
    from ledger import events as ev
    from pw.agent.brief import TOKEN_BUDGET
    from tests.conftest import ledger_events

    run = matmul_interchange
    verdict = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached) and e.data.id == "a")
    assert verdict.status == "verified"
    brief = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.BriefEmitted) and e.data.target == "a")
    baseline = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.BriefEmitted) and e.data.target == "baseline")
    assert brief.tokens <= TOKEN_BUDGET
    text = (run / "candidates" / "a" / "agent-brief.txt").read_text()
    assert text == brief.text and "Current best a" in text and "ID:current:MECHANISM" in text, text
    # its numbers come from a's reprofile: the hotspot share and the remaining Amdahl ceiling changed
    assert brief.numbers["hotspot"]["share"] != baseline.numbers["hotspot"]["share"]
    assert brief.numbers["current"] == "a" and brief.numbers["cumulative"] > 1.0
    assert (run / "candidates" / "a" / "profile" / "source-targets.json").is_file()
    for rel in brief.numbers["slices"]:
        assert rel["path"].startswith("candidates/a/source-slices/") and (run / rel["path"]).is_file()
    assert pw_main("audit", run).code == 0  # a projection: rebuilt byte for byte


def test_winner_confirmation_confirms_the_best_estimate_once_the_iteration_budget_is_spent(tmp_path):
    import json

    from ledger import events as ev
    from tests.conftest import SAME_SPEED_TINY_C, ledger_events, start_run, write_tiny_c_workload

    workload = write_tiny_c_workload(tmp_path / "workload")
    manifest = json.loads((workload / "profileweaver.json").read_text())
    manifest["sampling"] = {"mode": "winner-confirmation"}
    (workload / "profileweaver.json").write_text(json.dumps(manifest))
    run = start_run(workload, tmp_path / "runs", "--no-profile", "--iterations", 2)
    assert pw_main("prepare", run, "--candidate", "same:baseline:an unread global",
                   "--candidate", "closed:baseline:formula").code == 0
    (run / "candidates" / "same" / "src" / "tiny.c").write_text(SAME_SPEED_TINY_C)
    (run / "candidates" / "closed" / "src" / "tiny.c").write_text(FAST_TINY_C)

    first = pw_main("evaluate", run, "same", "--json").json()
    assert first["screening"]["iterations_left"] == 1 and first["screening"]["confirmed"] is None, first
    assert "1 of 2 iterations left" in first["screening"]["line"]
    assert not [e for e in ledger_events(run) if isinstance(e.data, ev.WinnerConfirmed)]
    status = pw_main("status", run)
    assert "1 of 2 iterations left" in status.out, status

    answered = pw_main("evaluate", run, "closed", "--json")
    last = answered.json()
    winner = max(("same", first["speedup"]), ("closed", last["speedup"]), key=lambda p: p[1])[0]
    assert last["screening"]["iterations_left"] == 0, last
    assert last["screening"]["confirmed"]["id"] == winner, last["screening"]
    # its own verdict is a screening estimate; the exit status is the confirmation's
    assert last["status"] != "verified"
    assert answered.code == (0 if last["screening"]["confirmed"]["status"] == "verified" else 1), answered
    confirmed = [e.data for e in ledger_events(run) if isinstance(e.data, ev.WinnerConfirmed)]
    assert [c.id for c in confirmed] == [winner]
    timings = [e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded)
               and e.data.targets[-1] == winner]
    assert len(timings) >= 2 and max(len(t.order) for t in timings) > 1  # the multi-pair campaign came after
    again = pw_main("status", run, "--json").json()
    assert again.get("screening") is None or "iterations left" not in str(again.get("screening"))
    assert pw_main("audit", run).code == 0
