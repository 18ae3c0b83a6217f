"""CI replay of workloads/cuda-suite run on an H200 as a new user would (tests/data/cuda-suite-h200/,
recorded by tests/data/cuda-suite-pw.sh in one device call): `pw start` with no manifest on every
kernel, the wrong candidate of each rejected by the inferred oracle, and the honest tiled / coalesced
rewrites evaluated under a manifest that names the program's timer line. CI has no GPU: it audits
the recorded runs (every verdict recomputed from the recorded evidence), reads what the recorded
briefs and verdicts say, and re-judges the honest candidates with the GPU mechanism catalog
(`pw.rules.mechanisms.gpu_counter_facts`) in place of the gates' own keyword table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.agent.brief import TOKEN_BUDGET, brief_lines, fit_brief, render_brief
from pw.agent.tokens import count_tokens
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "cuda-suite-h200"
KERNELS = {"gemm": ("gemm_kernel", "linear-algebra/gemm/gemm.cu"),
           "gesummv": ("gesummv_kernel", "linear-algebra/gesummv/gesummv.cu"),
           "conv2d": ("Convolution2D_kernel", "stencils/conv2d/conv2d.cu")}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    return unpack(DATA / "cuda-suite-runs.tgz", tmp_path_factory.mktemp("cuda-suite"))


def _run(root: Path, kind: str, kernel: str) -> Path:
    [run] = [p.parent for p in (root / "pwruns" / kind).glob(f"*-{kernel}{'-roi' if kind == 'roi' else ''}/ledger.jsonl")]
    return run


def _one(run: Path, kind: type, **match):
    found = [e.data for e in ledger_events(run) if isinstance(e.data, kind)
             and all(getattr(e.data, k) == v for k, v in match.items())]
    return found[-1]


def _runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / "pwruns").glob("*/*/ledger.jsonl"))


def test_every_recorded_run_audits_clean(recorded):
    from pw.app.audit import audit_run
    from pw.app.runpath import resolve_run

    runs = _runs(recorded)
    assert len(runs) == 5  # three kernels without a manifest, two with their timer named
    for run in runs:
        report = audit_run(resolve_run(str(run)))
        failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
        assert not failed, f"{run.name}: {failed}"


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_without_a_manifest_each_kernel_starts_and_its_brief_names_the_kernel_and_both_shares(recorded, kernel):
    run = _run(recorded, "plain", kernel)
    started = _one(run, ev.RunStarted)
    assert started.inferred and started.manifest_sha256 is None
    # The timers vary by nature: set aside, and the mismatch count is still compared.
    oracle = _one(run, ev.OracleChecked, target="baseline")
    assert oracle.passed and "unchecked: stdout lines 3, 5 vary run to run (timers?)" in oracle.compared
    assert oracle.lines_compared == 4  # device name, the two labels, the mismatch count
    name, file = KERNELS[kernel]
    hot = _one(run, ev.HotspotSelected)
    assert (hot.name, hot.file, hot.metric, hot.ceiling_of) == (name, file, "gpu_time_ns", "wall")
    assert hot.line_start and hot.line_end and hot.line_end > hot.line_start
    brief = (run / "agent-brief.txt").read_text()
    assert count_tokens(brief) <= TOKEN_BUDGET
    located = re.escape(f"{name} {file}:{hot.line_start}-{hot.line_end} = {hot.share:.1%} of device time, ")
    assert re.search(located + r"[0-9.]+% of the wall time; Amdahl ceiling 1\.00x of the wall time", brief), brief
    # The ncu diagnosis was of that kernel, and its one limiter line agrees with itself.
    limiter = next(line for line in brief.splitlines() if line.startswith("Limiter of "))
    assert limiter.startswith(f"Limiter of {name} (ncu): ")
    assert not ("memory-throughput bound" in limiter and "compute-bound" in limiter)
    assert "samples" not in brief  # no sampler ran
    # How to time the kernel instead of the whole run, said at start.
    answer = json.loads((recorded / "answers" / f"start-plain-{kernel}.json").read_text())
    assert any('"metric": {"kind": "roi", "timer": "GPU Runtime"}' in n for n in answer["notes"])


def test_a_memcpy_is_a_finding_and_never_the_hotspot(recorded):
    """On gesummv and conv2d a host-to-device or device-to-host copy takes most of the device time;
    the hotspot is still the kernel, the copy a finding beside it."""
    for kernel in ("gesummv", "conv2d"):
        run = _run(recorded, "plain", kernel)
        numbers = _one(run, ev.BriefEmitted, target="baseline").numbers
        assert numbers["hotspot"]["share"] < 0.5 and numbers["hotspot"]["name"] == KERNELS[kernel][0]
        assert any(f.startswith("memcpy ") and "of device time" in f for f in numbers["findings"])


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_wrong_rewrite_of_each_kernel_is_rejected_by_the_inferred_oracle(recorded, kernel):
    verdict = _one(_run(recorded, "plain", kernel), ev.VerdictReached, id="wrong")
    assert verdict.status == "rejected"
    reason = verdict.reasons[0]
    assert reason.startswith("oracle-failed") and "stdout line 6: got" in reason and "reference 0" in reason


def test_with_the_timer_named_the_region_is_the_metric_and_the_ceiling_is_of_it(recorded):
    for kernel in ("gemm", "gesummv"):
        run = _run(recorded, "roi", kernel)
        assert _one(run, ev.RunStarted).contract.metric.timer == "GPU Runtime"
        hot = _one(run, ev.HotspotSelected)
        assert hot.ceiling_of == "region" and hot.ceiling_share > 0.5
        assert hot.amdahl_ceiling == pytest.approx(1 / (1 - hot.ceiling_share), rel=1e-4)
        brief = (run / "agent-brief.txt").read_text()
        assert count_tokens(brief) <= TOKEN_BUDGET
        assert f"{hot.ceiling_share:.1%} of the timed region; Amdahl ceiling {hot.amdahl_ceiling:.2f}x of the timed region" in brief
        # Eager module loading: the region times the kernel, not the driver's start-up (CV about 1%).
        timing = _one(run, ev.TimingRecorded, purpose="baseline-variance")
        xs = timing.samples["baseline"]
        assert max(xs) / min(xs) < 1.2 and max(xs) < 0.002


def _counters(run: Path):
    """(mechanism text, parent metrics, candidate metrics) of the honest candidate's hotspot kernel."""
    from pw.rules.judge import gpu_counter_metrics, profiles_needed, select

    events = ledger_events(run)
    evidence = EvidenceStore(run / "raw")
    profiles = {sha: evidence.get(sha) for sha in profiles_needed(events, "honest")}
    return gpu_counter_metrics(select(events, "honest"), profiles)


