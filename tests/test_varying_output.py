"""Output that varies by nature: the inferred oracle sets aside the lines identical baseline runs do
not repeat (timers), compares the rest, offers a labelled timer as the region metric; `metric.timer`
names a timer line in a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.contract import Metric, timer_pattern
from ledger.errors import InputError
from pw.workload.compare import (
    Streams,
    compare_streams,
    compare_text,
    decode_streams,
    encode_streams,
    pattern_lines,
    timer_labels,
    unchecked_text,
    varying_lines,
)
from tests.conftest import ledger_events, pw_main

SUITE_OUT = ("setting device 0 with name NVIDIA H200\nGPU Runtime:\n{gpu}\nCPU Runtime:\n{cpu}\n"
             "Non-Matching CPU-GPU Outputs Beyond Error Threshold of 0.05 Percent: {bad}\n")


def out(gpu="0.000231", cpu="0.412345", bad=0) -> Streams:
    return Streams(stdout=SUITE_OUT.format(gpu=gpu, cpu=cpu, bad=bad))


def test_the_lines_that_vary_are_found_said_and_set_aside_and_the_rest_is_still_compared():
    vary, why = varying_lines(out(), [out("0.000251", "0.45"), out("0.000229", "0.39")], ["stdout", "stderr", "files"],
                              rtol=1e-6, atol=0.0)
    assert (vary, why) == ({"stdout": [3, 5]}, None)
    assert unchecked_text(vary) == "unchecked: stdout lines 3, 5 vary run to run (timers?)"
    want = Streams(stdout=out().stdout, vary=vary)
    assert compare_streams(out("0.1", "9.9"), want, ["stdout"], rtol=1e-6, atol=0).passed
    wrong = compare_streams(out("0.1", "9.9", bad=1215), want, ["stdout"], rtol=1e-6, atol=0)
    assert not wrong.passed and "line 6: got 1215, reference 0" in wrong.detail
    # Within the tolerance is not varying; another number of lines cannot be set aside.
    assert varying_lines(out(), [out(cpu="0.4123450001")], ["stdout"], rtol=1e-6, atol=0) == ({}, None)
    assert varying_lines(out(), [Streams(stdout=out().stdout + "extra\n")], ["stdout"], rtol=0, atol=0)[1] \
        == "stdout: 7 lines in one run, 6 in another"


def test_a_bundle_keeps_its_varying_lines_and_one_without_is_byte_identical_to_before():
    plain = Streams(stdout="a 1\n")
    assert encode_streams(plain) == b'pw-streams-v1\n{"stdout":"a 1\\n","stderr":"","files":{}}'
    kept = Streams(stdout="a 1\n", vary={"stdout": [1]})
    assert decode_streams(encode_streams(kept)).vary == {"stdout": [1]}


def test_a_timer_label_spans_its_number_on_the_same_or_the_next_line():
    text = out().stdout
    assert sorted(pattern_lines(text, timer_pattern("GPU Runtime"))) == [2, 3]
    assert sorted(pattern_lines("x\nelapsed: 3.2 s\n", timer_pattern("elapsed:"))) == [2]
    assert Metric(kind="roi", timer="GPU Runtime").region_pattern == timer_pattern("GPU Runtime")
    assert Metric(kind="wall").region_pattern is None
    # The lines it spans are never compared; the mismatch count still is.
    assert compare_text(out("0.9").stdout, text, rtol=0, atol=0, skip_pattern=timer_pattern("GPU Runtime"),
                        vary=[5]).passed
    assert timer_labels(text, [3, 5]) == [(3, "GPU Runtime"), (5, "CPU Runtime")]
    assert timer_labels("rate: 5 GB/s\nkernel time = 2 ms\n", [1, 2]) == [(2, "kernel time"), (1, "rate")]


@pytest.mark.parametrize("metric, message", [
    ({"kind": "wall", "timer": "GPU Runtime"}, "metric.timer: expected only with kind 'roi'"),
    ({"kind": "roi"}, "expected 'timer' \\(the label of a timer line"),
    ({"kind": "roi", "timer": "GPU Runtime", "pattern": "t=([0-9.]+)"}, "expected one of 'timer', 'pattern'"),
    ({"kind": "roi", "timer": " : "}, "metric.timer: expected the label of one output line"),
])
def test_a_bad_timer_in_a_manifest_is_one_line_naming_the_field(tmp_path, metric, message):
    from pw.workload.manifest import load_manifest

    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "t", "source": {"editable": ["main.c"]}, "run": {"argv": ["./main"]}, "metric": metric}))
    with pytest.raises(InputError, match=message):
        load_manifest(tmp_path)


TIMER_C = r"""
#include <stdio.h>
#include <sys/time.h>
static double now(void) { struct timeval t; gettimeofday(&t, NULL); return t.tv_sec + t.tv_usec * 1e-6; }
int main(void) {
    double t0 = now(), s = 0; for (long i = 1; i <= 1000000; i++) s += 1.0 / i; double t1 = now();
    printf("GPU Runtime:\n%0.6lf\nchecksum %.9f\n", t1 - t0 + 1e-6, s);
    return 0;
}
"""


@pytest.mark.slow
def test_start_sets_the_timer_aside_offers_it_and_a_manifest_naming_it_times_the_region(tmp_path):
    wl = tmp_path / "timer"
    wl.mkdir()
    (wl / "main.c").write_text(TIMER_C)
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile", "--json")
    assert r.code == 0, r
    answer = r.json()
    assert answer["notes"][0].startswith("unchecked: stdout line 2 varies run to run (timers?)")
    assert '"metric": {"kind": "roi", "timer": "GPU Runtime"}' in answer["notes"][1]
    (wl / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "timer", "source": {"editable": ["main.c"]},
        "build": [{"argv": ["cc", "-O2", "-o", "main", "main.c"]}], "run": {"argv": ["./main"]},
        "metric": {"kind": "roi", "timer": "GPU Runtime"}, "oracle": {"kind": "stable", "rtol": 1e-6}}))
    r = pw_main("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile", "--json")
    assert r.code == 0, r
    run = Path(r.json()["run_dir"])
    timing = next(e.data for e in ledger_events(run) if type(e.data).__name__ == "TimingRecorded")
    walls, regions = timing.samples["baseline:wall_s"], timing.samples["baseline"]
    assert all(0 < x < w for x, w in zip(regions, walls))  # the region, not the run
    assert r.json()["notes"] == []  # nothing varies once the timer is the metric
