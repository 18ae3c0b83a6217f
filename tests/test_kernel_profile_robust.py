"""The cache never loses a measurement nor serves a wrong row (issue #29's five cases), through the
real CLI, worker processes and cache ledger, with the FAKE runner standing in for CUDA:

1. a read-only database or output directory is refused before any GPU work;
2. a database whose ledger is gone (or empty) is never rebuilt over;
3. a torn ledger tail is named by every verb and mended by `pw kernel-profile repair`;
4. an edited, forged or replaced ledger is named and nothing is served;
5. spec fields are bounded, repeated keys and NaN refused, a NaN result fails its spec alone, a spec
   beyond the device's memory is never dispatched, a poisoned old event cannot break the cache, and a
   failed `measure` leaves no directory (the NVML hint: tests/test_kernel_profile_nvml.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_kernel_profile_cli import SPECS, T, db_args, fake_entry, kp, measured, specs_file  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_files(tmp_path) -> tuple[Path, Path]:
    return tmp_path / "c" / "profile.db", tmp_path / "c" / "profile.ledger.jsonl"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """One cache filled with SPECS by the real CLI, once per module; tests work on copies of it."""
    d = tmp_path_factory.mktemp("template")
    env = {**os.environ, "PW_PROFILE_GPUS": "0", "PW_FAKE_RUN_LOG": str(d / "measured.log"), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "tests.kernel_profile_fake", "kernel-profile", "run", *T, "--specs",
                        specs_file(d, SPECS), "--gpu-name", "FAKE", "--db", str(d / "c" / "profile.db"), "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return d / "c"


@pytest.fixture(autouse=True)
def one_device(monkeypatch):
    monkeypatch.setenv("PW_PROFILE_GPUS", "0")  # one worker process per call: these tests are about the cache


def filled(capsys, tmp_path, specs=SPECS, template: Path | None = None) -> tuple[Path, Path]:
    if template is not None:
        shutil.copytree(template, tmp_path / "c")
        return cache_files(tmp_path)
    code, body, _ = kp(capsys, "run", *T, "--specs", specs_file(tmp_path, specs, name="fill.json"), *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 0
    return cache_files(tmp_path)


def one_line_error(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


# --- 1. read-only places are refused before any GPU work ------------------------------------------

def read_only_run(tmp_path, ro: Path, *argv: str) -> subprocess.CompletedProcess:
    """The CLI (with the fake registered) inside bubblewrap, `ro` mounted read-only: a real read-only
    file system, which root's permission bits cannot fake."""
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    cmd = ["bwrap", "--bind", "/", "/", "--ro-bind", str(ro), str(ro), "--dev", "/dev", "--proc", "/proc",
           sys.executable, "-m", "tests.kernel_profile_fake", "kernel-profile", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60, env=dict(os.environ))


