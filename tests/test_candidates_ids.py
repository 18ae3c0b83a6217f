"""Hostile candidate ids never reach the file system: exit 2, one line on stderr, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InputError
from pw.rules.candidates import check_id, parse_candidate
from tests.conftest import copy_run, pw_main

HOSTILE = ["../x", "a/b", "UPPER", "", "x" * 200, "baseline", "current", "/abs", ".", "..", "-a", "a\n", "a b",
           "a\x00b", "é"]


@pytest.mark.parametrize("cid", HOSTILE)
def test_check_id_rejects(cid):
    with pytest.raises(InputError) as info:
        check_id(cid)
    assert "\n" not in info.value.message


@pytest.mark.parametrize("cid", ["a", "loop-order", "0", "a" * 32])
def test_check_id_accepts(cid):
    check_id(cid)
    assert parse_candidate(f"{cid}:baseline:why: because").id == cid


@pytest.mark.parametrize("mechanism", ["a\nb\x1b[31m", "tab\there", "bell\x07", "x" * 201],
                         ids=["newline-ansi", "tab", "bell", "long"])
def test_a_mechanism_that_is_not_one_printable_line_is_refused(mechanism):
    """It is printed in status tables, briefs and report.md (red team, session 9: kept raw)."""
    with pytest.raises(InputError) as info:
        parse_candidate(f"m1:baseline:{mechanism}")
    assert "\n" not in info.value.message and "\x1b" not in info.value.message
    assert info.value.message.startswith("--candidate mechanism ")


def test_a_mechanism_may_be_any_printable_line():
    assert parse_candidate("m1:baseline:Schleifentausch é, i-k-j: 中").mechanism == "Schleifentausch é, i-k-j: 中"


def snapshot(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def id_run(tiny_budget_run, tmp_path_factory) -> Path:
    return copy_run(tiny_budget_run, tmp_path_factory.mktemp("ids"))


def _commands(run: Path, cid: str) -> list[list[str]]:
    out = []
    if cid.strip() == cid:  # prepare strips blanks around each part of ID:PARENT:MECHANISM
        out.append(["prepare", str(run), "--candidate", f"{cid}:baseline:hostile"])
        if cid != "baseline":  # a valid parent
            out.append(["prepare", str(run), "--candidate", f"ok:{cid}:hostile parent"])
    out += [["evaluate", str(run), cid], ["confirm", str(run), cid], ["confirm", str(run), cid, "--fresh"]]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("cid", ["../x", "a/b", "UPPER", "", "x" * 200, "baseline", "a\n"],
                         ids=["dotdot", "slash", "upper", "empty", "long", "baseline", "newline"])
def test_hostile_ids_exit_2_with_one_line_and_create_nothing(id_run, cid):
    before = snapshot(id_run)
    for argv in _commands(id_run, cid):
        result = pw_main(*argv)
        assert result.code == 2, (argv, result)
        assert result.out == ""
        assert len(result.err.splitlines()) == 1, (argv, result.err)
        assert len(result.err) < 400, (argv, result.err)
        assert snapshot(id_run) == before, argv
    assert not (id_run / "candidates").exists()
