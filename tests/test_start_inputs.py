"""Bad input to `pw start`: one line on stderr, exit 2, no traceback, nothing created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@pytest.fixture
def bad_input(pw_cli, tmp_path):
    """Run `pw start ARGS` from inside tmp_path/cwd (so a default `runs/` would show up there) and
    check: exit 2, exactly one stderr line, no stdout, and no file created anywhere under tmp_path."""

    def run(*args, monkeypatch_cwd=None) -> str:
        before = _listing(tmp_path)
        r = pw_cli("start", *args)
        assert r.code == 2, r
        assert "Traceback" not in r.err
        assert r.err.endswith("\n") and r.err.count("\n") == 1, r.err
        assert r.out == ""
        assert _listing(tmp_path) == before
        return r.err

    return run


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")


def test_missing_workload_directory(bad_input, tmp_path):
    err = bad_input("--workload", tmp_path / "no-such-dir", "--runs-dir", tmp_path / "runs")
    assert "--workload" in err and "no-such-dir" in err


def test_workload_that_is_a_file(bad_input, tmp_path):
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    err = bad_input("--workload", tmp_path / "main.c", "--runs-dir", tmp_path / "runs")
    assert "expected a workload directory" in err


def test_both_workload_and_resume(bad_input, tmp_path):
    (tmp_path / "wl").mkdir()
    err = bad_input("--workload", tmp_path / "wl", "--resume", tmp_path / "wl", "--runs-dir", tmp_path / "runs")
    assert "exactly one of --workload" in err


def test_neither_workload_nor_resume(bad_input, tmp_path):
    err = bad_input("--runs-dir", tmp_path / "runs")
    assert "exactly one of --workload" in err


def test_resume_on_a_directory_that_is_not_a_run(bad_input, tmp_path):
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "not-a-run" / "notes.txt").write_text("hello\n")
    err = bad_input("--resume", tmp_path / "not-a-run")
    assert "not-a-run" in err and "ledger.jsonl" in err


def test_resume_on_a_missing_path(bad_input, tmp_path):
    err = bad_input("--resume", tmp_path / "gone")
    assert "gone" in err


def test_resume_on_an_empty_ledger(bad_input, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ledger.jsonl").write_bytes(b"")
    err = bad_input("--resume", tmp_path / "run")
    assert "ledger" in err


def test_resume_on_a_ledger_that_is_not_ours(bad_input, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ledger.jsonl").write_text('{"hello": "world"}\n')
    err = bad_input("--resume", tmp_path / "run")
    assert "ledger.jsonl" in err


def test_nothing_to_infer(bad_input, tmp_path):
    wl = tmp_path / "docs-only"
    wl.mkdir()
    (wl / "README.md").write_text("no code here\n")
    (wl / "a.c").write_text("int main(void) { return 0; }\n")
    (wl / "b.c").write_text("int helper(void) { return 1; }\n")  # two C files, no build file
    err = bad_input("--workload", wl, "--runs-dir", tmp_path / "runs")
    assert "nothing to infer" in err


def test_inferred_make_without_an_executable(bad_input, tmp_path):
    wl = tmp_path / "make-nothing"
    wl.mkdir()
    (wl / "Makefile").write_text("all:\n\t@echo nothing to build\n")
    err = bad_input("--workload", wl, "--runs-dir", tmp_path / "runs")
    assert "no executable" in err


@pytest.mark.parametrize("flag", [("--iterations", "0"), ("--repairs", "-1"), ("--iterations", "many")])
def test_bad_budgets(bad_input, tmp_path, flag):
    wl = tmp_path / "wl"
    wl.mkdir()
    (wl / "main.c").write_text("int main(void) { return 0; }\n")
    bad_input("--workload", wl, "--runs-dir", tmp_path / "runs", *flag)


def _small_workload(root: Path) -> Path:
    wl = root / "wl"
    wl.mkdir()
    (wl / "main.c").write_text("int main(void) { return 0; }\n")
    return wl


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file"])
def test_a_runs_dir_that_cannot_be_created_is_bad_input(bad_input, tmp_path, where):
    wl = _small_workload(tmp_path)
    (tmp_path / "plain-file").write_text("not a directory\n")
    runs = tmp_path / "plain-file" / "runs" if where == "under-a-file" else tmp_path / "plain-file"
    err = bad_input("--workload", wl, "--runs-dir", runs)
    assert err.startswith(f"pw start: --runs-dir {runs}: expected a directory runs can be written to"), err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_a_read_only_runs_dir_is_bad_input(bad_input, tmp_path):
    wl = _small_workload(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o500)
    try:
        err = bad_input("--workload", wl, "--runs-dir", runs)
    finally:
        runs.chmod(0o700)
    assert "--runs-dir" in err and "not writable" in err, err
