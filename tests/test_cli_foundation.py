"""The foundation verbs through the real command line: bad input is one line and exit 2 with
nothing written; audit, replay, rebuild, validate do what the README's verbs table says."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ledger.codec import seal
from ledger.events import GENESIS, Envelope
from ledger.store import Ledger
from tests.conftest import FIXED_AT, deterministic_ledger, make_run_started

PW = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "pw"
RUN_VERBS = (["log"], ["replay"], ["replay", "--until", "1"], ["audit"], ["rebuild"], ["repair"], ["log", "--json"])


def pw_process(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed console script in a fresh process: what a person or an agent runs."""
    return subprocess.run([str(PW), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def pw(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`pw.cli.main` in this process (a second per call saved); any exception escaping it fails
    the test, just as a traceback would."""
    from pw.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved, here = (sys.stdout, sys.stderr), os.getcwd()
    sys.stdout, sys.stderr = out, err
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdout, sys.stderr = saved
        os.chdir(here)
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8"))
    return subprocess.CompletedProcess(list(args), code, *texts)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }


def sealed_line(seq: int, prev: str, *, type_: str = "Note", v: int = 1, data=None) -> bytes:
    return seal(
        Envelope(
            seq=seq, id=f"{seq:032x}", type=type_, v=v, at=FIXED_AT, actor="cli", cause=None, key=None,
            batch=0, data={"text": "from the future"} if data is None else data, prev=prev,
        )
    )


# --- bad input: one line on stderr, exit 2, no traceback, nothing written -------------------------


def _run_with_ledger(root: Path, content: bytes) -> Path:
    run = root / "20260101-000000-bad"
    run.mkdir(parents=True)
    (run / "ledger.jsonl").write_bytes(content)
    return run


def _valid_then_newer(root: Path) -> Path:
    run = root / "20260101-000000-newer"
    Ledger(run / "ledger.jsonl").append(make_run_started(run.name), expected_seq=0)
    head = Ledger(run / "ledger.jsonl").head()
    with open(run / "ledger.jsonl", "ab") as f:  # what a newer ProfileWeaver would have appended
        f.write(sealed_line(2, head.hash, v=99))
    return run


def _not_a_run(root: Path) -> Path:
    (root / "somewhere").mkdir()
    (root / "somewhere" / "notes.txt").write_text("not a run\n")
    return root / "somewhere"


BAD_RUNS = {
    "missing-path": lambda root: root / "no-such-run",
    "empty-ledger": lambda root: _run_with_ledger(root, b""),
    "binary-ledger": lambda root: _run_with_ledger(root, bytes(range(256)) * 3 + b"\x00\xff\n\x89PNG\r\n"),
    "binary-no-newline": lambda root: _run_with_ledger(root, b"\x89PNG\r\x1a\x00" + bytes(range(200, 256))),
    "json-lines-not-ledger": lambda root: _run_with_ledger(root, b'{"event": "start"}\n{"event": "stop"}\n'),
    "wrong-run-path": _not_a_run,
    "file-outside-a-run": lambda root: _not_a_run(root) / "notes.txt",
    "newer-version-only": lambda root: _run_with_ledger(root, sealed_line(1, GENESIS, v=99)),
    "newer-version-appended": _valid_then_newer,
}


@pytest.mark.parametrize("case", sorted(BAD_RUNS))
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path, case: str):
    run = BAD_RUNS[case](tmp_path)
    before = snapshot(tmp_path)
    attempts = [[*verb[:1], run, *verb[1:]] for verb in RUN_VERBS]
    ledger_file = run / "ledger.jsonl" if run.is_dir() else run
    attempts.append(["validate", ledger_file if ledger_file.exists() else run])
    for i, args in enumerate(attempts):
        # One attempt per case in a real process (no traceback, console script); the rest in-process.
        proc = pw_process(*args) if i == 0 else pw(*args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stdout[-300:], proc.stderr)
        assert proc.stdout == "", (args, proc.stdout[-300:])
        assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith(f"pw {args[0]}: ")
        named = {run.name, ledger_file.name, run.parent.name}
        assert any(n in proc.stderr for n in named), (args, proc.stderr)  # names the input
        if case.startswith("newer-version"):
            assert "newer than this ProfileWeaver" in proc.stderr, proc.stderr
        assert snapshot(tmp_path) == before, (args, "wrote or changed files")


def test_usage_errors_are_one_line_exit_2(tmp_path: Path):
    for args in (["frobnicate"], ["log"], ["replay", tmp_path, "--until", "x"]):
        proc = pw_process(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc


# --- the exit code follows from the error's class, never from its message -----------------------


def _error_classes() -> dict[type, int]:
    from adapters.base import CaptureError
    from ledger import errors
    from pw.agent.skilltree import FrontmatterError
    from pw.kernel_profile.nvml import NvmlUnavailable
    from pw.stats.errors import StatsInputError

    return {
        errors.UsageError: errors.EXIT_BAD_INPUT,
        errors.InputError: errors.EXIT_BAD_INPUT,
        errors.LedgerCorrupt: errors.EXIT_BAD_INPUT,
        errors.TornTail: errors.EXIT_BAD_INPUT,
        errors.NewerLedger: errors.EXIT_BAD_INPUT,
        errors.RejectedCommand: errors.EXIT_BAD_INPUT,
        StatsInputError: errors.EXIT_BAD_INPUT,
        FrontmatterError: errors.EXIT_BAD_INPUT,
        errors.WorkloadError: errors.EXIT_CHECK_FAILED,
        errors.ToolError: errors.EXIT_TOOL_FAILED,
        errors.DiskError: errors.EXIT_TOOL_FAILED,
        CaptureError: errors.EXIT_TOOL_FAILED,
        NvmlUnavailable: errors.EXIT_TOOL_FAILED,
        errors.ConcurrencyError: errors.EXIT_CONFLICT,
        errors.HeldElsewhere: errors.EXIT_CONFLICT,
        errors.MergeConflict: errors.EXIT_CONFLICT,
    }


def _subclasses(cls: type) -> set[type]:
    return {c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))}


def test_every_error_of_the_family_has_a_documented_exit_code_and_only_a_check_exits_1():
    from ledger.errors import EXIT_CHECK_FAILED, EXIT_CODES, PWError

    table = _error_classes()
    family = _subclasses(PWError)
    assert set(table) <= family
    unlisted = {c.__qualname__ for c in family - set(table) if c.__module__.split(".")[0] in ("ledger", "pw", "adapters")}
    assert not unlisted, f"give these a row in _error_classes: {unlisted}"
    assert all(c.exit_code in EXIT_CODES and c.exit_code != 0 for c in family)
    assert {c for c in family if c.exit_code == EXIT_CHECK_FAILED and c in table} == {
        c for c in table if "WorkloadError" in c.__qualname__
    }
    help_text = pw("--help").stdout
    assert all(f"{code}: {what}" in " ".join(help_text.split()) for code, what in EXIT_CODES.items()), help_text


_RAISE: list[Exception] = []


def _raising_verb(args) -> int:
    raise _RAISE[0]


def _instance(cls: type) -> Exception:
    from ledger import errors

    if issubclass(cls, errors.ConcurrencyError):
        return cls("ledger moved on (head seq 3, expected 2); nothing was written", expected=2, actual=3)
    if issubclass(cls, errors.WorkloadError):
        return cls("build: exited 2", failure_class="build")
    if issubclass(cls, errors.DiskError):
        import errno

        return cls("/runs/x/ledger.jsonl", errno.ENOSPC)
    return cls(f"{cls.__name__} says what was expected")


@pytest.mark.parametrize("cls", list(_error_classes()), ids=lambda c: c.__name__)
def test_the_cli_renders_each_error_as_one_line_and_its_class_exit_code(cls, monkeypatch, tmp_path: Path):
    from pw.cli import VERBS

    monkeypatch.setitem(VERBS, "log", f"{__name__}:_raising_verb")
    monkeypatch.setattr(sys.modules[__name__], "_RAISE", [_instance(cls)])
    proc = pw("log", tmp_path)
    assert proc.returncode == _error_classes()[cls], proc
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pw log: ")


def test_audit_reports_a_torn_tail_or_a_broken_chain_as_a_failed_check(run: Path):
    """Told apart by type (TornTail, a corrupt line after the first): an audit's finding, exit 1."""
    path = run / "ledger.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq": 5, "id": "torn')
    torn = pw("audit", run)
    assert torn.returncode == 1, torn.stdout + torn.stderr
    lines = whole.split(b"\n")
    lines[2] = lines[2].replace(b"second", b"SECOND")  # a whole line whose hash no longer matches
    path.write_bytes(b"\n".join(lines))
    broken = pw("audit", run)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "audit failed" in broken.stdout


# --- verbs on a valid run ------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path) -> Path:
    from ledger import events as ev

    run = tmp_path / "20260101-000000-demo"
    ledger = deterministic_ledger(run / "ledger.jsonl")
    ledger.append(make_run_started(run.name), expected_seq=0)
    for i, text in enumerate(["first", "second ✓", "third"], start=1):
        ledger.append(ev.Note(text=text), expected_seq=i)
    return run


def test_rebuild_is_byte_identical_and_audit_names_an_edited_projection(run: Path):
    first = pw("rebuild", run, "--json")
    assert first.returncode == 0, first.stderr
    written = json.loads(first.stdout)
    assert "experiment-plan.json" in written["written"]
    files = snapshot(run)

    again = pw("rebuild", run, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["written"] == []
    assert snapshot(run) == files
    (run / "experiment-plan.json").unlink()
    assert pw("rebuild", run).returncode == 0
    assert snapshot(run) == files  # rebuilt from scratch: the same bytes

    ok = pw("audit", run)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "audit passed" in ok.stdout

    plan = run / "experiment-plan.json"
    data = bytearray(plan.read_bytes())
    data[data.index(b'"workload"') + 2] ^= 0x20  # one byte: "workload" -> "wOrkload"
    plan.write_bytes(bytes(data))
    edited = snapshot(run)
    failed = pw("audit", run)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    last = failed.stdout.strip().splitlines()[-1]
    assert last.startswith("audit failed") and "experiment-plan.json" in last
    assert snapshot(run) == edited  # audit reports, it does not fix


def test_replay_until_shows_state_as_of_that_event(run: Path):
    for until, notes in ((1, []), (2, ["first"]), (3, ["first", "second ✓"]), (4, ["first", "second ✓", "third"])):
        proc = pw("replay", run, "--until", until, "--json")
        assert proc.returncode == 0, proc.stderr
        state = msgspec.json.decode(proc.stdout)
        assert state["head"]["seq"] == until
        assert state["notes"] == notes
        assert state["head"]["hash"] == Ledger(run / "ledger.jsonl").events()[until - 1].hash
    whole = msgspec.json.decode(pw("replay", run, "--json").stdout)
    assert whole["head"]["seq"] == 4
    text = pw("replay", run, "--until", 2)
    assert text.returncode == 0 and '"first"' in text.stdout and "second" not in text.stdout
    for bad in (0, 5, -1):
        proc = pw("replay", run, "--until", bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--until" in proc.stderr


def test_run_may_be_given_as_a_file_inside_the_run(run: Path):
    assert pw("rebuild", run).returncode == 0
    nested = run / "candidates" / "a" / "profile"
    nested.mkdir(parents=True)
    (nested / "profile.json").write_text("{}\n")
    expected = pw("log", run, "--json").stdout
    assert expected.count("\n") == 4
    for inside in (run / "ledger.jsonl", run / "experiment-plan.json", nested / "profile.json", nested):
        proc = pw("log", inside, "--json")
        assert proc.returncode == 0, (inside, proc.stderr)
        assert proc.stdout == expected
    # Relative paths too, from inside the run, with the console script.
    assert pw_process("log", "experiment-plan.json", "--json", cwd=run).stdout == expected


# --- validate ------------------------------------------------------------------------------------

GOOD_CONTRACT = {
    "version": 1,
    "name": "demo",
    "source": {"editable": ["src/*.c"]},
    "build": [{"argv": ["make"], "timeout_s": 60}],
    "run": {"argv": ["./demo", "--n", "100"], "timeout_s": 10},
    "oracle": {"kind": "stdout", "reference": "reference/stdout.txt", "rtol": 1e-6},
}


def _with(path: list, value) -> dict:
    doc = json.loads(json.dumps(GOOD_CONTRACT))
    cur = doc
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (["run", "timeout_s"], "ten", ["run.timeout_s", "expected a number", '"ten"']),
        (["run", "timeout_s"], -1, ["run.timeout_s", "> 0"]),
        (["build", 0, "argv"], "make all", ["build[0].argv", "expected a list"]),
        (["oracle", "kind"], "psychic", ["oracle.kind", "psychic"]),
        (["run", "argvs"], ["x"], ["run", "argvs"]),
        (["version"], 2, ["version"]),
    ],
)
def test_validate_names_the_first_offending_field(tmp_path: Path, path, value, expected):
    manifest = tmp_path / "profileweaver.json"
    manifest.write_text(json.dumps(_with(path, value)))
    proc = pw_process("validate", manifest) if value == "ten" else pw("validate", manifest)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "profileweaver.json" in proc.stderr
    for part in expected:
        assert part in proc.stderr, (part, proc.stderr)


def test_validate_accepts_a_good_manifest_and_run_files(tmp_path: Path, run: Path):
    manifest = tmp_path / "profileweaver.json"
    manifest.write_text(json.dumps(GOOD_CONTRACT))
    proc = pw("validate", manifest)
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout
    assert pw("rebuild", run).returncode == 0
    for name in ("ledger.jsonl", "experiment-plan.json", "preflight.json"):
        proc = pw("validate", run / name)
        assert proc.returncode == 0, (name, proc.stderr)
    manifest.write_text("{not json")
    proc = pw("validate", manifest)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not valid JSON" in proc.stderr


@pytest.mark.parametrize(("target", "says"), [("missing.json", "no such file"), ("/dev/null", "not a regular file"),
                                              (".", "not a regular file")])
def test_validate_says_what_is_wrong_with_a_path_that_is_not_a_file(tmp_path: Path, target: str, says: str):
    path = target if target.startswith("/") else str(tmp_path / target)
    proc = pw("validate", path)
    assert proc.returncode == 2 and proc.stderr == f"pw validate: {path}: {says} (expected a run file or profileweaver.json)\n"


def test_report_before_any_evaluation_is_refused_and_writes_no_report(run_dir: Path):
    proc = pw("report", run_dir)
    assert proc.returncode == 2 and "no candidate evaluated yet" in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert not (run_dir / "report.md").exists() and not (run_dir / "report.json").exists()


# --- diagnostics ----------------------------------------------------------------------------------


def test_a_verb_with_nothing_to_say_never_imports_structlog(run_dir: Path):
    """structlog costs ~0.2 s to import; a plain verb must not pay it."""
    script = (
        "import sys; from pw.cli import main; code = main(['log', sys.argv[1]]); "
        "sys.stderr.write(f\"structlog loaded: {'structlog' in sys.modules}\\n\"); sys.exit(code)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PW_DEBUG"}
    proc = subprocess.run([sys.executable, "-c", script, str(run_dir)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == ["structlog loaded: False"]


def test_pw_debug_adds_structlog_lines_on_stderr_and_leaves_stdout_alone(run_dir: Path, monkeypatch):
    pw("rebuild", run_dir)
    (run_dir / "experiment-plan.json").unlink()
    quiet = pw("rebuild", run_dir)
    assert quiet.stderr == ""
    (run_dir / "experiment-plan.json").unlink()
    monkeypatch.setenv("PW_DEBUG", "1")
    loud = pw("rebuild", run_dir)
    assert loud.returncode == 0 and loud.stdout == quiet.stdout
    [line] = [ln for ln in loud.stderr.splitlines() if "projections written" in ln]
    assert "[debug" in line and "files=experiment-plan.json" in line and "head=2" in line


def test_pw_debug_shows_what_is_behind_an_error_line(tmp_path: Path, monkeypatch):
    missing = tmp_path / "no-such-run"
    plain = pw("log", missing)
    monkeypatch.setenv("PW_DEBUG", "1")
    debug = pw("log", missing)
    assert plain.returncode == debug.returncode == 2
    assert len(plain.stderr.splitlines()) == 1
    # The same one clear line ends the output; before it, the exception behind it.
    assert debug.stderr.splitlines()[-1] == plain.stderr.strip()
    assert "error=InputError" in debug.stderr and "Traceback" in debug.stderr
