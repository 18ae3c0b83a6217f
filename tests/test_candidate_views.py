"""`pw inspect --section ncu --candidate X --group G` on a recorded H200 run (the documents' own
example), the candidate's other sections, and cost.json's per-actor record of what was handed out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from projections.ncu_delta import compare
from pw.agent.tokens import count_tokens
from pw.cli.look import MAX_ITEMS
from tests.conftest import pw_main

DATA = Path(__file__).parent / "data" / "gpu-loop-h200"


@pytest.fixture
def transpose(tmp_path) -> Path:
    """A copy of the recorded cuda-transpose run: candidate `tiled` (verified) has its own ncu capture."""
    return Path(shutil.copytree(DATA / "transpose-run", tmp_path / "transpose-run"))


def test_candidate_ncu_memory_group_against_parent_and_baseline(transpose):
    r = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--group", "memory", "--json")
    assert r.code == 0, r
    doc = json.loads(r.out)
    assert doc["parent"] == "baseline" and doc["shown"] == len(doc["items"]) <= MAX_ITEMS
    rows = {i["name"]: i for i in doc["items"]}
    stores = rows["global_store_sectors_per_request"]  # the mechanism: tiling coalesces the stores
    assert (stores["baseline"], stores["candidate"]) == (32.0, 4.0) and stores["vs_baseline_ratio"] == 0.125
    assert stores["parent"] == stores["baseline"]  # its parent is the baseline
    assert rows["dram_read_bytes"]["vs_baseline"] < 0

    r = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--json")
    limiters = {i["target"]: i["limiter"] for i in json.loads(r.out)["items"]}
    assert "uncoalesced global stores" in limiters["baseline"] and "uncoalesced" not in limiters["candidate"]

    r = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--group", "rules", "--json")
    new = {i["rule"] for i in json.loads(r.out)["items"] if not i["in_baseline"]}
    assert "SharedMemoryConflicts" in new  # shared memory is what the tiled candidate added


def test_candidate_ncu_errors_are_one_line(transpose, tmp_path):
    r = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--group", "bogus")
    assert r.code == 2 and r.err.count("\n") == 1 and "memory" in r.err
    hist = Path(shutil.copytree(DATA / "histogram-run", tmp_path / "histogram-run"))
    r = pw_main("inspect", hist, "--section", "ncu", "--candidate", "noatomic")
    assert r.code == 2 and r.err.count("\n") == 1 and "no Nsight Compute capture" in r.err


def test_candidate_profile_section_reads_its_reprofile(transpose):
    r = pw_main("inspect", transpose, "--section", "profile", "--candidate", "tiled", "--json")
    assert r.code == 0, r
    top = json.loads(r.out)["items"][0]
    assert top["id"].startswith("transpose_kernel") and top["self"]["gpu_time_ns"] > 0


def test_compare_keeps_parent_and_baseline_apart():
    base = {"groups": {"memory": {"dram_bytes": 100.0}}}
    parent = {"groups": {"memory": {"dram_bytes": 80.0}}}
    cand = {"groups": {"memory": {"dram_bytes": 60.0, "l2_bytes": 5.0}}}
    rows = {r["name"]: r for r in compare(cand, parent, base, "memory")}
    assert rows["dram_bytes"]["vs_parent"] == -20.0 and rows["dram_bytes"]["vs_baseline"] == -40.0
    assert rows["l2_bytes"]["baseline"] is None and rows["l2_bytes"]["vs_baseline"] is None
    with pytest.raises(ValueError):
        compare(cand, None, base, "nope")


def test_cost_json_counts_what_each_actor_was_handed(transpose, monkeypatch):
    monkeypatch.setenv("PW_ACTOR", "agent-a")
    a = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--group", "memory")
    monkeypatch.setenv("PW_ACTOR", "agent-b")
    b = pw_main("inspect", transpose, "--section", "routing", "--json")
    assert a.code == b.code == 0
    cost = json.loads((transpose / "cost.json").read_text())
    views = {actor: [e for e in v["emitted"] if e["kind"] == "view"] for actor, v in cost["actors"].items()}
    assert [e["name"] for e in views["agent-a"]] == ["inspect --section ncu --candidate tiled --group memory"]
    assert views["agent-a"][0]["tokens"] == count_tokens(a.out.rstrip("\n"))  # what was printed, counted
    assert views["agent-b"][0]["tokens"] == count_tokens(b.out.rstrip("\n"))
    # the start's brief and slices went to the actor that ran `pw start` (recorded as "cli")
    assert {e["kind"] for e in cost["actors"]["cli"]["emitted"]} >= {"brief", "slice"}
    assert cost["total"] == sum(v["tokens"] for v in cost["actors"].values())
    before = (transpose / "cost.json").read_bytes()
    assert pw_main("rebuild", transpose).code == 0
    assert (transpose / "cost.json").read_bytes() == before  # a pure projection of the ledger
    assert pw_main("audit", transpose).code == 0
    monkeypatch.setenv("PW_ACTOR", "bad name!")
    bad = pw_main("inspect", transpose, "--section", "routing")
    assert bad.code == 2 and "PW_ACTOR" in bad.err


def test_a_run_that_cannot_be_written_is_still_inspected(transpose, monkeypatch):
    import errno

    from ledger.store import Ledger

    def refuse(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Ledger, "append", refuse)
    before = (transpose / "ledger.jsonl").read_bytes()
    r = pw_main("inspect", transpose, "--section", "ncu", "--candidate", "tiled", "--json")
    assert r.code == 0 and json.loads(r.out)["items"]
    assert r.err.count("\n") == 1 and "not recorded" in r.err
    assert (transpose / "ledger.jsonl").read_bytes() == before
