"""`pw audit` after a projection-format change: an older format's file is a note, an edit a failure.

`tests/data/projections-format-1/transpose-run/` is the GPU transpose run as recorded at commit
c5a75d1 (its ledger and the three projections that format 2 renders differently, byte for byte as
that ProfileWeaver wrote them; the raw evidence is left out). It must never be regenerated: it is
what keeps format 1 recognisable (`projections.formats.STEPS`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.store import Ledger
from projections import formats
from projections.materialize import compare, rebuild_in_memory

DATA = Path(__file__).parent / "data"
FORMAT_1 = DATA / "projections-format-1" / "transpose-run"
CURRENT = DATA / "gpu-loop-h200" / "transpose-run"
ROOT = Path(__file__).resolve().parent.parent
CHANGED = ["experiment-plan.json", "profiler-routing.json", "report.json"]


def _audit(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pw.cli", "audit", str(run_dir), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_recorded_format_1_set_is_recognised_as_format_1():
    _, files = rebuild_in_memory(Ledger(FORMAT_1 / "ledger.jsonl"))
    for name in CHANGED:  # a real format change: today's rebuild differs from what was written
        assert (FORMAT_1 / name).read_bytes() != files[name], name
    found = compare(FORMAT_1, files, CHANGED)
    assert found.divergence is None and found.older == dict.fromkeys(CHANGED, 1)


def test_the_json_downgrade_re_encodes_projections_byte_for_byte():
    """The downgrades decode and re-encode: with no edit, every JSON projection comes back unchanged."""
    same = formats._json(lambda doc: True)
    _, files = rebuild_in_memory(Ledger(CURRENT / "ledger.jsonl"))
    names = [n for n in files if n.endswith(".json")]
    assert len(names) >= 8
    for name in names:
        assert same(files[name]) == files[name], name


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The recorded run with every projection in today's format (it was recorded in format 2)."""
    copy = tmp_path / CURRENT.name
    shutil.copytree(CURRENT, copy)
    _, files = rebuild_in_memory(Ledger(copy / "ledger.jsonl"))
    for name, data in files.items():
        (copy / name).write_bytes(data)
    return copy


def test_a_format_2_preflight_is_recognised_and_an_image_was_never_format_2():
    """Format 3 added the build's running image to preflight.json: the recorded run's file (format
    2, no image) is recognised from its ledger; a preflight whose build has an image has no format-2
    rendering (that format had no place for it)."""
    _, files = rebuild_in_memory(Ledger(CURRENT / "ledger.jsonl"))
    on_disk = (CURRENT / "preflight.json").read_bytes()
    assert on_disk != files["preflight.json"]
    assert formats.recognise("preflight.json", on_disk, files["preflight.json"]) == 2
    doc = json.loads(files["preflight.json"])
    doc["build"]["image_sha256"] = "ab" * 32
    with_image = (json.dumps(doc, indent=2) + "\n").encode()
    assert formats.rendered_in("preflight.json", with_image, 2) is None


def _as_format_1(run: Path) -> None:
    for name in CHANGED:
        older = formats.rendered_in(name, (run / name).read_bytes(), 1)
        assert older is not None and older != (run / name).read_bytes()
        (run / name).write_bytes(older)


def test_an_older_format_projection_passes_with_a_note_that_names_it_and_pw_rebuild(run: Path):
    _as_format_1(run)
    r = _audit(run)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok   projections: ok (see note)" in r.stdout and "audit passed" in r.stdout
    note = next(line for line in r.stdout.splitlines() if line.startswith("note projections:"))
    assert "experiment-plan.json, profiler-routing.json, report.json in projection format 1" in note
    assert "`pw rebuild` refreshes them" in note and "routing climbs" in note
    assert json.loads(_audit(run, "--json").stdout)["notes"] == [note.removeprefix("note ")]
    rebuilt = subprocess.run([sys.executable, "-m", "pw.cli", "rebuild", str(run)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    again = _audit(run, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["notes"] == []


def test_a_tampered_current_format_projection_still_fails(run: Path):
    report = run / "report.json"
    report.write_bytes(report.read_bytes().replace(b'"winner": "tiled"', b'"winner": null', 1))
    r = _audit(run)
    assert r.returncode == 1 and "audit failed: projections: report.json: differs from its rebuild" in r.stdout
    assert "note projections" not in r.stdout


def test_an_old_format_shape_does_not_hide_an_edit(run: Path):
    """A tamperer who also drops format 2's fields (so the file looks like format 1) is still caught:
    a file is of format 1 only if it is exactly what format 1 renders from this ledger."""
    _as_format_1(run)
    report = run / "report.json"
    forged = report.read_bytes().replace(b'"winner": "tiled"', b'"winner": null', 1)
    assert forged != report.read_bytes()
    report.write_bytes(forged)
    r = _audit(run)
    assert r.returncode == 1 and "projections: report.json: differs from its rebuild" in r.stdout


def test_a_state_format_1_could_not_have_written_has_no_format_1_rendering():
    plan = json.loads((CURRENT / "experiment-plan.json").read_bytes())
    plan["contract"]["profiling"]["max_runs"] = 3  # a budget format 1 had no place for
    data = (json.dumps(plan, indent=2, ensure_ascii=False) + "\n").encode()
    assert formats.rendered_in("experiment-plan.json", data, 1) is None
    routing = json.loads((CURRENT / "profiler-routing.json").read_bytes())
    routing["climbs"] = routing["climbs"] * 2  # two climbs: format 1 kept one decision per phase
    data = (json.dumps(routing, indent=2, ensure_ascii=False) + "\n").encode()
    assert formats.rendered_in("profiler-routing.json", data, 1) is None
    # Files format 2 did not change are rendered the same; a differing one is of no older format.
    brief = (CURRENT / "agent-brief.txt").read_bytes()
    assert formats.rendered_in("agent-brief.txt", brief, 1) == brief
    assert formats.recognise("agent-brief.txt", brief + b"edited\n", brief) is None
