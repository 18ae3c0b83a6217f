"""End to end: pyloop's honest dict rewrite, profiled with py-spy, is verified under gate rules 9.

Under rules 7 it stayed `proposed` on the 2-core VM: py-spy misses ~0.1 s of start-up in every run,
a fifth of the baseline and most of the candidate (tests/test_gates_startup.py has the recorded
numbers). Real timings: when the host's own baseline timing is too noisy for a 5-pair campaign the
test skips, naming the measured noise; otherwise a verdict other than `verified` fails it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from pw.rules.gates import GATE_RULES, decode_inputs, evaluate_gates
from pw.rules.startup import startup_offset
from tests.conftest import (
    WORKLOADS,
    apply_patch,
    ledger_events,
    pw_main,
    skip_if_machine_changed,
    skip_if_profiles_too_noisy,
    start_run,
)

# Above this SD of log run time (the run's own baseline-variance timing) a one-run profile against a
# five-run median has no band worth the name: a quiet VM measures 3-6%, a host shared with other
# campaigns 15-30%.
NOISY_LOG_SD = 0.15


def _baseline_log_sd(run: Path) -> float:
    import numpy as np

    base = next(e.data for e in ledger_events(run)
                if isinstance(e.data, ev.TimingRecorded) and e.data.purpose == "baseline-variance")
    return float(np.std(np.log(base.samples["baseline"]), ddof=1))


@pytest.mark.slow
def test_the_dict_rewrite_is_verified_with_pyspys_start_up_read_as_start_up(tmp_path):
    run = start_run(WORKLOADS / "pyloop", tmp_path)
    assert pw_main("prepare", run, "--candidate", "d:baseline:dict lookup instead of list index").code == 0
    apply_patch(run / "candidates" / "d" / "src", WORKLOADS / "pyloop" / "candidates" / "dict.patch")
    result = pw_main("evaluate", run, "d", "--json")
    assert result.code in (0, 1), result
    out = result.json()
    gates = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == "d")
    assert gates.rules == GATE_RULES >= 9  # the start-up rules
    inputs = decode_inputs(gates.inputs)
    assert inputs.adapter is not None and inputs.adapter.name == "py-spy", inputs.adapter
    failing = {g["name"]: g["detail"] for g in out["gates"] if not g["passed"]}
    c = inputs.profile_consistency
    offset = startup_offset(c, inputs.profile_diff)
    noise = (f"baseline-variance log SD {_baseline_log_sd(run):.1%}, campaign log SDs "
             f"{c.baseline_timed_log_sd:.1%} (reference) and {c.candidate_timed_log_sd:.1%} (candidate); "
             f"speedup {out['speedup']:.3f}x over {out['n_pairs']} pairs; start-up offset {offset:.3f} s")
    skip_if_machine_changed(out)
    skip_if_profiles_too_noisy(run, "d")
    if out["status"] != "verified":
        spread = max(_baseline_log_sd(run), c.baseline_timed_log_sd, c.candidate_timed_log_sd)
        if spread > NOISY_LOG_SD and set(failing) <= {"mechanism", "no_collateral", "significance"}:
            pytest.skip(f"host too noisy to judge pyloop's dict rewrite ({noise}; > {NOISY_LOG_SD:.0%}): {failing}")
        pytest.fail(f"dict.patch {out['status']} under gate rules 9 ({noise}): {failing}")
    assert not failing and out["speedup"] > 1.5, out
    mech = next(g["detail"] for g in out["gates"] if g["name"] == "mechanism")
    if offset > 0:  # the interpreter behind a shim: the start-up py-spy missed is named and measured
        assert "of the whole run" in mech and "start-up the profiler misses" in mech, mech
    # The ledger judged under rules 9 replays to the same gates, and audits clean.
    assert [(g.name, g.passed, g.detail) for g in evaluate_gates(inputs, rules=gates.rules)] == \
        [(g.name, g.passed, g.detail) for g in gates.gates]
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
