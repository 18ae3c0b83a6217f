"""Issue 16 on this host, with real timings: workloads/series-c is compute-bound (a few thousand
values in L1), so its run-to-run noise is the core's, not a shared cache's; on a quiet 2-core VM
its baseline CV is about 2%, where matmul-c's memory-bound run is 5-6%. With the workload's own
manifest (`sampling.pairs` 5) the ~7% table-tenth candidate is verified and the no-op is "no
effect". Each test skips, saying why, when this host ran too noisy for its claim; the same
campaigns on the device machine's CPUs are replayed by tests/test_campaigns_16core_replay.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import (
    WORKLOADS,
    apply_patch,
    copy_run,
    ledger_events,
    pw_main,
    skip_if_machine_changed,
    skip_if_profiles_too_noisy,
)
from tests.test_adaptive_campaigns import (
    _campaign_quiet_enough,
    _judged_with_more,
    _quiet_enough,
    _resolution,
    _small_on_this_cpu,
    another_image,
    assert_noop_is_no_effect,
)

PATCHES = WORKLOADS / "series-c" / "candidates"


def _prepared(started: Path, tmp_path: Path, cid: str, patch: str) -> Path:
    run = copy_run(started, tmp_path)
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{patch}").code == 0
    apply_patch(run / "candidates" / cid / "src", PATCHES / f"{patch}.patch")
    return run


@pytest.mark.slow
def test_a_small_real_effect_on_a_compute_bound_workload_is_verified(series_started, tmp_path):
    run = _prepared(series_started, tmp_path, "q", "table-tenth")
    _quiet_enough(run, cv_max=0.05, claim="a 7% effect within the default budget")
    started = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.RunStarted))
    assert started.contract.sampling.pairs == 5
    out = _judged_with_more(run, "q", rounds=0)  # the default budget, no --more
    _campaign_quiet_enough(run, "q", out, sd_max=0.05 * 2 ** 0.5)
    skip_if_machine_changed(out)
    skip_if_profiles_too_noisy(run, "q")
    assert out["stop"] == "decided" and out["status"] == "verified", out
    assert out["speedup"] > 1.02, out
    sized = _resolution(run, "q")
    assert sized.stop == "resolved" and sized.looks[-1].band <= 0.5 * (sized.speedup - 1), sized
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
    _small_on_this_cpu(out, 1.2)  # ~1.07x here and on the device's Xeon; a CI host measured 1.31x


@pytest.mark.slow
def test_the_noop_on_a_compute_bound_workload_is_no_effect(series_started, tmp_path):
    """±2% needs about 2% CV per run within the default 40 pairs."""
    run = _prepared(series_started, tmp_path, "n", "noop")
    another_image(run, "n", "series.c")
    _quiet_enough(run)
    out = _judged_with_more(run, "n", rounds=0)
    assert_noop_is_no_effect(run, "n", out)
