"""The inferred oracle sees every output: stdout, stderr and files the run creates, and names which
stream and line differed (pw.workload.compare, pw.workload.correctness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.contract import Contract, Oracle, Source, Step
from ledger.errors import InputError
from ledger.evidence import EvidenceStore
from pw.workload import correctness
from pw.workload.compare import (
    Streams,
    compare_streams,
    compare_text,
    decode_streams,
    encode_streams,
    is_bundle,
)
from pw.workload.manifest import check_contract
from pw.workload.steps import Target

ALL = ("stdout", "stderr", "files")


def test_a_wrong_value_on_stderr_fails_naming_the_stream_and_line():
    want = Streams(stdout="", stderr="begin\n0.001714 0.5\n1.0 2.0\n")
    got = Streams(stdout="", stderr="begin\n0.000857 0.5\n1.0 2.0\n")
    cmp = compare_streams(got, want, ALL, rtol=1e-6, atol=0.0)
    assert not cmp.passed
    assert cmp.detail.startswith("stderr line 2: got 0.000857, reference 0.001714")


def test_stdout_only_would_have_passed_the_same_wrong_output():
    want = Streams(stdout="", stderr="0.001714\n")
    got = Streams(stdout="", stderr="0.000857\n")
    assert compare_streams(got, want, ["stdout"], rtol=1e-6, atol=0.0).passed
    assert not compare_streams(got, want, ["stderr"], rtol=1e-6, atol=0.0).passed


def test_files_the_run_creates_are_compared_by_name_and_line():
    want = Streams(stdout="ok\n", files={"out/result.txt": "1 2 3\n4 5 6\n"})
    assert "file out/result.txt line 2" in compare_streams(
        Streams(stdout="ok\n", files={"out/result.txt": "1 2 3\n4 5 7\n"}), want, ALL, rtol=1e-9, atol=0).detail
    missing = compare_streams(Streams(stdout="ok\n"), want, ALL, rtol=1e-9, atol=0)
    assert not missing.passed and missing.detail == "file out/result.txt: not written (the reference run wrote it)"
    extra = compare_streams(Streams(stdout="ok\n", files={"x": "1"}), Streams(stdout="ok\n"), ALL, rtol=0, atol=0)
    assert not extra.passed and "x: written" in extra.detail


def test_within_tolerance_on_every_stream_passes_and_reports_the_error():
    want = Streams(stdout="t 1.0\n", stderr="2.0 3.0\n")
    got = Streams(stdout="t 1.0\n", stderr="2.0000001 3.0\n")
    cmp = compare_streams(got, want, ALL, rtol=1e-6, atol=0.0)
    assert cmp.passed and 0 < cmp.max_rel_err < 1e-6


@given(st.text(), st.text(), st.dictionaries(st.text(min_size=1), st.text(), max_size=3))
def test_a_bundle_round_trips(out, err, files):
    s = Streams(stdout=out, stderr=err, files=files)
    blob = encode_streams(s)
    assert is_bundle(blob) and decode_streams(blob) == s
    assert decode_streams(blob.decode()) == s


def test_a_plain_stored_stdout_is_read_as_stdout_only():
    assert not is_bundle("1 2 3\n")
    assert decode_streams(b"1 2 3\n") == Streams(stdout="1 2 3\n")


def test_identical_long_outputs_compare_without_parsing_and_a_late_difference_is_found():
    text = "".join(f"{i * 0.5:0.6f} {i}\n" for i in range(200_000))
    assert compare_text(text, text, rtol=0, atol=0).passed
    late = text[:-20] + text[-20:].replace("199999", "199998")
    cmp = compare_text(late, text, rtol=0, atol=0)
    assert not cmp.passed and cmp.detail.startswith("line 200000:")


def _contract(script: str, streams=None) -> Contract:
    return Contract(version=1, name="sh", source=Source(editable=["*.sh"]),
                    run=Step(argv=["sh", "-c", script], timeout_s=20),
                    oracle=Oracle(kind="stable", rtol=1e-6, streams=streams))


def _target(tmp_path: Path) -> Target:
    build = tmp_path / "build"
    build.mkdir(exist_ok=True)
    return Target(label="baseline", src_dir=build, build_dir=build, files=[])


def test_a_real_candidate_that_changes_only_stderr_fails_the_inferred_oracle(tmp_path):
    evidence = EvidenceStore(tmp_path / "raw")
    base = correctness.check(_contract("echo 0.5 >&2"), _target(tmp_path), tmp_path, tmp_path / "s", evidence)
    assert base.event.passed and "stdout+stderr+files" in base.event.method
    reference = evidence.get(base.event.output_sha256).decode()
    cand = correctness.check(_contract("echo 0.25 >&2"), _target(tmp_path), tmp_path, tmp_path / "s", evidence,
                             stable_reference=reference)
    assert not cand.event.passed
    assert cand.event.detail == ("vs baseline output: stderr line 1: got 0.25, reference 0.5 "
                                 "(|diff| 0.25 > atol 0 + rtol 1e-06*|ref|)")


def test_a_file_the_run_writes_is_part_of_the_output(tmp_path):
    evidence = EvidenceStore(tmp_path / "raw")
    base = correctness.check(_contract("echo 1 > out.txt"), _target(tmp_path), tmp_path, tmp_path / "s", evidence)
    reference = evidence.get(base.event.output_sha256).decode()
    assert decode_streams(reference).files == {"out.txt": "1\n"}
    cand = correctness.check(_contract("echo 2 > out.txt"), _target(tmp_path), tmp_path, tmp_path / "s", evidence,
                             stable_reference=reference)
    assert not cand.event.passed and "file out.txt line 1: got 2" in cand.event.detail


def test_a_manifest_can_say_only_stdout_matters(tmp_path):
    evidence = EvidenceStore(tmp_path / "raw")
    only = ["stdout"]
    base = correctness.check(_contract("echo t=1 >&2; echo 7", only), _target(tmp_path), tmp_path, tmp_path / "s",
                             evidence)
    reference = evidence.get(base.event.output_sha256).decode()
    cand = correctness.check(_contract("echo t=2 >&2; echo 7", only), _target(tmp_path), tmp_path, tmp_path / "s",
                             evidence, stable_reference=reference)
    assert cand.event.passed, cand.event.detail


def test_the_manifest_rejects_streams_for_a_reference_oracle_and_repeats(tmp_path):
    (tmp_path / "a.sh").write_text("echo\n")
    ok = _contract("true", ["stderr", "files"])
    check_contract(ok, tmp_path, name="profileweaver.json")
    with pytest.raises(InputError, match="oracle.streams: expected each of stdout, stderr, files at most once"):
        check_contract(_contract("true", ["stderr", "stderr"]), tmp_path, name="profileweaver.json")
    exit_kind = Contract(version=1, name="sh", source=Source(editable=["*.sh"]), run=Step(argv=["true"]),
                         oracle=Oracle(kind="exit", streams=["stderr"]))
    with pytest.raises(InputError, match="oracle.streams: expected only with kind 'stable'"):
        check_contract(exit_kind, tmp_path, name="profileweaver.json")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\x1f\x85\x00\x01\x1b\x0eab1.-e\u00e9\u2003"))))
def test_the_fast_field_count_is_what_split_counts(text):
    from pw.workload.compare import field_count

    assert field_count(text) == len(text.split())
