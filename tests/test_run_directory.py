"""The run directory the source documents list, after start, evaluate and confirm: every file present,
every JSON file valid against its schema, and each one a projection (`pw rebuild` gives the same bytes).

The recorded H200 run of workloads/cuda-transpose (tests/data/gpu-loop-h200/transpose-run) holds
`pw start` and `pw evaluate RUN tiled`; the confirmation that reuses that evidence is added to a copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from projections import run_files
from pw.export.schemas import type_for_file
from pw.export.validation import decode_as
from pw.rules.stages import START_STAGES
from tests.conftest import pw_main

DATA = Path(__file__).parent / "data" / "gpu-loop-h200"

# Seed 000's run directory, with `<id>` = the candidate and globs where the documents list a family.
DOCUMENTS_LIST = (
    "brief.md", "plan.json", "harness-state.json", "preflight.json", "raw/", "profile.baseline.json",
    "source-targets.json", "source-slices/*.txt", "variants/<id>.patch", "bench.*.json",
    "candidates/<id>/profile/profile.json", "candidates/<id>/profile/profile-diff.json",
    "candidates/<id>/profile/source-targets.json", "experiment-plan.json", "experiment-state.json",
    "campaign-plan.json", "campaign-result.json", "agent-brief.txt", "agent-brief.json", "agent-view.json",
    "cost.json", "report.json", "report.md",
)


def _confirm_reusing_evidence(run: Path, cid: str) -> None:
    """What plain `pw confirm` records when it reuses the evaluation's samples and reprofile: the
    verdict again, as the winner's confirmation. Appended directly because the recorded run keeps no
    build trees, which a live `pw confirm` checks before it reuses anything."""
    from ledger import events as ev
    from pw.app.run import RunHandle

    handle = RunHandle(run)
    state = handle.state()
    cand = state.candidates[cid]
    v = cand.verdict
    handle.record(state, [ev.WinnerConfirmed(id=cid, fresh=False, status=v.status, reasons=list(v.reasons),
                                             speedup=v.speedup, interval=v.interval,
                                             timing_seq=cand.evaluation.timing_seq, reference=v.reference)])


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory) -> Path:
    run = Path(shutil.copytree(DATA / "transpose-run", tmp_path_factory.mktemp("rundir") / "transpose-run"))
    _confirm_reusing_evidence(run, "tiled")
    return run


def test_every_file_of_the_documents_run_directory_is_there_and_valid(confirmed):
    for entry in DOCUMENTS_LIST:
        pattern = entry.replace("<id>", "tiled")
        found = [p for p in confirmed.glob(pattern.rstrip("/"))]
        assert found, f"{entry}: missing from the run directory"
        for path in found:
            if path.suffix != ".json":
                continue
            typ = type_for_file(path)
            assert typ is not None, f"{path.name}: no schema"
            decode_as(path.read_bytes(), typ, name=path.name)  # raises on any mismatch
    brief = (confirmed / "brief.md").read_text()
    assert "transpose_kernel" in brief and "six gates" in brief


def test_the_new_files_say_what_the_ledger_says(confirmed):
    state = json.loads((confirmed / "experiment-state.json").read_text())
    assert state["winner"] == "tiled" and state["winner_confirmed"] is True
    assert state["candidates"][0]["confirmed"] == "verified"
    plan = json.loads((confirmed / "plan.json").read_text())
    assert [s["name"] for s in plan["stages"]] == list(START_STAGES) == list(run_files.START_STAGES)
    assert all(s["status"] == "done" for s in plan["stages"]) and plan["next"] == "pw prepare RUN --candidate ID:current:MECHANISM"
    result = json.loads((confirmed / "campaign-result.json").read_text())
    tiled = result["candidates"][0]
    assert tiled["confirmation"] == "verified" and len(tiled["samples"]["tiled"]) == len(tiled["samples"]["baseline"]) >= 5
    benches = sorted(p.name for p in confirmed.glob("bench.*.json"))
    assert benches[0] == "bench.01-baseline-variance-baseline.json" and any("screening-tiled" in b for b in benches)
    bench = json.loads((confirmed / benches[-1]).read_text())
    assert bench["seq"] == tiled["campaigns"][-1] and bench["summary"]["tiled"]["n"] == len(tiled["samples"]["tiled"])
    harness = json.loads((confirmed / "harness-state.json").read_text())
    assert harness["targets"]["tiled"]["binary_sha256"] and harness["targets"]["tiled"]["patch_sha256"]


def test_they_are_projections_and_an_older_run_without_them_still_audits(confirmed, tmp_path):
    before = {p.name: p.read_bytes() for p in confirmed.glob("*.json")}
    assert pw_main("rebuild", confirmed).code == 0
    assert {p.name: p.read_bytes() for p in confirmed.glob("*.json")} == before
    assert pw_main("audit", confirmed).code == 0
    (confirmed / "plan.json").write_text("{}\n")  # an edited projection is caught
    assert pw_main("audit", confirmed).code == 1
    assert pw_main("rebuild", confirmed).code == 0
    # The recorded run was written before these files existed: absent there, it audits with a note.
    old = Path(shutil.copytree(DATA / "transpose-run", tmp_path / "transpose-run"))
    r = pw_main("audit", old)
    assert r.code == 0 and "plan.json" in r.out and "in projection format" in r.out, r
    # ...but a run in today's format with one of them deleted does not.
    assert pw_main("rebuild", old).code == 0
    (old / "campaign-plan.json").unlink()
    r = pw_main("audit", old)
    assert r.code == 1 and "campaign-plan.json: missing" in r.out + r.err
