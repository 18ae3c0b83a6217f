"""perf in every timed run (one kind of run): the recorded raw output of two real timed runs
(tests/data/perf-matmul-timed/) normalizes to the profile the campaign recorded, line costs and inline
chains included, and the run's per-run reduction follows from it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from adapters.perf import LAUNCHER_COMM, PerfAdapter, parse_perf_script, program_pids
from adapters.symbolize import parse_addr2line
from ledger.events import Attribution
from ledger.profile import decode_profile, encode_profile
from pw.rules.attribution import side_seconds

DATA = Path(__file__).parent / "data" / "perf-matmul-timed"
ROLES = ("perf-script.txt", "perf-lines.json", "capture.json")


def _artifacts(label: str) -> dict[str, bytes]:
    return {role: (DATA / f"{label}-{role}").read_bytes() for role in ROLES}


def _campaign() -> dict:
    return json.loads((DATA / "campaign.json").read_text())


def test_the_recorded_raw_output_normalizes_to_the_recorded_profile():
    roots = _campaign()["source_roots"]
    for label in ("baseline", "loop"):
        again = PerfAdapter().normalize(_artifacts(label), roots[label], label)
        assert encode_profile(again) == (DATA / f"{label}-profile.json").read_bytes()


def test_the_timed_profile_has_the_hotspot_with_its_lines_and_the_machine_apart():
    p = decode_profile((DATA / "baseline-profile.json").read_bytes())
    hot = p.operation("matmul@matmul.c")
    assert hot is not None and hot.self_metrics["samples"] > 0.5 * p.totals["samples"]
    assert any(lc.file == "matmul.c" and lc.operation == "matmul@matmul.c" for lc in p.lines)
    # inlined helpers are their own operations (row_key and mix64 inlined into fill_matrix)
    assert any(o.name in ("mix64", "row_key") for o in p.operations)
    # nothing of the sandbox or the launcher: only the program's processes were kept
    assert not any("python" in o.module or "bwrap" in o.module for o in p.operations)


def test_only_the_programs_processes_are_kept_and_every_sample_names_its_offset():
    text = (DATA / "baseline-perf-script.txt").read_text()
    pids = program_pids(text, LAUNCHER_COMM)
    samples = parse_perf_script(text, offsets=True)
    mine = [s for s in samples if s.pid in pids]
    assert pids and 0 < len(mine) < len(samples)
    user = [s.frames[0] for s in mine if s.frames and not s.frames[0].dso.startswith("[")]
    assert user and all(f.offset is not None for f in user)


def test_the_per_run_reduction_follows_from_the_profile_and_the_attribution():
    c = _campaign()
    a = msgspec.convert(c["attribution"], Attribution)
    for label, side in (("baseline", a.hotspot), ("loop", a.changed)):
        p = decode_profile((DATA / f"{label}-profile.json").read_bytes())
        assert side_seconds(p, side, c["wall_s"][label]) == c["hot_s"][label]


def test_addr2line_output_reads_as_inline_chains_innermost_first():
    text = "0x00000000000016c6\nmix64\n/src/matmul.c:31\nrow_key\n/src/matmul.c:39\n" \
           "0x0000000000001710\n??\n??:0\n"
    chains = parse_addr2line(text)
    assert chains[0x16C6] == [["mix64", "/src/matmul.c", 31], ["row_key", "/src/matmul.c", 39]]
    assert chains[0x1710] == [[None, None, None]]
