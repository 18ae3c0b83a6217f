"""`pw demo`: the whole journey on workloads/matmul-c, as a newcomer runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pw.cli import main
from tests.conftest import skip_if_host_busy


@pytest.mark.slow
def test_demo_verifies_the_improvement_and_rejects_the_rest(tmp_path, capsys):
    code = main(["demo", "--runs-dir", str(tmp_path / "runs"), "--json"])
    out = json.loads(capsys.readouterr().out)
    by_id = {c["id"]: c for c in out["candidates"]}
    skip_if_host_busy(by_id["loop-order"])
    assert by_id["loop-order"]["status"] == "verified", by_id["loop-order"]
    assert all(by_id["loop-order"]["gates"].values()) and len(by_id["loop-order"]["gates"]) == 6
    # The no-op: not verified, its output correct, no significant speedup (whatever the verdict the
    # campaign reached: no-effect on a quiet host, inconclusive on a noisy one).
    assert by_id["noop"]["status"] in ("rejected", "inconclusive", "proposed"), by_id["noop"]
    assert by_id["noop"]["gates"]["correctness"] and not by_id["noop"]["gates"]["significance"], by_id["noop"]
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
