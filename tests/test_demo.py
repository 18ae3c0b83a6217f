"""`pw demo`: the whole journey on workloads/matmul-c, as a newcomer runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pw.cli import main
from tests.conftest import skip_if_machine_changed, skip_if_profiles_too_noisy


@pytest.mark.slow
def test_demo_verifies_the_improvement_and_rejects_the_rest(tmp_path, capsys):
    code = main(["demo", "--runs-dir", str(tmp_path / "runs"), "--json"])
    out = json.loads(capsys.readouterr().out)
    by_id = {c["id"]: c for c in out["candidates"]}
    skip_if_machine_changed(by_id["loop-order"])
    if by_id["loop-order"]["status"] == "proposed":
        skip_if_profiles_too_noisy(Path(out["run_dir"]), "loop-order")
    assert by_id["loop-order"]["status"] == "verified", by_id["loop-order"]["reasons"]
    assert all(by_id["loop-order"]["gates"].values()) and len(by_id["loop-order"]["gates"]) == 6
    # The no-op renames a variable: its output correct, the baseline's running image, so no effect
    # whatever its campaign reached on this host (gate rules 13).
    assert by_id["noop"]["status"] == "rejected", by_id["noop"]
    assert any("same running image as baseline" in r for r in by_id["noop"]["reasons"]), by_id["noop"]
    assert by_id["noop"]["gates"]["correctness"], by_id["noop"]
    assert by_id["broken"]["status"] == "rejected", by_id["broken"]
    assert code == 0 and out["as_expected"]

    run = Path(out["run_dir"])
    report = (run / "report.md").read_text()
    for heading in ("## Baseline", "## Hotspot", "## Candidates", "## Winner", "## Reproducibility"):
        assert heading in report
    assert "**loop-order**" in report
    # Every plot the report links exists.
    for link in [ln.split("](")[1].rstrip(")") for ln in report.splitlines() if ln.startswith("![")]:
        assert (run / link).is_file(), link
    assert main(["audit", str(run)]) == 0