def test_a_read_only_database_is_refused_before_measuring(capsys, tmp_path, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    before = measured(tmp_path), sha(db), sha(ledger)
    new = specs_file(tmp_path, [{"rows": 7, "cols": 7, "dtype": "fp16"}], name="new.json")
    p = read_only_run(tmp_path, db.parent, "run", *T, "--specs", new, *db_args(tmp_path))
    assert p.returncode == 2
    one_line_error(p.stderr, "cannot be written", "Read-only file system", "nothing was measured")
    assert (measured(tmp_path), sha(db), sha(ledger)) == before
    # Reading a read-only cache still works: nothing has to be written for a current database.
    p = read_only_run(tmp_path, db.parent, "count-missing", *T, "--specs", new, *db_args(tmp_path))
    assert p.returncode == 0 and json.loads(p.stdout)["missing_count"] == 1


def test_a_new_database_under_a_read_only_folder_is_refused_and_nothing_is_created(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    p = read_only_run(tmp_path, ro, "run", *T, "--spec", json.dumps(SPECS[0]), "--gpu-name", "FAKE",
                      "--db", str(ro / "deep" / "er" / "profile.db"), "--json")
    assert p.returncode == 2 and "cannot be written" in p.stderr and "nothing was measured" in p.stderr
    assert list(ro.iterdir()) == [] and measured(tmp_path) == []


def test_a_read_only_output_dir_is_refused_before_measuring(capsys, tmp_path, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    before = measured(tmp_path), sha(ledger)
    ro = tmp_path / "logs"
    ro.mkdir()
    new = specs_file(tmp_path, [{"rows": 7, "cols": 7, "dtype": "fp16"}], name="new.json")
    p = read_only_run(tmp_path, ro, "run", *T, "--specs", new, "--output-dir", str(ro / "kp-1"), *db_args(tmp_path))
    assert p.returncode == 2 and "--output-dir" in p.stderr and "cannot be written" in p.stderr
    assert (measured(tmp_path), sha(ledger)) == before and list(ro.iterdir()) == []


# --- 2. a database without its ledger is never rebuilt over -----------------------------------------

@pytest.mark.parametrize("loss", ["deleted", "emptied"])
def test_a_database_whose_ledger_is_gone_is_refused_not_rebuilt(capsys, tmp_path, loss, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    rows_sha = sha(db)
    ledger.unlink() if loss == "deleted" else ledger.write_bytes(b"")
    more = specs_file(tmp_path, SPECS + [{"rows": 9, "cols": 9, "dtype": "fp32"}], name="more.json")
    n = len(measured(tmp_path))
    for verb in ("run", "query", "count-missing"):
        code, _, err = kp(capsys, verb, *T, "--specs", more, *db_args(tmp_path))
        assert code == 2, verb
        one_line_error(err.splitlines()[-1] + "\n", "holds rows built from ledger seq 4",
                       "is missing" if loss == "deleted" else "is empty", "restore the ledger", "move profile.db aside")
    assert sha(db) == rows_sha and len(measured(tmp_path)) == n  # rows kept, nothing measured in vain
    assert ledger.exists() == (loss == "emptied")  # no new ledger was started beside the rows
    db.rename(db.with_name("kept.db"))  # the recovery the message names: a new, empty cache
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", more, *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 5


def test_a_file_that_is_not_a_cache_database_is_never_overwritten(capsys, tmp_path):
    other = tmp_path / "c" / "profile.db"
    other.parent.mkdir()
    other.write_bytes(b"SQLite format 3\x00 not ours at all")
    code, _, err = kp(capsys, "run", *T, "--spec", json.dumps(SPECS[0]), *db_args(tmp_path))
    assert code == 2 and "is not a kernel-profile database" in err and "refusing to overwrite" in err
    assert other.read_bytes() == b"SQLite format 3\x00 not ours at all" and measured(tmp_path) == []


# --- 3. a torn tail is named and repaired ------------------------------------------------------------

def test_a_torn_tail_is_named_by_every_verb_and_repair_quarantines_it(capsys, tmp_path, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    whole = ledger.read_bytes()
    torn = b'{"seq":5,"id":"abc","type":"KernelMeasured","v":2,"data":{"tab'
    ledger.write_bytes(whole + torn)
    p = specs_file(tmp_path, SPECS)
    for verb in ("count-missing", "query", "run"):
        code, _, err = kp(capsys, verb, *T, "--specs", p, *db_args(tmp_path))
        assert code == 2, verb
        one_line_error(err.splitlines()[-1] + "\n", "incomplete last line", f"pw kernel-profile repair --db {db}")
    code, body, _ = kp(capsys, "repair", "--db", str(db), "--json")
    assert code == 0 and body["repaired"] is True and body["rows_before"] == body["rows_after"] == 4
    assert Path(body["quarantine"]).read_bytes() == torn
    assert ledger.read_bytes().startswith(whole) and b'"type":"LedgerRepaired"' in ledger.read_bytes()
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", p, *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 0
    code, body, _ = kp(capsys, "repair", "--db", str(db), "--json")
    assert code == 0 and body["repaired"] is False


def test_repair_refuses_damage_before_the_tail_and_changes_nothing(capsys, tmp_path, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    lines = ledger.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"time_ms":', b'"time_ms":9', 1)
    ledger.write_bytes(b"".join(lines))
    damaged = ledger.read_bytes()
    code, _, err = kp(capsys, "repair", "--db", str(db))
    assert code == 2 and "only a torn tail can be repaired" in err and "restore the ledger" in err
    assert ledger.read_bytes() == damaged
    code, _, err = kp(capsys, "repair", "--db", str(tmp_path / "none" / "profile.db"))
    assert code == 2 and "no cache ledger" in err


# --- 4. an edited, forged or replaced ledger is named, never served -----------------------------------

def edit_event(ledger: Path, index: int, old: bytes, new: bytes) -> None:
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new, 1)
    ledger.write_bytes(b"".join(lines))


@pytest.mark.parametrize("where, needle", [
    ("middle", "fails its hash"),
    ("last", "last line fails its hash"),
])
def test_an_edited_event_is_named_and_no_row_is_served(capsys, tmp_path, where, needle, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    rows_sha = sha(db)
    edit_event(ledger, 1 if where == "middle" else -1, b'"tflops":1.0', b'"tflops":7.0')  # same length
    code, _, err = kp(capsys, "query", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 2
    one_line_error(err, needle)
    assert "seq 2" in err if where == "middle" else "kernel-profile repair" in err
    assert sha(db) == rows_sha


def test_a_forged_event_appended_is_named(capsys, tmp_path, template):
    db, ledger = filled(capsys, tmp_path, template=template)
    last = ledger.read_bytes().splitlines()[-1]
    forged = last.replace(b'"seq":4', b'"seq":5', 1).replace(b'"tflops":1.0', b'"tflops":9.0', 1)
    ledger.write_bytes(ledger.read_bytes() + forged + b"\n")
    code, _, err = kp(capsys, "count-missing", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 2 and "fails its hash" in err


def test_a_replaced_ledger_with_a_valid_chain_is_refused(capsys, tmp_path, template):
    """A whole new chain (every hash right) that is not the one the database was built from."""
    db, ledger = filled(capsys, tmp_path, template=template)
    rows_sha = sha(db)
    other = tmp_path / "other"
    code, _, _ = kp(capsys, "run", *T, "--specs", specs_file(tmp_path, SPECS[::-1], name="rev.json"),
                    "--gpu-name", "FAKE", "--db", str(other / "profile.db"), "--json")
    assert code == 0
    shutil.copy(other / "profile.ledger.jsonl", ledger)
    code, _, err = kp(capsys, "query", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 2 and "event seq 4 is not the one profile.db was built from" in err
    assert sha(db) == rows_sha


def test_a_ledger_that_lost_events_is_refused(capsys, tmp_path):
    filled(capsys, tmp_path, SPECS[:2])
    old = cache_files(tmp_path)[1].read_bytes()  # a backup of the first batch
    db, ledger = filled(capsys, tmp_path)
    ledger.write_bytes(old)  # the backup put back: a whole, valid prefix
    code, _, err = kp(capsys, "count-missing", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 2 and "built from ledger seq 4" in err and "ends at seq 2" in err


def test_another_writers_append_is_picked_up(capsys, tmp_path, template):
    """The positive control: a real extension of the ledger rebuilds the database and is served."""
    from pw.kernel_profile.cache import Cache

    db, ledger = filled(capsys, tmp_path, template=template)
    import msgspec

    from ledger.kernel_events import KernelMeasured

    row = json.loads(ledger.read_bytes().splitlines()[-1])
    event = msgspec.convert({**row["data"], "arg_values": [9, 9, "fp32", "ok"]}, KernelMeasured)
    Cache(db).ledger.append(event, expected_seq=None)  # another process's append, through the store
    code, body, _ = kp(capsys, "count-missing", *T, "--spec", json.dumps({"rows": 9, "cols": 9, "dtype": "fp32"}),
                       *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 0


# --- 5. bounds, repeated keys, NaN, memory, poison, empty directories ---------------------------------

@pytest.mark.parametrize("text, needle", [
    ('{"rows": 9223372036854775808, "cols": 1, "dtype": "bf16"}', "<= 9223372036854775807"),
    ('{"rows": 1e23, "cols": 1, "dtype": "bf16"}', "Expected `int`, got `float`"),
    ('{"rows": NaN, "cols": 1, "dtype": "bf16"}', "not valid JSON"),
    ('{"rows": Infinity, "cols": 1, "dtype": "bf16"}', "not valid JSON"),
    ('{"rows": 1, "rows": 2, "cols": 1, "dtype": "bf16"}', "duplicate key 'rows'"),
])
def test_out_of_bounds_non_finite_and_repeated_keys_are_refused(capsys, tmp_path, text, needle):
    code, _, err = kp(capsys, "run", *T, "--spec", text, *db_args(tmp_path))
    assert code == 2
    one_line_error(err, needle)
    assert measured(tmp_path) == [] and not (tmp_path / "c").exists()


@pytest.mark.parametrize("form", ["list", "wrapped", "jsonl", "object"])
def test_a_repeated_key_in_a_specs_file_is_named(capsys, tmp_path, form):
    gemm = ['{"m": 64, "n": 64, "k": 64, "dtype": "bf16"}', '{"m": 1, "n": 2, "m": 3, "k": 4, "dtype": "bf16"}']
    body = {"list": "[" + ",".join(gemm) + "]", "wrapped": '{"specs": [' + ",".join(gemm) + "]}",
            "jsonl": "\n".join(gemm), "object": gemm[1]}[form]
    p = tmp_path / "specs.json"
    p.write_text(body)
    code, _, err = kp(capsys, "count-missing", "single_gemm", "--backend", "torch", "--specs", str(p),
                      *db_args(tmp_path))
    assert code == 2
    one_line_error(err, "duplicate key 'm'", "spec[1]" if form != "object" else "spec[0]")


def test_a_repeated_specs_key_is_named(capsys, tmp_path):
    p = tmp_path / "specs.json"
    p.write_text('{"specs": [], "specs": [{"m": 64, "n": 64, "k": 64, "dtype": "bf16"}]}')
    code, _, err = kp(capsys, "count-missing", "single_gemm", "--backend", "torch", "--specs", str(p),
                      *db_args(tmp_path))
    assert code == 2 and "duplicate key 'specs'" in err


def test_gemm_dimensions_are_bounded_by_32_bit_sizes(capsys, tmp_path):
    spec = json.dumps({"m": 1 << 31, "n": 8, "k": 8, "dtype": "bf16"})
    code, _, err = kp(capsys, "count-missing", "single_gemm", "--backend", "torch", "--spec", spec, *db_args(tmp_path))
    assert code == 2 and "field 'm'" in err and "<= 2147483647" in err


@pytest.mark.parametrize("flag, value", [("--duration-s", "nan"), ("--duration-s", "inf"), ("--telemetry-hz", "-1")])
def test_measure_refuses_non_finite_numbers(capsys, tmp_path, flag, value):
    with pytest.raises(SystemExit) as exc:
        kp(capsys, "measure", *T, "--spec", json.dumps(SPECS[0]), flag, value, "--output-dir", str(tmp_path / "m"))
    assert exc.value.code == 2 and "positive, finite number" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_a_nan_timeout_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PW_PROFILE_TIMEOUT_S", "nan")
    code, _, err = kp(capsys, "run", *T, "--spec", json.dumps(SPECS[0]), *db_args(tmp_path))
    assert code == 2 and "PW_PROFILE_TIMEOUT_S='nan'" in err and measured(tmp_path) == []


def test_a_nan_result_fails_its_spec_and_the_batch_is_stored(capsys, tmp_path):
    bad = {"rows": 3, "cols": 3, "dtype": "bf16", "behavior": "nan"}
    code, body, _ = kp(capsys, "run", *T, "--specs", specs_file(tmp_path, [bad] + SPECS), *db_args(tmp_path))
    assert code == 1
    assert [r["status"] for r in body["results"]] == ["missing", "ok", "ok", "ok", "ok"]
    assert body["results"][0]["error"] == "not_finite" and "metrics.tflops=nan" in body["results"][0]["message"]
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 0


def test_a_spec_beyond_the_device_memory_is_refused_before_dispatch(tmp_path):
    from pw.kernel_profile import executor, registry, service
    from pw.kernel_profile.cache import Cache
    from pw.kernel_profile.protocol import Settings

    entry = registry.lookup("fake_matrix", "fake")
    huge = entry.args(rows=1 << 20, cols=1 << 20, dtype="bf16")  # 4 TiB of fake tensors
    small = entry.args(rows=2, cols=2, dtype="bf16")
    body = service.run(entry, [huge, small], "FAKE", Cache(tmp_path / "c" / "profile.db"), force=False, fresh=False,
                       settings=Settings(), devices=executor.Devices([0], True, memory_bytes=80 << 30))
    assert [r["status"] for r in body["results"]] == ["missing", "ok"]
    assert body["results"][0]["error"] == "too_large"
    assert "needs at least 4096.0 GiB" in body["results"][0]["message"] and "has 80.0 GiB" in body["results"][0]["message"]
    assert measured(tmp_path) == ["2,2,bf16"]  # the huge one never reached a worker


def test_an_old_event_beyond_int64_cannot_poison_the_cache(capsys, tmp_path, template):
    """A row written before specs were bounded: folded aside, never an SQLite OverflowError."""
    from ledger.kernel_events import KernelMeasured, SampleStats, Telemetry
    from pw.kernel_profile.cache import Cache

    db, ledger = filled(capsys, tmp_path, template=template)
    st = SampleStats(n=10, median_ms=1.0, mean_ms=1.0, q1_ms=1.0, q3_ms=1.0, rel_stdev=0.0, gpu_time_s=0.5,
                     stop_reason="converged", statistic="mean")
    Cache(db).ledger.append(KernelMeasured(table="fake_matrix", backend="fake", gpu_name="FAKE",
                                           arg_names=["rows", "cols", "dtype", "behavior"],
                                           arg_values=[10 ** 23, 1, "bf16", "ok"], metrics={"time_ms": 1.0},
                                           stats=st, telemetry=Telemetry(), provenance={},
                                           profiler_revision="fake-1"), expected_seq=None)
    for _ in range(2):
        code, body, err = kp(capsys, "count-missing", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
        assert code == 0 and body["missing_count"] == 0, err
    assert sorted(p.name for p in db.parent.iterdir() if p.name.endswith(".tmp")) == []


def test_a_failed_measure_leaves_no_directory(capsys, tmp_path):
    out = tmp_path / "logs" / "deep" / "m1"
    code, _, err = kp(capsys, "measure", *T, "--spec", json.dumps(SPECS[0]), "--duration-s", "0.1",
                      "--output-dir", str(out))
    assert code == 3 and "not timed through the CUPTI timer" in err
    assert not (tmp_path / "logs").exists()


def test_without_nvml_a_pinned_run_asks_for_gpu_name(capsys, tmp_path, monkeypatch):
    try:
        import pynvml  # noqa: F401

        pytest.skip("NVML is installed here: the hint for its absence cannot be seen")
    except ImportError:
        pass
    code, _, err = kp(capsys, "count-missing", *T, "--spec", json.dumps(SPECS[0]), "--db",
                      str(tmp_path / "c" / "profile.db"))
    assert code == 3 and "pinned devices (PW_PROFILE_GPUS=0)" in err and "pass --gpu-name NAME" in err
    assert "set PW_PROFILE_GPUS" not in err