def test_the_tiled_gemm_was_held_at_proposed_by_the_keyword_table_and_the_catalog_names_the_counter(recorded):
    """Rules 1-18 map "tiled" to store sectors/request, already 4 in the naive kernel, and kept the
    recorded verdict at proposed; the catalog's data-reuse class (what rules 19 name beside the
    device-time mechanism) finds the global load requests, which fell 30x."""
    from pw.rules import mechanisms

    run = _run(recorded, "roi", "gemm")
    recorded_verdict = _one(run, ev.VerdictReached, id="honest")
    assert recorded_verdict.status == "proposed" and recorded_verdict.interval[0] > 1.5
    assert any("global_store_sectors_per_request 4 -> 4" in r for r in recorded_verdict.reasons)
    c = mechanisms.gpu_counter_facts(*_counters(run))
    assert c is not None and c.metric == "global_load_requests" and c.before > 10 * c.after, c


def test_the_coalesced_gesummv_names_its_counter_and_what_kept_it_from_verified(recorded):
    """Its counter moved (sectors/request 12.3 -> 4, by either table); what held it at proposed under
    rules 18 is the mechanism gate's total: all device time, where host-to-device copies outside the
    timed region vary between single profiled runs by more than the kernel's whole saving (rules 19
    read the kernel's device time in the same runs instead)."""
    from pw.rules import mechanisms

    run = _run(recorded, "roi", "gesummv")
    verdict = _one(run, ev.VerdictReached, id="honest")
    assert verdict.status == "proposed" and verdict.interval[0] > 10
    assert [r.split(":")[0] for r in verdict.reasons] == ["gate mechanism"]
    assert "explains only" in verdict.reasons[0]
    c = mechanisms.gpu_counter_facts(*_counters(run))
    assert c is not None and "sectors_per_request" in c.metric and c.after < c.before


def test_an_over_budget_brief_degrades_without_a_traceback_for_a_gpu_and_a_cpu_run(recorded):
    """Essential lines over the budget (a deep runs directory, a long templated kernel name, suite
    paths): the brief is shortened and points at `pw inspect`; it is never an exception."""
    gpu = _one(_run(recorded, "plain", "gemm"), ev.BriefEmitted, target="baseline").numbers
    cpu_run = Path(__file__).parent / "data" / "ci-interchange-consistency"
    cpu = _one(cpu_run, ev.BriefEmitted, target="baseline").numbers
    deep = "/scratch/" + "/".join(f"project-{i}" for i in range(40))
    long_name = "void tiled_kernel<" + ", ".join(f"Policy{i}<float, 128, 4>" for i in range(30)) + ">"
    for numbers in (gpu, cpu):
        over = {**numbers, "run_dir": deep, "oracle": numbers["oracle"] + "; " + "x" * 400,
                "hotspot": {**numbers["hotspot"], "name": long_name},
                "editable": [f"src/very/long/module/path/number/{i}/kernel_file_{i}.cu" for i in range(6)]}
        with pytest.raises(ValueError, match="essential lines"):
            fit_brief(brief_lines(over), count_tokens)  # what crashed `pw start` before
        text, tokens = render_brief(over, count_tokens)
        assert tokens == count_tokens(text) <= TOKEN_BUDGET
        assert text.startswith("ProfileWeaver brief") and "pw prepare RUN --candidate" in text
        assert "pw inspect RUN" in text  # says where what was cut is
    # Nothing to shorten: the same brief as before, word for word (the gates' line says today's gates).
    again = [x for x in render_brief(cpu, count_tokens)[0].splitlines() if not x.startswith("Verified needs")]
    recorded_text = _one(cpu_run, ev.BriefEmitted, target="baseline").text
    assert again == [x for x in recorded_text.splitlines() if not x.startswith("Verified needs")]
